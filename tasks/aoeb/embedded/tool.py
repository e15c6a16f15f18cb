"""EmbeddedToolRetrieval: find the CLI command that performs a task (ToolRet-like).

Documents are real tools: the leaf commands of installed CLIs this project depends on (dvc's
argparse tree, mlflow's and ray's click trees), each "<tool> <command path>: <help>" with its
options and their help. A query is the command's one-line help turned into a task request:
the first sentence, a leading third-person verb made imperative ("Lists" -> "List") and,
when it is the command's own name, swapped for a synonym ("list" -> "show"), the tool's
name removed, put in one of a few request templates picked by a seeded hash of the command.
A sentence that still names the command, or is left too short, gives no query (so no
request is a lexical copy of the name); its command stays in the corpus as a distractor.
Splits (train, dev, test) are by command family (`dvc exp`, `mlflow runs`): no family has
commands in two.
Relevance is 1.

Everything is sorted, so the task is stable for a given set of installed versions. A CLI
that fails to import is skipped with a warning; too few commands overall is an InputError.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration
from tasks.aoeb.embedded.splits import SplitParams, judged_documents, split_qrels, split_query_ids
from tasks.core.errors import InputError
from tasks.core.progress import get_logger
from tasks.core.strict_model import StrictModel

log = get_logger("paperline.aoeb.tool")


class ToolSource(StrictModel):
    name: str = Field(description="the tool as typed, e.g. dvc")
    kind: Literal["argparse", "click"] = Field(description="how its command tree is walked")
    entry: str = Field(description="module:attribute of the root parser or click group")
    call: bool = Field(default=False, description="the attribute is a factory to call first")


DEFAULT_SOURCES = [
    ToolSource(name="dvc", kind="argparse", entry="dvc.cli.parser:get_main_parser", call=True),
    ToolSource(name="mlflow", kind="click", entry="mlflow.cli:cli"),
    ToolSource(name="ray", kind="click", entry="ray.scripts.scripts:cli"),
]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TEMPLATES = ("{Task}.", "I need to {task}.", "How do I {task}?", "Help me {task}.")
NOT_VERBS = {"a", "an", "the", "all", "this", "these", "it", "command", "commands", "utility"}
PREPOSITIONS = {"with", "in", "from", "to", "for", "by", "of", "on", "using", "via"}
SYNONYMS = {  # a leading verb that names the command -> a verb that does not
    "list": "show",
    "show": "display",
    "get": "fetch",
    "delete": "remove",
    "remove": "delete",
    "create": "make",
    "run": "execute",
    "start": "launch",
    "stop": "halt",
    "update": "modify",
    "download": "fetch",
    "upload": "send",
    "push": "upload",
    "pull": "fetch",
    "add": "register",
    "describe": "show",
    "set": "assign",
    "search": "look",
    "serve": "host",
    "submit": "send",
    "init": "initialize",
    "import": "bring in",
    "export": "write out",
    "move": "relocate",
    "rename": "change the name of",
    "restore": "recover",
    "diff": "compare",
    "check": "verify",
    "attach": "connect",
    "exec": "execute",
    "install": "set up",
    "build": "assemble",
    "kill": "terminate",
    "commit": "record",
    "checkout": "restore",
    "fetch": "download",
}


class ToolTaskParams(SplitParams):
    """The tool task: which CLIs, and how queries and documents are cut."""

    sources: list[ToolSource] = Field(default_factory=lambda: list(DEFAULT_SOURCES))
    min_commands: int = Field(default=50, ge=2, description="fewer found: InputError")
    min_query_words: int = Field(default=3, ge=1, description="shorter requests: no query")
    max_document_chars: int = Field(default=2000, ge=200, description="help is cut here")


@dataclass(frozen=True)
class ToolCommand:
    tool: str
    path: tuple[str, ...]  # e.g. ("exp", "run")
    summary: str  # the one-line help
    help: str  # the long help
    options: tuple[tuple[str, str], ...]  # (names, help)

    @property
    def doc_id(self) -> str:
        return "/".join((self.tool, *self.path))

    @property
    def title(self) -> str:
        return " ".join((self.tool, *self.path))

    @property
    def family(self) -> str:
        return "/".join((self.tool, *self.path[:1]))


def normalize(text: str | None) -> str:
    """Whitespace collapsed; click's \\b markers and terminal colour codes removed."""
    return " ".join(ANSI.sub("", (text or "").replace("\b", " ")).split())


