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
workers): the copies made so far, the builds under way and the failures are kept there. The
registry's file lock is held only to read and update it, never during a build: a request
that a build under way will satisfy waits for it instead of building it again, and any other
request builds at once, so a worker is never held up by a build it does not need.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import pytest
from filelock import FileLock

from tasks.core.dvc_stages import area_stages, pipeline_areas, stale_stages
from tasks.core.stage import dvc_name


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


@dataclass(frozen=True)
class Building:
    """A build under way: the copy, the stages it will hold, the process building it."""

    root: Path
    wanted: frozenset[str]
    pid: int
    base_index: int | None = None  # the copy it starts from, in `built` (which only grows)

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False  # its process died mid-build: nobody will finish it
        return True


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
        self.building: list[Building] = []
        self.registry = registry  # JSON shared by the session's processes (None: this one)
        self.poll_s = 1.0

    def areas(self) -> list[str]:
        return pipeline_areas(self.repo)

    def standalone_areas(self) -> list[str]:
        return standalone_areas(self.repo)

    def needed(self, area: str) -> frozenset[str]:
        if area not in self.needs:
            self.needs[area] = frozenset(s.dvc_name for s in area_stages(area, self.repo))
            if not self.needs[area]:
                raise ValueError(f"no dvc.yaml stage belongs to the area {area!r}")
        return self.needs[area]

    def reproduce(self, *areas: str) -> Reproduced:
        """A copy holding every stage of `areas` and their upstream, reproduced."""
        wanted = frozenset().union(*(self.needed(area) for area in areas))
        while (step := self.next_step(areas, wanted)) is None:
            time.sleep(self.poll_s)  # a build under way will hold these stages
        found = self.build(step) if isinstance(step, Building) else step
        self.stop_if_failed(wanted)
        return found

    def next_step(
        self, areas: tuple[str, ...], wanted: frozenset[str]
    ) -> Reproduced | Building | None:
        """A copy that holds `wanted`, else a build of it claimed by this process, else None
        (wait: a build under way will hold it); a stage known to fail fails the test here."""
        with self.shared():
            found = self.find(wanted)
            if found is not None:
                return found
            self.stop_if_failed(wanted)
            if any(wanted <= build.wanted for build in self.building):
                return None
            return self.claim(areas, wanted)

    def find(self, wanted: frozenset[str]) -> Reproduced | None:
        for built in self.built:
            if wanted <= built.done:
                return built.reproduced
        return None

    def claim(self, areas: tuple[str, ...], wanted: frozenset[str]) -> Building:
        """Register a build of `wanted`, on the copy made so far that holds most of the
        needed stages, then the one with the fewest others."""
        base = max(
            (i for i, built in enumerate(self.built) if built.done & wanted),
            key=lambda i: (len(self.built[i].done & wanted), -len(self.built[i].done - wanted)),
            default=None,
        )
        root = self.new_folder("-".join(areas)) / "repo"
        claim = Building(root, wanted | done_in(self.base(base)), os.getpid(), base)
        self.building.append(claim)
        return claim

    def base(self, index: int | None) -> Built | None:
        return None if index is None else self.built[index]

    def build(self, claim: Building) -> Reproduced:
        """Run the claimed build (without the registry's lock), then record what it made in
        the same update that ends the claim, so no process sees neither."""
        base = self.base(claim.base_index)
        built, failed = None, {}
        try:
            if base is None:
                self.fresh_copy(claim.root)
            else:
                copy_built(base.reproduced.root, claim.root)
            todo = claim.wanted - done_in(base)
            result = Repro.of(self.dvc("repro", "--keep-going", *sorted(todo), cwd=claim.root))
            done = claim.wanted
            if result.returncode != 0:
                stale = {dvc_name(name) for name in stale_stages(claim.root)}
                done -= stale
                failed = dict.fromkeys(todo & stale, result.stderr[-3000:])
            if base is not None:
                result = base.reproduced.result.then(result)
            built = Built(Reproduced(claim.root, result), done)
        finally:
            with self.shared():
                self.building.remove(claim)
                if built is not None:
                    self.built.append(built)
                    self.failed.update(failed)
        return built.reproduced

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Under the registry's lock, with the copies every process made so far; what this
        process adds is written back before the lock is released."""
        if self.registry is None:
            yield
            return
        with FileLock(self.registry.with_suffix(".lock")):
            if self.registry.exists():
                self.built, self.failed, building = loaded(json.loads(self.registry.read_text()))
                self.building = [build for build in building if build.alive()]
            try:
                yield
            finally:
                self.registry.write_text(json.dumps(saved(self.built, self.failed, self.building)))

    def stop_if_failed(self, wanted: frozenset[str]) -> None:
        failed = sorted(wanted & set(self.failed))
        if failed:
            pytest.fail(
                f"dvc repro failed for {', '.join(failed)} (needed here):\n"
                f"{self.failed[failed[0]]}",
                pytrace=False,
            )


def standalone_areas(repo: Path) -> list[str]:
    """The areas whose stages no other area's stage feeds."""
    return [
        area for area in pipeline_areas(repo) if {s.area for s in area_stages(area, repo)} == {area}
    ]


def done_in(base: Built | None) -> frozenset[str]:
    return base.done if base is not None else frozenset()


def saved(built: list[Built], failed: dict[str, str], building: list[Building]) -> dict:
    copies = [
        {
            "root": str(b.reproduced.root),
            "done": sorted(b.done),
            "result": asdict(b.reproduced.result),
        }
        for b in built
    ]
    builds = [{**asdict(b), "root": str(b.root), "wanted": sorted(b.wanted)} for b in building]
    return {"copies": copies, "failed": failed, "building": builds}


def loaded(registry: dict) -> tuple[list[Built], dict[str, str], list[Building]]:
    built = [
        Built(
            Reproduced(Path(c["root"]), Repro(**c["result"])),
            frozenset(c["done"]),
        )
        for c in registry["copies"]
    ]
    building = [
        Building(Path(b["root"]), frozenset(b["wanted"]), b["pid"], b["base_index"])
        for b in registry["building"]
    ]
    return built, registry["failed"], building
