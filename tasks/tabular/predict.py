"""Predict a CSV with a registered tabular model: validate, predict, write atomically.

The rows are checked against the schema and the model's fitted categories before the
model sees them (schema.py): the first bad cell is one InputError naming the column and
the row, and no output file is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tasks.core import tracking
from tasks.core.errors import InputError, UserError
from tasks.core.io import write_file
from tasks.tabular.schema import TARGET, read_housing_csv


def load_registered(uri: str, mlflow_params: Any, root: Path) -> Any:
    """The pyfunc's TabularModel behind `uri` (models:/name@alias or a runs:/ URI)."""
    import mlflow
    from mlflow.exceptions import MlflowException

    tracking.configure(mlflow_params, root)
    try:
        loaded = mlflow.pyfunc.load_model(uri)
    except MlflowException as error:
        first = str(error).strip().splitlines()[0]
        raise UserError(
            f"model {uri}: cannot load it ({first}); run `dvc repro tabular-zoo` to register it"
        ) from None
    return loaded.unwrap_python_model()


def predict_csv(
    uri: str, csv: Path, out: Path, mlflow_params: Any, root: Path, *, evaluate: bool = False
) -> str:
    """Write `out` (row, prediction, uncertainty[, target, error]); a one-line summary."""
    if not Path(csv).is_file():
        raise InputError(f"{csv}: no such CSV file")
    model = load_registered(uri, mlflow_params, root)
    frame = read_housing_csv(csv, require_target=evaluate, categories=model.categories)
    predicted = model.predict(None, frame)
    predicted.insert(0, "row", np.arange(1, len(frame) + 1))
    summary = f"{len(frame)} rows → {out}"
    if evaluate:
        predicted[TARGET] = frame[TARGET].to_numpy()
        predicted["error"] = predicted["prediction"] - predicted[TARGET]
        rmse = float(np.sqrt(np.mean(predicted["error"] ** 2)))
        summary += f" (RMSE {rmse:,.0f} against {TARGET})"
    write_file(out, predicted.to_csv(index=False))
    return summary
