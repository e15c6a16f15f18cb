"""The source archive: one Parquet table of (path, source), read in the order a folder walk
gave (the CPython sample's stages depend on it)."""

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.aoeb.assemble import STAGE as ASSEMBLE
from tasks.core.errors import InputError
from tasks.core.source_archive import (
    SourceFile,
    path_order,
    read_source_archive,
    write_source_archive,
)
from tasks.scam.poison import STAGE as POISON
from tests.conftest import REPO

# names where sorting Path objects (by component) and sorting strings disagree
TRICKY = [
    "Lib/json.py",
    "Lib/json/__init__.py",
    "Lib/json/decoder.py",
    "Lib/json-x.py",
    "Lib/json_x.py",
    "Lib/a b.py",
    "Lib/a/b.py",
    "Lib/Z.py",
    "Lib/http/client.py",
    "Lib/http.py",
    "top.py",
]


def test_files_come_back_in_the_order_of_a_sorted_folder_walk(tmp_path):
    tree = tmp_path / "tree"
    for number, name in enumerate(TRICKY):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(f"x = {number}\n", encoding="utf-8")
    walked = [
        (path.relative_to(tree).as_posix(), path.read_text(encoding="utf-8"))
        for path in sorted(tree.rglob("*.py"))  # how the stages read the loose folder
    ]
    assert [p for p, _ in walked] != sorted(TRICKY)  # the string order would differ
    shuffled = [SourceFile(p, s) for p, s in walked]
    random.Random(0).shuffle(shuffled)
    archive = tmp_path / "code.parquet"
    write_source_archive(archive, shuffled)
    assert [(f.path, f.source) for f in read_source_archive(archive)] == walked
    rows = pq.read_table(archive).to_pylist()  # written in that order too
    assert [(r["path"], r["source"]) for r in rows] == walked
    # the reader sorts, whatever order another writer left the rows in
    pq.write_table(pa.table({"path": ["b.py", "a/b.py"], "source": ["", ""]}), archive)
    assert [f.path for f in read_source_archive(archive)] == ["a/b.py", "b.py"]


def test_the_stdlib_sample_is_one_archive_in_path_order():
    assert ASSEMBLE.inputs["code"] == POISON.inputs["code"]
    archive = REPO / ASSEMBLE.inputs["code"]
    rows = pq.read_table(archive).to_pylist()
    files = read_source_archive(archive)
    assert [(f.path, f.source) for f in files] == [(r["path"], r["source"]) for r in rows]
    assert [f.path for f in files] == sorted((f.path for f in files), key=path_order)
    assert len(files) == 38 and all(f.path.startswith("Lib/") for f in files)
    assert all(f.path.endswith(".py") and f.source for f in files)


def test_bad_archives_are_refused_with_the_file_named(tmp_path):
    archive = tmp_path / "code.parquet"
    with pytest.raises(InputError, match="code.parquet: missing"):
        read_source_archive(archive)
    pq.write_table(pa.table({"name": ["a.py"], "text": ["x"]}), archive)
    with pytest.raises(InputError, match=r"code.parquet: columns \['name', 'text'\]"):
        read_source_archive(archive)
    write_source_archive(archive, [SourceFile("a.py", "1"), SourceFile("a.py", "2")])
    with pytest.raises(InputError, match=r"paths \['a.py'\] appear more than once"):
        read_source_archive(archive)
    write_source_archive(archive, [SourceFile("../a.py", "1")])
    with pytest.raises(InputError, match="non-relative path"):
        read_source_archive(archive)
    write_source_archive(archive, [])
    with pytest.raises(InputError, match="code.parquet: no source files"):
        read_source_archive(archive)
