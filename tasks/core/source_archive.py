"""Source code kept as data: one Parquet table of (path, source), read back in path order.

A corpus of someone else's code (e.g. the CPython standard-library sample in
data/seed/code) lives in one file rather than as loose `.py` files that would read as this
project's own code. Paths are POSIX and relative to the source tree (`Lib/http/client.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pyarrow as pa

from tasks.core.errors import InputError
from tasks.core.io import read_parquet, write_file

SCHEMA = pa.schema([("path", pa.string()), ("source", pa.string())])


@dataclass(frozen=True)
class SourceFile:
    path: str  # POSIX, relative to the source tree
    source: str


def path_order(path: str) -> tuple[str, ...]:
    """Sort key: component by component, as `sorted()` orders `Path` objects: the folder
    `json/` sorts before `json.py` and `json-x.py` (a plain string sort puts it after them,
    since '/' > '.' and '-')."""
    return PurePosixPath(path).parts


def read_source_archive(path: Path) -> list[SourceFile]:
    """Every file in the archive at `path`, in `path_order`."""
    table = read_parquet(path)
    if not SCHEMA.equals(table.schema, check_metadata=False):
        raise InputError(
            f"{path}: columns {table.schema.names}; a source archive has exactly the string "
            "columns path, source: rebuild it with write_source_archive"
        )
    rows = table.to_pylist()
    if not rows:
        raise InputError(f"{path}: no source files; the archive is empty")
    paths = [row["path"] for row in rows]
    bad = [p for p in paths if p is None or PurePosixPath(p).is_absolute() or ".." in p.split("/")]
    if bad or any(row["source"] is None for row in rows):
        raise InputError(f"{path}: a row has a null or non-relative path or null source: {bad}")
    if len(set(paths)) != len(paths):
        twice = sorted({p for p in paths if paths.count(p) > 1})
        raise InputError(f"{path}: paths {twice} appear more than once; keep one row each")
    files = [SourceFile(row["path"], row["source"]) for row in rows]
    return sorted(files, key=lambda f: path_order(f.path))


def write_source_archive(path: Path, files: Iterable[SourceFile]) -> None:
    """Write `files` as a zstd Parquet archive, rows in `path_order`."""
    ordered = sorted(files, key=lambda f: path_order(f.path))
    table = pa.table(
        {"path": [f.path for f in ordered], "source": [f.source for f in ordered]}, schema=SCHEMA
    )
    write_file(path, table)
