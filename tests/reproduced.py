"""Small `dvc repro` copies shared by a test session, one per set of areas, each stage run once.

A test of one area asks for that area: it gets a copy in which the area's stages and their
upstream stages are reproduced; no stage it does not need is run for it. A copy that already
holds every stage asked for is handed out as it is (after a whole-DAG repro, every area's
tests read that copy). Otherwise the new copy starts from the copy made so far that holds
most of the stages it needs (kg's copy starts from mlm's), so upstream stages are not run
again and the models they registered stay in the copy's MLflow store (DVC's run-cache could
restore their outputs but not those registrations).

A failed stage stops only what needs it: `dvc repro --keep-going` finishes the stages beside
it, and every later request that needs the failed stage fails at once with its error.

With a `registry` file the copies are shared by every process of the session (pytest-xdist
workers): the copies made so far and the failures are kept there, and a request holds the
registry's file lock while it builds, so a worker that needs a copy another worker is
building waits for it instead of building it again.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import pytest
from filelock import FileLock

from tasks.core.dvc_stages import area_stages, dvc_name, pipeline_stages, stale_stages


@dataclass(frozen=True)
class Repro:
    """What the `dvc repro` runs that built a copy printed, from the first, joined (a value,
    so it survives the registry's JSON)."""

    args: list
    returncode: int
    stdout: str
    stderr: str

    @classmethod
    def of(cls, ran: subprocess.CompletedProcess) -> Repro:
        return cls(list(ran.args), ran.returncode, ran.stdout, ran.stderr)

    def then(self, later: Repro) -> Repro:
        return Repro(
            [self.args, later.args],
            later.returncode,
            self.stdout + later.stdout,
            self.stderr + later.stderr,
        )


class Reproduced(NamedTuple):
    root: Path
    result: Repro


@dataclass(frozen=True)
class Built:
    reproduced: Reproduced
    done: frozenset[str]  # DVC stage names up to date in the copy


def copy_built(source: Path, target: Path) -> Path:
    """A copy of a reproduced repo without its local service state (ports and pids)."""
    shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(".paperline"))
    return target


class ReproducedCopies:
    def __init__(
        self,
        repo: Path,
        new_folder: Callable[[str], Path],
        fresh_copy: Callable[[Path], Path],
        dvc: Callable[..., subprocess.CompletedProcess],
        registry: Path | None = None,
    ):
        self.repo = repo
        self.new_folder = new_folder  # an empty folder, named after the areas
        self.fresh_copy = fresh_copy  # a committed small copy of the repo at the path
        self.dvc = dvc
        self.built: list[Built] = []
        self.failed: dict[str, str] = {}  # stage → the error of the repro it failed in
        self.needs: dict[str, frozenset[str]] = {}  # area → its stages and their upstream
        self.registry = registry  # JSON shared by the session's processes (None: this one)

    def areas(self) -> list[str]:
        return sorted({stage.area for stage in pipeline_stages(self.repo)})

    def needed(self, area: str) -> frozenset[str]:
        if area not in self.needs:
            self.needs[area] = frozenset(s.dvc_name for s in area_stages(area, self.repo))
            if not self.needs[area]:
                raise ValueError(f"no dvc.yaml stage belongs to the area {area!r}")
        return self.needs[area]

    def reproduce(self, *areas: str) -> Reproduced:
        """A copy holding every stage of `areas` and their upstream, reproduced."""
        wanted = frozenset().union(*(self.needed(area) for area in areas))
        with self.shared():
            reproduced = self.find_or_build(areas, wanted)
        self.stop_if_failed(wanted)
        assert reproduced is not None
        return reproduced

    def find_or_build(self, areas: tuple[str, ...], wanted: frozenset[str]) -> Reproduced | None:
        for built in self.built:
            if wanted <= built.done:
                return built.reproduced
        if wanted & set(self.failed):
            return None  # known to fail: stop_if_failed says why
        # the copy that holds most of the needed stages, then the one with the fewest others
        base = max(
            (built for built in self.built if built.done & wanted),
            key=lambda built: (len(built.done & wanted), -len(built.done - wanted)),
            default=None,
        )
        root = self.new_folder("-".join(areas)) / "repo"
        if base is None:
            self.fresh_copy(root)
        else:
            copy_built(base.reproduced.root, root)
        ran = self.dvc("repro", "--keep-going", *sorted(wanted - done_in(base)), cwd=root)
        result = Repro.of(ran)
        done = wanted | done_in(base)
        if result.returncode != 0:
            stale = {dvc_name(name) for name in stale_stages(root)}
            done -= stale
            self.failed.update(dict.fromkeys(wanted & stale, result.stderr[-3000:]))
        if base is not None:
            result = base.reproduced.result.then(result)
        self.built.append(Built(Reproduced(root, result), done))
        return self.built[-1].reproduced

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Under the registry's lock, with the copies every process made so far; what this
        process adds is written back before the lock is released."""
        if self.registry is None:
            yield
            return
        with FileLock(self.registry.with_suffix(".lock")):
            if self.registry.exists():
                self.built, self.failed = loaded(json.loads(self.registry.read_text()))
            try:
                yield
            finally:
                self.registry.write_text(json.dumps(saved(self.built, self.failed)))

    def stop_if_failed(self, wanted: frozenset[str]) -> None:
        failed = sorted(wanted & set(self.failed))
        if failed:
            pytest.fail(
                f"dvc repro failed for {', '.join(failed)} (needed here):\n"
                f"{self.failed[failed[0]]}",
                pytrace=False,
            )


def done_in(base: Built | None) -> frozenset[str]:
    return base.done if base is not None else frozenset()


def saved(built: list[Built], failed: dict[str, str]) -> dict:
    copies = [
        {
            "root": str(b.reproduced.root),
            "done": sorted(b.done),
            "result": asdict(b.reproduced.result),
        }
        for b in built
    ]
    return {"copies": copies, "failed": failed}


def loaded(registry: dict) -> tuple[list[Built], dict[str, str]]:
    built = [
        Built(
            Reproduced(Path(c["root"]), Repro(**c["result"])),
            frozenset(c["done"]),
        )
        for c in registry["copies"]
    ]
    return built, registry["failed"]
