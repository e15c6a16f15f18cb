"""One way to get Ray and to start work on it, with a bounded retry budget.

`init_ray` joins $RAY_ADDRESS when set (the run's shared instance, see ray_cluster, or a
cluster), else starts a quiet local instance (never whatever address file a past
`ray start` left behind). Stage code starts Ray work only through the
helpers here (`remote`, `map_table`, `tuner`) and `ray_train.fit_torch`: a worker that dies
(a signal, the OOM killer, Ray's memory monitor) is retried `runtime.ray.max_retries` times,
an exception is not retried, and what is still failing then ends the stage with one
`WorkerFailure` line naming the function, the signal or exception and the worker's log.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tasks.core import jit_cache, ray_cluster
from tasks.core.errors import InputError, ServiceError, WorkerFailure
from tasks.core.io import read_parquet
from tasks.core.params import RayParams

_budget = {"max_retries": RayParams().max_retries}  # set by init_ray from params

LOCAL_WORKER_SETUP = {"worker_process_setup_hook": "tasks.core.ray_runtime.quiet_worker_logs"}
# One machine has no node to lose: Ray Train's PreemptionWatcher actor (one per fit) would
# only log an error about its own restart settings (ray-project/ray#53727). Ray Train's
# controller polls its workers every 2 s and notices a finished fit only at the next poll;
# locally a poll is a cheap actor call, and 0.25 s saves ~1.6 s of every fit
# (benchmarks/ray_train_start.py).
SINGLE_NODE_ENV = {
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.25",
}


def max_retries() -> int:
    return _budget["max_retries"]


def init_ray(params: RayParams) -> Any:
    """Connect once per process; later calls return the running context unchanged."""
    import ray

    if ray.is_initialized():
        return ray.get_runtime_context()
    _budget["max_retries"] = params.max_retries
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # workers inherit the driver's environment; a cluster's workers get it from runtime_env
    env_vars = {jit_cache.ENV: str(jit_cache.use_project_cache())}
    quiet = {"logging_level": logging.WARNING, "log_to_driver": True}
    address = os.environ.get("RAY_ADDRESS")
    if not address or os.environ.get(ray_cluster.SESSION_ENV):  # a local instance of ours
        runtime_env = {"env_vars": {**env_vars, **SINGLE_NODE_ENV}, **LOCAL_WORKER_SETUP}
    else:
        runtime_env = {"env_vars": env_vars}  # a cluster: its nodes may not have our code
    if address:
        require_reachable(address)
        # the system config of a running instance was set when it started: not passed here
        ray.init(address=address, runtime_env=runtime_env, **quiet)
    else:
        memory = params.object_store_memory_mb
        ray.init(
            address="local",
            num_cpus=params.num_cpus,
            object_store_memory=memory * 1024 * 1024 if memory else None,
            include_dashboard=False,
            # a task killed by the memory monitor otherwise retries without end
            _system_config={"task_oom_retries": params.max_retries},
            runtime_env=runtime_env,
            **quiet,
        )
    return ray.get_runtime_context()


def require_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in one line when RAY_ADDRESS names a host:port nothing listens on: `ray.init`
    would otherwise wait for that GCS without end. ("auto" and names without a port are
    left to Ray.)"""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise ServiceError(
            f"RAY_ADDRESS={address}: no Ray cluster answers there ({error.strerror or error}); "
            "start it (`ray start --head`) or unset RAY_ADDRESS to use a local instance"
        ) from None


def quiet_worker_logs() -> None:
    """Worker setup hook for the local instance, which runs without the dashboard.

    Without the dashboard (ray[default] is not installed) there is no state API, and Ray
    Train's placement-group monitor warns about that every second; the monitor only matters
    on clusters, where the dashboard runs.
    """
    logging.getLogger(
        "ray.train.v2._internal.execution.controller.placement_group_cleaner"
    ).setLevel(logging.ERROR)
    # Tune trials log every checkpoint they save at INFO; the trial's own reports say enough
    logging.getLogger("ray.train._internal.storage").setLevel(logging.WARNING)


