"""Faults the product survives: a killed training stage resumes, a corrupt input and a full
disk fail with one clear line and lose nothing. (A dead SPARQL endpoint: tests/integration/
test_kg.py::test_a_dead_endpoint_fails_clearly_and_loses_nothing.)"""

import contextlib
import json
import os
import resource
import signal
import subprocess
import time

import pytest

from tests.conftest import BIN, dvc, edit_params, git_commit_all

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

CORPUS = "data/interim/corpus"


def snapshot(root, folder):
    return {p.name: p.read_bytes() for p in sorted((root / folder).iterdir()) if p.is_file()}


def error_line(stderr):
    """The error of a failed stage: its first stderr line, no traceback (the stage log's
    path and tail follow it)."""
    assert "Traceback" not in stderr, stderr[-3000:]
    return stderr.strip().splitlines()[0]


def test_corrupt_parquet_names_the_file_and_dvc_checkout_restores_everything(product):
    git_commit_all(product, "the reproduced pipeline")  # its cache-less metrics are in git
    before = snapshot(product, CORPUS)
    lock = (product / "dvc.lock").read_text()
    (product / CORPUS / "filtered.parquet").write_bytes(b"PAR1 this is not parquet")

    stage = subprocess.run(
        [str(BIN / "paperline"), "stage", "corpus.dedup"],
        cwd=product,
        capture_output=True,
        text=True,
    )
    assert stage.returncode == 2
    line = error_line(stage.stderr)
    assert f"{CORPUS}/filtered.parquet: not a readable Parquet file" in line
    after = snapshot(product, CORPUS)
    assert {name: after[name] for name in before if name != "filtered.parquet"} == {
        name: data for name, data in before.items() if name != "filtered.parquet"
    }  # the stage's own outputs were not touched, and no temp file was left

    repro = dvc("repro", "--single-item", "corpus-dedup", cwd=product)
    assert repro.returncode != 0
    assert f"{CORPUS}/filtered.parquet: " in repro.stderr and "Traceback" not in repro.stderr
    # DVC removes a stage's outputs before running it: dvc.lock still names them, the cache
    # holds them and git the cache-less metrics, so one checkout each brings them all back
    assert (product / "dvc.lock").read_text() == lock
    assert dvc("checkout", "--force", cwd=product).returncode == 0
    subprocess.run(["git", "checkout", "--", CORPUS], cwd=product, check=True)
    assert snapshot(product, CORPUS) == before
    assert dvc("status", cwd=product).stdout.strip() == "Data and pipelines are up to date."


def limit_file_size(size):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return apply


def test_full_disk_midway_leaves_no_partial_output(corpus_product):
    product = corpus_product  # the corpus stages are enough
    before = snapshot(product, CORPUS)
    docs = product / CORPUS / "docs.parquet"
    # the kernel refuses any write past half the output's size: EFBIG, like a disk filling up
    stage = subprocess.run(
        [str(BIN / "paperline"), "stage", "corpus.ingest"],
        cwd=product,
        capture_output=True,
        text=True,
        preexec_fn=limit_file_size(docs.stat().st_size // 2),
    )
    assert stage.returncode == 2
    line = error_line(stage.stderr)
    assert line.startswith(f"{CORPUS}/docs.parquet: write failed") or line.startswith(
        f"{docs}: write failed"
    ), line
    assert "File too large" in line and "previous ones are intact" in line
    assert snapshot(product, CORPUS) == before  # no temp file, nothing half-written


def newest_checkpoint_step(scratch):
    steps = []
    for folder in scratch.glob("step-*/"):  # the core loop names checkpoints by step
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):  # Ray writing it
            steps.append(json.loads((folder / "state.json").read_text())["step"])
    return max(steps, default=0)


def test_killed_training_stage_resumes_under_dvc_repro(cmipref_product):
    product = cmipref_product  # the cmipref stages are enough
    # killed at step 40 or just after: 60 steps to spare, and little left to resume
    edit_params(product, {"cmipref": {"train": {"pretrain_steps": 100, "checkpoint_every": 20}}})
    scratch = product / ".paperline/ray/cmipref/train"

    first = subprocess.Popen(
        [str(BIN / "dvc"), "repro", "cmipref-train"],
        cwd=product,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 600
    # two checkpoints: the first is surely registered by Ray (a folder appears just before)
    while (reached := newest_checkpoint_step(scratch)) < 40 and time.monotonic() < deadline:
        assert first.poll() is None, "the training finished before it could be killed"
        time.sleep(0.2)
    assert reached >= 40, "no second checkpoint within 10 minutes"
    os.killpg(first.pid, signal.SIGKILL)  # dvc, the stage, Ray and its workers
    first.wait(timeout=60)

    second = dvc("repro", "cmipref-train", cwd=product)
    assert second.returncode == 0, second.stderr[-3000:]
    assert (
        "cmipref.train: resuming from its last checkpoint"
        in (product / ".paperline/logs/cmipref-train.log").read_text()
    )
    metrics = json.loads((product / "models/cmi_rm/metrics.json").read_text())
    (resumed,) = metrics["resumed_from"]
    assert resumed >= reached - 20 and resumed % 20 == 0
    assert dvc("status", "cmipref-train", cwd=product).stdout.strip().endswith("up to date.")
