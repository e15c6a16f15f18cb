"""`paperline repro`: `dvc repro` with a console a person can read, on one Ray instance.

DVC runs in this process with its own announcements muted ("Running stage …", "> cmd",
"Updating lock file …": each stage prints its own start and end line), its warnings and
errors kept. The stages DVC runs share one local Ray (`shared_ray`), started
when the first stale stage that uses Ray is about to run and stopped at the end.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from tasks.core.dvc_lockfile import fast_lock_updates
from tasks.core.params import RayParams
from tasks.core.paths import state_dir
from tasks.core.ray_cluster import LocalRay

DVC_LOGGERS = ("dvc", "dvc_objects", "dvc_data")


def _warnings_and_errors(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING


@contextlib.contextmanager
def quiet_dvc() -> Iterator[None]:
    """DVC's console handlers keep warnings and errors only; its records stay out of the
    root logger (this process's own log file)."""
    loggers = [logging.getLogger(name) for name in DVC_LOGGERS]
    handlers = {handler for each in loggers for handler in each.handlers}
    before = [each.propagate for each in loggers]
    for each in loggers:
        each.propagate = False
    for handler in handlers:
        handler.addFilter(_warnings_and_errors)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(_warnings_and_errors)
        for each, propagate in zip(loggers, before, strict=True):
            each.propagate = propagate


@contextlib.contextmanager
def logs_to_file(path: Path) -> Iterator[None]:
    """This process's Python logging and warnings (Ray start/stop, paperline's own, what
    importing a stage module to ask whether it uses Ray may warn) to `path`."""
    from tasks.core.progress import configure_logging

    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    console = [h for h in root.handlers if getattr(h, "_paperline", False)]
    for each in console:
        root.removeHandler(each)
    root.addHandler(handler)
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        handler.close()
        if console:
            configure_logging()


def reproduce(root: Path, dvc_args: Sequence[str]) -> int:
    """`dvc repro <dvc_args>` in `root`; DVC's exit status."""
    from dvc.cli import main as dvc_main  # importing dvc installs its console handlers

    with (
        contextlib.chdir(root),
        logs_to_file(state_dir(root) / "logs" / "repro.log"),
        quiet_dvc(),
        fast_lock_updates(),
        shared_ray(root),  # reads params.yaml only if a Ray stage runs
    ):
        return dvc_main(["repro", *dvc_args])


@contextlib.contextmanager
def shared_ray(root: Path, params: RayParams | None = None) -> Iterator[None]:
    """Within: the first stage DVC runs that uses Ray starts this run's instance, the
    later ones join it; a run with no stale Ray stage starts nothing, and with RAY_ADDRESS
    set nothing is started at all. `params`: runtime.ray, else the root's params.yaml."""
    if os.environ.get("RAY_ADDRESS"):
        yield
        return
    local = LocalRay(root, params)
    try:
        with announce_stages(local):
            yield
    finally:
        local.stop()


class _StageAnnouncements(logging.Filter):
    """DVC logs "Running stage 'x':" just before it builds the stage's environment and
    starts its command; start Ray there when the stage uses it."""

    def __init__(self, local: LocalRay) -> None:
        super().__init__()
        self.local = local

    def filter(self, record: logging.LogRecord) -> bool:
        announced = record.msg == "Running stage '%s':" and record.args
        if announced and not self.local.running and _uses_ray(str(record.args[0])):
            self.local.start()
        return True


def _uses_ray(dvc_stage: str) -> bool:
    from tasks.core.stage_index import find_stage

    try:
        return find_stage(dvc_stage).uses_ray
    except Exception:  # not a paperline stage (or a broken one, which will say so itself)
        return False


@contextlib.contextmanager
def announce_stages(local: LocalRay) -> Iterator[None]:
    """Start `local` when DVC is about to run a stage that uses Ray."""
    logger = logging.getLogger("dvc.stage.run")
    hook = _StageAnnouncements(local)
    logger.addFilter(hook)
    try:
        yield
    finally:
        logger.removeFilter(hook)
