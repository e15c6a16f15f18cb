"""One dvc.lock update as DVC makes it after every stage: its round-trip parser against
the C loader of tasks/core/dvc_lockfile.py (both write with DVC's round-trip emitter).

Each timing reads this repository's dvc.lock, changes nothing and writes it back, in a
temporary copy; both paths must write the same bytes.

    .venv/bin/python benchmarks/dvc_lock_update.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _timing import spread, timings  # benchmarks/_timing.py: the script's folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def update(lock: Path) -> None:
    import dvc.dvcfile

    with dvc.dvcfile.modify_yaml(lock):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    from tasks.core.dvc_lockfile import fast_lock_updates

    with tempfile.TemporaryDirectory() as folder:
        lock = Path(folder) / "dvc.lock"
        shutil.copy(ROOT / "dvc.lock", lock)
        lines = len(lock.read_text().splitlines())
        round_trip = timings(lambda: update(lock), repeats)
        with fast_lock_updates():
            fast = timings(lambda: update(lock), repeats)
        same = lock.read_bytes() == (ROOT / "dvc.lock").read_bytes()
    print(f"dvc.lock: {lines} lines; seconds per update, median [min–max] of {repeats}")
    print(f"DVC's round-trip parser  {spread(round_trip)}")
    print(f"C loader (paperline)     {spread(fast)}")
    ratio = statistics.median(round_trip) / statistics.median(fast)
    print(f"ratio {ratio:.2f}x; bytes identical: {same}")


if __name__ == "__main__":
    main()
