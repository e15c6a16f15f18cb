"""Fixed cost of one Ray Train fit on a local instance: Ray Train's default worker polling
(every 2 s) vs the interval that tasks.core.ray_runtime sets for local instances.

Each fit runs a no-op train loop on one worker, so its time is Ray Train's own start-up
and tear-down: what every small training stage pays once per fit. Each setting gets its
own local Ray (the interval is read by the controller, from the job's runtime_env).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

from tasks.core.ray_runtime import SINGLE_NODE_ENV

INTERVAL = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
RAY_DEFAULT_INTERVAL = "2.0"  # ray.train.v2's DEFAULT_HEALTH_CHECK_INTERVAL_S

FIT = """
import json, sys, tempfile, time
import ray, ray.train
from ray.train.torch import TorchTrainer

def loop(config):
    ray.train.report({"done": 1})

env = json.loads(sys.argv[1])
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    TorchTrainer(
        loop,
        scaling_config=ray.train.ScalingConfig(num_workers=1),
        run_config=ray.train.RunConfig(storage_path=tempfile.mkdtemp()),
    ).fit()
    print(time.perf_counter() - started, flush=True)
"""


def fits(interval: str, repeats: int) -> list[float]:
    """Fit times in one local Ray whose jobs see the local instance's settings, but with
    the controller polling its workers every `interval` seconds."""
    env = {**SINGLE_NODE_ENV, INTERVAL: interval}
    done = subprocess.run(
        [sys.executable, "-c", FIT, json.dumps(env), str(repeats)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    return [float(line) for line in done.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fits per setting")
    args = parser.parse_args()
    started = time.time()
    medians = {}
    ours = SINGLE_NODE_ENV[INTERVAL]
    for interval in (RAY_DEFAULT_INTERVAL, ours):
        seconds = fits(interval, args.repeats)
        medians[interval] = statistics.median(seconds)
        print(f"poll every {interval:>4} s: " + "  ".join(f"{s:5.2f}" for s in seconds))
    print(
        f"median fit: {medians[RAY_DEFAULT_INTERVAL]:.2f} s vs {medians[ours]:.2f} s, "
        f"ratio {medians[RAY_DEFAULT_INTERVAL] / medians[ours]:.2f}x "
        f"({time.time() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
