"""DVC runs the stages; Prefect runs the same DVC stages and must land on the same dvc.lock."""

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.stages import artifact_key
from tasks.core.dvc_stages import area_stages, pipeline_stages, stale_stages
from tests.conftest import REPO, copy_repo, dvc, run_cli

pytestmark = pytest.mark.integration

DOCS = "data/interim/corpus/docs.parquet"
METRICS = "data/interim/corpus/ingest_metrics.json"


def assert_phases_follow_schedule(root):
    schedule = json.loads((root / "data/processed/corpus/schedule.json").read_text())
    previous: set[str] = set()
    for phase in schedule["phases"]:
        folder = root / "data/processed/corpus/shards" / phase["name"]
        manifest = json.loads((folder / "manifest.json").read_text())
        assert set(manifest["languages"]) == set(phase["languages"]) >= previous
        previous = set(phase["languages"])
        for key in ("sequence_length", "mask_ratio", "temperature", "token_budget"):
            assert manifest[key] == phase[key]
        for lang, p in phase["probabilities"].items():
            assert abs(manifest["token_share_per_language"][lang] - p) <= 1 / phase["token_budget"]
        rows = sum(pq.read_metadata(folder / s["file"]).num_rows for s in manifest["shards"])
        assert rows == manifest["sequences"] > 0
    assert len(schedule["phases"]) == 3


def test_ingest_reads_every_shipped_translation(tmp_path):
    full = copy_repo(tmp_path / "full", small=False)
    result = dvc("repro", "corpus-ingest", cwd=full)
    assert result.returncode == 0, result.stderr
    docs = pq.read_table(full / DOCS)
    metrics = json.loads((full / METRICS).read_text())
    assert metrics["documents"] == docs.num_rows > 11_000
    assert metrics["languages"] >= 330 and metrics["bcp47_tags"] >= 345
    assert len(set(docs.column("lang").to_pylist())) == metrics["languages"] + 1  # + und


def test_dvc_repro_runs_every_stage_then_does_nothing(reproduced):
    root, first = reproduced
    for stage in pipeline_stages(root):
        assert f"Running stage '{stage.dvc_name}'" in first.stdout
    assert_phases_follow_schedule(root)
    lock = (root / "dvc.lock").read_text()
    stamp = os.stat(root / DOCS).st_mtime_ns

    second = dvc("repro", cwd=root)
    assert second.returncode == 0, second.stderr
    assert "didn't change, skipping" in second.stdout
    assert "Running stage" not in second.stdout
    assert os.stat(root / DOCS).st_mtime_ns == stamp
    assert (root / "dvc.lock").read_text() == lock
    assert stale_stages(root) == {}


def test_params_change_makes_stage_stale(repo_copy):
    assert dvc("repro", "corpus-ingest", cwd=repo_copy).returncode == 0
    params = repo_copy / "params.yaml"
    params.write_text(params.read_text().replace("min_chars: 1", "min_chars: 50"))
    assert stale_stages(repo_copy)["corpus.ingest"] == ["deps: params.yaml:corpus.ingest modified"]


# Training and evaluation stages are the costly ones: the flow gets their outputs from the
# DVC run and must find them up to date, which holds only if it rebuilds every input of
# theirs byte for byte.
KEPT = {
    "mlm-pretrain",
    "mlm-mid",
    "mlm-decay",
    "mlm-evaluate",
    "kg-detector",
    "kg-answerer",
    "kg-eval",
    "scam-guard",
    "scam-poison",
    "deltastack-study",
    "aoeb-finetune",
    "aoeb-evaluate",
    "cmipref-label",
    "cmipref-train",
    "cmipref-evaluate",
}


def copy_without_state(source, target):
    def ignore(folder, names):
        if Path(folder) == source:
            return {".paperline"} & set(names)
        if Path(folder).name == ".dvc":
            return {"tmp"} & set(names)
        # the object cache stays (an output missing from it counts as changed); the run
        # cache goes, or DVC would restore the deleted outputs instead of running the stages
        return {"runs"} & set(names) if Path(folder).name == "cache" else set()

    shutil.copytree(source, target, ignore=ignore)
    return target


