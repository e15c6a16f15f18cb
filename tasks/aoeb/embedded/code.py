"""EmbeddedCodeRetrieval: find a function by what its docstring says (CodeSearchNet, CosQA).

Material: real Python source from a source archive (data/seed/code: a CPython 3.11
standard-library sample), parsed with `ast`. A query is a function's or method's docstring
summary (its first paragraph, whitespace collapsed); its document is the function's source
with the docstring removed, titled by the qualified name
(`http.client.HTTPConnection.request`). Functions whose summary is short or quotes their
own call, whose body is only the docstring, or whose code repeats the summary give no
query. A summary shared by several functions stays with the first (by name) and the others
leave the corpus, so no unjudged document answers a query. Functions without a usable
docstring fill the corpus as distractors. Splits (train, dev, test) are by module: no file
has functions in two. Relevance is 1.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import Field

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration
from tasks.aoeb.embedded.splits import (
    SplitParams,
    judged_documents,
    sample,
    split_qrels,
    split_query_ids,
)
from tasks.core.errors import InputError
from tasks.core.source_archive import read_source_archive

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class CodeTaskParams(SplitParams):
    """The code task: which docstrings make queries, and how large the corpus is."""

    min_summary_words: int = Field(default=5, ge=1, description="shorter summaries: no query")
    max_summary_words: int = Field(default=60, ge=1, description="longer ones are cut")
    max_document_chars: int = Field(default=4000, ge=200, description="source is cut here")
    max_documents: int = Field(
        default=450, ge=1, description="distractor functions fill the corpus up to this"
    )


@dataclass(frozen=True)
class CodeUnit:
    module: str  # dotted, e.g. http.client
    qualname: str  # e.g. HTTPConnection.request
    summary: str  # the docstring's first paragraph, normalized ("" when none)
    code: str  # the source without its docstring

    @property
    def title(self) -> str:
        return f"{self.module}.{self.qualname}"


def module_name(path: str) -> str:
    """`Lib/http/client.py` -> `http.client`; a package's `__init__.py` -> its package."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if "Lib" in parts:
        parts = parts[len(parts) - parts[::-1].index("Lib") :]
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def normalize(text: str) -> str:
    return " ".join(text.split())


def summary_of(docstring: str | None, max_words: int) -> str:
    """The first paragraph of a docstring, whitespace collapsed, at most `max_words` words."""
    if not docstring:
        return ""
    words = docstring.strip().split("\n\n", 1)[0].split()
    return " ".join(words[:max_words])


def functions(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, FunctionNode]]:
    """(qualified name, node) of each function and method, classes nested; not closures."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield from functions(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, FunctionNode):
            yield f"{prefix}{node.name}", node


def _docstring_node(node: FunctionNode) -> ast.Expr | None:
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return first if isinstance(first.value.value, str) else None
    return None


def source_without_docstring(lines: list[str], node: FunctionNode) -> str | None:
    """The function's source (decorators included), docstring lines removed, dedented;
    None when the docstring shares a line with other code or is the whole body."""
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    doc = _docstring_node(node)
    if doc is None:
        return textwrap.dedent("\n".join(lines[start - 1 : node.end_lineno]))
    assert doc.end_lineno is not None and doc.end_col_offset is not None
    before = lines[doc.lineno - 1][: doc.col_offset]
    after = lines[doc.end_lineno - 1][doc.end_col_offset :]
    if before.strip() or after.strip() or len(node.body) == 1:
        return None
    kept = lines[start - 1 : doc.lineno - 1] + lines[doc.end_lineno : node.end_lineno]
    return textwrap.dedent("\n".join(kept))


def code_units(archive: Path, max_summary_words: int) -> list[CodeUnit]:
    """Every function and method in the source archive, in file then source order."""
    units, seen = [], set()
    for file in read_source_archive(archive):
        text = file.source
        try:
            tree = ast.parse(text, filename=file.path)
        except SyntaxError as exc:
            raise InputError(
                f"{archive}: {file.path}:{exc.lineno}: not valid Python ({exc.msg})"
            ) from None
        module, lines = module_name(file.path), text.splitlines()
        for qualname, node in functions(tree.body):
            code = source_without_docstring(lines, node)
            if code is None or f"{module}.{qualname}" in seen:
                continue  # a stub, or a second definition of the same name
            seen.add(f"{module}.{qualname}")
            summary = summary_of(ast.get_docstring(node), max_summary_words)
            units.append(CodeUnit(module, qualname, summary, code))
    return units


def _makes_query(unit: CodeUnit, settings: CodeTaskParams) -> bool:
    signature = unit.qualname.rsplit(".", 1)[-1] + "("  # a summary quoting the call
    return (
        len(unit.summary.split()) >= settings.min_summary_words
        and signature not in unit.summary
        and unit.summary.lower() not in normalize(unit.code).lower()
    )


DECLARATION = TaskDeclaration(
    name="EmbeddedCodeRetrieval",
    capability="code",
    description="Retrieve the Python function that a docstring summary describes.",
    source="data/seed/code (CPython 3.11 standard library sample)",
    splits=("train", "dev", "test"),
    query_instruction="Given a description of what code does, retrieve the function that does it",
)


def code_task(archive: Path, settings: CodeTaskParams) -> RetrievalTask:
    """The code task from the Python files in a source archive (tasks.core.source_archive)."""
    units = sorted(code_units(archive, settings.max_summary_words), key=lambda u: u.title)
    queried: dict[str, CodeUnit] = {}  # summary (lower case) -> the first function with it
    for unit in units:
        if _makes_query(unit, settings):
            queried.setdefault(unit.summary.lower(), unit)
    by_title = {  # a function repeating a queried summary would be an unjudged answer
        u.title: u for u in units if queried.get(u.summary.lower(), u) is u
    }
    judgments = {f"q:{u.title}": {u.title: 1} for u in queried.values()}
    group_of = {f"q:{u.title}": u.module for u in queried.values()}
    qrels = split_qrels(judgments, group_of, settings, str(archive))
    judged = judged_documents(qrels)
    queried_titles = {u.title for u in queried.values()}
    spare = [t for t in by_title if t not in queried_titles]
    room = max(0, settings.max_documents - len(judged))
    titles = sorted(judged | set(sample(spare, room, settings.seed + 2)))
    corpus = {
        t: {"title": t, "text": by_title[t].code[: settings.max_document_chars]} for t in titles
    }
    queries = {qid: by_title[qid[2:]].summary for qid in split_query_ids(qrels)}
    return RetrievalTask(DECLARATION, corpus, queries, qrels)
