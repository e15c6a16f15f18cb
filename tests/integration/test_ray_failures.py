"""Fault injection on real Ray: a worker that segfaults, is killed, raises or runs out of
memory fails its work within the retry budget, with one line; a rerun without the fault
gives what an undisturbed run gives."""

from __future__ import annotations

import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pytest
import ray.cloudpickle

from tasks.core.errors import WorkerFailure
from tasks.core.ray_runtime import collect, map_table, max_retries, require_reachable, tuner
from tasks.core.ray_train import fit_torch
from tests.conftest import BIN, REPO, free_port

pytestmark = pytest.mark.integration
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import tests

ROWS = pa.table({"x": list(range(12))})
BOUND_SECONDS = 60


def faulty(batch: pa.Table, fault: str, flag: str) -> pa.Table:
    """Squares x; on the block holding x == 5, while `flag` exists, injects `fault`."""
    if 5 in batch.column("x").to_pylist() and Path(flag).exists():
        if fault == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "raise":
            raise ValueError("row 5 is cursed")
        if fault == "memory":
            exhaust_memory()
    squares = pa.array([x * x for x in batch.column("x").to_pylist()], pa.int64())
    return batch.append_column("square", squares)


def exhaust_memory() -> None:
    """Allocate past a soft address-space limit 256 MiB above what the worker maps now."""
    import numpy as np

    mapped_kib = next(
        int(line.split()[1])
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmSize:")
    )
    before = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped_kib * 1024 + (256 << 20), before[1]))
    try:
        np.ones(1 << 30, dtype=np.float64)  # 8 GiB
    finally:
        resource.setrlimit(resource.RLIMIT_AS, before)


def squares(flag: Path, fault: str) -> pa.Table:
    return collect(map_table(ROWS, faulty, batch_size=2, fault=fault, flag=str(flag)))


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("segfault", r"faulty died with SIGSEGV in \d attempts; worker log: \S+/worker-\S+\.err"),
        (
            "kill",
            r"faulty died with a signal it could not report \(e\.g\. SIGKILL by the OOM "
            r"killer\) in \d attempts",
        ),
        ("raise", r"faulty raised ValueError: row 5 is cursed \(at \S+test_ray_failures\.py:\d+\)"),
        ("memory", r"faulty raised MemoryError"),
    ],
)
def test_a_failing_worker_fails_the_map_in_bounded_time_then_a_rerun_recovers(
    ray_session, tmp_path, fault, expected
):
    flag = tmp_path / "fault-on"
    undisturbed = squares(flag, fault)
    flag.touch()
    started = time.monotonic()
    with pytest.raises(WorkerFailure) as failure:
        squares(flag, fault)
    assert time.monotonic() - started < BOUND_SECONDS
    line = str(failure.value)
    assert "\n" not in line
    assert re.search(expected, line), line
    if fault in ("segfault", "raise"):
        log = Path(re.search(r"worker log: (\S+\.err)", line).group(1))
        assert log.is_file()
    assert f"in {max_retries() + 1} attempts" in line or fault in ("raise", "memory")
    flag.unlink()
    assert squares(flag, fault).equals(undisturbed)


def segfault_trial(config: dict) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def test_a_segfaulting_tune_trial_errors_within_its_budget(ray_session, tmp_path):
    from ray import tune

    started = time.monotonic()
    grid = tuner(
        segfault_trial,
        name="crash",
        storage=tmp_path,
        param_space={"x": tune.grid_search([1])},
    ).fit()
    assert time.monotonic() - started < BOUND_SECONDS
    assert len(grid.errors) == 1


def segfault_loop(config: dict) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def test_a_segfaulting_train_worker_fails_fit_with_one_line(ray_session, tmp_path):
    from types import SimpleNamespace

    scaling = SimpleNamespace(num_workers=1, cpus_per_worker=1, use_gpu=False)
    started = time.monotonic()
    with pytest.raises(WorkerFailure) as failure:
        fit_torch(segfault_loop, {}, tmp_path / "run", scaling, what="crash test", max_failures=1)
    assert time.monotonic() - started < BOUND_SECONDS * 2  # two worker-group starts
    line = str(failure.value)
    assert re.search(r"^crash test died with SIGSEGV in 2 attempts; worker log: ", line), line
    assert "\n" not in line


def test_run_stage_names_the_stage_in_the_failure_line(ray_session, tmp_path, monkeypatch):
    from tasks.core import stage_runner
    from tasks.core.stage import Stage
    from tasks.core.stage_runner import run_stage

    flag = tmp_path / "fault-on"
    flag.touch()

    def run(params, inputs, ctx):
        return {"table": squares(flag, "segfault")}

    declared = Stage(
        name="demo.crash", run=run, params_key="runtime", inputs={}, outputs={"table": "t.pq"}
    )
    monkeypatch.setattr(stage_runner, "find_stage", lambda name: declared)
    (tmp_path / "params.yaml").write_bytes((REPO / "params.yaml").read_bytes())
    with pytest.raises(WorkerFailure, match=r"^demo\.crash: faulty died with SIGSEGV"):
        run_stage("demo.crash", root=tmp_path)
    assert not (tmp_path / "t.pq").exists()


