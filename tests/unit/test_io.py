import json
import os

import pyarrow as pa
import pytest

from tasks.core import io
from tasks.core.errors import InputError


def _siblings(folder):
    return sorted(p.name for p in folder.iterdir())


def test_write_file_round_trips_each_type(tmp_path):
    table = pa.table({"a": [1, 2]})
    io.write_file(tmp_path / "t.parquet", table)
    io.write_file(tmp_path / "m.json", {"b": 1, "a": [1]})
    io.write_jsonl(tmp_path / "r.jsonl", [{"x": 1}, {"x": 2}])
    assert io.read_parquet(tmp_path / "t.parquet").equals(table)
    assert io.read_json(tmp_path / "m.json") == {"a": [1], "b": 1}
    assert list(io.read_jsonl(tmp_path / "r.jsonl")) == [{"x": 1}, {"x": 2}]


def test_failed_write_keeps_previous_output(tmp_path):
    target = tmp_path / "out.json"
    io.write_file(target, {"version": 1})
    with pytest.raises(RuntimeError), io.atomic_path(target) as temp:
        temp.write_text('{"version": 2, "trunc')
        raise RuntimeError("killed midway")
    assert io.read_json(target) == {"version": 1}
    assert _siblings(tmp_path) == ["out.json"]


def test_commit_outputs_renames_nothing_when_one_value_fails(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.parquet"
    io.commit_outputs({first: {"v": 1}, second: pa.table({"v": [1]})})
    with pytest.raises(TypeError):
        io.commit_outputs({first: {"v": 2}, second: object()})
    assert io.read_json(first) == {"v": 1}
    assert io.read_parquet(second).column("v").to_pylist() == [1]
    assert _siblings(tmp_path) == ["a.json", "b.parquet"]


def test_full_disk_midway_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "docs.parquet"
    io.write_file(target, pa.table({"v": [1]}))
    real_fsync = os.fsync

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(io.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        io.write_file(target, pa.table({"v": [2]}))
    monkeypatch.setattr(io.os, "fsync", real_fsync)
    assert io.read_parquet(target).column("v").to_pylist() == [1]
    assert _siblings(tmp_path) == ["docs.parquet"]


def test_atomic_directory_replaces_whole_tree(tmp_path):
    target = tmp_path / "shards"
    with io.atomic_path(target, directory=True) as temp:
        (temp / "old.txt").write_text("old")
    with io.atomic_path(target, directory=True) as temp:
        (temp / "new.txt").write_text("new")
    assert _siblings(target) == ["new.txt"]
    with pytest.raises(ValueError), io.atomic_path(target, directory=True) as temp:
        (temp / "half.txt").write_text("half")
        raise ValueError
    assert _siblings(target) == ["new.txt"]
    assert _siblings(tmp_path) == ["shards"]


def test_corrupt_parquet_names_the_file(tmp_path):
    bad = tmp_path / "docs.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match=r"docs.parquet: not a readable Parquet file"):
        io.read_parquet(bad)


def test_bad_json_names_file_and_line(tmp_path):
    bad = tmp_path / "rows.jsonl"
    bad.write_text(json.dumps({"ok": 1}) + "\n{broken\n")
    with pytest.raises(InputError, match=r"rows.jsonl: line 2: invalid JSON"):
        list(io.read_jsonl(bad))
