"""AOEB's embedded tasks (code, tool, multi-hop, memory) and the hub loader, on small inputs."""

from __future__ import annotations

import argparse
import ast
import json
import logging
import re
import textwrap
from itertools import combinations

import click
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.aoeb.assemble import STAGE as ASSEMBLE
from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration, read_task, task_files
from tasks.aoeb.embedded.code import CodeTaskParams, code_task, functions, module_name, summary_of
from tasks.aoeb.embedded.memory import MemoryTaskParams, memory_task
from tasks.aoeb.embedded.reasoning import ANSWER, BRIDGE, MultiHopTaskParams, reasoning_task
from tasks.aoeb.embedded.splits import SPLITS, SplitParams, assign_groups, split_qrels
from tasks.aoeb.embedded.tool import (
    DEFAULT_SOURCES,
    ToolCommand,
    ToolSource,
    ToolTaskParams,
    argparse_commands,
    click_commands,
    load_commands,
    task_request,
    tool_task_from_commands,
)
from tasks.aoeb.hub import load_hub_task
from tasks.core.errors import InputError
from tasks.core.io import commit_outputs
from tasks.core.source_archive import SourceFile, read_source_archive, write_source_archive
from tests.conftest import REPO

WD, WDT = "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
PROPERTY_LABELS = (
    "country of citizenship",
    "official language",
    "continent",
    "occupation",
    "place of birth",
    "country",
)


# ---------------------------------------------------------------- shared checks


def check_task(task: RetrievalTask, group_of) -> None:
    """Every split judged, ids resolve, and no query, group or relevant document in two
    splits (train, dev, test)."""
    assert set(task.qrels) == {"train", "dev", "test"} == set(task.declaration.splits)
    assert all(task.qrels[split] for split in SPLITS)
    for judged in task.qrels.values():
        for qid, docs in judged.items():
            assert qid in task.queries and task.queries[qid].strip()
            assert docs and set(docs) <= task.corpus.keys() and min(docs.values()) > 0
    assert set(task.queries) == set().union(*(task.qrels[split].keys() for split in SPLITS))
    groups = {split: {group_of(q) for q in task.qrels[split]} for split in task.qrels}
    docs = {split: {d for ds in task.qrels[split].values() for d in ds} for split in task.qrels}
    for one, other in combinations(SPLITS, 2):
        assert task.qrels[one].keys().isdisjoint(task.qrels[other])
        assert groups[one].isdisjoint(groups[other]) and docs[one].isdisjoint(docs[other])


def round_trip(task: RetrievalTask, tmp_path) -> None:
    folder = tmp_path / task.declaration.name
    commit_outputs({folder: task_files(task)})
    back = read_task(folder)
    assert back.declaration == task.declaration
    assert (back.corpus, back.queries, back.qrels) == (task.corpus, task.queries, task.qrels)
    assert back.candidates == task.candidates


def test_split_qrels_groups_and_drops_train_queries_sharing_a_test_document():
    judgments = {f"q{i}": {f"d{i}": 1, "shared": 1} if i < 2 else {f"d{i}": 1} for i in range(8)}
    group_of = {f"q{i}": f"g{i % 4}" for i in range(8)}
    qrels = split_qrels(judgments, group_of, SplitParams(test_fraction=0.5), "test input")
    test_groups = {group_of[q] for q in qrels["test"]}
    assert test_groups and test_groups.isdisjoint(group_of[q] for q in qrels["train"])
    if any("shared" in qrels["test"][q] for q in qrels["test"]):
        assert all("shared" not in docs for docs in qrels["train"].values())
    assert split_qrels(judgments, group_of, SplitParams(test_fraction=0.5), "x") == qrels
    with pytest.raises(InputError, match="at least 3 groups"):
        split_qrels(judgments, dict.fromkeys(judgments, "g"), SplitParams(), "one group")


