"""A pytest plugin: the machine's CPU seconds spent in each test, setup and teardown included.

The suite is CPU-bound on 2 cores, so a test's wall time under xdist says little about what
it costs; this counts the whole machine's CPU (`/proc/stat`: the test's subprocesses, Ray
workers and services too) around each phase. Run it serially on a quiet machine:

    PYTHONPATH=benchmarks .venv/bin/python -m pytest -n0 -p cpu_per_test

It prints the costliest tests at the end and, with CPU_PER_TEST_OUT=<file>, writes one
JSON line per test phase. Linux only.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

SHOWN = 40
_spent: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # wall, cpu, setup cpu


def machine_cpu_seconds() -> float:
    with open("/proc/stat") as stat:
        user, nice, system = stat.readline().split()[1:4]
    return (int(user) + int(nice) + int(system)) / os.sysconf("SC_CLK_TCK")


def _measured(item: pytest.Item, phase: str) -> Iterator[None]:
    wall, cpu = time.monotonic(), machine_cpu_seconds()
    try:
        return (yield)
    finally:
        _record(item, phase, time.monotonic() - wall, machine_cpu_seconds() - cpu)


def _record(item: pytest.Item, phase: str, wall: float, cpu: float) -> None:
    spent = _spent[item.nodeid]
    spent[0] += wall
    spent[1] += cpu
    if phase == "setup":
        spent[2] += cpu
    if out := os.environ.get("CPU_PER_TEST_OUT"):
        with open(out, "a") as handle:
            record = {"id": item.nodeid, "phase": phase, "wall": wall, "cpu": cpu}
            handle.write(json.dumps(record) + "\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _measured(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _measured(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    return (yield from _measured(item, "teardown"))


def pytest_terminal_summary(terminalreporter) -> None:
    if not _spent:
        return
    total = sum(cpu for _, cpu, _ in _spent.values())
    terminalreporter.section(f"machine CPU per test: {total:.0f} CPU-s in {len(_spent)} tests")
    terminalreporter.write_line("   CPU-s   wall s  of it setup CPU-s")
    ranked = sorted(_spent.items(), key=lambda entry: -entry[1][1])
    for nodeid, (wall, cpu, setup) in ranked[:SHOWN]:
        terminalreporter.write_line(f"{cpu:8.1f} {wall:8.1f} {setup:8.1f}  {nodeid}")
