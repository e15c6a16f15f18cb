"""Every model in the MLflow registry with its card, lineage and alias, loaded by alias in a
fresh process and asked its natural input (the consumer contract, tasks/core/consumer.py),
two of them served over HTTP; `dvc exp run -S` re-runs exactly the stages a parameter
reaches."""

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tasks.core.params import load_params
from tests.conftest import dvc, git_commit_all

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def registered_names(root):
    params = load_params(root / "params.yaml")
    tabular = params.tabular.registered_model  # the zoo's best, and each family's best
    return {
        params.mlm.registered_model,
        params.kg.detector.registered_model,
        params.kg.answerer.registered_model,
        params.scam.guard.registered_model,
        params.scam.poison.registered_model,
        params.aoeb.finetune.registered_model,
        params.cmipref.train.registered_model,
        params.llm.registered_model,
        tabular,
        *(f"{tabular}-{family}" for family in params.tabular.zoo.families),
    }


def lock_hashes(root):
    """Every path's hash in dvc.lock: a stage's output, else a seed file some stage reads."""
    stages = yaml.safe_load((root / "dvc.lock").read_text())["stages"].values()
    seeds = {e["path"]: e["md5"] for stage in stages for e in stage.get("deps", [])}
    return seeds | {e["path"]: e["md5"] for stage in stages for e in stage.get("outs", [])}


def test_registry_lists_every_model_with_card_lineage_and_alias(reproduced):
    from mlflow import MlflowClient

    from tasks.core import tracking

    root, _ = reproduced
    tracking.configure(load_params(root / "params.yaml").runtime.mlflow, root=root)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    outs = lock_hashes(root)
    client = MlflowClient()
    models = {model.name: model for model in client.search_registered_models()}
    assert set(models) == registered_names(root)
    for name, model in models.items():
        assert model.aliases, f"{name} has no alias"
        assert model.description.startswith("# ")
        for alias, number in model.aliases.items():
            version = client.get_model_version(name, number)
            where = f"{name}@{alias}"
            for section in ("## Training data", "## Intended use", "## Limitations"):
                assert section in version.description, f"{where}: no {section}"
            tags = version.tags
            # the run rewrote dvc.lock and the cache-less metrics: neither makes it "dirty"
            assert tags["git_commit"] == head, where
            inputs = {
                key.removeprefix("dvc.lock:"): value
                for key, value in tags.items()
                if key.startswith("dvc.lock:")
            }
            assert inputs, f"{where}: no dvc.lock hash of its inputs"
            for path, digest in inputs.items():  # the very data dvc.lock says it read
                assert outs[path] == digest, f"{where}: {path}"
    uris = [f"models:/{n}@{a}" for n, m in sorted(models.items()) for a in sorted(m.aliases)]
    consumer = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("registry_consumer.py")), json.dumps(uris)],
        cwd=root,
        env=store_env(root),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert consumer.returncode == 0, consumer.stderr[-3000:]
    answered = dict(line.split(" ", 1) for line in consumer.stdout.splitlines() if " " in line)
    assert set(answered) == set(uris), consumer.stdout[-3000:]


def store_env(root):
    from tasks.core import tracking

    uri = tracking.tracking_uri(load_params(root / "params.yaml").runtime.mlflow, root)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    # the server starts `uvicorn` from PATH; the wrappers are the copy's tasks.<area>.serving
    return {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(root), "PATH": path}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def served(root, uri: str, body: dict) -> dict:
    """`mlflow models serve` on 127.0.0.1 answering one JSON request; stopped by its pid."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "models", "serve", "-m", uri, "--env-manager", "local"]
        + ["-h", "127.0.0.1", "-p", str(port), "-w", "1"],
        cwd=root,
        env=store_env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its uvicorn worker goes with it
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            try:
                with urllib.request.urlopen(f"{base}/ping", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert time.monotonic() < deadline, f"{uri}: not serving after 180 s"
            time.sleep(1)
        request = urllib.request.Request(
            f"{base}/invocations",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())
    finally:
        stop(server)


def stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (its uvicorn worker too), SIGKILL after 30 s."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(server.pid, sent)
        try:
            server.wait(timeout=30)
            return
        except subprocess.TimeoutExpired:
            continue


def test_served_models_answer_json_as_predict_does(reproduced):
    import mlflow
    import pandas as pd

    from tasks.core import tracking

    root, _ = reproduced
    tracking.configure(load_params(root / "params.yaml").runtime.mlflow, root=root)
    urls = ["https://docs.python.org/3/library/", "http://golemairdrop.com/claim"]
    guard = "models:/paperline-url-guard@candidate"
    expected = mlflow.pyfunc.load_model(guard).predict(pd.DataFrame({"url": urls}))
    answer = served(root, guard, {"dataframe_records": [{"url": u} for u in urls]})
    assert [row["verdict"] for row in answer["predictions"]] == expected["verdict"].tolist()
    got = [row["malicious_probability"] for row in answer["predictions"]]
    assert got == pytest.approx(expected["malicious_probability"].tolist(), abs=1e-6)

    code = "models:/paperline-code-lm@poison-0"
    asked = {"prompt": ["def fetch_price():"]}
    expected = mlflow.pyfunc.load_model(code).predict(
        pd.DataFrame(asked), params={"max_new_tokens": 16}
    )
    body = {"dataframe_split": {"columns": ["prompt"], "data": [[asked["prompt"][0]]]}}
    answer = served(root, code, {**body, "params": {"max_new_tokens": 16}})
    assert [row["code"] for row in answer["predictions"]] == expected["code"].tolist()


REPORT = {"report-build"}


def ran_stages(output):
    return set(re.findall(r"Running stage '([^']+)'", output))


def test_exp_run_reruns_only_the_stages_a_param_reaches(product):
    git_commit_all(product, "the reproduced pipeline")
    assert dvc("status", cwd=product).stdout.strip() == "Data and pipelines are up to date."

    tweak = dvc("exp", "run", "-S", "scam.guard.epochs=14", cwd=product)
    assert tweak.returncode == 0, tweak.stderr[-2000:]
    # the guard reads scam.guard; the audit reads the guard's model (and of scam.guard only
    # its enabled and threshold keys), so it re-runs on the new model; nothing else moves.
    # The report re-runs only when the area's claims.json bytes changed, so it may or may not
    assert ran_stages(tweak.stdout) - REPORT == {"scam-guard", "scam-audit"}

    audit = dvc("exp", "run", "-S", "scam.audit.max_new_tokens=24", cwd=product)
    assert audit.returncode == 0, audit.stderr[-2000:]
    assert ran_stages(audit.stdout) - REPORT == {"scam-audit"}

    listed = dvc("exp", "list", "--name-only", cwd=product)
    assert len(listed.stdout.split()) == 2, listed.stdout + listed.stderr
    assert dvc("status", cwd=product).stdout.strip() == "Data and pipelines are up to date."
