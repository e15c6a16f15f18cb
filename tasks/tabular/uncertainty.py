"""tabular.uncertainty: each dev and test sample's aleatoric (data) uncertainty.

As in the paper, CatBoost with the RMSEWithUncertainty loss: the model predicts a mean and
a variance per row (a Gaussian likelihood), and the predicted standard deviation is the
row's estimated data uncertainty. Trained on the training split of each data set (the
model-ready features of features.py), early-stopped on dev. On the synthetic set the
truth is known: the Spearman correlation of the estimate with exp(g(x)) on the test split
(interval: Fisher's z with the Bonett–Wright variance for Spearman's ρ) checks it, and
`spearman_tolerance` is the bar the tests hold it to.

Outputs: `data/processed/tabular/uncertainty.parquet` (dataset, split, row_id, sigma: the
estimated standard deviation on the standardized target), `models/tabular/uncertainty/`
(one CatBoost model file per data set; California's is bundled into the served model)
and `models/tabular/uncertainty.json` (dev RMSE and Gaussian NLL per data set, the
synthetic check).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.tabular.features import Prepared
from tasks.tabular.params import TabularParams, UncertaintyParams

log = get_logger("paperline.tabular.uncertainty")
DATASETS = ("california", "synthetic")


def fit_uncertainty(prepared: Prepared, settings: UncertaintyParams) -> Any:
    """CatBoost RMSEWithUncertainty on the training split, early-stopped on dev."""
    train, dev = prepared.splits["train"], prepared.splits["dev"]
    return fit_arrays(train.x, train.y, dev.x, dev.y, settings)


def fit_arrays(
    x: np.ndarray, y: np.ndarray, x_dev: np.ndarray, y_dev: np.ndarray, settings: UncertaintyParams
) -> Any:
    from catboost import CatBoostRegressor

    model = CatBoostRegressor(
        loss_function="RMSEWithUncertainty",
        iterations=settings.iterations,
        depth=settings.depth,
        learning_rate=settings.learning_rate,
        random_seed=settings.seed,
        thread_count=settings.threads,
        od_type="Iter",
        od_wait=settings.early_stopping_rounds,
        use_best_model=True,
        allow_writing_files=False,
        verbose=False,
    )
    model.fit(x, y, eval_set=(x_dev, y_dev))
    return model


def mean_and_sigma(model: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CatBoost's RMSEWithUncertainty prediction: columns mean and variance → (mean, std)."""
    prediction = np.asarray(model.predict(x, prediction_type="RMSEWithUncertainty"))
    return prediction[:, 0], np.sqrt(np.maximum(prediction[:, 1], 1e-12))


def spearman_interval(rho: float, n: int) -> tuple[float, float]:
    """95% interval of Spearman's ρ: Fisher's z with the Bonett–Wright variance."""
    from scipy.stats import norm

    z, se = math.atanh(max(min(rho, 0.999999), -0.999999)), math.sqrt((1 + rho**2 / 2) / (n - 3))
    half = norm.ppf(0.975) * se
    return math.tanh(z - half), math.tanh(z + half)


def synthetic_check(sigma: np.ndarray, truth: np.ndarray, tolerance: float) -> dict[str, Any]:
    from scipy.stats import spearmanr

    rho = float(spearmanr(sigma, truth).statistic)
    low, high = spearman_interval(rho, len(sigma))
    log_ratio = np.log(sigma) - np.log(truth)
    return {
        "spearman_vs_true_sigma": round(rho, 4),
        "ci_low": round(low, 4),
        "ci_high": round(high, 4),
        "n": len(sigma),
        "median_abs_log_ratio": round(float(np.median(np.abs(log_ratio))), 4),
        "tolerance": tolerance,
        "within_tolerance": rho >= tolerance,
    }


def run(params: TabularParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
    settings = params.uncertainty
    rows, models, metrics = [], Folder(), {"model": "CatBoost RMSEWithUncertainty"}
    for name in DATASETS:
        prepared = Prepared.read(inputs[name])
        model = fit_uncertainty(prepared, settings)
        entry: dict[str, Any] = {"iterations": int(model.get_best_iteration() or 0) + 1}
        for split in ("dev", "test"):
            part = prepared.splits[split]
            mean, sigma = mean_and_sigma(model, part.x)
            rows.append(
                pa.table(
                    {
                        "dataset": [name] * len(sigma),
                        "split": [split] * len(sigma),
                        "row_id": part.row_id.astype(np.int64),
                        "mean": mean.astype(np.float64),  # CatBoost's own prediction
                        "sigma": sigma.astype(np.float64),
                    }
                )
            )
            if split == "dev":
                residual = part.y - mean
                entry["dev_rmse"] = round(float(np.sqrt(np.mean(residual**2))), 4)
                nll = 0.5 * (np.log(2 * np.pi * sigma**2) + residual**2 / sigma**2)
                entry["dev_gaussian_nll"] = round(float(np.mean(nll)), 4)
            elif name == "synthetic":
                truth = part.table["sigma"].to_numpy()
                entry["test_check"] = synthetic_check(sigma, truth, settings.spearman_tolerance)
            entry[f"{split}_sigma_quantiles"] = [
                round(float(q), 4) for q in np.quantile(sigma, [0.1, 0.5, 0.9])
            ]
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"{name}.cbm"
            without_run_stamps(model).save_model(str(path))
            models[f"{name}.cbm"] = path.read_bytes()
        metrics[name] = entry
        log.info("tabular.uncertainty: %s: %s", name, entry.get("test_check", entry["dev_rmse"]))
    return {"estimates": pa.concat_tables(rows), "models": models, "metrics": metrics}


def without_run_stamps(model: Any) -> Any:
    """The model without the training time and random GUID CatBoost writes into each file,
    so the same inputs save the same bytes and a re-run leaves dvc.lock as it was."""
    metadata = model.get_metadata()
    for key in ("train_finish_time", "model_guid"):
        if key in metadata:
            del metadata[key]
    return model


STAGE = Stage(
    name="tabular.uncertainty",
    run=run,
    params_key="tabular",
    params=("tabular.uncertainty",),
    inputs={
        "california": "data/processed/tabular/california",
        "synthetic": "data/processed/tabular/synthetic",
    },
    outputs={
        "estimates": "data/processed/tabular/uncertainty.parquet",
        "models": "models/tabular/uncertainty",
        "metrics": Output.metrics("models/tabular/uncertainty.json"),
    },
    headline="models/tabular/uncertainty.json:synthetic.test_check.spearman_vs_true_sigma",
)