def test_the_dev_split_is_its_own_groups_and_no_train_query_shares_its_documents():
    # q0..q9 in 10 groups; q0 shares a document with every other query
    judgments = {f"q{i}": {f"d{i}": 1, "hub": 1} if i == 0 else {f"d{i}": 1} for i in range(10)}
    judgments |= {f"p{i}": {f"e{i}": 1, "hub": 1} for i in range(1, 10)}
    group_of = {q: f"g{q[1:]}" for q in judgments}
    params = SplitParams(test_fraction=0.3, dev_fraction=0.3, seed=4)
    qrels = split_qrels(judgments, group_of, params, "test input")
    assert set(qrels) == set(SPLITS) and all(qrels[split] for split in SPLITS)
    groups = {split: {group_of[q] for q in qrels[split]} for split in SPLITS}
    for one, other in combinations(SPLITS, 2):
        assert groups[one].isdisjoint(groups[other])
    held_out = {d for split in ("dev", "test") for docs in qrels[split].values() for d in docs}
    assert all(held_out.isdisjoint(docs) for docs in qrels["train"].values())
    test_docs = {d for docs in qrels["test"].values() for d in docs}
    assert all(test_docs.isdisjoint(docs) for docs in qrels["dev"].values())
    assert split_qrels(judgments, group_of, params, "again") == qrels  # fixed by the seed
    assert split_qrels(judgments, group_of, params.model_copy(update={"seed": 5}), "x") != qrels
    capped = split_qrels(judgments, group_of, params.model_copy(update={"max_dev_queries": 1}), "x")
    assert len(capped["dev"]) == 1 and capped["test"] == qrels["test"]


def test_three_groups_make_one_per_split_and_fractions_leave_room_to_train():
    assert sorted(assign_groups(["a", "b", "c"], 0.5, 0.5, seed=0).values()) == [
        "dev",
        "test",
        "train",
    ]
    with pytest.raises(ValueError, match="no group to train on"):
        SplitParams(test_fraction=0.6, dev_fraction=0.4)


# ---------------------------------------------------------------- code


STDLIB_SAMPLE = REPO / ASSEMBLE.inputs["code"]


@pytest.fixture(scope="module")
def real_code_task():
    settings = CodeTaskParams(max_test_queries=60, max_train_queries=60, max_documents=200)
    return code_task(STDLIB_SAMPLE, settings)


def _functions_by_title(archive):
    """title -> (function node, its module) for every function in the source archive."""
    found = {}
    for file in read_source_archive(archive):
        module = module_name(file.path)
        for qualname, node in functions(ast.parse(file.source).body):
            found.setdefault(f"{module}.{qualname}", (node, module))
    return found


def test_code_task_on_the_stdlib_sample(real_code_task, tmp_path):
    task = real_code_task
    by_title = _functions_by_title(STDLIB_SAMPLE)
    assert len(task.corpus) == 200 and len(task.qrels["test"]) == 60
    check_task(task, lambda qid: by_title[qid[2:]][1])  # no module in both splits
    for qid in sorted(task.queries)[::10]:
        title = qid[2:]
        judged = {q: docs for split in SPLITS for q, docs in task.qrels[split].items()}
        assert judged.get(qid) == {title: 1}
        node, _ = by_title[title]
        docstring = ast.get_docstring(node)
        assert (
            task.queries[qid]
            == " ".join(docstring.split("\n\n")[0].split())[: len(task.queries[qid])]
        )  # the docstring's first paragraph (maybe cut at 60 words)
        text = task.corpus[title]["text"]
        assert f"def {node.name}(" in text and task.corpus[title]["title"] == title
        assert task.queries[qid] not in " ".join(text.split())  # the docstring is gone
        assert docstring.splitlines()[0] not in text
    round_trip(task, tmp_path)


def _write_modules(archive):
    alpha = textwrap.dedent('''
        def parse_header(line):
            """Split one header line into its name and its value.

            Longer explanation that is not part of the query.
            """
            name, _, value = line.partition(":")
            return name, value


        def short(x):
            """Too short."""
            return x


        def stub(x):
            """A stub whose whole body is this docstring, nothing else."""


        class Reader:
            def read_all(self, stream):
                """Read every remaining chunk from the stream and join them."""
                return b"".join(stream)
        ''')
    pkg = textwrap.dedent('''
        def copy_one(a):
            """Read every remaining chunk from the stream and join them."""
            return a


        def undocumented(b):
            return b + 1


        def join_paths(a, b):
            """Join two path segments with exactly one separator."""
            return a.rstrip("/") + "/" + b.lstrip("/")
        ''')
    gamma = textwrap.dedent('''
        def count_words(text):
            """Count the whitespace separated words of a text."""
            return len(text.split())
        ''')
    files = [
        SourceFile("Lib/pkg/__init__.py", pkg),
        SourceFile("Lib/alpha.py", alpha),
        SourceFile("Lib/gamma.py", gamma),  # a third module: train, dev and test need one each
    ]
    write_source_archive(archive, files)


