"""`make setup` (uv) vs the pip install it replaced, each into a new venv with empty caches.

Both install the same pinned set (`-c constraints.txt -e '.[dev]'`) and compile the
bytecode, as on a fresh machine. The uv side is `make setup VENV=<new venv>`, the Makefile's
own code path; the pip side is the command setup ran before (`pip install`, which installs
and compiles one file at a time). One run each: a second run would find warm caches.

    python3 benchmarks/setup_installers.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def seconds(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="pl-bench-setup-") as scratch:
        base = Path(scratch)
        env = {
            **os.environ,
            "PIP_CACHE_DIR": str(base / "pip-cache"),
            "UV_CACHE_DIR": str(base / "uv-cache"),
        }
        pip_venv = base / "pip-venv"
        subprocess.run([sys.executable, "-m", "venv", str(pip_venv)], check=True)
        pip = seconds(
            [str(pip_venv / "bin/python"), "-m", "pip", "install", "--quiet"]
            + ["-c", "constraints.txt", "-e", ".[dev]"],
            env,
        )
        uv = seconds(["make", "setup", f"VENV={base / 'uv-venv'}"], env)
    print(f"pip install {pip:6.1f} s   make setup (uv) {uv:6.1f} s   {pip / uv:.2f}x")


if __name__ == "__main__":
    main()
