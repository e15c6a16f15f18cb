"""Loading a transformers causal LM from a checkpoint folder or the MLflow registry.

A folder is any `save_pretrained` checkpoint of a decoder (Llama, Qwen3, …). A registry
URI (`models:/name@alias` or `/version`) is either a transformers-flavour model or a pyfunc
that carries its checkpoint as the artifact `checkpoint` (how `paperline-llm` is logged);
the checkpoint is read, never unpickled. A registry URI against a local SQLite store that
does not exist is one line, and no empty database is left behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from tasks.core.errors import UserError

DTYPES = ("float32", "bfloat16", "float16")
CHECKPOINT_ARTIFACT = "checkpoint"


def causal_classes(model_type: str) -> set[str]:
    """The classes AutoModelForCausalLM builds for `model_type` (empty: none)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    names = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, ())
    return {names} if isinstance(names, str) else set(names)


def is_causal_lm(config: Any) -> bool:
    """A causal-LM family, saved as a causal LM (a BERT saved as BertForMaskedLM is not,
    although BERT has a decoder head class)."""
    classes = causal_classes(config.model_type)
    saved_as = getattr(config, "architectures", None) or []
    return bool(classes) and (not saved_as or bool(classes & set(saved_as)))


def torch_dtype(name: str) -> Any:
    import torch

    if name not in DTYPES:
        raise UserError(f"dtype {name!r} is not one of: {', '.join(DTYPES)}")
    return getattr(torch, name)


def load_local(path: Path, device: str = "cpu", dtype: str = "float32") -> tuple[Any, Any]:
    """A checkpoint folder → (causal LM in eval mode, tokenizer); one line when it is not one."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if not path.is_dir():
        raise UserError(
            f"{path}: no such model folder; give a checkpoint folder or models:/name@alias "
            "(the core LLM's folder is written by `paperline repro llm-import`)"
        )
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        first = str(error).splitlines()[0]
        raise UserError(f"{path}: not a transformers checkpoint ({first})") from None
    if not is_causal_lm(config):
        saved_as = ", ".join(getattr(config, "architectures", None) or []) or "no head"
        raise UserError(
            f"{path}: a '{config.model_type}' checkpoint ({saved_as}) is not a causal LM; "
            "give a decoder checkpoint such as Llama or Qwen3"
        )
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype(dtype))
    return model.to(device).eval(), AutoTokenizer.from_pretrained(path)


def require_store(tracking_uri: str, uri: str) -> None:
    """One line when a local SQLite store does not exist (MLflow would create an empty one)."""
    prefix = "sqlite:///"
    if tracking_uri.startswith(prefix) and not Path(tracking_uri[len(prefix) :]).exists():
        raise UserError(
            f"{uri}: there is no MLflow store at {tracking_uri[len(prefix) :]}; run `make run` "
            "(it registers the models) or set MLFLOW_TRACKING_URI to the store that has it"
        )


def registered_flavours(uri: str) -> dict[str, Any]:
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        return mlflow.models.get_model_info(uri).flavors
    except (MlflowException, OSError) as error:
        first = str(error).splitlines()[0]
        raise UserError(f"{uri}: cannot load it from the registry ({first})") from None


def load_registered(
    uri: str, tracking_uri: str, device: str = "cpu", dtype: str = "float32"
) -> tuple[Any, Any]:
    """`models:/name@alias` (or /version) → (causal LM, tokenizer)."""
    import mlflow

    require_store(tracking_uri, uri)
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    flavours = registered_flavours(uri)
    if "transformers" in flavours:
        parts = mlflow.transformers.load_model(uri, return_type="components")
        model = parts["model"]
        if not is_causal_lm(model.config):
            raise UserError(f"{uri}: a '{model.config.model_type}' model is not a causal LM")
        return model.to(device=device, dtype=torch_dtype(dtype)).eval(), parts["tokenizer"]
    with tempfile.TemporaryDirectory(prefix="paperline-llm-") as scratch:
        folder = Path(mlflow.artifacts.download_artifacts(uri, dst_path=scratch))
        checkpoint = folder / "artifacts" / CHECKPOINT_ARTIFACT
        if not checkpoint.is_dir():
            raise UserError(
                f"{uri}: a pyfunc without a '{CHECKPOINT_ARTIFACT}' artifact, so not a causal "
                "LM checkpoint; give a transformers-flavour model or a checkpoint folder"
            )
        return load_local(checkpoint, device, dtype)


def load_causal_lm(
    spec: str, device: str = "cpu", dtype: str = "float32", tracking_uri: str | None = None
) -> tuple[Any, Any]:
    """A local folder or a registry URI → (causal LM, tokenizer), quietly (no progress
    bars: an error after loading stays one line). `tracking_uri`: the store a registry URI
    is resolved against (default $MLFLOW_TRACKING_URI)."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    if spec.startswith("models:/"):
        store = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not store:
            raise UserError(f"{spec}: no MLflow store to resolve it in; set MLFLOW_TRACKING_URI")
        return load_registered(spec, store, device, dtype)
    return load_local(Path(spec), device, dtype)


def max_positions(model: Any) -> int | None:
    return getattr(model.config.get_text_config(), "max_position_embeddings", None)
