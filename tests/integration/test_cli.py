"""The `paperline` command as a user runs it: help, exit codes, one-line errors."""

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["stage"],
        ["flow"],
        ["status"],
        ["params", "check"],
        ["services", "up"],
        ["services", "down"],
        ["services", "status"],
    ],
)
def test_every_command_has_help(command, repo_copy):
    result = run_cli(*command, "--help", cwd=repo_copy)
    assert result.returncode == 0
    assert "Usage: paperline" in result.stdout


@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        (
            "min_chars: 1",
            "min_chars: ten",
            'params.yaml: corpus.ingest.min_chars: expected an integer ≥ 0, got "ten"',
        ),
        (
            "  ingest:",
            "  ingets:",
            "params.yaml: corpus.ingets: unknown key; did you mean 'ingest'?",
        ),
    ],
)
@pytest.mark.parametrize("command", [["params", "check"], ["stage", "corpus.ingest"]])
def test_bad_params_give_one_line_and_exit_2(repo_copy, before, after, message, command):
    params = repo_copy / "params.yaml"
    params.write_text(params.read_text().replace(before, after, 1))
    result = run_cli(*command, cwd=repo_copy)
    assert result.returncode == 2
    assert result.stderr == message + "\n"
    assert not (repo_copy / "data" / "interim" / "corpus" / "docs.parquet").exists()


def test_params_check_ok(repo_copy):
    result = run_cli("params", "check", cwd=repo_copy)
    assert result.returncode == 0 and result.stdout.startswith("params.yaml: OK")


def test_unknown_stage_and_flow(repo_copy):
    stage = run_cli("stage", "corpus.nope", cwd=repo_copy)
    assert (stage.returncode, stage.stderr) == (
        2,
        "stage 'corpus.nope': no such stage; see `dvc stage list`\n",
    )
    flow = run_cli("flow", "nope", cwd=repo_copy)
    assert (flow.returncode, flow.stderr) == (
        2,
        "flow 'nope': no such flow; the flows are pipeline, kg, aoeb, corpus, mlm, cmipref,"
        " deltastack, llm, kvcache, scam, tabular, report"
        " (`pipeline`, then one per area with stages in dvc.yaml)\n",
    )


def test_status_lists_stale_stage(repo_copy):
    result = run_cli("status", cwd=repo_copy)
    assert result.returncode == 0
    assert "corpus.ingest: stale" in result.stdout
