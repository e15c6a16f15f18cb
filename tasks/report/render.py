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
    area: str
    paper: str
    claims: Sequence[Claim]
    figure: str  # the forest plot's PNG, base64 (the HTML embeds it)
    extra: str | None = None  # the area's own figure (PNG, base64), if it has one


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


def render(title: str, profile: str, parts: Sequence[Section]) -> tuple[str, str]:
    """(REPORT.md, index.html)."""
    every = [claim for part in parts for claim in part.claims]
    counts = Counter({"supported": 0, "contradicted": 0, "inconclusive": 0})
    counts.update(claim.verdict for claim in every)
    values = dict(title=title, profile=profile, claims=every, counts=counts, sections=parts)
    markdown = _environment(False).get_template("REPORT.md.j2").render(values)
    page = _environment(True).get_template("index.html.j2").render(values)
    return markdown, page
