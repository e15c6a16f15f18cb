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

A copy's stages run as the DAG's independent branches side by side (`jobs` concurrent
`dvc --wait-for-lock repro` runs: DVC releases its repo lock while a stage's command runs
and locks only that stage's paths), then the stages that join branches (the report).

With a `registry` file the copies are shared by every process of the session (pytest-xdist
workers): the copies made so far and the failures are kept there, and a request holds the
registry's file lock while it builds, so a worker that needs a copy another worker is
building waits for it instead of building it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import pytest
from filelock import FileLock

from tasks.core.dvc_stages import (
    StageInfo,
    area_stages,
    dvc_name,
    pipeline_stages,
    stale_stages,
)


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

    @classmethod
    def beside(cls, runs: list[Repro]) -> Repro:
        """Runs made side by side as one: failed when any failed."""
        return cls(
            [run.args for run in runs],
            next((run.returncode for run in runs if run.returncode), 0),
            "".join(run.stdout for run in runs),
            "".join(run.stderr for run in runs),
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
        jobs: int = 2,
    ):
        self.repo = repo
        self.new_folder = new_folder  # an empty folder, named after the areas
        self.fresh_copy = fresh_copy  # a committed small copy of the repo at the path
        self.dvc = dvc
        self.built: list[Built] = []
        self.failed: dict[str, str] = {}  # stage → the error of the repro it failed in
        self.needs: dict[str, frozenset[str]] = {}  # area → its stages and their upstream
        self.registry = registry  # JSON shared by the session's processes (None: this one)
        self.jobs = jobs  # `dvc repro` runs side by side

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
        result = self.repro(root, wanted - done_in(base))
        done = wanted | done_in(base)
        if result.returncode != 0:
            stale = {dvc_name(name) for name in stale_stages(root)}
            done -= stale
            self.failed.update(dict.fromkeys(wanted & stale, result.stderr[-3000:]))
        if base is not None:
            result = base.reproduced.result.then(result)
        self.built.append(Built(Reproduced(root, result), done))
        return self.built[-1].reproduced

    def repro(self, root: Path, targets: frozenset[str]) -> Repro:
        """`dvc repro --keep-going` of `targets`: independent branches side by side, then
        the stages that join them (not run when a branch failed: they stay stale)."""
        groups, joins = side_by_side(pipeline_stages(root), targets, self.jobs)

        def run(names: list[str]) -> Repro:
            return Repro.of(self.dvc("--wait-for-lock", "repro", "--keep-going", *names, cwd=root))

        with ThreadPoolExecutor(max(len(groups), 1)) as pool:
            result = Repro.beside(list(pool.map(run, groups)))
        if joins and result.returncode == 0:
            result = result.then(run(joins))
        return result

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


def side_by_side(
    stages: list[StageInfo], targets: frozenset[str], jobs: int
) -> tuple[list[list[str]], list[str]]:
    """`targets` (DVC names) as at most `jobs` groups that share no stage to run, each in
    DAG order, and the stages that join groups (a last stage whose direct upstream lies in
    several branches, like the report): DVC runs each group's upstream stages itself."""
    names = {s.dvc_name: s for s in stages if s.dvc_name in targets}
    producers = {out: s.dvc_name for s in names.values() for out in s.outs}

    def producer(dep: str) -> str | None:
        return producers.get(dep) or next(
            (p for out, p in producers.items() if dep.startswith(out + os.sep)), None
        )

    upstream = {n: {p for d in s.deps if (p := producer(d)) and p != n} for n, s in names.items()}
    last = {n for n in names if not any(n in ups for ups in upstream.values())}
    branch = {n: n for n in names}  # union-find over the stages that are not last

    def root_of(n: str) -> str:
        while branch[n] != n:
            n = branch[n]
        return n

    for n in names.keys() - last:
        for p in upstream[n]:
            branch[root_of(p)] = root_of(n)
    joins = [n for n in last if len({root_of(p) for p in upstream[n]}) > 1]
    for n in last:
        if n not in joins and upstream[n]:
            branch[n] = root_of(next(iter(upstream[n])))
    members: dict[str, list[str]] = {}
    for n in names:
        if n not in joins:
            members.setdefault(root_of(n), []).append(n)
    groups: list[list[str]] = [[] for _ in range(max(1, min(jobs, len(members))))]
    for member in sorted(members.values(), key=len, reverse=True):
        min(groups, key=len).extend(member)
    order = [s.dvc_name for s in stages]
    return [sorted(g, key=order.index) for g in groups if g], sorted(joins, key=order.index)


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
