"""`paperline report …`: build the reproduction report, or show its verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="The reproduction report: every paper's claims with intervals and verdicts.")


@app.command("build")
def report_build() -> None:
    """Write reports/REPORT.md, reports/index.html and reports/figures/ from the areas'
    claims.json files as they are now (`paperline repro report-build` also brings stale
    claims up to date first)."""
    from tasks.core.paths import repo_root
    from tasks.core.stage_runner import run_stage

    for role, path in run_stage("report.build", repo_root()).items():
        typer.echo(f"{role}: {path}")


@app.command("show")
def report_show() -> None:
    """Print every entry's kind, estimate, interval and verdict from the areas' claims.json
    (before the report's Holm adjustment: `reports/REPORT.md` has the settled verdicts)."""
    from rich.console import Console
    from rich.table import Table

    from tasks.core.evidence import read_claims
    from tasks.core.paths import repo_root
    from tasks.report.build import CLAIMS
    from tasks.report.render import number

    table = Table("claim", "kind", "metric", "estimate [95% CI]", "n", "verdict")
    colour = {"supported": "green", "contradicted": "red", "inconclusive": "yellow"}
    for path in CLAIMS.values():
        for claim in read_claims(repo_root() / path):
            table.add_row(
                claim.id,
                "primary" if claim.primary else claim.kind,
                claim.metric,
                f"{number(claim.estimate)} [{number(claim.ci_low)}, {number(claim.ci_high)}]",
                f"{claim.n} {claim.unit}",
                f"[{colour[claim.verdict]}]{claim.verdict}[/]",
            )
    Console().print(table)


@app.command("compare")
def report_compare(
    other: Annotated[Path, typer.Argument(help="another run's verdicts.json")],
    ours: Annotated[
        Path | None, typer.Option(help="this run's verdicts.json [default: reports/verdicts.json]")
    ] = None,
) -> None:
    """Each paper's primary verdict in this run and in OTHER (another machine's or another
    seed set's): `unstable` where they differ. Exits 1 when any is unstable."""
    from tasks.core.paths import repo_root
    from tasks.report.stability import compare

    rows = compare(ours or repo_root() / "reports" / "verdicts.json", other)
    width = max(len(row.claim) for row in rows) if rows else 0
    for row in rows:
        typer.echo(
            f"{row.claim:<{width}}  {row.ours or '—':<12}  {row.theirs or '—':<12}  {row.status}"
        )
    unstable = sum(row.status == "unstable" for row in rows)
    typer.echo(f"{len(rows)} primary claims, {unstable} unstable")
    raise typer.Exit(1 if unstable else 0)