def first_sentence(text: str) -> str:
    text = re.sub(r"^\[[^\]]*\]\s*", "", normalize(text))  # "[Experimental] …"
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(".!? ")


def _argparse_help(action: argparse.Action) -> str:
    text = action.help or ""
    text = re.sub(r"%\((\w+)\)[sdr]", lambda m: str(getattr(action, m.group(1), "")), text)
    return normalize(text.replace("%%", "%"))


def argparse_commands(
    tool: str, parser: argparse.ArgumentParser, path: tuple[str, ...] = (), summary: str = ""
) -> Iterator[ToolCommand]:
    """The leaf commands under an argparse parser (aliases once, suppressed ones skipped)."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups and path:
        options = tuple(
            (", ".join(a.option_strings) or a.dest, _argparse_help(a))
            for a in parser._actions
            if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS
        )
        long_help = normalize(parser.description) or summary
        yield ToolCommand(tool, path, summary, long_help, options)
    for group in groups:
        helps = {a.dest: a.help for a in group._choices_actions}
        seen: set[int] = set()
        for name, child in group.choices.items():
            if id(child) in seen or helps.get(name) == argparse.SUPPRESS:
                continue
            seen.add(id(child))
            yield from argparse_commands(tool, child, (*path, name), normalize(helps.get(name)))


def click_commands(tool: str, group: Any, path: tuple[str, ...] = ()) -> Iterator[ToolCommand]:
    """The visible leaf commands under a click group, in name order."""
    import click

    context = click.Context(group, info_name=tool)
    for name in sorted(group.list_commands(context)):
        command = group.get_command(context, name)
        if command is None or command.hidden:
            continue
        if isinstance(command, click.Group):
            yield from click_commands(tool, command, (*path, name))
            continue
        text = inspect.cleandoc(command.help or "").split("\f", 1)[0]
        options = []
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                names = ", ".join([*param.opts, *param.secondary_opts])
                options.append((names, normalize(param.help)))
            elif isinstance(param, click.Argument):
                options.append((param.human_readable_name, ""))
        summary = normalize(command.short_help) or first_sentence(text)
        yield ToolCommand(tool, (*path, name), summary, normalize(text), tuple(options))


def load_commands(source: ToolSource) -> list[ToolCommand]:
    """Every leaf command of one CLI; [] with a warning when it cannot be imported or walked."""
    module_name, _, attribute = source.entry.partition(":")
    try:
        root = getattr(importlib.import_module(module_name), attribute)
        root = root() if source.call else root
        walk = argparse_commands if source.kind == "argparse" else click_commands
        return list(walk(source.name, root))
    except Exception as exc:  # an optional CLI: skipped, never fatal on its own
        log.warning("tool task: skipping %s (%s: %s)", source.name, type(exc).__name__, exc)
        return []


def _imperative(word: str) -> str:
    """A leading third-person verb made imperative: Lists -> List, Pushes -> Push."""
    if not re.fullmatch(r"[A-Z][a-z]+s", word) or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if re.search(r"(sh|ch|x|z)es$", word):
        return word[:-2]
    return word[:-1]


def _bare(word: str) -> str:
    return re.sub(r"('s|\W)+$", "", word.lower()).strip("`'\"(")


def _variants(parts: tuple[str, ...]) -> set[str]:
    words = {w.lower() for part in parts for w in re.split(r"[-_]", part) if w}
    return words | {w + "s" for w in words} | {w[:-1] for w in words if w.endswith("s")}


def task_request(command: ToolCommand, min_words: int, seed: int) -> str | None:
    """The command's first help sentence as a task request that does not name the command.

    The tool's name goes (with a preposition before it: "with DVC"); a leading verb that is
    the command's name is swapped for a synonym; the command's name anywhere else leaves the
    request unusable (None), as does one shorter than `min_words` words.
    """
    words = first_sentence(command.summary).split()
    tool, path = _variants((command.tool,)), _variants(command.path[-1:])
    if not words or _bare(words[-1]) == "commands":  # a group's blurb, no task
        return None
    kept: list[str] = []
    articles: list[int] = []  # "an MLflow project" -> "a project"
    for word in words:
        if _bare(word) in tool:
            if kept and kept[-1].lower() in PREPOSITIONS:
                kept.pop()
            elif kept and kept[-1].lower() in ("a", "an"):
                articles.append(len(kept) - 1)
            continue
        kept.append(word)
    for at in articles:
        if at + 1 < len(kept):
            kept[at] = "an" if kept[at + 1][0].lower() in "aeiou" else "a"
    if not kept:
        return None
    first = _imperative(kept[0]).lower()
    if first in path:
        first = SYNONYMS.get(first, "")
    if not first or any(_bare(w) in path for w in kept[1:]) or len(kept) < min_words:
        return None
    task = " ".join([first, *kept[1:]]).rstrip(",;: ")
    if first in NOT_VERBS:
        return f"Task: {task}."
    pick = zlib.crc32(f"{seed}:{command.doc_id}".encode()) % len(TEMPLATES)
    return TEMPLATES[pick].format(Task=task[0].upper() + task[1:], task=task)


def command_document(command: ToolCommand, max_chars: int) -> dict[str, str]:
    options = "; ".join(f"{names}: {text}" if text else names for names, text in command.options)
    text = f"{command.title}: {command.help or command.summary}"
    text += f"\nOptions: {options}" if options else ""
    return {"title": command.title, "text": text[:max_chars]}


DECLARATION = TaskDeclaration(
    name="EmbeddedToolRetrieval",
    capability="tool",
    description="Retrieve the CLI command (dvc, mlflow, ray) that performs a requested task.",
    source="the installed dvc / mlflow / ray command-line interfaces",
    splits=("train", "dev", "test"),
    query_instruction="Given a task, retrieve the tool that performs it",
)


def tool_task_from_commands(commands: list[ToolCommand], settings: ToolTaskParams) -> RetrievalTask:
    """The tool task over the given commands (every command is a document)."""
    commands = sorted({c.doc_id: c for c in commands}.values(), key=lambda c: c.doc_id)
    if len(commands) < settings.min_commands:
        found = sorted({c.tool for c in commands})
        raise InputError(
            f"tool task: {len(commands)} CLI commands found ({', '.join(found) or 'no tool'}), "
            f"need {settings.min_commands}; install the tools in `sources` or lower min_commands"
        )
    requests = {
        c.doc_id: task_request(c, settings.min_query_words, settings.seed) for c in commands
    }
    by_id = {c.doc_id: c for c in commands}
    judgments = {f"q:{doc}": {doc: 1} for doc, request in requests.items() if request}
    group_of = {qid: by_id[qid[2:]].family for qid in judgments}
    qrels = split_qrels(judgments, group_of, settings, "tool task")
    assert judged_documents(qrels) <= by_id.keys()
    corpus = {c.doc_id: command_document(c, settings.max_document_chars) for c in commands}
    judged = split_query_ids(qrels)
    queries = {qid: str(requests[qid[2:]]) for qid in judged}
    return RetrievalTask(DECLARATION, corpus, queries, qrels)


def tool_task(settings: ToolTaskParams) -> RetrievalTask:
    """The tool task from the installed CLIs named in `settings.sources`."""
    commands = [c for source in settings.sources for c in load_commands(source)]
    return tool_task_from_commands(commands, settings)
