"""Two runs' verdicts side by side: a primary verdict that differs between two honest runs
(another machine, another seed set) is unstable, reported as neither of its verdicts.

Reads two `reports/verdicts.json` files (report.build writes `"primary": {claim id:
verdict}`); a claim present in only one run is listed as missing from the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import InputError
from tasks.core.io import read_json


@dataclass(frozen=True)
class Row:
    claim: str
    ours: str | None  # None: the claim is not in that run
    theirs: str | None

    @property
    def status(self) -> str:
        if self.ours is None or self.theirs is None:
            return "missing"
        return "stable" if self.ours == self.theirs else "unstable"


def primary_verdicts(path: Path) -> dict[str, str]:
    found = read_json(path)  # a missing file or bad JSON: an InputError naming it
    try:
        return dict(found["primary"])
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(
            f'{path}: no "primary" map of claim id → verdict; rebuild it with '
            "`paperline repro report-build`"
        ) from error


def compare(ours: Path, theirs: Path) -> list[Row]:
    a, b = primary_verdicts(ours), primary_verdicts(theirs)
    return [Row(claim, a.get(claim), b.get(claim)) for claim in sorted(a.keys() | b.keys())]
