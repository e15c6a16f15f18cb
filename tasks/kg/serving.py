"""What a registry consumer calls: the KG models as MLflow pyfuncs on their natural input.

`HalluDetectModel`: rows of `question`, `answer`, `path` (the KG path's text) → `label`
(`supported` or `hallucinated`: hallucinated when P(hallucinated) ≥ the dev-chosen
threshold) and `probability` (P(hallucinated)). `AnswererModel`: rows of `question` and an
optional `path` → `answer` (greedy, at most the trained max_new_tokens). Both load their
folders in `load_context` and are logged with tasks.core.consumer.log_pyfunc_model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd

SUPPORTED, HALLUCINATED = "supported", "hallucinated"


def text_column(frame: pd.DataFrame, name: str) -> list[str]:
    """A column's strings, '' for a missing column or value."""
    if name not in frame:
        return [""] * len(frame)
    return ["" if v is None or v != v else str(v) for v in frame[name]]


class HalluDetectModel(mlflow.pyfunc.PythonModel):
    def __init__(self, threshold: float, max_length: int) -> None:
        self.threshold, self.max_length = threshold, max_length

    def load_context(self, context: Any) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        folder = context.artifacts["model"]
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForSequenceClassification.from_pretrained(folder).eval()

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        from tasks.kg.detector_train import supported_probabilities

        columns = {
            "question": text_column(model_input, "question"),
            "path_text": text_column(model_input, "path"),
            "answer": text_column(model_input, "answer"),
        }
        supported = supported_probabilities(self.model, self.tokenizer, columns, self.max_length)
        hallucinated = [1.0 - p for p in supported]
        return pd.DataFrame(
            {
                "label": [HALLUCINATED if p >= self.threshold else SUPPORTED for p in hallucinated],
                "probability": hallucinated,
            }
        )


class AnswererModel(mlflow.pyfunc.PythonModel):
    def __init__(self, max_new_tokens: int) -> None:
        self.max_new_tokens = max_new_tokens

    def load_context(self, context: Any) -> None:
        from tasks.kg.answerer_lm import LocalAnswerer

        self.answerer = LocalAnswerer(
            Path(context.artifacts["model"]),
            Path(context.artifacts["tokenizer"]),
            self.max_new_tokens,
        )

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        from tasks.kg.answerer_corpus import prompt

        questions, paths = text_column(model_input, "question"), text_column(model_input, "path")
        prompts = [prompt(q, p or None) for q, p in zip(questions, paths, strict=True)]
        return pd.DataFrame({"answer": self.answerer.answer_texts(prompts)})
