"""One way to get Ray: join $RAY_ADDRESS when set, else start a quiet local instance."""

from __future__ import annotations

import logging
import os
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
            **quiet,
        )
    return ray.get_runtime_context()
