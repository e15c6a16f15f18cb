"""REPORT.md and index.html from the claims (jinja2 templates beside this module); the
HTML page embeds its figures, so it opens from disk without a server."""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import jinja2

from tasks.core.evidence import Claim


@dataclass(frozen=True)
class Section:
    """One paper: its card (the primary claim and the forest plot), then every entry."""

    area: str
    paper: str
    claims: Sequence[Claim]  # settled (evidence.settle_paper): claims and checks, in order
    figure: str  # the forest plot's PNG, base64 (the HTML embeds it)
    extra: str | None = None  # the area's own figure (PNG, base64), if it has one

    @property
    def primary(self) -> Claim:
        return next(claim for claim in self.claims if claim.primary)

    @property
    def secondary(self) -> list[Claim]:
        return [c for c in self.claims if c.kind == "claim" and not c.primary]

    @property
    def checks(self) -> list[Claim]:
        return [c for c in self.claims if c.kind == "check"]


def number(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1e-3 and value else f"{value:.3f}".rstrip("0").rstrip(".")


def _environment(autoescape: bool) -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("tasks.report", "templates"),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    environment.filters["num"] = number
    return environment


def sections(
    claims: Mapping[str, Sequence[Claim]],
    figures: Mapping[str, bytes],
    extras: Mapping[str, bytes] | None = None,
) -> list[Section]:
    def encoded(png: bytes | None) -> str | None:
        return base64.b64encode(png).decode() if png is not None else None

    return [
        Section(
            area,
            found[0].paper,
            found,
            base64.b64encode(figures[area]).decode(),
            encoded((extras or {}).get(area)),
        )
        for area, found in claims.items()
    ]


def verdict_counts(entries: Sequence[Claim]) -> Counter:
    counts = Counter({"supported": 0, "contradicted": 0, "inconclusive": 0})
    counts.update(entry.verdict for entry in entries)
    return counts


def render(title: str, profile: str, parts: Sequence[Section]) -> tuple[str, str]:
    """(REPORT.md, index.html): the paper cards, every claim, the checks, the details."""
    claims = [c for part in parts for c in part.claims if c.kind == "claim"]
    checks = [c for part in parts for c in part.checks]
    values = dict(
        title=title,
        profile=profile,
        claims=claims,
        checks=checks,
        counts=verdict_counts(claims),
        check_counts=verdict_counts(checks),
        sections=parts,
    )
    markdown = _environment(False).get_template("REPORT.md.j2").render(values)
    page = _environment(True).get_template("index.html.j2").render(values)
    return markdown, page
