"""`paperline tabular …`: predictions of the registered tabular model for new rows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tasks.core.paths import repo_root

app = typer.Typer(help="Predict with the registered tabular model (California Housing).")

MODEL_HELP = "A registered model URI, e.g. models:/paperline-tabular@candidate."
CSV_HELP = "Rows with the California Housing columns (the target column is optional)."
OUT_HELP = "Where to write the predictions CSV; default: <csv>.predictions.csv beside it."
EVALUATE_HELP = "The CSV has the target column too: also print the RMSE against it."


@app.command("predict")
def tabular_predict(
    csv: Annotated[Path, typer.Option(help=CSV_HELP)],
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "models:/paperline-tabular@candidate",
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
    evaluate: Annotated[bool, typer.Option("--evaluate", help=EVALUATE_HELP)] = False,
) -> None:
    """Write one row per input row: prediction and uncertainty (the estimated standard
    deviation of the noise), in the target's units. A missing column, a value that is not a
    number, or a category the model has not seen is one line naming the column and row
    (exit 2), and nothing is written."""
    from tasks.core.params import load_params
    from tasks.tabular.predict import predict_csv

    root = repo_root()
    params = load_params(root / "params.yaml")
    target = out or csv.with_name(csv.stem + ".predictions.csv")
    summary = predict_csv(model, csv, target, params.runtime.mlflow, root, evaluate=evaluate)
    typer.echo(summary)
