"""The registered model: an MLflow pyfunc that takes California Housing rows (the schema's
typed columns) and returns the prediction and its estimated data uncertainty, both in the
target's units (dollars).

A bundle folder holds everything the rows pass through: the preprocessing fitted on the
training split (`preprocessor.pkl`), the zoo model's spec and weights, the target scale
and the CatBoost RMSEWithUncertainty model whose predicted standard deviation is the
uncertainty. `predict` validates nothing itself: the CLI checks the CSV against the schema
and the bundle's categories first (schema.py), so bad rows get one line, not a traceback.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
import pandas as pd

SPEC_FILE, WEIGHTS_FILE = "spec.json", "weights.pt"
PREPROCESSOR_FILE, UNCERTAINTY_FILE = "preprocessor.pkl", "uncertainty.cbm"


def write_bundle(
    folder: Path,
    *,
    spec: dict[str, Any],
    weights: Path,
    preprocessor: Path,
    uncertainty: Path,
    manifest: dict[str, Any],
) -> Path:
    """The served model's files under `folder` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(weights, folder / WEIGHTS_FILE)
    shutil.copyfile(preprocessor, folder / PREPROCESSOR_FILE)
    shutil.copyfile(uncertainty, folder / UNCERTAINTY_FILE)
    served = {
        "spec": spec,
        "features": manifest["features"],
        "target": manifest["target"],
        "target_mean": manifest["target_mean"],
        "target_std": manifest["target_std"],
        "categories": manifest["categories_fitted_on_train"],
    }
    (folder / SPEC_FILE).write_text(json.dumps(served, indent=2), encoding="utf-8")
    return folder


class TabularModel(mlflow.pyfunc.PythonModel):
    """Rows → `prediction` and `uncertainty` (the estimated standard deviation of the
    noise around it), in the target's units."""

    def load_context(self, context: Any) -> None:
        self.load(Path(context.artifacts["bundle"]))

    def load(self, folder: Path) -> None:
        import torch
        from catboost import CatBoostRegressor

        from tasks.tabular.models import build_model

        self.served = json.loads((folder / SPEC_FILE).read_text(encoding="utf-8"))
        self.categories = list(self.served["categories"])
        self.model = build_model(self.served["spec"])
        self.model.load_state_dict(torch.load(folder / WEIGHTS_FILE, weights_only=True))
        self.model.eval()
        self.preprocessor = pickle.loads((folder / PREPROCESSOR_FILE).read_bytes())
        self.uncertainty = CatBoostRegressor()
        self.uncertainty.load_model(str(folder / UNCERTAINTY_FILE))

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        from tasks.tabular.features import transform
        from tasks.tabular.models import predict
        from tasks.tabular.uncertainty import mean_and_sigma

        x = transform(self.preprocessor, model_input)
        mean, std = self.served["target_mean"], self.served["target_std"]
        _, sigma = mean_and_sigma(self.uncertainty, x)
        return pd.DataFrame(
            {
                "prediction": predict(self.model, x) * std + mean,
                "uncertainty": np.asarray(sigma) * std,
            }
        )


def example_rows() -> pd.DataFrame:
    """Two California Housing rows (the data set's first and last) as a consumer sends them."""
    from tasks.tabular.schema import FEATURES

    rows = [
        (-122.23, 37.88, 41.0, 880.0, 129.0, 322.0, 126.0, 8.3252, "NEAR BAY"),
        (-121.24, 39.37, 16.0, 2785.0, 616.0, 1387.0, 530.0, 2.3886, "INLAND"),
    ]
    return pd.DataFrame(rows, columns=list(FEATURES))


def log_bundle(bundle: Path, card: Any) -> str:
    """Log the bundle as a pyfunc model named `model` in the active run (signature and input
    example from `example_rows`), card beside it; the model URI."""
    from tasks.core import consumer

    packages = ("torch", "catboost", "scikit-learn", "rtdl_num_embeddings", "tabm", "pandas")
    info = consumer.log_pyfunc_model(
        TabularModel(),
        "model",
        card,
        example_rows(),
        artifacts={"bundle": bundle},
        packages=packages,
    )
    return info.model_uri
