"""`toy.make`: a noisy line y = slope · x + ε, split into train and test rows."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
from tasks.toy.params import ToyParams

from tasks.core.stage import Output, Stage, StageContext


def run(params: ToyParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
    rng = np.random.default_rng(params.seed)
    x = rng.uniform(-2, 2, params.rows)
    y = params.slope * x + rng.normal(0, params.noise, params.rows)
    split = np.where(np.arange(params.rows) % 2 == 0, "train", "test")
    table = pa.table({"x": x, "y": y, "split": split})
    return {"rows": table, "summary": {"rows": params.rows, "train": int((split == "train").sum())}}


STAGE = Stage(
    name="toy.make",
    run=run,
    params_key="toy",
    inputs={},
    outputs={
        "rows": "data/processed/toy/rows.parquet",
        "summary": Output.metrics("data/processed/toy/summary.json"),
    },
    headline="data/processed/toy/summary.json:rows",
)
