"""One way to get Ray: join $RAY_ADDRESS when set, else start a quiet local instance."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from tasks.core.params import RayParams


def init_ray(params: RayParams) -> Any:
    """Connect once per process; later calls return the running context unchanged."""
    import ray

    if ray.is_initialized():
        return ray.get_runtime_context()
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    quiet = {"logging_level": logging.WARNING, "log_to_driver": True}
    if address := os.environ.get("RAY_ADDRESS"):
        ray.init(address=address, **quiet)
    else:
        memory = params.object_store_memory_mb
        ray.init(
            num_cpus=params.num_cpus,
            object_store_memory=memory * 1024 * 1024 if memory else None,
            include_dashboard=False,
            runtime_env={"worker_process_setup_hook": "tasks.core.ray_runtime.quiet_worker_logs"},
            **quiet,
        )
    return ray.get_runtime_context()


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


def map_table(
    table: Any,
    fn: Callable[..., Any],
    *,
    batch_size: int,
    num_workers: int | None = None,
    **fn_kwargs: Any,
) -> Any:
    """Run `fn(batch: pa.Table, **fn_kwargs) -> pa.Table` over a table on Ray Data.

    The table is cut into blocks of `batch_size` rows so the work spreads over the workers;
    `num_workers` caps the Ray tasks in flight (None: as many as the CPUs allow). Returns the
    materialized dataset; `collect` turns it back into one table.
    """
    import ray

    if table.num_rows == 0:  # nothing to spread: run once for the output schema
        return ray.data.from_arrow([fn(table, **fn_kwargs)]).materialize()
    blocks = [table.slice(i, batch_size) for i in range(0, table.num_rows, batch_size)]
    return (
        ray.data.from_arrow(blocks)
        .map_batches(
            fn,
            fn_kwargs=fn_kwargs,
            batch_format="pyarrow",
            batch_size=batch_size,
            compute=ray.data.TaskPoolStrategy(size=num_workers),
        )
        .materialize()
    )


def collect(dataset: Any) -> Any:
    """A Ray dataset as one pyarrow table (block order kept)."""
    import pyarrow as pa
    import ray

    return pa.concat_tables(ray.get(dataset.to_arrow_refs()))
