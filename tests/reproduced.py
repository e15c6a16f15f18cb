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
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest

from tasks.core.dvc_stages import area_stages, dvc_name, pipeline_stages, stale_stages


class Reproduced(NamedTuple):
    root: Path
    # the `dvc repro` runs that built the copy, from the first, their outputs joined
    result: subprocess.CompletedProcess


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
    ):
        self.repo = repo
        self.new_folder = new_folder  # an empty folder, named after the areas
        self.fresh_copy = fresh_copy  # a committed small copy of the repo at the path
        self.dvc = dvc
        self.built: list[Built] = []
        self.failed: dict[str, str] = {}  # stage → the error of the repro it failed in
        self.needs: dict[str, frozenset[str]] = {}  # area → its stages and their upstream

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
        for built in self.built:
            if wanted <= built.done:
                return built.reproduced
        self.stop_if_failed(wanted)

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
        result = self.dvc("repro", "--keep-going", *sorted(wanted - done_in(base)), cwd=root)
        done = wanted | done_in(base)
        if result.returncode != 0:
            stale = {dvc_name(name) for name in stale_stages(root)}
            done -= stale
            self.failed.update(dict.fromkeys(wanted & stale, result.stderr[-3000:]))
        if base is not None:
            result = joined(base.reproduced.result, result)
        self.built.append(Built(Reproduced(root, result), done))
        self.stop_if_failed(wanted)
        return self.built[-1].reproduced

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


def joined(
    first: subprocess.CompletedProcess, then: subprocess.CompletedProcess
) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(
        [first.args, then.args],
        then.returncode,
        stdout=first.stdout + then.stdout,
        stderr=first.stderr + then.stderr,
    )
