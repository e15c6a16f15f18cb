"""`paperline-llm` as an MLflow pyfunc: prompts in, replies out.

Input: a DataFrame with a `prompt` column (one user turn each) and an optional `system`
column (a system message; empty = the chat template's default). Output: a DataFrame with
one `reply` column. Params: `max_new_tokens`, `temperature` (0 = greedy), `seed`. The
checkpoint travels as the artifact `checkpoint` (safetensors, never unpickled).
"""

from __future__ import annotations

from typing import Any

import mlflow.pyfunc
import pandas as pd

from tasks.core.causal_lm import CHECKPOINT_ARTIFACT

PARAMS = {"max_new_tokens": 64, "temperature": 0.0, "seed": 0}


def column(frame: pd.DataFrame, name: str) -> list[str]:
    if name not in frame:
        return [""] * len(frame)
    return ["" if v is None or v != v else str(v) for v in frame[name]]


class LLMPyfunc(mlflow.pyfunc.PythonModel):
    def __init__(self, batch_size: int = 8) -> None:
        self.batch_size = batch_size

    def load_context(self, context: Any) -> None:
        from pathlib import Path

        from tasks.core.causal_lm import load_local
        from tasks.core.llm_local import LocalLLM

        model, tokenizer = load_local(Path(context.artifacts[CHECKPOINT_ARTIFACT]))
        self.llm = LocalLLM(model, tokenizer, self.batch_size, name="paperline-llm")

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        settings = {**PARAMS, **(params or {})}
        conversations = []
        for prompt, system in zip(
            column(model_input, "prompt"), column(model_input, "system"), strict=True
        ):
            turns = [{"role": "system", "content": system}] if system else []
            conversations.append([*turns, {"role": "user", "content": prompt}])
        replies = self.llm.chat(
            conversations,
            max_new_tokens=int(settings["max_new_tokens"]),
            temperature=float(settings["temperature"]),
            seed=int(settings["seed"]),
        )
        return pd.DataFrame({"reply": replies})
