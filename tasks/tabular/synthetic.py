"""tabular.synthetic: heteroscedastic regression with a known mean and a known noise level.

    x ~ U[-1, 1]^d,  y = f(x) + exp(g(x))·ε,  ε ~ N(0, 1)
    f(x) = sin(π·x0) + 0.8·x1² − 0.6·x2 + 0.5·x0·x3
    g(x) = noise_offset + noise_scale·(0.8·x1 + 0.6·sin(π·x4))

The noise depends on x1 (which f also uses) and x4 (which f does not), so an uncertainty
estimate has to find it rather than read it off the mean; features beyond x4 are noise.
With the defaults exp(g) spans about 0.12 to 1.3, against f's spread of about 1. Same
split and layout as California (features.py) plus the truth per row: `f`, `g` and
`sigma` = exp(g(x)). y is not standardized (target_mean 0, target_std 1 in the manifest).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.stage import Stage, StageContext
from tasks.tabular.features import MANIFEST, SPLITS, split_indices, split_table
from tasks.tabular.params import SyntheticParams, TabularParams

log = get_logger("paperline.tabular.synthetic")


def mean_function(x: np.ndarray) -> np.ndarray:
    return np.sin(np.pi * x[:, 0]) + 0.8 * x[:, 1] ** 2 - 0.6 * x[:, 2] + 0.5 * x[:, 0] * x[:, 3]


def log_noise(x: np.ndarray, settings: SyntheticParams) -> np.ndarray:
    shape = 0.8 * x[:, 1] + 0.6 * np.sin(np.pi * x[:, 4])
    return settings.noise_offset + settings.noise_scale * shape


def generate(settings: SyntheticParams) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(settings.seed)
    x = rng.uniform(-1.0, 1.0, size=(settings.rows, settings.features))
    f, g = mean_function(x), log_noise(x, settings)
    y = f + np.exp(g) * rng.standard_normal(settings.rows)
    return {"x": x, "y": y, "f": f, "g": g}


def run(params: TabularParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
    settings = params.synthetic
    data = generate(settings)
    names = [f"x{i}" for i in range(settings.features)]
    indices = split_indices(settings.rows, params.split.dev, params.split.test, params.split.seed)
    folder = Folder()
    for name in SPLITS:
        rows = indices[name]
        truth = {
            "f": data["f"][rows],
            "g": data["g"][rows],
            "sigma": np.exp(data["g"][rows]),
        }
        folder[f"{name}.parquet"] = split_table(
            data["x"][rows], names, data["y"][rows], rows, truth
        )
    sigma = np.exp(data["g"])
    folder[MANIFEST] = {
        "dataset": "synthetic",
        "generator": "y = f(x) + exp(g(x))·eps (tasks/tabular/synthetic.py)",
        "rows": settings.rows,
        "split": {"seed": params.split.seed, **{n: int(len(indices[n])) for n in SPLITS}},
        "features": names,
        "n_numerical": settings.features,
        "target": "y",
        "target_mean": 0.0,
        "target_std": 1.0,
        "sigma_range": [round(float(sigma.min()), 4), round(float(sigma.max()), 4)],
        "noise_share_of_variance": round(float(np.mean(sigma**2) / np.var(data["y"])), 4),
    }
    log.info(
        "tabular.synthetic: %d rows, exp(g) in [%.2f, %.2f], noise %.0f%% of var(y)",
        settings.rows,
        sigma.min(),
        sigma.max(),
        100 * folder[MANIFEST]["noise_share_of_variance"],
    )
    return {"data": folder}


STAGE = Stage(
    name="tabular.synthetic",
    run=run,
    params_key="tabular",
    params=("tabular.split", "tabular.synthetic"),
    inputs={},
    outputs={"data": "data/processed/tabular/synthetic"},
)
