"""The typed schema of California Housing and the one reader every door uses.

`read_housing_csv` parses a CSV as text and checks it against the schema before anything
uses it: a missing column, a value that is not a number in a numeric column, a missing
target where the target is needed, or (given the fitted categories) a category the model
has not seen, is one InputError naming the column and the row (1 = the first data row,
line 2 of the file). Missing feature values are kept as NaN: imputation belongs to the
preprocessing that was fitted on the training split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tasks.core.errors import InputError

NUMERIC = (
    "longitude",
    "latitude",
    "housing_median_age",
    "total_rooms",
    "total_bedrooms",
    "population",
    "households",
    "median_income",
)
CATEGORICAL = ("ocean_proximity",)
TARGET = "median_house_value"
FEATURES = NUMERIC + CATEGORICAL
# the categories the seed documents (its README); the encoder keeps those seen in train
CATEGORIES = ("<1H OCEAN", "INLAND", "ISLAND", "NEAR BAY", "NEAR OCEAN")


def _number(text: str) -> float | None:
    """A float, NaN for an empty cell, None when the text is not a number."""
    stripped = text.strip()
    if not stripped or stripped.lower() in {"nan", "na"}:
        return math.nan
    try:
        value = float(stripped)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def typed_frame(
    raw: pd.DataFrame,
    source: str,
    *,
    require_target: bool,
    categories: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The schema's columns, typed: numeric as float64 (NaN where empty), the categorical as
    str, the target (when present) as float64. `raw` holds text cells."""
    needed = list(FEATURES) + ([TARGET] if require_target else [])
    if missing := [c for c in needed if c not in raw.columns]:
        what = "target column" if missing == [TARGET] else "column"
        raise InputError(
            f"{source}: {what} '{missing[0]}' is missing (header: {', '.join(raw.columns)}); "
            f"expected {', '.join(needed)}"
        )
    typed: dict[str, list] = {}
    numeric = list(NUMERIC) + ([TARGET] if TARGET in raw.columns else [])
    for column in numeric:
        values = []
        for row, text in enumerate(raw[column].tolist(), start=1):
            value = _number(str(text))
            if value is None:
                raise InputError(
                    f"{source}: column '{column}', row {row}: {str(text)!r} is not a number"
                )
            if column == TARGET and require_target and math.isnan(value):
                raise InputError(f"{source}: column '{column}', row {row}: the target is empty")
            values.append(value)
        typed[column] = values
    known = list(categories) if categories is not None else None
    for column in CATEGORICAL:
        values = [str(text).strip() for text in raw[column].tolist()]
        for row, value in enumerate(values, start=1):
            if not value:
                raise InputError(f"{source}: column '{column}', row {row}: the category is empty")
            if known is not None and value not in known:
                raise InputError(
                    f"{source}: column '{column}', row {row}: unknown category {value!r} "
                    f"(the model knows {', '.join(known)})"
                )
        typed[column] = values
    frame = pd.DataFrame(typed)
    return frame[[c for c in (*FEATURES, TARGET) if c in frame.columns]]


def read_housing_csv(
    path: Path,
    *,
    require_target: bool,
    categories: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Read `path` (all cells as text) and type it with `typed_frame`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such CSV file")
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"{path}: not a readable CSV ({first})") from None
    if raw.empty:
        raise InputError(f"{path}: no data rows")
    return typed_frame(raw, str(path), require_target=require_target, categories=categories)