def remote(fn: Callable[..., Any], **options: Any) -> Any:
    """`fn` as a Ray task within the retry budget: a dead worker is retried, an exception
    is not (a second try would raise it again)."""
    import ray

    return ray.remote(max_retries=max_retries(), retry_exceptions=False, **options)(fn)


def gather(refs: Sequence[Any], what: str, *, since: float, jit: bool = False) -> list[Any]:
    """`ray.get(refs)` of tasks submitted at `since` (time.time()), a failure turned into
    one WorkerFailure line about `what`."""
    import ray

    try:
        return ray.get(list(refs))
    except ray.exceptions.RayError as error:
        raise worker_failure(error, what, since, jit=jit) from None


def read_parquet_dataset(folder: Path, columns: list[str]) -> Any:
    """A Ray dataset over a folder of Parquet files (Ray Train's streaming ingest), its read
    tasks within the retry budget (Ray Data's default is to retry a dead reader forever)."""
    import warnings

    import ray.data

    with warnings.catch_warnings():
        # Ray 2.60 has no named parameter for a read task's retries; ray_remote_args is the
        # only way and warns that it goes away in 2.64 (revisit when the pin moves)
        warnings.filterwarnings("ignore", "`ray_remote_args` is deprecated")
        return ray.data.read_parquet(
            str(folder),
            file_extensions=["parquet"],
            columns=columns,
            ray_remote_args={"max_retries": max_retries()},
        )


def parquet_dataset_in_memory(folder: Path, columns: list[str]) -> Any:
    """The same rows as `read_parquet_dataset(...).materialize()`, file by file in name
    order, read by the driver: for data that fits in memory, without the read tasks' worker
    start-up (seconds per dataset on a small machine)."""
    import ray.data

    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise InputError(f"{folder}: no Parquet files; run `dvc repro` first")
    return ray.data.from_arrow([read_parquet(path, columns=columns) for path in files])


def map_table(
    table: Any,
    fn: Callable[..., Any],
    *,
    batch_size: int,
    num_workers: int | None = None,
    jit_warmup: bool = False,
    **fn_kwargs: Any,
) -> list[Any]:
    """Run `fn(batch: pa.Table, **fn_kwargs) -> pa.Table` over a table as Ray tasks.

    The table is cut into blocks of `batch_size` rows; `num_workers` caps the tasks in
    flight (None: as many as the CPUs allow). `jit_warmup` first runs `fn` on one row as a
    single task, so numba-compiled code is compiled and cached by one process and the
    workers that follow only read the cache. Returns the output blocks' object refs, in
    order, all finished; `collect` turns them into one table.
    """
    import ray

    what = getattr(fn, "__qualname__", repr(fn))
    task = remote(fn)
    shared = {key: ray.put(value) for key, value in fn_kwargs.items()}
    started = time.time()
    if table.num_rows == 0:  # nothing to spread: run once for the output schema
        ref = task.remote(table, **shared)
        gather([ref], what, since=started, jit=jit_warmup)
        return [ref]
    if jit_warmup:
        gather([task.remote(table.slice(0, 1), **shared)], what, since=started, jit=True)
    starts = deque(range(0, table.num_rows, batch_size))
    # blocks go into the object store ahead of their tasks, while the workers are busy, so a
    # worker that frees up gets its next block at once rather than after the driver copies it
    staged: deque[Any] = deque()
    lookahead = 2 * num_workers if num_workers else len(starts)  # uncapped: stage them all
    refs: list[Any] = []
    in_flight: list[Any] = []
    while starts or staged:
        while starts and len(staged) < lookahead:
            staged.append(ray.put(table.slice(starts.popleft(), batch_size)))
        if num_workers and len(in_flight) >= num_workers:
            _, in_flight = ray.wait(in_flight, num_returns=1)
        refs.append(task.remote(staged.popleft(), **shared))
        in_flight.append(refs[-1])
    gather(refs, what, since=started, jit=jit_warmup)
    return refs


def collect(refs: Sequence[Any]) -> Any:
    """Output blocks of `map_table` as one pyarrow table (block order kept)."""
    import pyarrow as pa

    return pa.concat_tables(gather(refs, "collect", since=time.time()))


