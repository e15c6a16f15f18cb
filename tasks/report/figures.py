"""One forest plot per area: each claim's estimate with its 95% interval against the value
of no effect, coloured by verdict."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence

from tasks.core.evidence import Claim

COLOURS = {"supported": "#1a7f37", "contradicted": "#cf222e", "inconclusive": "#9a6700"}


def forest_plot(title: str, claims: Sequence[Claim]) -> bytes:
    """A PNG: one row per claim (its id and metric), a dot at the estimate, a bar over the
    interval, a dashed tick at that claim's null."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axis = plt.subplots(figsize=(10, 1.2 + 0.9 * len(claims)), dpi=110)
    for row, claim in enumerate(reversed(claims)):
        colour = COLOURS[claim.verdict]
        axis.plot([claim.ci_low, claim.ci_high], [row, row], color=colour, linewidth=3)
        axis.plot(claim.estimate, row, "o", color=colour, markersize=8)
        axis.plot([claim.null, claim.null], [row - 0.35, row + 0.35], "k--", linewidth=1)
    labels = [f"{c.id}\n{textwrap.fill(c.metric, 48)}" for c in reversed(claims)]
    axis.set_yticks(range(len(claims)), labels, fontsize=8)
    axis.set_ylim(-0.7, len(claims) - 0.3)
    axis.set_title(title, fontsize=10)
    axis.set_xlabel("estimate with 95% interval (dashed: the claim's null)", fontsize=8)
    axis.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()
