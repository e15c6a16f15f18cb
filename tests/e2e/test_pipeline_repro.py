"""The whole pipeline under DVC and under Prefect: `dvc repro` runs every stage once and then
nothing, and the pipeline flow lands on the same dvc.lock and the same bytes."""

import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.stages import artifact_key
from tasks.core.dvc_stages import pipeline_stages, stale_stages
from tests.conftest import dvc, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

DOCS = "data/interim/corpus/docs.parquet"


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


# The flow re-runs the corpus area's stages, whose outputs it must rebuild byte for byte, and
# finds every later stage up to date, which holds only if those rebuilt inputs are identical.
# (Each other area's stages run the same `paperline stage` path; re-running them all here
# would double the pipeline's cost in the suite.)
RERUN_AREA = "corpus"


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
    rerun = {stage.dvc_name for stage in stages if stage.area == RERUN_AREA}
    assert rerun and len(rerun) < len(stages)
    for stage in stages:
        if stage.dvc_name in rerun:
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
        # each key's latest version: the session's server also holds the artifacts of the
        # other flow tests that ran on it (deltastack's flow ran its stage: "Ran.")
        artifacts = {a.key: a.data for a in client.read_latest_artifacts()}
    assert "| documents |" in artifacts["corpus-ingest"]
    for stage in stages:
        expected = "Ran." if stage.dvc_name in rerun else "Up to date: DVC skipped it."
        assert artifacts[artifact_key(stage)].startswith(f"# {stage.name}\n\n{expected}"), (
            stage.name
        )