def tuner(trainable: Any, *, name: str, storage: Path, restore: bool = False, **options: Any):
    """A Ray Tune `Tuner` whose trials get the retry budget. `options`: param_space,
    tune_config, and RunConfig's callbacks / checkpoint_config. With `restore`, continue
    the experiment under storage/name (errored trials included)."""
    from ray import tune

    if restore:
        return tune.Tuner.restore(str(storage / name), trainable, resume_errored=True)
    run_keys = {"callbacks", "checkpoint_config"}
    run_options = {k: v for k, v in options.items() if k in run_keys}
    return tune.Tuner(
        trainable,
        **{k: v for k, v in options.items() if k not in run_keys},
        run_config=tune.RunConfig(
            name=name,
            storage_path=str(storage),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=max_retries()),
            **run_options,
        ),
    )


# faulthandler's names for the fatal signals a worker's stderr reports
_SIGNALS = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
}
_FATAL = re.compile(r"Fatal Python error: (\w[\w ]*)")
_PID = re.compile(r"\bpid=(\d+)")
# A file's mtime comes from the kernel's coarse clock and may trail time.time() by a tick
# (a few ms); a wider margin picks up the log of a crash from just before this work.
MTIME_TICK_S = 0.05
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def worker_failure(
    error: Exception, what: str, since: float, *, jit: bool = False, attempts: int | None = None
) -> WorkerFailure:
    """One line: the function, what killed it or what it raised, and the worker's log."""
    import ray

    attempts = attempts or max_retries() + 1
    logs = logs_dir()
    cause = getattr(error, "cause", None)
    log: Path | None = None
    if isinstance(error, ray.exceptions.RayTaskError) and cause is not None:
        message = str(cause).strip().splitlines()
        detail = f"raised {type(cause).__name__}" + (f": {message[0]}" if message else "")
        if frames := _FRAME.findall(str(error)):
            detail += f" (at {frames[-1][0]}:{frames[-1][1]})"
        pid = _PID.search(str(error))
        log = _worker_log(logs, int(pid.group(1)) if pid else None)
    elif isinstance(error, ray.exceptions.OutOfMemoryError):
        detail = f"was killed by Ray's memory monitor (out of memory) in {attempts} attempts"
    elif isinstance(error, ray.exceptions.WorkerCrashedError | ray.exceptions.ActorDiedError):
        signal, log = _crash(logs, since)
        how = signal or "a signal it could not report (e.g. SIGKILL by the OOM killer)"
        detail = f"died with {how} in {attempts} attempts"
    else:
        lines = str(error).strip().splitlines()
        detail = f"failed: {type(error).__name__}" + (f": {lines[0]}" if lines else "")
    hint = ""
    if jit:
        cache = os.environ.get(jit_cache.ENV, jit_cache.project_cache())
        hint = f"; if numba's cache is corrupt, `paperline doctor --clear-jit-cache` clears {cache}"
    return WorkerFailure(f"{what} {detail}; worker log: {log or logs}{hint}")


def logs_dir() -> Path | None:
    """The running Ray session's log folder (worker-*.err hold the workers' stderr)."""
    try:
        import ray

        node = ray._private.worker._global_node  # the local session; None when joined remotely
        return Path(node.get_logs_dir_path()) if node else None
    except Exception:  # a log path is a courtesy; never let it mask the failure itself
        return None


def _worker_log(logs: Path | None, pid: int | None) -> Path | None:
    if logs is None or pid is None:
        return None
    found = sorted(logs.glob(f"worker-*-{pid}.err"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _crash(logs: Path | None, since: float) -> tuple[str | None, Path | None]:
    """(signal name, log file) of the newest worker stderr since `since` that reports a
    fatal signal; (None, None) when none does (SIGKILL leaves no trace there)."""
    if logs is None:
        return None, None
    recent = [p for p in logs.glob("worker-*.err") if p.stat().st_mtime >= since - MTIME_TICK_S]
    for path in sorted(recent, key=lambda p: p.stat().st_mtime, reverse=True):
        match = _FATAL.search(path.read_text(encoding="utf-8", errors="replace"))
        if match:
            name = match.group(1).strip()
            return _SIGNALS.get(name, name), path
    return None, None
