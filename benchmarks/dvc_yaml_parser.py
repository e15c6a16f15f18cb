"""DVC commands with ruamel.yaml's C parser vs its pure-Python parser.

DVC reads dvc.yaml and dvc.lock with ruamel.yaml's safe loader on every command. Since
ruamel.yaml 0.19 the C parser is an extra (`ruamel.yaml[oldlibyaml]`, which pyproject.toml
asks for); without it ruamel falls back to pure Python. Each run is a fresh process, so
imports count as they do for a user: `dvc status` on this repository, and the check a
Prefect flow makes per stage (`reproduce_stage`, in one process, over every stage that is
up to date; stale ones would run, so they are left out: time it where `dvc status` is clean).

    .venv/bin/python benchmarks/dvc_yaml_parser.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _timing import timed  # benchmarks/_timing.py: the script's folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
PURE = "import sys; sys.modules['_ruamel_yaml'] = None  # ruamel falls back to pure Python\n"
STATUS = "from dvc.repo import Repo\nwith Repo('.') as repo: repo.status()\n"
FLOW_CHECKS = (
    "from tasks.core.dvc_stages import pipeline_stages, stale_stages, reproduce_stage\n"
    "stale = stale_stages()\n"
    "for stage in pipeline_stages():\n"
    "    if stage.name not in stale: reproduce_stage(stage.name)  # up to date: DVC skips it\n"
)


def run(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    import ruamel.yaml.main

    if ruamel.yaml.main.CParser is None:
        sys.exit("ruamel.yaml's C parser is not installed: `make setup` installs it")
    lock, spec = (ROOT / "dvc.lock").stat().st_size, (ROOT / "dvc.yaml").stat().st_size
    print(
        f"dvc.yaml {spec / 1024:.0f} KiB, dvc.lock {lock / 1024:.0f} KiB; "
        f"median of {repeats} after a warm-up"
    )
    for label, code in (("dvc status", STATUS), ("flow check of every stage", FLOW_CHECKS)):
        pure = timed(lambda code=code: run(PURE + code), repeats)
        c = timed(lambda code=code: run(code), repeats)
        print(f"{label:28s} pure Python {pure:6.2f} s   C parser {c:6.2f} s   {pure / c:.2f}x")


if __name__ == "__main__":
    main()