def test_code_task_on_tiny_modules(tmp_path):
    archive = tmp_path / "code.parquet"
    _write_modules(archive)
    settings = CodeTaskParams(min_summary_words=4, test_fraction=0.5)
    task = code_task(archive, settings)
    assert task == code_task(archive, settings)  # deterministic
    assert set(task.queries) == {
        "q:alpha.parse_header",
        "q:alpha.Reader.read_all",
        "q:pkg.join_paths",
        "q:gamma.count_words",
    }
    summary = "Split one header line into its name and its value."
    assert task.queries["q:alpha.parse_header"] == summary
    # the repeated docstring stays with the first function; its twin leaves the corpus
    assert "pkg.copy_one" not in task.corpus and "alpha.stub" not in task.corpus
    assert {"alpha.short", "pkg.undocumented"} <= task.corpus.keys()  # distractors
    doc = task.corpus["alpha.parse_header"]
    assert doc["title"] == "alpha.parse_header" and "Split one header" not in doc["text"]
    assert doc["text"].startswith("def parse_header(line):\n") and "partition" in doc["text"]
    check_task(task, lambda qid: qid[2:].split(".")[0])
    assert summary_of("First  line\n  goes on.\n\nSecond.", 3) == "First line goes"


def test_code_task_needs_valid_python_source(tmp_path):
    archive = tmp_path / "code.parquet"
    write_source_archive(archive, [])
    with pytest.raises(InputError, match="no source files"):
        code_task(archive, CodeTaskParams())
    write_source_archive(archive, [SourceFile("Lib/broken.py", "def f(:\n")])
    with pytest.raises(InputError, match=r"code.parquet: Lib/broken.py:1: not valid Python"):
        code_task(archive, CodeTaskParams())


# ---------------------------------------------------------------- tool


@click.group()
def fake_cli():
    """A fake tool."""


@fake_cli.group()
def runs():
    """Manage runs."""


@runs.command("list")
@click.option("--experiment-id", "-x", help="Which experiment.")
@click.argument("where")
def list_runs(experiment_id, where):
    """Lists all runs of an MLflow experiment.

    More detail.\f
    Hidden from help.
    """


@runs.command(hidden=True)
def secret():
    """Never listed."""


@fake_cli.command()
def doctor():
    """Prints out useful information for debugging issues."""


def _fake_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dvc")
    sub = parser.add_subparsers()
    add = sub.add_parser("add", help="Track data files or directories with DVC.")
    add.add_argument("--jobs", default=4, help="Parallel jobs (default %(default)s).")
    add.add_argument("targets", nargs="+", help="Files to add.")
    remote = sub.add_parser("remote", aliases=["rem"], help="Manage remotes.")
    remote_sub = remote.add_subparsers()
    remote_sub.add_parser("rename", help="Rename a DVC remote to something new.")
    sub.add_parser("daemon", help=argparse.SUPPRESS)
    return parser


def test_walkers_find_leaf_commands_with_options():
    commands = {c.doc_id: c for c in click_commands("mlflow", fake_cli)}
    assert set(commands) == {"mlflow/doctor", "mlflow/runs/list"}
    listed = commands["mlflow/runs/list"]
    assert listed.summary == "Lists all runs of an MLflow experiment"
    assert "Hidden" not in listed.help  # after click's \\f
    assert ("--experiment-id, -x", "Which experiment.") in listed.options
    parsed = {c.doc_id: c for c in argparse_commands("dvc", _fake_parser())}
    assert set(parsed) == {"dvc/add", "dvc/remote/rename"}  # alias once, suppressed skipped
    assert ("--jobs", "Parallel jobs (default 4).") in parsed["dvc/add"].options


def test_task_request_drops_the_command_words():
    command = next(c for c in click_commands("mlflow", fake_cli) if c.path == ("runs", "list"))
    request = task_request(command, min_words=3, seed=0)
    assert request is not None
    lowered = request.lower()
    assert "mlflow" not in lowered and "list" not in lowered
    assert "show all runs of an experiment" in lowered
    add = ToolCommand("dvc", ("add",), "Track data files or directories with DVC.", "", ())
    assert "track data files or directories" in task_request(add, 3, 0).lower()
    assert "dvc" not in task_request(add, 3, 0).lower()
    assert task_request(ToolCommand("dvc", ("x",), "Two words.", "", ()), 3, 0) is None


def test_real_dvc_cli_and_a_missing_one(caplog):
    dvc = load_commands(DEFAULT_SOURCES[0])
    assert len(dvc) > 50 and "dvc/add" in {c.doc_id for c in dvc}
    with caplog.at_level(logging.WARNING):
        missing = ToolSource(name="nope", kind="click", entry="no_such_module_here:cli")
        assert load_commands(missing) == []
    assert "skipping nope" in caplog.text


