"""Path judges behind one interface, and MultiHal's protocol around them.

Protocol (`judge_paths`): with more than `top_paths` paths, the judge picks its top
`top_paths` twice from two shuffled orders; the two picks are intersected and filled at
random from the rest; each chosen path then gets a 1–5 Likert score; ≥ `min_score` is kept.

- `HeuristicJudge` (offline, deterministic — not an LLM): a path starts at 3; +1 if it is
  one hop; +1 if a property's English label shares a content word with the question;
  −1 for each `instance of` (P31) edge in a longer path (type hubs link unrelated items);
  −1 for a 2-hop path none of whose properties the question mentions. Clamped to 1–5.
- `OpenAIJudge` (production): any OpenAI-compatible endpoint (vLLM, Ollama, hosted),
  MultiHal's temperature 0.3; the API key comes from the environment variable named in
  params, never from params.yaml.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tasks.core.llm import ChatModel
from tasks.kg.linking import normalise
from tasks.kg.params import JudgeParams

_STOPWORDS = "a an and are as at by for from has have in is it of on or the to was what which "
_STOPWORDS += "who whom whose with did does do when where how many much"
STOPWORDS = frozenset(_STOPWORDS.split())


@dataclass(frozen=True)
class Candidate:
    ids: tuple[str, ...]  # Q P Q [P Q]
    text: str  # the path in English labels (what an LLM reads)


class PathJudge(Protocol):
    name: str

    def pick(self, question: str, answer: str, paths: Sequence[Candidate], k: int) -> list[int]:
        """Indices of the `k` paths most relevant to the QA item."""
        ...

    def score(self, question: str, answer: str, path: Candidate) -> int:
        """Likert 1–5: how well the path supports answering the question."""
        ...


def content_words(text: str) -> set[str]:
    return {w for w in normalise(text).split() if w not in STOPWORDS and len(w) > 2}


class HeuristicJudge:
    name = "heuristic-v1"

    def __init__(self, property_labels: dict[str, str]) -> None:
        self.property_labels = property_labels  # PID → English label

    def score_ids(self, question: str, path: Sequence[str]) -> int:
        words = content_words(question)
        props = path[1::2]  # Q P Q [P Q]: the properties
        mentioned = [bool(content_words(self.property_labels.get(p, "")) & words) for p in props]
        score = 3 + (len(props) == 1) + any(mentioned)
        if len(props) > 1:
            score -= sum(p == "P31" for p in props) + (not any(mentioned))
        return max(1, min(5, score))

    def pick(self, question: str, answer: str, paths: Sequence[Candidate], k: int) -> list[int]:
        order = sorted(range(len(paths)), key=lambda i: -self.score_ids(question, paths[i].ids))
        return order[:k]

    def score(self, question: str, answer: str, path: Candidate) -> int:
        return self.score_ids(question, path.ids)


PICK_PROMPT = (
    "Question: {question}\nAnswer: {answer}\nKnowledge-graph paths:\n{paths}\n\n"
    "Which {k} paths are most relevant for answering the question with this answer? "
    "Reply with their numbers only, separated by commas."
)
SCORE_PROMPT = (
    "Question: {question}\nAnswer: {answer}\nKnowledge-graph path: {path}\n\n"
    "On a scale from 1 (unrelated) to 5 (directly supports the answer), how well does this "
    "path support answering the question with this answer? Reply with one digit."
)


class OpenAIJudge:
    def __init__(self, params: JudgeParams) -> None:
        self.chat = ChatModel(
            params.base_url,
            params.model,
            params.api_key_env,
            params.temperature,
            params.seed,
            params_key="kg.judge.backend",
            offline_choice="heuristic",
        )
        self.name = self.chat.name

    def pick(self, question: str, answer: str, paths: Sequence[Candidate], k: int) -> list[int]:
        listing = "\n".join(f"{n + 1}. {p.text}" for n, p in enumerate(paths))
        reply = self.chat.ask(
            PICK_PROMPT.format(question=question, answer=answer, paths=listing, k=k)
        )
        return parse_picks(reply, len(paths), k)

    def score(self, question: str, answer: str, path: Candidate) -> int:
        prompt = SCORE_PROMPT.format(question=question, answer=answer, path=path.text)
        return parse_score(self.chat.ask(prompt))


def parse_picks(reply: str, count: int, k: int) -> list[int]:
    """'3, 1, 7' → [2, 0, 6]: valid 1-based numbers, first k, no repeats."""
    numbers = [int(n) - 1 for n in re.findall(r"\d+", reply)]
    return list(dict.fromkeys(n for n in numbers if 0 <= n < count))[:k]


def parse_score(reply: str) -> int:
    """The first digit 1–5 in the reply; 1 when there is none (unusable = unsupported)."""
    match = re.search(r"[1-5]", reply)
    return int(match.group(0)) if match else 1


def choose_paths(
    judge: PathJudge, question: str, answer: str, paths: list[Candidate], k: int, rng: random.Random
) -> list[int]:
    """MultiHal's selection when more than k paths: top-k twice (shuffled), ∩, fill."""
    if len(paths) <= k:
        return list(range(len(paths)))
    picks = []
    for _ in range(2):
        order = rng.sample(range(len(paths)), len(paths))
        chosen = judge.pick(question, answer, [paths[i] for i in order], k)
        picks.append({order[i] for i in chosen})
    both = sorted(picks[0] & picks[1])
    rest = [i for i in range(len(paths)) if i not in both]
    return sorted(both + rng.sample(rest, k - len(both)))


def make_judge(params: JudgeParams, property_labels: dict[str, str]) -> PathJudge:
    if params.backend == "openai":
        return OpenAIJudge(params)
    return HeuristicJudge(property_labels)
