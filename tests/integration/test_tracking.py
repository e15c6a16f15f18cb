"""MLflow helpers against a real SQLite store and model registry in a temporary folder."""

import hashlib

import pytest
import torch

from tasks.core import tracking
from tasks.core.params import MlflowParams

pytestmark = pytest.mark.integration


DOCS = b"one document per line\n"


@pytest.fixture
def store(tmp_path):
    (tmp_path / "data/interim/corpus").mkdir(parents=True)
    (tmp_path / "data/interim/corpus/docs.parquet").write_bytes(DOCS)
    (tmp_path / "data/seed/udhr").mkdir(parents=True)
    (tmp_path / "data/seed/udhr/a.xml").write_text("<udhr/>")
    return MlflowParams(tracking_uri="sqlite:///mlruns/mlflow.db", artifact_root="mlruns/artifacts")


def test_register_tiny_model_and_load_it_back_by_alias(tmp_path, store):
    import mlflow
    from mlflow import MlflowClient

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    card = tracking.ModelCard(
        name="paperline-tiny",
        summary="A 4→3 layer used to test the registry helpers.",
        training_data="none",
        intended_use="tests only",
        limitations="untrained",
        metrics={"loss": 0.25},
    )
    docs = "data/interim/corpus/docs.parquet"
    with tracking.start_run("tests", store, run_name="tiny", inputs=[docs], root=tmp_path) as run:
        mlflow.log_metric("loss", 0.25)
        info = tracking.log_torch_model(
            model, "model", card, input_example=torch.zeros(2, 4), pip_requirements=["torch"]
        )
    version = tracking.register_model(info.model_uri, "paperline-tiny", card, alias="candidate")

    assert (tmp_path / "mlruns" / "mlflow.db").exists()
    assert mlflow.get_tracking_uri() == f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    client = MlflowClient()
    tags = client.get_run(run.info.run_id).data.tags
    assert tags[f"dvc.lock:{docs}"] == hashlib.md5(DOCS).hexdigest()  # DVC 3's file hash
    assert tags["git_commit"]
    assert str(client.get_model_version_by_alias("paperline-tiny", "candidate").version) == version
    registered = client.get_registered_model("paperline-tiny")
    assert registered.description.startswith("# paperline-tiny")
    assert "| loss | 0.25 |" in registered.description
    artifacts_dir = tmp_path / "mlruns" / "artifacts"
    assert any(artifacts_dir.rglob(tracking.MODEL_CARD_FILE))

    loaded = tracking.load_torch_model("paperline-tiny", "candidate")
    probe = torch.randn(5, 4)
    assert torch.equal(loaded(probe), model(probe))


def test_env_overrides_tracking_uri(monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    assert tracking.tracking_uri(MlflowParams(), tmp_path) == "http://127.0.0.1:5999"
    assert tracking.artifact_location(MlflowParams(), tmp_path) is None


def test_lineage_hashes_inputs_as_dvc_does_and_skips_missing_ones(tmp_path, store):
    first = tracking.dvc_hashes(["data/seed/udhr", "nope"], tmp_path)
    assert list(first) == ["data/seed/udhr"] and first["data/seed/udhr"].endswith(".dir")
    (tmp_path / "data/seed/udhr/a.xml").write_text("<udhr>changed</udhr>")
    assert tracking.dvc_hashes(["data/seed/udhr"], tmp_path) != first


def test_git_commit_is_dirty_only_when_code_differs_not_when_the_run_wrote(tmp_path):
    """A run rewrites dvc.lock and cache-less outputs tracked in git; only a change to
    anything else marks the lineage's commit as modified."""
    import subprocess

    from tests.conftest import git_commit_all

    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  s:\n    cmd: x\n    outs:\n      - out/model\n"
        "    metrics:\n      - out/metrics.json:\n          cache: false\n"
    )
    (tmp_path / "out").mkdir()
    (tmp_path / "out/metrics.json").write_text("{}")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    head = git_commit_all(tmp_path, "base")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    (tmp_path / "out/metrics.json").write_text('{"loss": 1}')
    assert tracking.git_commit(tmp_path) == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert tracking.git_commit(tmp_path) == f"{head}-dirty"
    assert tracking.changed_paths("R  new.py\0old.py\0 M b.py\0") == ["new.py", "old.py", "b.py"]


def test_a_stage_whose_commit_fails_registers_no_model_version(tmp_path, store, monkeypatch):
    """Registration waits for the stage's outputs: when writing them fails, the registry
    gains no version; when they are written, the version appears after them."""
    from mlflow import MlflowClient

    from tests.conftest import run_demo_stage

    card = tracking.ModelCard(
        name="paperline-tiny",
        summary="A 4→3 layer.",
        training_data="none",
        intended_use="tests only",
        limitations="untrained",
        metrics={},
    )
    seen_outputs = []

    def register(ctx):
        tracking.configure(store, ctx.root)
        with tracking.start_run("tests", store, run_name="tiny", root=ctx.root):
            info = tracking.log_torch_model(
                torch.nn.Linear(4, 3),
                "model",
                card,
                torch.zeros(2, 4),
                pip_requirements=["torch"],
            )
        tracking.register_after_commit(ctx, info.model_uri, "paperline-tiny", card, "c")
        ctx.after_commit(lambda: seen_outputs.append((ctx.root / "m.json").exists()))

    with pytest.raises(TypeError):  # the metrics cannot be written
        run_demo_stage(tmp_path, monkeypatch, register, {"bad": object()})
    client = MlflowClient()
    assert not (tmp_path / "m.json").exists()
    assert client.search_model_versions("name = 'paperline-tiny'") == []
    run_demo_stage(tmp_path, monkeypatch, register, {"loss": 0.5})
    versions = client.search_model_versions("name = 'paperline-tiny'")
    assert [int(v.version) for v in versions] == [1] and seen_outputs == [True]
