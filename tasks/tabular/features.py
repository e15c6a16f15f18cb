"""The model-ready layout both data sets share, and California's preprocessing.

A prepared data set is a folder: `train.parquet`, `dev.parquet`, `test.parquet` and
`manifest.json`. Each split has the feature columns (float32; the first `n_numerical` are
the continuous features the numerical embeddings act on, the rest are indicators and
one-hot columns passed through), `y` (the standardized target: the models' scale, MSE is
reported on it) and `row_id` (the source row). The manifest names the features and how y
was standardized.

California's preprocessing is scikit-learn's, fitted on the training split only: median
imputation (plus a missing-value indicator for total_bedrooms), a quantile transform to a
normal distribution for the numerical features (the usual input of tabular DL models) and
one-hot encoding of ocean_proximity with the categories seen in train.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tasks.core.io import read_json, read_parquet
from tasks.tabular.schema import CATEGORICAL, NUMERIC, TARGET

SPLITS = ("train", "dev", "test")
MANIFEST = "manifest.json"
PREPROCESSOR = "preprocessor.pkl"


def split_indices(rows: int, dev: float, test: float, seed: int) -> dict[str, np.ndarray]:
    """A fixed split: a seeded permutation cut into train / dev / test (sorted indices)."""
    order = np.random.default_rng(seed).permutation(rows)
    n_test, n_dev = round(rows * test), round(rows * dev)
    parts = {
        "test": order[:n_test],
        "dev": order[n_test : n_test + n_dev],
        "train": order[n_test + n_dev :],
    }
    return {name: np.sort(parts[name]) for name in SPLITS}


def build_preprocessor(rows: int, seed: int) -> Any:
    """The unfitted ColumnTransformer (numerical first, then indicator and one-hot)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import MissingIndicator, SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, QuantileTransformer

    numerical = Pipeline(
        [
            ("impute", SimpleImputer(strategy="median")),
            (
                "quantile",
                QuantileTransformer(
                    output_distribution="normal",
                    n_quantiles=max(10, min(1000, rows // 30)),
                    subsample=1_000_000,
                    random_state=seed,
                ),
            ),
        ]
    )
    return ColumnTransformer(
        [
            ("num", numerical, list(NUMERIC)),
            ("missing", MissingIndicator(features="all"), ["total_bedrooms"]),
            ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), list(CATEGORICAL)),
        ],
        verbose_feature_names_out=False,
    )


def fitted_categories(preprocessor: Any) -> list[str]:
    """The ocean_proximity categories the fitted encoder knows (those seen in train)."""
    encoder = preprocessor.named_transformers_["cat"]
    return [str(c) for c in encoder.categories_[0]]


def feature_names(preprocessor: Any) -> list[str]:
    return [str(name) for name in preprocessor.get_feature_names_out()]


def transform(preprocessor: Any, frame: pd.DataFrame) -> np.ndarray:
    columns = list(NUMERIC) + list(CATEGORICAL)
    return np.asarray(preprocessor.transform(frame[columns]), dtype=np.float32)


def split_table(
    x: np.ndarray, names: list[str], y: np.ndarray, row_ids: np.ndarray, extra: dict[str, Any]
) -> pa.Table:
    columns: dict[str, Any] = {name: x[:, i].astype(np.float32) for i, name in enumerate(names)}
    columns["y"] = y.astype(np.float64)
    columns["row_id"] = row_ids.astype(np.int64)
    return pa.table({**columns, **extra})


@dataclass(frozen=True)
class Split:
    x: np.ndarray  # float32 (rows, features)
    y: np.ndarray  # float64 standardized target
    row_id: np.ndarray
    table: pa.Table


@dataclass(frozen=True)
class Prepared:
    """A prepared data set as the later stages read it."""

    name: str
    features: list[str]
    n_numerical: int
    splits: dict[str, Split]
    manifest: dict[str, Any]

    @classmethod
    def read(cls, folder: Path) -> Prepared:
        manifest = read_json(folder / MANIFEST)
        features = manifest["features"]
        splits = {}
        for name in SPLITS:
            table = read_parquet(folder / f"{name}.parquet")
            x = np.column_stack([table[c].to_numpy() for c in features]).astype(np.float32)
            splits[name] = Split(
                x, table["y"].to_numpy().astype(np.float64), table["row_id"].to_numpy(), table
            )
        return cls(manifest["dataset"], features, manifest["n_numerical"], splits, manifest)


def target_scale(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation of the training target (y = (value − mean) / std)."""
    return float(np.mean(values)), float(np.std(values))


def raw_target(frame: pd.DataFrame) -> np.ndarray:
    return frame[TARGET].to_numpy(dtype=np.float64)
