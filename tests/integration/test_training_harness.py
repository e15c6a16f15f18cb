"""The shared training harness (tasks/core/training.py, the core loop and its Ray reporter)
on a tiny model: a run that dies resumes from its last checkpoint in the same MLflow run, a
killed worker is restarted from its last checkpoint, and a model is registered only once
its stage's outputs are committed.
(Killing a whole stage under `dvc repro` and resuming: tests/e2e/test_faults.py.)"""

import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tasks.core import tracking, training
from tasks.core.errors import WorkerFailure
from tasks.core.loop import LoopPlan, fresh_state, run_loop
from tasks.core.ray_train import ScalingParams, start_worker
from tasks.core.stage import StageContext
from tasks.core.train_loop import RayReporter, resume_state

STEPS, EVERY, CRASH_AT = 12, 4, 6


def tiny_loop(config):
    """A 4→1 linear model on fixed data, trained by the core loop; checkpoints every EVERY
    steps; dies once at CRASH_AT when `crash_once` names a marker file that does not exist
    yet."""
    start_worker(config)
    if config.get("pid_file"):
        Path(config["pid_file"]).write_text(str(os.getpid()))
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["learning_rate"])

    def load(folder: Path) -> None:
        model.load_state_dict(torch.load(folder / "model.pt", weights_only=True))

    state = resume_state(load, optimizer) or fresh_state()
    x = torch.tensor(config["x"])  # a copy: Ray hands workers read-only arrays
    y = x.sum(dim=1, keepdim=True)

    def loss_of(_batch):
        if config.get("step_seconds"):
            time.sleep(config["step_seconds"])
            Path(config["progress_file"]).write_text(str(state["step"] + 1))
        marker = Path(config["crash_once"])
        if state["step"] == CRASH_AT and not marker.exists():
            marker.touch()
            raise RuntimeError("injected crash")
        return torch.nn.functional.mse_loss(model(x), y)

    def point(state, window):
        return {"step": state["step"], "loss": window.loss}

    def save(folder: Path) -> None:
        torch.save(model.state_dict(), folder / "model.pt")

    plan = LoopPlan(steps=config["steps"], log_every=EVERY, checkpoint_every=EVERY)
    reporter = RayReporter(config, point, save, optimizer)
    run_loop(model, optimizer, loss_of, plan, state, reporter, next_batch=lambda state: None)


def tiny_job(tmp_path: Path) -> training.TrainingJob:
    (tmp_path / "data.txt").write_text("the input whose bytes decide resumption\n")
    return training.TrainingJob(
        name="demo.train",
        train_loop=tiny_loop,
        config={
            "steps": STEPS,
            "learning_rate": 0.05,
            "seed": 0,
            "crash_once": str(tmp_path / "crashed"),
        },
        data={"x": torch.rand(16, 4).numpy()},
        sources=[tmp_path / "data.txt"],
        scaling=ScalingParams(num_workers=1, cpus_per_worker=1),
        max_failures=0,
        experiment="demo",
        run_name="tiny",
        lineage=["data.txt"],
    )


CARD = tracking.ModelCard(
    name="paperline-tiny",
    summary="A 4→1 linear layer.",
    training_data="16 random rows",
    intended_use="tests only",
    limitations="tiny",
    metrics={"final_loss": 0.0},
)


def test_a_crashed_run_resumes_from_its_checkpoint_in_the_same_mlflow_run(ray_session, tmp_path):
    from mlflow import MlflowClient

    ctx = StageContext.at(tmp_path)
    job = tiny_job(tmp_path)
    with pytest.raises(WorkerFailure, match=r"demo.train .*injected crash"):
        training.train(job, ctx)
    first_run = tracking_run_id(ctx)
    assert MlflowClient().get_run(first_run).info.status == "FAILED"

    trained = training.train(job, ctx)
    assert trained.state["step"] == STEPS
    assert trained.state["resumed_from"] == [EVERY]  # the checkpoint before the crash
    assert trained.run_id == first_run
    run = MlflowClient().get_run(trained.run_id)
    assert run.data.params["learning_rate"] == "0.05" and "x" not in run.data.params
    assert run.data.tags["dvc.lock:data.txt"] and run.data.tags["git_commit"]
    steps = [m.step for m in MlflowClient().get_metric_history(trained.run_id, "loss")]
    assert steps == [EVERY, 2 * EVERY, 3 * EVERY]


