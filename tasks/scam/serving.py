"""What a registry consumer calls: the scam area's models as MLflow pyfuncs.

`UrlGuardModel`: a `url` column of URLs or bare hosts → `malicious_probability` (the
character CNN's P(malicious) of the URL's normalized host) and `verdict` (`malicious` at
or above the trained threshold, else `benign`; `invalid` with a NaN probability for a
string with no hostname). `CodeLmModel`: a `prompt` column → `code`, the greedy
continuation of the prompt as the study asks it (`# <prompt>` heading a file); the
`max_new_tokens` param (default 48) is capped at the model's positions less one, and the
prompt keeps its last tokens that still fit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd

MALICIOUS, BENIGN, INVALID = "malicious", "benign", "invalid"
DEFAULT_NEW_TOKENS = 48


def first_column(model_input: Any, name: str) -> list[str]:
    """The `name` column (else the first) of a DataFrame, or a list of strings, as strings."""
    if isinstance(model_input, pd.DataFrame):
        column = model_input[name] if name in model_input else model_input.iloc[:, 0]
        return [str(v) for v in column]
    return [str(v) for v in model_input]


class UrlGuardModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context: Any) -> None:
        from tasks.scam.guard_model import load_model

        self.model = load_model(Path(context.artifacts["model"]))

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        from tasks.scam.domains import BadHost, host_of
        from tasks.scam.guard_model import score_hosts

        hosts: list[str | None] = []
        for url in first_column(model_input, "url"):
            try:
                hosts.append(host_of(url.strip()))
            except BadHost:
                hosts.append(None)
        valid = [h for h in hosts if h is not None]
        scores = iter(score_hosts(self.model, valid) if valid else [])
        probability = [math.nan if h is None else next(scores) for h in hosts]
        threshold = self.model.config.threshold
        verdict = [
            INVALID if h is None else MALICIOUS if p >= threshold else BENIGN
            for h, p in zip(hosts, probability, strict=True)
        ]
        return pd.DataFrame({"malicious_probability": probability, "verdict": verdict})


class CodeLmModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context: Any) -> None:
        from tasks.scam.code_lm import LocalCodeModel

        self.lm = LocalCodeModel(
            "paperline-code-lm",
            Path(context.artifacts["model"]),
            Path(context.artifacts["tokenizer"]),
            DEFAULT_NEW_TOKENS,
        )

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        positions = self.lm.model.config.n_positions
        wanted = int((params or {}).get("max_new_tokens", DEFAULT_NEW_TOKENS))
        self.lm.max_new_tokens = max(1, min(wanted, positions - 1))
        self.lm.room = positions - self.lm.max_new_tokens
        return pd.DataFrame({"code": self.lm.generate_all(first_column(model_input, "prompt"))})
