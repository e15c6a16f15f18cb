"""`toy.evaluate`: the line fitted on train rows against the strongest simple baseline (the
train mean), paired over test rows; one primary claim."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from tasks.toy.params import ToyParams

from tasks.core import evidence
from tasks.core.io import read_parquet
from tasks.core.stage import Output, Stage, StageContext


def run(params: ToyParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
    rows = read_parquet(inputs["rows"]).to_pandas()
    train, test = rows[rows.split == "train"], rows[rows.split == "test"]
    slope, intercept = np.polyfit(train.x, train.y, 1)
    line_error = (test.y - (slope * test.x + intercept)) ** 2
    mean_error = (test.y - train.y.mean()) ** 2
    comparison = evidence.paired(mean_error, line_error, unit="test rows")
    claim = evidence.Claim.of(
        comparison.difference,
        "greater",
        p_value=comparison.p_value,
        id="toy.line_beats_mean",
        kind="claim",
        primary=True,
        paper="Toy",
        claim="A least-squares line predicts a noisy line better than the train mean.",
        paper_value="lower squared error",
        metric="squared error of the mean minus that of the line",
        arms=["line", "train mean"],
        simplifications=["one synthetic data set"],
        reproduce="dvc repro toy-evaluate",
    )
    results = {"slope": float(slope), "line_mse": float(line_error.mean())}
    return {"results": results, "claims": evidence.claims_value([claim])}


STAGE = Stage(
    name="toy.evaluate",
    run=run,
    params_key="toy",
    inputs={"rows": "data/processed/toy/rows.parquet"},
    outputs={
        "results": Output.metrics("models/toy/results.json"),
        "claims": Output.claims_json("models/toy/claims.json"),
    },
    headline="models/toy/results.json:line_mse",
)
