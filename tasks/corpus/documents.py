"""The corpus document record shared by every source and stage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

DOC_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("lang", pa.string(), nullable=False),  # ISO 639-3 (`und` when unknown)
        pa.field("script", pa.string(), nullable=False),  # ISO 15924
        pa.field("bcp47", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("n_chars", pa.int64(), nullable=False),
    ]
)


def document(
    doc_id: str, text: str, lang: str, script: str, bcp47: str, source: str
) -> dict[str, Any]:
    return {
        "id": doc_id,
        "text": text,
        "lang": lang,
        "script": script,
        "bcp47": bcp47,
        "source": source,
        "n_chars": len(text),
    }


def documents_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=DOC_SCHEMA)


def corpus_summary(table: pa.Table) -> dict[str, Any]:
    """Documents, languages, scripts and characters per script of a documents table."""
    langs = table.column("lang").to_pylist()
    scripts = table.column("script").to_pylist()
    chars = table.column("n_chars").to_pylist()
    per_script: Counter[str] = Counter()
    for script, n in zip(scripts, chars, strict=True):
        per_script[script] += n
    return {
        "documents": table.num_rows,
        "languages": len(set(langs) - {"und"}),
        "bcp47_tags": len(set(table.column("bcp47").to_pylist())),
        "scripts": len(per_script),
        "characters": sum(chars),
        "characters_per_script": dict(sorted(per_script.items())),
    }


def is_sorted(ids: pa.ChunkedArray) -> bool:
    """Whether a column is in ascending order (then sorting by it would copy for nothing)."""
    ids = ids.combine_chunks()
    return len(ids) < 2 or pc.all(pc.less_equal(ids[:-1], ids[1:])).as_py() is True
