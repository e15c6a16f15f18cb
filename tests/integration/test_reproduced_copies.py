"""The session's `dvc repro` copies (tests/reproduced.py) on a four-stage DAG: each stage runs
once per session, a copy holding what a test needs is reused, a failed stage stops only the
areas downstream of it."""

import json
import re
import shutil
import subprocess
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import dvc, git_commit_all
from tests.reproduced import Building, ReproducedCopies, saved

pytestmark = pytest.mark.integration

# a-alone stands alone and fails when the file `broken` exists; b-one → c-two → c-three
# and b-one → d-four.
# DVC runs the targets in the order given, sorted here: a-alone first.
DAG = """
stages:
  a-alone:
    cmd: test ! -e broken && echo 4 > w
    deps: [seed]
    outs: [w]
  b-one:
    cmd: echo 1 > x
    outs: [x]
  c-two:
    cmd: cp x y
    deps: [x]
    outs: [y]
  c-three:
    cmd: cp y z
    deps: [y]
    outs: [z]
  d-four:
    cmd: cp x v
    deps: [x]
    outs: [v]
"""


def no_dvc(*args, **kwargs):
    raise AssertionError(f"ran dvc {args}: the first process's copy was not reused")


def second_process(copies, dvc=dvc):
    """What another xdist worker sees: its own ReproducedCopies on the same registry."""
    other = ReproducedCopies(
        copies.repo, copies.new_folder, copies.fresh_copy, dvc, registry=copies.registry
    )
    other.poll_s = 0.05
    return other


def ran(reproduced):
    return sorted(re.findall(r"Running stage '([^']+)'", reproduced.result.stdout))


@pytest.fixture
def copies(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=source, check=True)
    assert dvc("init", "-q", cwd=source).returncode == 0
    (source / "dvc.yaml").write_text(textwrap.dedent(DAG))
    (source / "seed").write_text("seed\n")
    git_commit_all(source, "a four-stage pipeline")
    folders = tmp_path / "copies"

    def new_folder(name):
        folder = folders / f"{name}-{len(list(folders.glob('*')))}"
        folder.mkdir(parents=True)
        return folder

    def fresh_copy(root):
        return shutil.copytree(source, root)

    return ReproducedCopies(source, new_folder, fresh_copy, dvc, registry=tmp_path / "copies.json")


def test_each_stage_runs_once_and_a_copy_holding_the_stages_is_reused(copies):
    c = copies.reproduce("c")
    assert ran(c) == ["b-one", "c-three", "c-two"]
    assert (c.root / "z").read_text() == "1\n" and not (c.root / "w").exists()
    assert copies.reproduce("b") == c  # b's stage is in c's copy: no new copy, no run

    a = copies.reproduce("a")  # no upstream: a fresh copy, not c's
    assert ran(a) == ["a-alone"] and not (a.root / "x").exists()

    d = copies.reproduce("d")  # on c's copy, which has b-one: only d-four runs
    assert d.result.stdout.startswith(c.result.stdout)
    assert ran(d) == ["b-one", "c-three", "c-two", "d-four"]  # each stage once

    every = copies.reproduce("a", "b", "c")  # on c's copy: as much, and nothing more
    assert every.root not in (a.root, c.root, d.root)
    assert every.result.stdout.startswith(c.result.stdout)
    assert ran(every) == ["a-alone", "b-one", "c-three", "c-two"]
    assert dvc("status", "a-alone", "c-three", cwd=every.root).stdout.strip() == (
        "Data and pipelines are up to date."
    )
    assert copies.reproduce("c") == c and len(copies.built) == 4


def test_a_failed_stage_fails_only_what_needs_it(copies):
    (copies.repo / "broken").write_text("")
    with pytest.raises(pytest.fail.Exception, match="dvc repro failed for a-alone"):
        copies.reproduce("a", "b", "c")
    partial = copies.built[-1].reproduced
    assert ran(partial) == ["a-alone", "b-one", "c-three", "c-two"]  # went on after a-alone
    assert copies.reproduce("c") == partial  # c's stages were done beside the failure

    before = len(copies.built)
    with pytest.raises(pytest.fail.Exception, match="dvc repro failed for a-alone"):
        copies.reproduce("a")
    assert len(copies.built) == before  # known to fail: not run again


def test_a_second_process_reads_the_copies_and_failures_the_first_made(copies):
    """Two xdist workers: each has its own ReproducedCopies on the same registry file."""
    (copies.repo / "broken").write_text("")
    c = copies.reproduce("c")
    with pytest.raises(pytest.fail.Exception, match="dvc repro failed for a-alone"):
        copies.reproduce("a")

    other = second_process(copies, dvc=no_dvc)
    assert other.reproduce("b") == c  # b's stage is in c's copy, output kept
    assert "Running stage 'c-three'" in other.reproduce("c").result.stdout
    with pytest.raises(pytest.fail.Exception, match="dvc repro failed for a-alone"):
        other.reproduce("a")  # known to fail: not run again


def test_a_request_waits_for_the_build_under_way_that_will_hold_its_stages(copies):
    claim = copies.next_step(("c",), copies.needed("c"))
    assert isinstance(claim, Building)  # claimed, not built yet
    other = second_process(copies, dvc=no_dvc)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(other.reproduce, "b")  # b-one is in the claimed build
        time.sleep(0.5)
        assert not waiting.done()
        c = copies.build(claim)
        assert waiting.result(timeout=60) == c


def test_a_request_no_build_under_way_holds_is_built_at_once(copies):
    claim = copies.next_step(("c",), copies.needed("c"))
    with ThreadPoolExecutor(1) as pool:
        request = pool.submit(second_process(copies).reproduce, "a")
        try:
            a = request.result(timeout=60)  # not in c's build: no wait for it
        finally:
            c = copies.build(claim)  # ends the wait, were there one
    assert ran(a) == ["a-alone"] and not (a.root / "x").exists()
    assert ran(c) == ["b-one", "c-three", "c-two"]


def test_a_build_whose_process_died_is_not_waited_for(copies):
    ended = subprocess.Popen(["true"])
    ended.wait()
    orphan = Building(copies.new_folder("c") / "repo", copies.needed("c"), ended.pid)
    copies.registry.write_text(json.dumps(saved([], {}, [orphan])))
    c = second_process(copies).reproduce("c")
    assert ran(c) == ["b-one", "c-three", "c-two"]
    assert json.loads(copies.registry.read_text())["building"] == []
