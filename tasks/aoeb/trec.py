"""Readers for relevance judgments (qrels) and TREC run files, into pytrec_eval's dicts.

Qrels come in two layouts, told apart by the first line:
- MTEB/BEIR TSV: `query-id<TAB>corpus-id<TAB>score`, a header line first (3 columns);
- TREC: `qid iteration docid relevance`, whitespace-separated, no header (4 columns).
Relevance is an integer (`1.0` is read as 1). A pair judged twice keeps its last judgment,
as BEIR's and MTEB's loaders do.

A run is TREC's `qid Q0 docid rank score tag`; the rank column is ignored (trec_eval ranks
by score) and each (query, document) pair may appear once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from tasks.core.errors import InputError

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]

RUN_FORMAT = "qid Q0 docid rank score tag"
TREC_QRELS = "qid iteration docid relevance"
BEIR_QRELS = "query-id<TAB>corpus-id<TAB>score"


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line; InputError when unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield number, line.rstrip("\r\n")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None


def _relevance(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def _qrels_fields(line: str) -> list[str]:
    fields = [field.strip() for field in line.split("\t")]
    return fields if len(fields) == 3 else line.split()


def read_qrels(path: str | Path) -> Qrels:
    """{query id: {document id: relevance}} from a BEIR/MTEB TSV or a TREC qrels file."""
    path = Path(path)
    qrels: Qrels = {}
    columns = None
    for number, line in _lines(path):
        fields = _qrels_fields(line)
        if columns is None:
            columns = len(fields)
            if columns not in (3, 4):
                raise InputError(
                    f"{path}: line {number}: {columns} columns; qrels are either "
                    f"'{BEIR_QRELS}' with a header, or '{TREC_QRELS}'"
                )
            if columns == 3 and _relevance(fields[2]) is None:
                continue  # the BEIR header
        expected = BEIR_QRELS if columns == 3 else TREC_QRELS
        if len(fields) != columns:
            raise InputError(
                f"{path}: line {number}: {len(fields)} columns where the first line has "
                f"{columns} ('{expected}'); fix or remove the line"
            )
        query, doc, value = fields[0], fields[-2], fields[-1]
        relevance = _relevance(value)
        if relevance is None:
            raise InputError(
                f"{path}: line {number}: relevance {value!r} is not an integer "
                f"('{expected}'); fix or remove the line"
            )
        if not query or not doc:
            raise InputError(f"{path}: line {number}: an empty id ('{expected}'); fix the line")
        qrels.setdefault(query, {})[doc] = relevance
    if not qrels:
        raise InputError(f"{path}: no judgments; expected '{BEIR_QRELS}' or '{TREC_QRELS}' lines")
    return qrels


def read_run(path: str | Path) -> Run:
    """{query id: {document id: score}} from a TREC run file."""
    path = Path(path)
    run: Run = {}
    for number, line in _lines(path):
        fields = line.split()
        if len(fields) != 6:
            raise InputError(
                f"{path}: line {number}: {len(fields)} columns, expected 6 ('{RUN_FORMAT}'); "
                "fix or remove the line"
            )
        query, _, doc, _, value, _ = fields
        try:
            score = float(value)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise InputError(
                f"{path}: line {number}: score {value!r} is not a finite number "
                f"(5th column of '{RUN_FORMAT}'); fix the line"
            )
        docs = run.setdefault(query, {})
        if doc in docs:
            raise InputError(
                f"{path}: line {number}: document {doc} of query {query} is listed twice; "
                "keep one line per query and document"
            )
        docs[doc] = score
    if not run:
        raise InputError(f"{path}: no ranked documents; expected '{RUN_FORMAT}' lines")
    return run


def run_text(run: Run, tag: str) -> str:
    """`run` as a TREC run file, best first per query (scores written exactly: `repr`)."""
    lines = []
    for query in sorted(run):
        ranked = sorted(run[query].items(), key=lambda item: (-item[1], item[0]))
        lines += [
            f"{query} Q0 {doc} {rank} {score!r} {tag}"
            for rank, (doc, score) in enumerate(ranked, 1)
        ]
    return "\n".join(lines) + "\n" if lines else ""
