"""DVC runs the stages; Prefect runs the same DVC stages and must land on the same dvc.lock."""

import json
import shutil
import subprocess
import textwrap

import pyarrow.parquet as pq
import pytest

from tasks.core.dvc_stages import area_stages, pipeline_stages, stale_stages
from tests.conftest import REPO, copy_repo, dvc

pytestmark = pytest.mark.integration

DOCS = "data/interim/corpus/docs.parquet"
METRICS = "data/interim/corpus/ingest_metrics.json"


def test_ingest_reads_every_shipped_translation(tmp_path):
    full = copy_repo(tmp_path / "full", small=False)
    result = dvc("repro", "corpus-ingest", cwd=full)
    assert result.returncode == 0, result.stderr
    docs = pq.read_table(full / DOCS)
    metrics = json.loads((full / METRICS).read_text())
    assert metrics["documents"] == docs.num_rows > 11_000
    assert metrics["languages"] >= 330 and metrics["bcp47_tags"] >= 345
    assert len(set(docs.column("lang").to_pylist())) == metrics["languages"] + 1  # + und


def test_params_change_makes_stage_stale(repo_copy):
    assert dvc("repro", "corpus-ingest", cwd=repo_copy).returncode == 0
    params = repo_copy / "params.yaml"
    params.write_text(params.read_text().replace("min_chars: 1", "min_chars: 50"))
    assert stale_stages(repo_copy)["corpus.ingest"] == ["deps: params.yaml:corpus.ingest modified"]


def test_area_flow_runs_in_process(two_trial_copy, prefect_harness):
    from flows.dvc_flows import deltastack  # the smallest area: one stage, no upstream

    names = [s.name for s in pipeline_stages(two_trial_copy) if s.area == "deltastack"]
    assert deltastack(root=str(two_trial_copy)) == dict.fromkeys(names, True)
    assert deltastack(root=str(two_trial_copy)) == dict.fromkeys(names, False)


def toy_dag(tmp_path):
    """Areas a, b, c: b needs a's output, c stands alone."""
    folder = tmp_path / "dag"
    folder.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    assert dvc("init", "-q", cwd=folder).returncode == 0
    (folder / "dvc.yaml").write_text(
        textwrap.dedent("""
        stages:
          b-three:
            cmd: cp y z
            deps: [y]
            outs: [z]
          a-one:
            cmd: echo 1 > x
            outs: [x]
          b-two:
            cmd: cp x y
            deps: [x]
            outs: [y]
          c-four:
            cmd: echo 4 > w
            outs: [w]
    """)
    )
    return folder


def test_stage_order_and_area_selection_follow_the_dag(tmp_path):
    folder = toy_dag(tmp_path)
    order = [s.name for s in pipeline_stages(folder)]
    assert sorted(order) == ["a.one", "b.three", "b.two", "c.four"]
    assert order.index("a.one") < order.index("b.two") < order.index("b.three")
    assert [s.name for s in area_stages("b", folder)] == [
        n for n in order if n in {"a.one", "b.two", "b.three"}
    ]
    assert [s.name for s in area_stages("c", folder)] == ["c.four"]


def test_an_area_gets_its_flow_from_dvc_yaml_alone(tmp_path, monkeypatch, prefect_harness):
    from flows import dvc_flows

    folder = toy_dag(tmp_path)
    shutil.copy(REPO / "params.yaml", folder)  # the flow reads runtime.prefect's retries
    monkeypatch.chdir(folder)
    assert dvc_flows.flow_names() == ["pipeline", "a", "b", "c"]
    assert dvc_flows.c.name == "c"
    assert dvc_flows.c(root=str(folder)) == {"c.four": True}
    assert (folder / "w").read_text() == "4\n"
    with pytest.raises(AttributeError):
        dvc_flows.d  # noqa: B018 - the lookup itself is under test


def code_reasons(stale: dict[str, list[str]], module: str) -> set[str]:
    return {name for name, reasons in stale.items() if f"deps: {module} modified" in reasons}


@pytest.mark.parametrize(
    "module",
    [
        "tasks/core/io.py",
        "tasks/core/stage_runner.py",
        "tasks/core/console.py",
        "tasks/core/train_loop.py",
        "tasks/core/training.py",
        "tasks/core/loop.py",
    ],
)
def test_editing_a_module_makes_exactly_its_importers_stale(tmp_path, module):
    """dvc.lock records every module a stage imports, and the runner every stage goes
    through: a comment appended to one of them makes `dvc status` report each stage whose
    code reaches it, and no other; the console, which only presents stages, reaches none."""
    from tasks.core.code_deps import declared_deps

    root = copy_repo(tmp_path / "repo", small=False)
    assert not code_reasons(stale_stages(root), module), "dvc.lock is older than the code"
    with (root / module).open("a", encoding="utf-8") as handle:
        handle.write("# an edit that changes nothing but the file's hash\n")
    importers = {
        stage.name for stage in pipeline_stages(root) if module in declared_deps(stage.name, root)
    }
    assert code_reasons(stale_stages(root), module) == importers
    if module == "tasks/core/train_loop.py":  # the kit the fine-tunes share with mlm
        assert {"scam.poison", "aoeb.finetune", "cmipref.train", "mlm.pretrain"} <= importers
    elif module == "tasks/core/training.py":  # the harness: every training stage
        trainers = {"mlm.pretrain", "mlm.mid", "mlm.decay", "kg.detector", "scam.guard"}
        assert trainers | {"scam.poison", "aoeb.finetune", "cmipref.train"} <= importers
        assert "corpus.ingest" not in importers
    elif module == "tasks/core/loop.py":  # the one optimizer loop: every stage that trains
        assert {"tabular.zoo", "deltastack.study", "kg.detector", "mlm.decay"} <= importers
        assert "corpus.ingest" not in importers and "report.build" not in importers
    elif module == "tasks/core/console.py":
        assert not importers
    else:  # every stage runs through the runner and writes through io
        assert len(importers) == len(pipeline_stages(root))
