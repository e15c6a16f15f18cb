"""The stage console: headline metrics, log tails without redraws, the error line first."""

import json
import subprocess
import sys

import pytest
import yaml

from tasks.core import console
from tasks.core.stage_index import find_stage
from tasks.core.stage_runner import headline_metric
from tests.conftest import REPO

DVC_STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


@pytest.mark.parametrize("dvc_name", sorted(DVC_STAGES))
def test_a_headline_names_a_metrics_output_and_a_key_it_holds(dvc_name):
    stage = find_stage(dvc_name)
    metrics = {
        next(iter(m)) if isinstance(m, dict) else m for m in DVC_STAGES[dvc_name].get("metrics", [])
    }
    if not metrics:
        assert stage.headline is None
        return
    assert stage.headline, f"{stage.name} writes {sorted(metrics)}: declare a headline"
    path, _, key = stage.headline.partition(":")
    assert path in metrics and key
    if (REPO / path).exists():  # cache-less metrics are committed
        assert headline_metric(stage, REPO), f"{stage.headline}: no such key"


def test_headline_formats_the_value_and_survives_a_missing_key(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"test": {"f1": 0.812345}, "items": 12, "tasks": {"a": 1}}))
    assert console.headline(path, "test.f1") == "test.f1=0.8123"
    assert console.headline(path, "items") == "items=12"
    assert console.headline(path, "tasks") == "tasks=1"
    assert console.headline(path, "test.auroc") is None
    assert console.headline(tmp_path / "absent.json", "items") is None


def test_tail_keeps_the_last_redraw_and_drops_escape_sequences(tmp_path):
    log = tmp_path / "stage.log"
    lines = [f"line {i}" for i in range(30)]
    log.write_text("\n".join(lines) + "\n\x1b[32mok\x1b[0m\nstep 1/3\rstep 2/3\rstep 3/3\n")
    shown = console.tail(log)
    assert len(shown) == console.TAIL_LINES
    assert shown[-2:] == ["ok", "step 3/3"] and shown[0] == "line 12"


STAGE_LIKE = """
import logging, sys
from pathlib import Path
from tasks.core.cli import report
from tasks.core.console import open_stage_console
from tasks.core.progress import configure_logging

configure_logging()
shown = open_stage_console(Path(sys.argv[1]), "demo.stage")
shown.started()
logging.getLogger("chatty").warning("a library warning")
print("a print", flush=True)
sys.stderr.write("C-level noise\\n")
if sys.argv[2] == "fail":
    report("demo.stage: data/x.parquet: not a readable Parquet file")
else:
    shown.finished(1.25, "f1=0.9")
"""


@pytest.mark.parametrize("outcome", ["ok", "fail"])
def test_the_terminal_gets_the_console_lines_and_the_log_gets_the_rest(tmp_path, outcome):
    done = subprocess.run(
        [sys.executable, "-c", STAGE_LIKE, str(tmp_path), outcome],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    log = tmp_path / ".paperline" / "logs" / "demo-stage.log"
    text = log.read_text()
    assert "a library warning" in text and "a print" in text and "C-level noise" in text
    started, *ended = done.stdout.splitlines()
    assert started.endswith(" demo-stage ...")
    if outcome == "ok":
        assert ended[0].endswith(" demo-stage done in 1.2 s, f1=0.9") and done.stderr == ""
        return
    error, where, *tail = done.stderr.splitlines()
    assert error == "demo.stage: data/x.parquet: not a readable Parquet file"
    assert where == f"log: {log} (last 3 lines)"
    assert tail[-1] == "  | C-level noise" and len(tail) == 3
    assert text.rstrip().endswith(error)  # the log ends with the error too
