"""What a person sees of a stage: one line when it starts, one when it ends, the rest in its log.

`open_stage_console` points this process's stdout and stderr (Python, C++ libraries such
as Ray's core, child processes) at `.paperline/logs/<stage>.log` and keeps the terminal
for the `StageConsole`'s own lines: `started`, `finished` (seconds and the stage's
headline metric), `failed` (the error line first, then the log's path and its last lines),
and the one live progress bar of `tasks.core.progress.track` when stderr is a terminal.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from tasks.core import progress
from tasks.core.paths import state_dir
from tasks.core.stage import dvc_name

TAIL_LINES = 20
# colour and cursor sequences, and the carriage-return redraws of progress bars
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def stage_log(root: Path, stage: str) -> Path:
    """`.paperline/logs/<dvc stage name>.log`: everything a stage's process printed."""
    return state_dir(root) / "logs" / f"{dvc_name(stage)}.log"


def plain(text: str) -> str:
    """A log line as the terminal would leave it: the last redraw, no escape sequences."""
    return _ANSI.sub("", text.rsplit("\r", 1)[-1])


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    if not path.exists():
        return []
    text = path.read_bytes().decode("utf-8", errors="replace")  # keeps \r (redraws)
    kept = [plain(line) for line in text.split("\n")]  # splitlines() also splits at \r
    return [line for line in kept if line.strip()][-lines:]


def headline(path: Path, key: str) -> str | None:
    """`key=value` of a dotted key in a metrics JSON file (a list's or mapping's size);
    None when either is missing."""
    try:
        value: Any = json.loads(path.read_text(encoding="utf-8"))
        for part in key.split("."):
            value = value[part]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    if isinstance(value, dict | list):  # e.g. "tasks": how many
        value = len(value)
    elif isinstance(value, float):
        value = f"{value:.4g}"
    return f"{key}={value}"


class StageConsole:
    def __init__(self, stage: str, log_path: Path, out: TextIO, err: TextIO) -> None:
        self.stage = dvc_name(stage)
        self.log_path = log_path
        self.out = out
        self.err = err

    def started(self) -> None:
        self.out.write(f"{time.strftime('%H:%M:%S')} {self.stage} ...\n")

    def finished(self, seconds: float, metric: str | None) -> None:
        shown = f", {metric}" if metric else ""  # ASCII: any terminal encoding
        self.out.write(f"{time.strftime('%H:%M:%S')} {self.stage} done in {seconds:.1f} s{shown}\n")

    def failed(self, message: str) -> None:
        """The error line, then (when the stage logged anything) the log's path and tail."""
        sys.stdout.flush()
        sys.stderr.flush()
        self.err.write(message + "\n")
        if lines := tail(self.log_path):
            self.err.write(f"log: {self.log_path} (last {len(lines)} lines)\n")
            self.err.writelines(f"  | {line}\n" for line in lines)
        self.err.flush()
        print(message, file=sys.stderr, flush=True)  # the log ends with it too

    def progress_stream(self) -> TextIO | None:
        """Where a live progress bar may draw: the terminal, and only a terminal."""
        return self.err if self.err.isatty() else None


_active: list[StageConsole] = []


def open_stage_console(root: Path, stage: str) -> StageConsole:
    """From here on the process's stdout and stderr go to the stage's log; returns the
    console that still writes to the terminal (`started` prints the start line). Once per
    process (the stage door)."""
    path = stage_log(root, stage)
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    err = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8")
    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    console = StageConsole(stage, path, out, err)
    _active.append(console)
    progress.draw_bars_with(console.progress_stream)
    return console


def active() -> StageConsole | None:
    """The stage console of this process, if the stage door opened one."""
    return _active[-1] if _active else None
