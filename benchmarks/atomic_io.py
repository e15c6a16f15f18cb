"""Cost of paperline's atomic outputs against a plain pyarrow write of the same table.

The peer is `pyarrow.parquet.write_table` straight onto the target (what a stage would do
without the temp + fsync + rename guarantee). Run: `make bench` or
`python benchmarks/atomic_io.py --repeats 20`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from tasks.core.io import write_file
from tasks.corpus.documents import documents_table
from tasks.corpus.udhr import read_udhr

ROOT = Path(__file__).resolve().parents[1]


def _time(write, repeats: int) -> list[float]:
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        write()
        runs.append(time.perf_counter() - started)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    table = documents_table(read_udhr(ROOT / "data" / "seed" / "udhr"))
    with tempfile.TemporaryDirectory(dir=ROOT / "benchmarks") as folder:
        target = Path(folder) / "docs.parquet"
        plain = _time(lambda: pq.write_table(table, target, compression="zstd"), args.repeats)
        atomic = _time(lambda: write_file(target, table), args.repeats)
        size_mb = target.stat().st_size / 1e6
    plain_s, atomic_s = statistics.median(plain), statistics.median(atomic)
    print(f"table: {table.num_rows} UDHR documents, {size_mb:.2f} MB Parquet (zstd)")
    print(f"pyarrow write_table (peer):      median {plain_s * 1000:7.1f} ms over {args.repeats}")
    print(f"paperline atomic write_file:     median {atomic_s * 1000:7.1f} ms over {args.repeats}")
    print(f"ratio atomic / plain: {atomic_s / plain_s:.2f}x")


if __name__ == "__main__":
    main()
