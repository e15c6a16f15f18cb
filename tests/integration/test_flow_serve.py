"""`paperline flow serve NAME --cron …` registers a scheduled deployment and runs it (on the
smallest area, deltastack: one stage, no upstream)."""

import subprocess
import time

import pytest

from tasks.core.dvc_stages import stale_stages
from tests.conftest import BIN

pytestmark = pytest.mark.integration


def test_served_flow_has_its_schedule_and_runs(two_trial_copy, prefect_harness):
    import os

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    env = {
        **os.environ,
        "PREFECT_API_URL": PREFECT_API_URL.value(),
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
    }
    server = subprocess.Popen(
        [str(BIN / "paperline"), "flow", "serve", "deltastack", "--cron", "0 4 * * *"],
        cwd=two_trial_copy,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with get_client(sync_client=True) as client:
            deployment = None
            deadline = time.monotonic() + 120
            while deployment is None and time.monotonic() < deadline:
                assert server.poll() is None, server.stderr.read()
                try:
                    deployment = client.read_deployment_by_name("deltastack/deltastack-served")
                except Exception:  # not registered yet
                    time.sleep(1)
            assert deployment is not None, "the served deployment never appeared"
            assert [s.schedule.cron for s in deployment.schedules] == ["0 4 * * *"]
            # the runner imports this to run the flow: the area's flow, built from dvc.yaml
            # (a path relative to the cwd, to wherever the `flows` package was imported from)
            assert deployment.entrypoint.endswith("flows/dvc_flows.py:deltastack")

            run = client.create_flow_run_from_deployment(deployment.id)
            while time.monotonic() < deadline + 120:
                state = client.read_flow_run(run.id).state
                if state is not None and state.is_final():
                    break
                time.sleep(1)
            assert state.is_completed(), state
    finally:
        server.terminate()
        server.wait(timeout=30)
    # the run reproduced the area's stage (the copy's smaller params had made it stale)
    assert stale_stages(two_trial_copy).get("deltastack.study") is None
