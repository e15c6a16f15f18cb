"""tabular.prepare: California Housing → a fixed train / dev / test split, model-ready.

Reads `data/seed/tabular/california_housing.csv` through the typed schema (schema.py),
splits it by a seeded permutation (`tabular.split`), fits the preprocessing on the
training rows only (median imputation of the 207 missing total_bedrooms values plus a
missing indicator, a quantile transform of the numerical features, one-hot
ocean_proximity with the categories seen in train; features.py) and applies it to every
split. The target is standardized with the training mean and deviation. Outputs the
folder `data/processed/tabular/california/` (`train|dev|test.parquet`, the fitted
`preprocessor.pkl` that serving reuses, `manifest.json` with the split sizes, the missing
values per split, the fitted medians and categories and the target scale).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.stage import Stage, StageContext
from tasks.tabular.features import (
    MANIFEST,
    PREPROCESSOR,
    SPLITS,
    build_preprocessor,
    feature_names,
    fitted_categories,
    raw_target,
    split_indices,
    split_table,
    target_scale,
    transform,
)
from tasks.tabular.params import TabularParams
from tasks.tabular.schema import CATEGORICAL, NUMERIC, TARGET, read_housing_csv

log = get_logger("paperline.tabular.prepare")
SEED_CSV = "data/seed/tabular/california_housing.csv"


def prepare(frame: Any, params: TabularParams) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """Split, fit on train, transform: (split tables, fitted preprocessor, manifest)."""
    split = params.split
    indices = split_indices(len(frame), split.dev, split.test, split.seed)
    parts = {name: frame.iloc[indices[name]].reset_index(drop=True) for name in SPLITS}
    preprocessor = build_preprocessor(len(parts["train"]), split.seed)
    preprocessor.fit(parts["train"][list(NUMERIC) + list(CATEGORICAL)])
    names = feature_names(preprocessor)
    mean, std = target_scale(raw_target(parts["train"]))
    tables = {}
    for name in SPLITS:
        x = transform(preprocessor, parts[name])
        value = raw_target(parts[name])
        tables[name] = split_table(
            x, names, (value - mean) / std, indices[name], {"target": value.astype(np.float64)}
        )
    imputer = preprocessor.named_transformers_["num"].named_steps["impute"]
    manifest = {
        "dataset": "california",
        "source": SEED_CSV,
        "rows": len(frame),
        "split": {"seed": split.seed, **{name: len(parts[name]) for name in SPLITS}},
        "features": names,
        "n_numerical": len(NUMERIC),
        "target": TARGET,
        "target_mean": mean,
        "target_std": std,
        "missing_total_bedrooms": {
            name: int(parts[name]["total_bedrooms"].isna().sum()) for name in SPLITS
        },
        "imputer_medians_fitted_on_train": {
            column: float(value) for column, value in zip(NUMERIC, imputer.statistics_, strict=True)
        },
        "categories_fitted_on_train": fitted_categories(preprocessor),
        "category_counts": {
            name: {str(k): int(v) for k, v in parts[name]["ocean_proximity"].value_counts().items()}
            for name in SPLITS
        },
    }
    return tables, preprocessor, manifest


def run(params: TabularParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
    frame = read_housing_csv(inputs["csv"], require_target=True)
    tables, preprocessor, manifest = prepare(frame, params)
    log.info(
        "tabular.prepare: %d rows → %s; %d missing total_bedrooms imputed with the train median",
        manifest["rows"],
        " / ".join(f"{manifest['split'][n]} {n}" for n in SPLITS),
        sum(manifest["missing_total_bedrooms"].values()),
    )
    folder = Folder({f"{name}.parquet": tables[name] for name in SPLITS})
    folder[PREPROCESSOR] = pickle.dumps(preprocessor)
    folder[MANIFEST] = manifest
    return {"data": folder}


STAGE = Stage(
    name="tabular.prepare",
    run=run,
    params_key="tabular",
    params=("tabular.split",),
    inputs={"csv": SEED_CSV},
    outputs={"data": "data/processed/tabular/california"},
)
