"""Atomic writes (temp then rename) and the Parquet / JSON / JSONL readers and writers.

A write either replaces the target whole or leaves the previous version in place: a killed
or failing stage never leaves a half-written output behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.core.errors import InputError


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def _temp_sibling(target: Path, directory: bool) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}.tmp-"
    if directory:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    fd, name = tempfile.mkstemp(prefix=prefix, dir=target.parent)
    os.close(fd)
    return Path(name)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _replace(temp: Path, target: Path) -> None:
    """Move `temp` onto `target`; a directory target is swapped via a side name."""
    if temp.is_dir() and target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        _remove(old)
        os.replace(target, old)
        os.replace(temp, target)
        _remove(old)
    else:
        os.replace(temp, target)
    _fsync_dir(target.parent)


@contextlib.contextmanager
def atomic_path(target: Path | str, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling of `target`; on success it replaces `target`, else vanishes."""
    target = Path(target)
    temp = _temp_sibling(target, directory)
    try:
        yield temp
        if not directory:
            _fsync_file(temp)
        _replace(temp, target)
    except BaseException:
        _remove(temp)
        raise


def write_file(path: Path | str, value: Any) -> None:
    """Atomically write one value (Table → Parquet, dict/list → JSON, str, bytes)."""
    commit_outputs({Path(path): value})


def write_jsonl(path: Path | str, rows: Iterable[Mapping[str, Any]]) -> None:
    with atomic_path(path) as temp, open(temp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_parquet(path: Path | str, columns: list[str] | None = None) -> pa.Table:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: missing; run the stage that produces it (`dvc repro`)")
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(
            f"{path}: not a readable Parquet file ({exc}); delete it and re-run its stage"
        ) from None


def read_json(path: Path | str) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: missing") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None


def read_jsonl(path: Path | str) -> Iterator[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: missing")
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}: line {number}: invalid JSON ({exc.msg})") from None


class Folder(dict):
    """A directory output: file name → value, each written like any other output."""


def write_output(temp: Path, value: Any) -> None:
    """Write one stage output to `temp` by its type (Table → Parquet, dict → JSON, Path → copy)."""
    if isinstance(value, Folder):
        for name, item in value.items():
            (temp / name).parent.mkdir(parents=True, exist_ok=True)
            write_output(temp / name, item)
    elif isinstance(value, pa.Table):
        pq.write_table(value, temp, compression="zstd")
    elif isinstance(value, (dict, list)):
        temp.write_text(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
    elif isinstance(value, str):
        temp.write_text(value, encoding="utf-8")
    elif isinstance(value, bytes):
        temp.write_bytes(value)
    elif isinstance(value, Path):  # an existing file or folder, copied
        if value.is_dir():
            shutil.copytree(value, temp, dirs_exist_ok=True)
        else:
            shutil.copyfile(value, temp)
    else:
        raise TypeError(f"cannot write a {type(value).__name__} as a stage output")


def commit_outputs(outputs: Mapping[Path, Any]) -> None:
    """Write every output to a temp sibling first, then rename them all into place.

    Nothing is renamed until every value has been written, so a failure (bad value, full
    disk) leaves all previous outputs untouched.
    """
    staged: list[tuple[Path, Path]] = []
    try:
        for target, value in outputs.items():
            target = Path(target)
            directory = isinstance(value, Folder) or (isinstance(value, Path) and value.is_dir())
            temp = _temp_sibling(target, directory=directory)
            staged.append((temp, target))
            write_output(temp, value)
            for written in temp.rglob("*") if directory else [temp]:
                if written.is_file():
                    _fsync_file(written)
    except BaseException as error:
        for temp, _ in staged:
            _remove(temp)
        if isinstance(error, OSError) and error.filename is None and staged:
            raise OSError(error.errno, error.strerror, str(staged[-1][1])) from error
        raise
    for temp, target in staged:
        _replace(temp, target)
