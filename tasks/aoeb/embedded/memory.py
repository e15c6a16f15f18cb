"""EmbeddedMemoryRetrieval: find the past session where the user stated a fact (LongMemEval).

Material: facts of the Wikidata slice. Each synthetic user history covers a few entities; each
of their facts is stated once, by the user, in one session of short user/assistant turns
(sessions hold a couple of facts, so an entity's facts are spread over several sessions),
and distractor sessions state facts about other entities. A query asks for one stated fact
("What did I tell you the <property> of <entity> is?"); its only relevant document is the
session that states it, and it is ranked only against its own history's sessions
(`candidates`). Splits (train, dev, test) are by history: no history, and so no session, is
in two splits. Relevance is 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration
from tasks.aoeb.embedded.facts import Fact, FactGraph, read_facts
from tasks.aoeb.embedded.splits import SplitParams, split_qrels, split_query_ids
from tasks.core.errors import InputError

OPENERS = ("Hi again!", "Hey, quick chat?", "Good morning.", "Back with more notes.")
STATEMENTS = (
    "By the way, the {prop} of {entity} is {obj}.",
    "Something I read today: {entity} has {obj} as {prop}.",
    "Note this down: {entity}, {prop}: {obj}.",
    "A friend told me that the {prop} of {entity} is {obj}.",
)
REPLIES = ("Noted.", "Got it, thanks for sharing.", "Interesting, I'll remember that.", "OK.")
QUESTIONS = (
    "What did I tell you the {prop} of {entity} is?",
    "Remind me: what is the {prop} of {entity}, as I mentioned?",
    "Earlier I shared the {prop} of {entity}. What was it?",
)


class MemoryTaskParams(SplitParams):
    """The memory task: how many histories, and how each is made."""

    test_fraction: float = Field(default=0.4, gt=0, lt=1, description="histories tested")
    dev_fraction: float = Field(default=0.2, gt=0, lt=1, description="histories for dev")
    histories: int = Field(default=80, ge=3, description="synthetic users")
    entities_per_history: int = Field(default=3, ge=1, description="entities a user talks about")
    facts_per_entity: int = Field(default=3, ge=1, description="facts stated per entity")
    facts_per_session: int = Field(default=2, ge=1, description="facts stated per session")
    distractor_sessions: int = Field(default=2, ge=0, description="about other entities")
    queries_per_history: int = Field(default=3, ge=1, description="facts asked about")
    language: str = Field(default="en", description="of the labels used")


@dataclass(frozen=True)
class History:
    number: int
    sessions: list[list[Fact]]  # in order; each session's stated facts
    asked: list[tuple[Fact, int]]  # (fact, index of the session stating it)

    @property
    def group(self) -> str:
        return f"h{self.number:03d}"

    def session_id(self, index: int) -> str:
        return f"{self.group}-s{index:02d}"


def entity_facts(graph: FactGraph, entity: str, count: int, rng: np.random.Generator) -> list[Fact]:
    """`count` facts about `entity`, each on a different property (one object each)."""
    properties = graph.properties(entity)
    pids = sorted(properties)
    chosen = sorted(rng.choice(len(pids), size=count, replace=False))
    return [
        (entity, pids[i], properties[pids[i]][rng.integers(len(properties[pids[i]]))])
        for i in chosen
    ]


def build_histories(graph: FactGraph, settings: MemoryTaskParams) -> list[History]:
    """Seeded histories; no entity is talked about in two histories."""
    rng = np.random.default_rng(settings.seed)
    per_history = settings.entities_per_history + settings.distractor_sessions
    pool = sorted(e for e in graph.facts if len(graph.properties(e)) >= settings.facts_per_entity)
    if len(pool) < settings.histories * per_history:
        raise InputError(
            f"memory task: {len(pool)} entities with {settings.facts_per_entity}+ facts, "
            f"{settings.histories * per_history} needed; lower `histories` or a fact count"
        )
    order = [pool[i] for i in rng.permutation(len(pool))[: settings.histories * per_history]]
    histories = []
    for number in range(settings.histories):
        entities = order[number * per_history : (number + 1) * per_history]
        cut = settings.entities_per_history
        main, others = entities[:cut], entities[cut:]
        stated = [f for e in main for f in entity_facts(graph, e, settings.facts_per_entity, rng)]
        stated = [stated[i] for i in rng.permutation(len(stated))]
        size = settings.facts_per_session
        sessions = [stated[i : i + size] for i in range(0, len(stated), size)]
        sessions += [
            entity_facts(graph, e, min(size, len(graph.properties(e))), rng) for e in others
        ]
        sessions = [sessions[i] for i in rng.permutation(len(sessions))]
        where = {fact: index for index, facts in enumerate(sessions) for fact in facts}
        count = min(settings.queries_per_history, len(stated))
        asked = [
            (stated[i], where[stated[i]])
            for i in sorted(rng.choice(len(stated), size=count, replace=False))
        ]
        histories.append(History(number, sessions, asked))
    return histories


def _pick(options: tuple[str, ...], rng: np.random.Generator) -> str:
    return options[rng.integers(len(options))]


def session_text(graph: FactGraph, facts: list[Fact], rng: np.random.Generator) -> str:
    """Short user/assistant turns: an opener, then each fact stated and acknowledged."""
    turns = [f"User: {_pick(OPENERS, rng)}", "Assistant: Hello! What's on your mind?"]
    for entity, pid, obj in facts:
        line = _pick(STATEMENTS, rng).format(
            entity=graph.described(entity), prop=graph.name(pid), obj=graph.name(obj)
        )
        turns += [f"User: {line}", f"Assistant: {_pick(REPLIES, rng)}"]
    return "\n".join(turns)


DECLARATION = TaskDeclaration(
    name="EmbeddedMemoryRetrieval",
    capability="memory",
    description="Retrieve the past chat session in which the user stated the fact asked about.",
    source="data/interim/kg/wikidata_slice.nt (facts voiced in synthetic chat histories)",
    splits=("train", "dev", "test"),
    query_instruction="Given a question about the chat history, retrieve the session that "
    "answers it",
    has_candidates=True,
)


def memory_task(slice_nt: Path, settings: MemoryTaskParams) -> RetrievalTask:
    """The memory task from the Wikidata slice at `slice_nt`."""
    graph = read_facts(slice_nt, settings.language)
    histories = build_histories(graph, settings)
    rng = np.random.default_rng(settings.seed + 3)
    judgments, group_of, texts, pools = {}, {}, {}, {}
    for history in histories:
        for k, ((entity, pid, _), index) in enumerate(history.asked):
            qid = f"{history.group}-q{k}"
            judgments[qid] = {history.session_id(index): 1}
            group_of[qid] = history.group
            texts[qid] = _pick(QUESTIONS, rng).format(
                prop=graph.name(pid), entity=graph.described(entity)
            )
            pools[qid] = [history.session_id(i) for i in range(len(history.sessions))]
    qrels = split_qrels(judgments, group_of, settings, str(slice_nt))
    kept = split_query_ids(qrels)
    used = {group_of[qid] for qid in kept}
    corpus = {}
    for history in histories:
        for index, facts in enumerate(history.sessions):
            text = session_text(graph, facts, rng)  # drawn for every history: stable text
            if history.group in used:
                title = f"Session {index + 1} of user {history.group}"
                corpus[history.session_id(index)] = {"title": title, "text": text}
    queries = {qid: texts[qid] for qid in kept}
    candidates = {qid: pools[qid] for qid in kept}
    return RetrievalTask(DECLARATION, dict(sorted(corpus.items())), queries, qrels, candidates)