def test_a_killed_worker_is_restarted_from_its_last_checkpoint(ray_session, tmp_path):
    (tmp_path / "crashed").touch()  # no injected crash: a SIGKILL instead
    pid_file, progress = tmp_path / "rank-0.pid", tmp_path / "step"
    job = tiny_job(tmp_path)
    job = replace(
        job,
        config={
            **job.config,
            "steps": 24,
            "step_seconds": 0.1,
            "pid_file": str(pid_file),
            "progress_file": str(progress),
        },
        max_failures=1,
        experiment=None,
    )
    killed = []

    def kill_the_worker_after_two_checkpoints() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if progress.exists() and int(progress.read_text() or 0) > 2 * EVERY:
                killed.append(int(pid_file.read_text()))
                os.kill(killed[0], signal.SIGKILL)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_worker_after_two_checkpoints, daemon=True)
    killer.start()
    trained = training.train(job, StageContext.at(tmp_path))
    killer.join()
    assert killed and int(pid_file.read_text()) != killed[0]  # a new worker finished it
    (resumed,) = trained.state["resumed_from"]
    # a checkpoint folder appears just before Ray registers it, hence not exactly 2 * EVERY
    assert resumed in (EVERY, 2 * EVERY)
    # one curve: the restarted worker went on from the checkpoint's state
    assert [point["step"] for point in trained.state["curve"]] == list(range(EVERY, 25, EVERY))


def tracking_run_id(ctx: StageContext) -> str:
    from tasks.core.io import read_json

    return read_json(ctx.scratch("ray", "demo", "train") / training.RUN_FILE)["run_id"]


def test_publish_registers_only_after_the_stage_commits(ray_session, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from tests.conftest import run_demo_stage

    (tmp_path / "crashed").touch()  # no injected crash here

    def train_and_publish(ctx):
        trained = training.train(tiny_job(tmp_path), ctx)
        model = torch.nn.Linear(4, 1)
        model.load_state_dict(torch.load(trained.checkpoint / "model.pt", weights_only=True))
        training.publish(
            trained,
            ctx,
            card=CARD,
            log_model=lambda card: (
                tracking.log_torch_model(
                    model, "model", card, torch.zeros(2, 4), pip_requirements=["torch"]
                ).model_uri
            ),
            registered_model="paperline-tiny",
            metrics={"final_loss": trained.state["curve"][-1]["loss"]},
            files={"curves/loss.csv": "step,loss\n"},
        )

    with pytest.raises(TypeError):  # the metrics cannot be written
        run_demo_stage(tmp_path, monkeypatch, train_and_publish, {"bad": object()})
    client = MlflowClient()
    assert client.search_model_versions("name = 'paperline-tiny'") == []
    scratch = tmp_path / ".paperline/ray/demo/train"
    assert not (scratch / "finished").exists()  # unfinished: a re-run reuses the fit

    run_demo_stage(tmp_path, monkeypatch, train_and_publish, {"loss": 0.5})
    (version,) = client.search_model_versions("name = 'paperline-tiny'")
    assert str(client.get_model_version_by_alias("paperline-tiny", "candidate").version) == "1"
    assert version.tags["dvc.lock:data.txt"] and "## Lineage" in version.description
    assert (scratch / "finished").read_text() == "1"
    run = client.get_run(version.run_id)
    assert "final_loss" in run.data.metrics and run.info.status == "FINISHED"