def test_pipeline_flow_and_dvc_repro_write_identical_outputs(tmp_path, reproduced, prefect_harness):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    by_dvc, _ = reproduced
    by_flow = copy_without_state(by_dvc, tmp_path / "by_flow")
    stages = pipeline_stages(by_flow)
    assert {stage.dvc_name for stage in stages} >= KEPT
    for stage in stages:
        if stage.dvc_name not in KEPT:
            for output in stage.outs:
                path = by_flow / output
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    result = run_cli(
        "flow", "pipeline", cwd=by_flow, env={"PREFECT_API_URL": PREFECT_API_URL.value()}
    )
    assert result.returncode == 0, result.stderr[-2000:]

    assert (by_flow / "dvc.lock").read_text() == (by_dvc / "dvc.lock").read_text()
    for stage in stages:
        for output in stage.outs:
            for made in sorted((by_dvc / output).rglob("*")) or [by_dvc / output]:
                twin = by_flow / made.relative_to(by_dvc)
                assert made.is_dir() or made.read_bytes() == twin.read_bytes(), made

    with get_client(sync_client=True) as client:
        artifacts = {a.key: a.data for a in client.read_artifacts()}
    assert "| documents |" in artifacts["corpus-ingest"]
    for stage in stages:
        expected = "Up to date: DVC skipped it." if stage.dvc_name in KEPT else "Ran."
        assert artifacts[artifact_key(stage)].startswith(f"# {stage.name}\n\n{expected}"), (
            stage.name
        )


def test_area_flow_runs_in_process(repo_copy, prefect_harness):
    from flows.dvc_flows import corpus

    names = [s.name for s in pipeline_stages(repo_copy) if s.area == "corpus"]
    assert corpus(root=str(repo_copy)) == dict.fromkeys(names, True)
    assert corpus(root=str(repo_copy)) == dict.fromkeys(names, False)


def toy_dag(tmp_path):
    """Areas a, b, c: b needs a's output, c stands alone."""
    folder = tmp_path / "dag"
    folder.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    assert dvc("init", "-q", cwd=folder).returncode == 0
    (folder / "dvc.yaml").write_text(
        textwrap.dedent("""
        stages:
          b-three:
            cmd: cp y z
            deps: [y]
            outs: [z]
          a-one:
            cmd: echo 1 > x
            outs: [x]
          b-two:
            cmd: cp x y
            deps: [x]
            outs: [y]
          c-four:
            cmd: echo 4 > w
            outs: [w]
    """)
    )
    return folder


def test_stage_order_and_area_selection_follow_the_dag(tmp_path):
    folder = toy_dag(tmp_path)
    order = [s.name for s in pipeline_stages(folder)]
    assert sorted(order) == ["a.one", "b.three", "b.two", "c.four"]
    assert order.index("a.one") < order.index("b.two") < order.index("b.three")
    assert [s.name for s in area_stages("b", folder)] == [
        n for n in order if n in {"a.one", "b.two", "b.three"}
    ]
    assert [s.name for s in area_stages("c", folder)] == ["c.four"]


def test_an_area_gets_its_flow_from_dvc_yaml_alone(tmp_path, monkeypatch, prefect_harness):
    from flows import dvc_flows

    folder = toy_dag(tmp_path)
    shutil.copy(REPO / "params.yaml", folder)  # the flow reads runtime.prefect's retries
    monkeypatch.chdir(folder)
    assert dvc_flows.flow_names() == ["pipeline", "a", "b", "c"]
    assert dvc_flows.c.name == "c"
    assert dvc_flows.c(root=str(folder)) == {"c.four": True}
    assert (folder / "w").read_text() == "4\n"
    with pytest.raises(AttributeError):
        dvc_flows.d  # noqa: B018 - the lookup itself is under test


def code_reasons(stale: dict[str, list[str]], module: str) -> set[str]:
    return {name for name, reasons in stale.items() if f"deps: {module} modified" in reasons}


@pytest.mark.parametrize(
    "module", ["tasks/core/io.py", "tasks/core/train_loop.py", "tasks/core/training.py"]
)
def test_editing_a_module_makes_exactly_its_importers_stale(tmp_path, module):
    """dvc.lock records every module a stage imports: a comment appended to one of them
    makes `dvc status` report each stage whose code reaches it, and no other."""
    from tasks.core.code_deps import declared_deps

    root = copy_repo(tmp_path / "repo", small=False)
    assert not code_reasons(stale_stages(root), module), "dvc.lock is older than the code"
    with (root / module).open("a", encoding="utf-8") as handle:
        handle.write("# an edit that changes nothing but the file's hash\n")
    importers = {
        stage.name for stage in pipeline_stages(root) if module in declared_deps(stage.name, root)
    }
    assert code_reasons(stale_stages(root), module) == importers
    if module == "tasks/core/train_loop.py":  # the kit the fine-tunes share with mlm
        assert {"scam.poison", "aoeb.finetune", "cmipref.train", "mlm.pretrain"} <= importers
    elif module == "tasks/core/training.py":  # the harness: every training stage
        trainers = {"mlm.pretrain", "mlm.mid", "mlm.decay", "kg.detector", "scam.guard"}
        assert trainers | {"scam.poison", "aoeb.finetune", "cmipref.train"} <= importers
        assert "corpus.ingest" not in importers
    else:
        assert len(importers) == len(pipeline_stages(root))  # every stage writes through io
