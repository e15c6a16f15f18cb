"""The reproduction report: one page that opens without a server, every figure it names
loads, a broken claims file stops it with one line, and it reads every area's claims."""

import base64
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from tasks.core import evidence
from tasks.core.errors import InputError
from tasks.core.stage import StageContext
from tasks.core.stage_index import find_stage, stage_names
from tasks.report import build
from tasks.report.params import ReportParams
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]


def claims_file(
    folder: Path, area: str, verdicts: list[str], name: str = "", checks: int = 0
) -> Path:
    """The first entry is the paper's primary claim, the last `checks` are checks."""
    claims = []
    for index, expect in enumerate(verdicts):
        low, high = {"supported": (0.1, 0.3), "contradicted": (-0.3, -0.1)}.get(expect, (-0.1, 0.3))
        estimate = evidence.Estimate((low + high) / 2, low, high, 30, "queries", "BCa bootstrap")
        claims.append(
            evidence.Claim.of(
                estimate,
                "greater",
                id=f"{area}.claim_{index}",
                paper=f"Paper of {area}",
                claim="Method A beats method B <b>clearly</b>.",
                paper_value="+5 points",
                metric="nDCG@10 difference",
                arms=["A", "B"],
                simplifications=["a tiny model"],
                reproduce=f"dvc repro {area}-evaluate",
                kind="check" if index >= len(verdicts) - checks else "claim",
                primary=index == 0 and not name,
                p_value={"inconclusive": 0.3}.get(expect, 0.01),
            )
        )
    path = folder / f"{name or area}.json"
    evidence.write_claims(path, claims)
    return path


class Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.sources.append(dict(attrs)["src"])


def test_the_report_is_one_page_whose_figures_load(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "CLAIMS", {"one.evaluate": "a", "two.a": "b", "two.b": "c"})
    inputs = {
        "one.evaluate": claims_file(
            tmp_path, "one", ["supported", "inconclusive", "supported"], checks=1
        ),
        "two.a": claims_file(tmp_path, "two", ["contradicted"]),
        "two.b": claims_file(tmp_path, "two", [], name="empty"),  # one area, two stages
    }
    outputs = build.run(ReportParams(), inputs, StageContext.at(tmp_path))

    assert outputs["verdicts"] == {
        "claims": 3,
        "supported": 1,
        "contradicted": 1,
        "inconclusive": 1,
        "checks": {"checks": 1, "supported": 1, "contradicted": 0, "inconclusive": 0},
        "primary": {"one.claim_0": "supported", "two.claim_0": "contradicted"},
    }
    markdown = outputs["markdown"]
    assert "### Paper of one (`one`): **supported**" in markdown  # the paper's card
    assert (
        "| Paper of one | `one.claim_0` (primary) nDCG@10 difference | 0.2 [0.1, 0.3] |" in markdown
    )
    checks = markdown.split("## Checks", 1)[1].split("## Details", 1)[0]
    assert "`one.claim_2`" in checks and "`one.claim_1`" not in checks
    assert "p = 0.3 (Holm 0.3)" in markdown  # the one secondary claim: its own family
    assert "![Paper of two: estimates with 95% intervals](figures/two.png)" in markdown
    assert set(outputs["figures"]) == {"one.png", "two.png"}

    page = outputs["html"]
    assert "&lt;b&gt;clearly&lt;/b&gt;" in page  # claim texts are escaped
    parser = Images()
    parser.feed(page)
    assert len(parser.sources) == 2
    assert page.index('id="card-one"') < page.index("<h2>Every claim</h2>")
    for source in parser.sources:  # embedded: the page needs no server and no other file
        assert source.startswith("data:image/png;base64,")
        image = Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1])))
        image.load()
        assert image.width > 100 and image.height > 50


def test_a_claims_file_missing_a_field_stops_the_report_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "CLAIMS", {"one.evaluate": "a"})
    path = claims_file(tmp_path, "one", ["supported"])
    rows = json.loads(path.read_text())
    del rows["claims"][0]["unit"]
    path.write_text(json.dumps(rows))
    with pytest.raises(InputError, match=r"one.json: claim one.claim_0: unit: Field required"):
        build.run(ReportParams(), {"one.evaluate": path}, StageContext.at(tmp_path))


def test_the_report_reads_every_claims_file_the_pipeline_writes():
    """The report finds the claims files in the declarations' source; they are exactly the
    `Output.claims_json` outputs of the imported STAGEs."""
    written = {}
    for name in stage_names(REPO):
        declared = find_stage(name)
        for out in declared.tracked.values():
            if out.claims:
                assert declared.name not in written, f"{declared.name}: two claims files"
                written[declared.name] = out.path
        if declared.report_figure:
            assert build.FIGURES[declared.name] == declared.report_figure
    assert written == build.CLAIMS
    figures = {build.figure_role(stage): path for stage, path in build.FIGURES.items()}
    assert build.STAGE.inputs == {**written, **figures}
    assert set(build.FIGURES) <= set(build.CLAIMS)


def test_an_area_figure_appears_below_its_forest_plot(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "CLAIMS", {"one.evaluate": "a"})
    monkeypatch.setattr(build, "FIGURES", {"one.evaluate": "p"})
    figure = tmp_path / "own.png"
    figure.write_bytes(build.forest_plot("x", []))
    inputs = {
        "one.evaluate": claims_file(tmp_path, "one", ["supported"]),
        build.figure_role("one.evaluate"): figure,
    }
    outputs = build.run(ReportParams(), inputs, StageContext.at(tmp_path))
    assert set(outputs["figures"]) == {"one.png", "one-results.png"}
    assert "(figures/one-results.png)" in outputs["markdown"]
    parser = Images()
    parser.feed(outputs["html"])
    assert len(parser.sources) == 2


def test_compare_calls_a_primary_verdict_that_differs_between_runs_unstable(tmp_path):
    def verdicts(name, primary):
        path = tmp_path / name
        path.write_text(json.dumps({"claims": 3, "primary": primary}))
        return path

    ours = verdicts("ours.json", {"a.x": "supported", "b.y": "inconclusive", "c.z": "supported"})
    theirs = verdicts(
        "theirs.json", {"a.x": "supported", "b.y": "contradicted", "d.w": "supported"}
    )
    found = run_cli("report", "compare", str(theirs), "--ours", str(ours), cwd=tmp_path)
    assert found.returncode == 1, found.stderr
    lines = {line.split()[0]: line.split() for line in found.stdout.splitlines()[:-1]}
    assert lines["a.x"][1:] == ["supported", "supported", "stable"]
    assert lines["b.y"][1:] == ["inconclusive", "contradicted", "unstable"]
    assert lines["c.z"][-1] == "missing" and lines["d.w"][-1] == "missing"
    assert found.stdout.splitlines()[-1] == "4 primary claims, 1 unstable"
    same = run_cli("report", "compare", str(ours), "--ours", str(ours), cwd=tmp_path)
    assert same.returncode == 0 and same.stdout.splitlines()[-1].endswith(", 0 unstable")
    (tmp_path / "old.json").write_text(json.dumps({"claims": 3}))
    failed = run_cli(
        "report", "compare", str(tmp_path / "old.json"), "--ours", str(ours), cwd=tmp_path
    )
    assert failed.returncode == 2 and 'no "primary" map' in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
