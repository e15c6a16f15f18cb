"""How busy the machine's cores are during each stage of a pipeline run, and how long the
gaps between stages are: the measurement behind running DAG branches side by side (worth it
only where a stage leaves a core idle).

    python benchmarks/stage_cpu_use.py -- make run        # or: -- .venv/bin/paperline repro

It runs the command, copies its output through, samples /proc/stat every `--every` seconds,
reads the console's stage lines (`HH:MM:SS <stage> ...` and `HH:MM:SS <stage> done in N s`)
and prints, per stage, its wall time and the share of all cores busy while it ran, then the
gaps between one stage's end and the next one's start. The peer of a stage's busy share is
the machine's capacity measured in the same run: 100% means every core was busy.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import subprocess
import sys
import threading
import time

START = re.compile(r"^(\d\d:\d\d:\d\d) (\S+) \.\.\.$")
DONE = re.compile(r"^(\d\d:\d\d:\d\d) (\S+) done in ([\d.]+) s")


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies over all cores since boot."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def sample(samples: list[tuple[float, int, int]], every: float, stop: threading.Event) -> None:
    while not stop.is_set():
        samples.append((time.time(), *cpu_times()))
        stop.wait(every)


def busy_share(samples: list[tuple[float, int, int]], start: float, end: float) -> float:
    inside = [s for s in samples if start <= s[0] <= end]
    if len(inside) < 2:
        return float("nan")
    (_, busy0, total0), (_, busy1, total1) = inside[0], inside[-1]
    return (busy1 - busy0) / max(1, total1 - total0)


def clock(text: str, day: dt.date) -> float:
    moment = dt.datetime.combine(day, dt.time.fromisoformat(text))
    return moment.timestamp()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    samples: list[tuple[float, int, int]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(samples, args.every, stop), daemon=True)
    sampler.start()
    started, day = time.time(), dt.date.today()
    stages: dict[str, dict[str, float]] = {}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        sys.stdout.write(line)
        if match := START.match(line.strip()):
            stages.setdefault(match[2], {})["start"] = clock(match[1], day)
        elif match := DONE.match(line.strip()):
            entry = stages.setdefault(match[2], {})
            entry["end"], entry["inside"] = clock(match[1], day), float(match[3])
    code = process.wait()
    stop.set()
    sampler.join()
    wall = time.time() - started
    finished = sorted(
        ((name, s) for name, s in stages.items() if {"start", "end"} <= set(s)),
        key=lambda item: item[1]["start"],
    )
    cores = os.cpu_count() or 1
    print(f"\n{len(finished)} stages, {wall:.0f} s wall, {cores} cores; busy = share of all cores")
    print(f"{'stage':28} {'wall s':>7} {'in fn s':>8} {'busy':>6}")
    for name, s in sorted(finished, key=lambda item: -(item[1]["end"] - item[1]["start"])):
        share = busy_share(samples, s["start"], s["end"] + 1)
        print(f"{name:28} {s['end'] - s['start']:7.0f} {s['inside']:8.1f} {share:6.0%}")
    gaps = [b[1]["start"] - a[1]["end"] for a, b in zip(finished, finished[1:], strict=False)]
    if gaps:
        print(
            f"gaps between stages: mean {statistics.mean(gaps):.1f} s, median "
            f"{statistics.median(gaps):.1f} s, total {sum(gaps):.0f} s over {len(gaps)}"
        )
    print(f"whole run busy: {busy_share(samples, started, time.time()):.0%} (exit {code})")
    return code


if __name__ == "__main__":
    sys.exit(main())