def test_tool_task_from_dvc_and_a_fake_cli(tmp_path):
    commands = load_commands(DEFAULT_SOURCES[0]) + list(click_commands("mlflow", fake_cli))
    settings = ToolTaskParams(min_commands=20)
    task = tool_task_from_commands(commands, settings)
    assert task == tool_task_from_commands(list(reversed(commands)), settings)  # order-free
    assert {"dvc/add", "mlflow/doctor"} <= task.corpus.keys()
    assert task.corpus["dvc/add"]["text"].startswith("dvc add: Track data files")
    assert "\x1b[" not in task.corpus["dvc/add"]["text"]
    check_task(task, lambda qid: "/".join(qid[2:].split("/")[:2]))  # by command family
    for qid, text in task.queries.items():  # the tool is never named
        assert qid[2:].split("/")[0] not in {w.strip("`'\".,?()").lower() for w in text.split()}
    round_trip(task, tmp_path)
    with pytest.raises(InputError, match="need 500"):
        tool_task_from_commands(commands, ToolTaskParams(min_commands=500))


# ---------------------------------------------------------------- KG: reasoning and memory


def _triple(s: str, p: str, o: str) -> str:
    return f"<{WD}{s}> <{WDT}{p}> <{WD}{o}> ."


def _label(s: str, text: str) -> str:
    return f'<{WD}{s}> <{LABEL}> "{text}"@en .'


@pytest.fixture
def slice_nt(tmp_path):
    """4 countries (language, continent), 3 cities (country), 24 unlabelled people."""
    lines = [
        _label(p, t)
        for p, t in [
            ("P27", "country of citizenship"),
            ("P37", "official language"),
            ("P30", "continent"),
            ("P19", "place of birth"),
            ("P17", "country"),
            ("P106", "occupation"),
            ("P31", "instance of"),
            ("Q5", "human"),
            ("Q6256", "country"),
            ("Q300", "Europe"),
            ("Q400", "writer"),
            ("Q401", "painter"),
        ]
    ]
    for c in range(4):
        country = f"Q10{c}"
        lines += [_label(country, f"Country{c}"), _label(f"Q20{c}", f"Language{c}")]
        lines += [
            _triple(country, "P37", f"Q20{c}"),
            _triple(country, "P30", "Q300"),
            _triple(country, "P31", "Q6256"),
        ]
    for c in range(3):
        lines += [_label(f"Q50{c}", f"City{c}"), _triple(f"Q50{c}", "P17", f"Q10{c}")]
    for i in range(1, 25):
        person = f"Q{1000 + i}"
        lines += [
            _triple(person, "P31", "Q5"),
            _triple(person, "P27", f"Q10{i % 4}"),
            _triple(person, "P106", f"Q40{i % 2}"),
            _triple(person, "P19", f"Q50{i % 3}"),
        ]
    lines.append(f'<{WD}P27> <{LABEL}> "Staatsangehörigkeit"@de .')  # another language
    path = tmp_path / "wikidata_slice.nt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reasoning_task_asks_two_hops(slice_nt, tmp_path):
    settings = MultiHopTaskParams(test_fraction=0.5, max_documents=40)
    task = reasoning_task(slice_nt, settings)
    assert task == reasoning_task(slice_nt, settings)
    bridge_of = {
        qid: next(d for d, r in docs.items() if r == ANSWER)
        for judged in task.qrels.values()
        for qid, docs in judged.items()
    }
    check_task(task, bridge_of.get)
    assert len(task.corpus) <= 40
    for judged in task.qrels.values():
        for qid, docs in judged.items():
            assert sorted(docs.values()) == [BRIDGE, ANSWER]
            e1 = next(d for d, r in docs.items() if r == BRIDGE)
            e2 = bridge_of[qid]
            question = task.queries[qid]
            title = task.corpus[e1]["title"]
            name = e1 if title.startswith(f"{e1} (") else title  # unlabelled: by its QID
            assert question.startswith("What is the ") and question.endswith(f"of {name}?")
            e2_name = task.corpus[e2]["title"]
            assert e2_name in task.corpus[e1]["text"]  # the bridge is on e1's sheet
            assert e2_name not in question  # …and not in the question
    # a known path: a person's country's official language
    qid = next(q for q, t in task.queries.items() if "official language of the country of" in t)
    docs = next(task.qrels[split][qid] for split in SPLITS if qid in task.qrels[split])
    e2 = bridge_of[qid]
    assert f"Language{e2[-1]}" in task.corpus[e2]["text"]
    assert task.corpus[next(d for d in docs if d != e2)]["title"].endswith("(human)")
    round_trip(task, tmp_path)