JIT_MODULE = """
import numba

@numba.njit(cache=True)
def triangle(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""

JIT_DRIVER = """
import os, json
import pyarrow as pa
from tasks.core.params import RayParams
from tasks.core.ray_runtime import collect, init_ray, map_table

def compile_and_call(batch):
    import time
    import jitmod
    time.sleep(0.1)  # long enough that both workers take tasks
    stats = jitmod.triangle.stats
    values = [jitmod.triangle(int(x)) for x in batch.column("x").to_pylist()]
    return pa.table({"x": batch.column("x"), "triangle": values,
                     "pid": [os.getpid()] * batch.num_rows,
                     "misses": [sum(stats.cache_misses.values())] * batch.num_rows,
                     "hits": [sum(stats.cache_hits.values())] * batch.num_rows})

init_ray(RayParams(num_cpus=2))
table = collect(map_table(pa.table({"x": list(range(40))}), compile_and_call, batch_size=1,
                          jit_warmup=True))
print(json.dumps(table.to_pylist()))
"""


def test_concurrent_workers_on_an_empty_jit_cache_compile_once(tmp_path):
    """Many workers calling one `numba.njit(cache=True)` function on an empty cache: with
    the warm-up, one process compiles it and every other process loads the cache."""
    import json

    (tmp_path / "jitmod.py").write_text(JIT_MODULE)
    cache = tmp_path / "numba-cache"
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", JIT_DRIVER],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["triangle"] for r in rows] == [x * (x - 1) // 2 for x in range(40)]
    misses = {r["pid"]: r["misses"] for r in rows}
    assert sum(misses.values()) <= 1, misses  # compiled by the warm-up task alone
    assert any(r["hits"] for r in rows), rows  # another process loaded it from the cache
    assert list(cache.rglob("*.nbi")) and list(cache.rglob("*.nbc"))


def test_a_stale_ray_address_file_does_not_stop_a_local_start(tmp_path):
    """`ray start` leaves ray_current_cluster behind; with RAY_ADDRESS unset, init_ray starts
    its own instance instead of trying to join the dead cluster."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="ry", dir="/tmp"))  # socket paths must be short
    (ray_tmp / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}")
    script = (
        "import ray\n"
        "from tasks.core.params import RayParams\n"
        "from tasks.core.ray_runtime import init_ray\n"
        "init_ray(RayParams(num_cpus=1))\n"
        "print(int(ray.cluster_resources()['CPU']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [str(BIN / "python"), "-c", script],
        env={**env, "RAY_TMPDIR": str(ray_tmp)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "1"


def test_a_dead_ray_address_fails_the_stage_in_one_line(repo_copy):
    """RAY_ADDRESS naming a port nothing listens on: `ray.init` would wait for that GCS
    without end; the stage ends at once with one line naming the address."""
    dead = f"127.0.0.1:{free_port()}"
    outputs = repo_copy / "models" / "deltastack"
    before = sorted((p, p.stat().st_mtime_ns) for p in outputs.rglob("*"))
    started = time.monotonic()
    done = subprocess.run(
        [str(BIN / "paperline"), "stage", "deltastack.study"],
        cwd=repo_copy,
        env={**os.environ, "RAY_ADDRESS": dead},
        capture_output=True,
        text=True,
        timeout=BOUND_SECONDS,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"RAY_ADDRESS={dead}" in lines[0], done.stderr[-2000:]
    assert "unset RAY_ADDRESS" in lines[0]
    assert time.monotonic() - started < BOUND_SECONDS / 2
    assert sorted((p, p.stat().st_mtime_ns) for p in outputs.rglob("*")) == before


def test_a_listening_ray_address_passes_the_reachability_check():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        require_reachable(f"127.0.0.1:{port}")  # raises ServiceError when nothing answers
        require_reachable(f"ray://127.0.0.1:{port}")


def test_an_ipv6_ray_address_is_probed_without_its_brackets(monkeypatch):
    """`[::1]:6379` names host ::1; the brackets are URL syntax, not part of the host. (The
    connection is recorded rather than made: not every machine has an IPv6 loopback.)"""
    probed = []

    class Answered:
        def close(self):
            pass

    def connect(address, timeout):
        probed.append(address)
        return Answered()

    monkeypatch.setattr(socket, "create_connection", connect)
    require_reachable("[::1]:6379")
    require_reachable("ray://[fe80::1]:10001")
    assert probed == [("::1", 6379), ("fe80::1", 10001)]
