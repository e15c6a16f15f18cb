"""`report.build`: every area's claims.json into reports/REPORT.md, reports/index.html, a
forest plot per area (reports/figures/, also `dvc plots`; an area's own figure beside it
where FIGURES names one) and the verdicts (reports/verdicts.json: the counts of claims and
of checks, and each paper's primary claim → its verdict, the stability record).

Each paper is settled first (evidence.settle_paper): exactly one primary claim, and its
secondary claims Holm-adjusted together."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from tasks.core.evidence import Claim, read_claims, settle_paper
from tasks.core.io import Folder
from tasks.core.stage import Output, Stage, StageContext
from tasks.core.stage_index import declared_literals
from tasks.report.figures import forest_plot
from tasks.report.params import ReportParams
from tasks.report.render import render, sections

# stage → the claims file it declares (`Output.claims_json`), one report section per area in
# area order; stage → a figure of its own its area's section shows below the forest plot
# (`Stage.report_figure`). Both are read from the declarations' source, so an area adds
# itself to the report by declaring them, and this module imports no area.
CLAIMS = declared_literals("claims_json")
FIGURES = declared_literals("report_figure")


FIGURE = ":figure"


def figure_role(stage: str) -> str:
    return stage + FIGURE


def run(params: ReportParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
    claims: dict[str, list[Claim]] = {}
    for stage, path in inputs.items():  # a claims file per stage, or a figure (figure_role)
        if not stage.endswith(FIGURE):
            claims.setdefault(stage.split(".")[0], []).extend(read_claims(path))
    claims = {
        area: settle_paper(f"{found[0].paper} ({area})", found)
        for area, found in claims.items()
        if found
    }
    figures = {
        area: forest_plot(f"{found[0].paper} ({area})", found) for area, found in claims.items()
    }
    extras = {
        stage.split(".")[0]: inputs[figure_role(stage)].read_bytes()
        for stage in FIGURES
        if stage.split(".")[0] in claims
    }
    markdown, page = render(params.title, params.profile, sections(claims, figures, extras))
    every = [claim for found in claims.values() for claim in found]
    return {
        "markdown": markdown,
        "html": page,
        "figures": Folder(
            {f"{area}.png": png for area, png in figures.items()}
            | {f"{area}-results.png": png for area, png in extras.items()}
        ),
        "verdicts": {
            **counted([c for c in every if c.kind == "claim"], "claims"),
            "checks": counted([c for c in every if c.kind == "check"], "checks"),
            "primary": {c.id: c.verdict for c in every if c.primary},
        },
    }


def counted(entries: list[Claim], name: str) -> dict[str, int]:
    counts = Counter(entry.verdict for entry in entries)
    return {
        name: len(entries),
        **{v: counts[v] for v in ("supported", "contradicted", "inconclusive")},
    }


STAGE = Stage(
    name="report.build",
    run=run,
    params_key="report",
    inputs={**CLAIMS, **{figure_role(stage): path for stage, path in FIGURES.items()}},
    outputs={
        "markdown": Output.in_git("reports/REPORT.md"),
        "html": Output.in_git("reports/index.html"),
        "figures": Output.in_git("reports/figures"),
        "verdicts": Output.metrics("reports/verdicts.json"),
    },
    headline="reports/verdicts.json:supported",
    top_plots={
        "reports/figures": {
            "title": "Reproduction report: each claim's estimate with its 95% interval"
        }
    },
)