def test_kg_tasks_need_the_slice(tmp_path):
    with pytest.raises(InputError, match="missing"):
        reasoning_task(tmp_path / "absent.nt", MultiHopTaskParams())
    broken = tmp_path / "broken.nt"
    broken.write_text("<a> <b> not n-triples\n")
    with pytest.raises(InputError, match="not N-Triples"):
        memory_task(broken, MemoryTaskParams())


def test_memory_task_pools_and_sessions(slice_nt, tmp_path):
    settings = MemoryTaskParams(
        histories=4,
        entities_per_history=2,
        facts_per_entity=2,
        distractor_sessions=1,
        queries_per_history=2,
    )
    task = memory_task(slice_nt, settings)
    assert task == memory_task(slice_nt, settings)
    assert task.declaration.has_candidates
    check_task(task, lambda qid: qid.split("-")[0])  # by history
    assert set(task.candidates) == set(task.queries)
    for judged in task.qrels.values():
        for qid, docs in judged.items():
            pool = task.candidates[qid]
            (target,) = docs
            assert target in pool and all(s.split("-")[0] == qid.split("-")[0] for s in pool)
            assert len(pool) == len(set(pool)) >= 2
            text = task.corpus[target]["text"]
            assert text.startswith("User: ") and "\nAssistant: " in text
            # the asked entity and property are stated together in the target session only
            entity = re.search(r"Q\d+ \(human\)|Country\d", task.queries[qid]).group()
            prop = next(p for p in PROPERTY_LABELS if p in task.queries[qid])
            stating = [
                s
                for s in pool
                if any(
                    entity in line and prop in line for line in task.corpus[s]["text"].splitlines()
                )
            ]
            assert stating == [target], (task.queries[qid], entity, prop)
    round_trip(task, tmp_path)
    with pytest.raises(InputError, match="lower `histories`"):
        memory_task(slice_nt, MemoryTaskParams(histories=50))


# ---------------------------------------------------------------- hub


def _write_hub_dataset(root, id_column: str, extension: str):
    """MTEB's hub layout in one file format (a dataset's builder is inferred from it)."""
    root.mkdir()
    configs = {"corpus": ["corpus"], "queries": ["queries"], "default": ["train", "test"]}
    lines = ["---", "configs:"]
    for name, splits in configs.items():
        lines += [f"- config_name: {name}", "  data_files:"]
        for split in splits:
            folder = "qrels/" if name == "default" else ""
            lines += [f"  - split: {split}", f"    path: {folder}{split}.{extension}"]
    (root / "README.md").write_text("\n".join([*lines, "---", "A tiny retrieval task.", ""]))
    tables = {
        "corpus": [
            {id_column: f"d{i}", "title": f"T{i}", "text": f"document {i}"} for i in range(4)
        ],
        "queries": [
            {id_column: f"q{i}", "text": t} for i, t in [(1, "one"), (2, "two"), (3, "three")]
        ],
        "qrels/train": [{"query-id": "q1", "corpus-id": "d1", "score": 1}],
        "qrels/test": [
            {"query-id": "q2", "corpus-id": "d2", "score": 2.0},
            {"query-id": "q2", "corpus-id": "d3", "score": 1.0},
        ],
    }
    (root / "qrels").mkdir()
    for name, rows in tables.items():
        path = root / f"{name}.{extension}"
        if extension == "parquet":
            pq.write_table(pa.Table.from_pylist(rows), path)
        else:
            path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.mark.parametrize("id_column, extension", [("_id", "jsonl"), ("id", "parquet")])
def test_hub_task_from_a_local_copy(tmp_path, id_column, extension):
    _write_hub_dataset(tmp_path / "hub", id_column, extension)
    declaration = TaskDeclaration("HubRetrieval", "tool", splits=("train", "test"))
    cache = str(tmp_path / "cache")
    task = load_hub_task(declaration, str(tmp_path / "hub"), None, cache_dir=cache)
    assert task.corpus["d1"] == {"title": "T1", "text": "document 1"} and len(task.corpus) == 4
    assert task.queries == {"q1": "one", "q2": "two"}  # q3 is judged nowhere
    assert task.qrels == {"train": {"q1": {"d1": 1}}, "test": {"q2": {"d2": 2, "d3": 1}}}
    assert task.declaration.source == f"hf:{tmp_path / 'hub'}"
    round_trip(task, tmp_path)
    with pytest.raises(InputError, match="no qrels split 'dev'"):
        load_hub_task(
            TaskDeclaration("H", "tool", splits=("dev",)),
            str(tmp_path / "hub"),
            None,
            cache_dir=cache,
        )
    with pytest.raises(InputError, match="cannot load config"):
        load_hub_task(declaration, str(tmp_path / "hub"), None, subset="xx", cache_dir=cache)
