"""What a registry consumer calls: `paperline-embedder` as an MLflow pyfunc.

`EmbedderModel`: texts (a `text` column or a list of strings) → a (texts, dim) float32
array, one L2-normalised embedding per text, computed by the evaluation's own encoder
(tasks.core.text_encoders.TransformersEncoder: mean of the last hidden states under the
attention mask, 256 tokens kept). Texts are embedded as documents; with the `instruction`
param they are embedded as queries, as `Instruct: <instruction>\\nQuery: <text>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
import pandas as pd


class EmbedderModel(mlflow.pyfunc.PythonModel):
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options  # EncoderOptions fields, as the evaluation's embedder uses

    def load_context(self, context: Any) -> None:
        from tasks.core.text_encoders import EncoderOptions, TransformersEncoder

        folder = Path(context.artifacts["model"])
        options = EncoderOptions(**{**self.options, "model": str(folder)})
        self.encoder = TransformersEncoder("paperline-embedder", folder, options)

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> np.ndarray:
        if isinstance(model_input, pd.DataFrame):
            column = model_input["text"] if "text" in model_input else model_input.iloc[:, 0]
            texts = [str(v) for v in column]
        else:
            texts = [str(v) for v in model_input]
        instruction = str((params or {}).get("instruction", ""))
        if instruction:
            return self.encoder.encode_queries(texts, instruction)
        return self.encoder.encode_documents(texts)
