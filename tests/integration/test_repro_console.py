"""`paperline repro`: one console line per stage start and end, one Ray per run, stopped
only by the run that started it; a failing stage shows its error, log path and log tail."""

import os
import re
import time
from pathlib import Path

import psutil
import pytest

from tasks.core.params import RayParams
from tasks.core.ray_cluster import SESSION_ENV, LocalRay
from tests.conftest import run_cli

pytestmark = pytest.mark.integration

STAGES = ("corpus-ingest", "deltastack-study")


def processes_under(folder: Path) -> list[psutil.Process]:
    """Running processes whose command line names `folder` (Ray's session processes do)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with_args = " ".join(process.info["cmdline"] or [])
        if str(folder) in with_args:
            found.append(process)
    return found


def ray_temp_dir(root: Path) -> Path:
    started = (root / ".paperline/logs/repro.log").read_text()
    return Path(re.search(r"temp (\S+)\)", started).group(1))


def test_repro_prints_each_stage_twice_and_starts_and_stops_its_own_ray(two_trial_copy):
    result = run_cli("repro", *STAGES, cwd=two_trial_copy)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "\x1b[" not in output and "\r" not in output
    assert len(output.splitlines()) <= 2 * len(STAGES) + 2, output
    for stage in STAGES:
        assert len(re.findall(rf"\b{stage}\b", output)) == 2, output
    assert re.search(r"deltastack-study done in [\d.]+ s, deltastack_beats_deltanet=", output)

    repro_log = (two_trial_copy / ".paperline/logs/repro.log").read_text()
    assert "Ray started" in repro_log and "Ray stopped" in repro_log
    assert "Ray runtime started." in (two_trial_copy / ".paperline/logs/ray.log").read_text()
    assert not processes_under(ray_temp_dir(two_trial_copy))

    started = time.monotonic()
    again = run_cli("repro", *STAGES, cwd=two_trial_copy)
    elapsed = time.monotonic() - started
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.strip() == "Data and pipelines are up to date.", again.stdout
    assert "Ray started" not in (two_trial_copy / ".paperline/logs/repro.log").read_text()
    print(f"no-op paperline repro: {elapsed:.1f} s")


def test_repro_joins_an_explicit_ray_address_and_leaves_it_running(two_trial_copy):
    cluster = LocalRay(two_trial_copy, RayParams(num_cpus=2))
    cluster.start()  # as a user's `ray start` would; exports RAY_ADDRESS and its token
    try:
        env = {k: v for k, v in os.environ.items() if k != SESSION_ENV}
        result = run_cli("repro", "deltastack-study", cwd=two_trial_copy, env=env)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        assert "Ray started" not in (two_trial_copy / ".paperline/logs/repro.log").read_text()
        assert cluster.process is not None and cluster.process.poll() is None
        assert processes_under(cluster.temp_dir)
        stage_log = (two_trial_copy / ".paperline/logs/deltastack-study.log").read_text()
        assert "Started a local Ray instance" not in stage_log
    finally:
        temp_dir = cluster.temp_dir
        cluster.stop()
    assert not processes_under(temp_dir)


def test_a_failing_stage_shows_its_error_then_its_log_path_and_tail(two_trial_copy):
    (two_trial_copy / "data/seed/udhr/udhr_zzz.xml").write_text("<udhr><p>broken\n")
    result = run_cli("repro", "corpus-ingest", cwd=two_trial_copy)
    assert result.returncode != 0
    assert result.stdout.count("corpus-ingest") == 1  # the start line; no end line
    error, where, *tail = result.stderr.splitlines()
    assert error.startswith(str(two_trial_copy / "data/seed/udhr/udhr_zzz.xml") + ": invalid XML")
    log = two_trial_copy / ".paperline/logs/corpus-ingest.log"
    assert where.startswith(f"log: {log} (last ")
    assert any("1 files not in index.xml" in line for line in tail), tail
    assert "Traceback" not in result.stderr
