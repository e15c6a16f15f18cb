"""The pipeline on a real Prefect server: every stage a task with its artifact, and a
prefect.yaml deployment registered by `prefect deploy`, picked up by a worker, run once."""

import os
import subprocess

import pytest

from flows.stages import artifact_key
from tasks.core.dvc_stages import pipeline_stages
from tests.conftest import BIN

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def run(*command, cwd, env=None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return subprocess.run(
        [str(BIN / command[0]), *command[1:]],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def flow_runs(client, flow_name):
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    return client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])))


def test_pipeline_and_a_prefect_yaml_deployment_run_on_the_server(product):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    up = run("paperline", "services", "up", "prefect", cwd=product)
    assert up.returncode == 0 and "prefect: running at " in up.stdout, up.stderr
    url = up.stdout.split("running at ")[1].split()[0] + "/api"
    try:
        # no PREFECT_API_URL: `paperline flow` finds the server `services up` started
        pipeline = run("paperline", "flow", "pipeline", cwd=product)
        assert pipeline.returncode == 0, pipeline.stderr[-2000:]

        env = {"PREFECT_API_URL": url, "PAPERLINE_ROOT": str(product)}
        pool = run(
            "prefect",
            "work-pool",
            "create",
            "paperline-local",
            "--type",
            "process",
            cwd=product,
            env=env,
        )
        assert pool.returncode == 0, pool.stdout + pool.stderr
        deploy = run(
            "prefect", "deploy", "--no-prompt", "--name", "corpus-nightly", cwd=product, env=env
        )
        assert deploy.returncode == 0, deploy.stdout[-2000:] + deploy.stderr[-2000:]
        started = run("prefect", "deployment", "run", "corpus/corpus-nightly", cwd=product, env=env)
        assert started.returncode == 0, started.stdout + started.stderr
        worker = run(
            "prefect",
            "worker",
            "start",
            "--pool",
            "paperline-local",
            "--run-once",
            "--limit",
            "1",
            cwd=product,
            env=env,
        )
        assert worker.returncode == 0, worker.stdout[-2000:] + worker.stderr[-2000:]

        with temporary_settings({PREFECT_API_URL: url}), get_client(sync_client=True) as client:
            (whole,) = flow_runs(client, "pipeline")
            assert whole.state.is_completed()
            only_whole = FlowRunFilter(id=FlowRunFilterId(any_=[whole.id]))
            tasks = client.read_task_runs(flow_run_filter=only_whole)
            stages = pipeline_stages(product)
            assert sorted(t.name for t in tasks) == sorted(s.name for s in stages)
            assert all(t.state.is_completed() for t in tasks)
            artifacts = {a.key: a.data for a in client.read_artifacts()}
            for stage in stages:  # each stage's metrics, as a markdown artifact
                assert artifacts[artifact_key(stage)].startswith(f"# {stage.name}\n"), stage.name
            assert "| documents |" in artifacts["corpus-ingest"]

            deployment = client.read_deployment_by_name("corpus/corpus-nightly")
            assert [s.schedule.cron for s in deployment.schedules] == ["30 2 * * *"]
            assert deployment.work_pool_name == "paperline-local"
            assert deployment.entrypoint == "flows/dvc_flows.py:corpus"
            (nightly,) = flow_runs(client, "corpus")
            assert nightly.deployment_id == deployment.id
            assert nightly.state.is_completed(), nightly.state
    finally:
        down = run("paperline", "services", "down", "prefect", cwd=product)
        assert down.stdout == "prefect: stopped\n", down.stderr
