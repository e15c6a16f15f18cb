"""What a registry consumer does with nothing but the URIs (run in a fresh interpreter from
the repository root, MLFLOW_TRACKING_URI set): each `models:/<name>@<alias>` in argv[1] (a
JSON list) shows a signature and an input example, loads with `mlflow.pyfunc.load_model`
and answers its natural input in the documented shape. One line per model, "<uri>
<answer>"; an AssertionError names the first model that breaks the contract."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd

from tasks.tabular.serving import example_rows


def natural_inputs() -> dict[str, tuple[object, list[str] | None]]:
    """Registered name → (input, output columns; None for an array or a list of texts)."""
    clip = min(Path("data/interim/cmipref/audio").rglob("*.flac"))
    detect = {
        "question": ["What is the official language of Q1009?"],
        "answer": ["Q1860"],
        "path": ["Q1009 official language Q1860"],
    }
    return {
        "paperline-mmbert": (["Everyone has the right to [MASK]."], None),
        "paperline-kg-halludetect": (pd.DataFrame(detect), ["label", "probability"]),
        "paperline-kg-answerer": (pd.DataFrame({"question": detect["question"]}), ["answer"]),
        "paperline-url-guard": (
            pd.DataFrame({"url": ["https://golemairdrop.com/claim", "docs.python.org"]}),
            ["malicious_probability", "verdict"],
        ),
        "paperline-code-lm": (pd.DataFrame({"prompt": ["def fetch_price():"]}), ["code"]),
        "paperline-embedder": (
            pd.DataFrame({"text": ["Everyone has the right to life.", "Tea"]}),
            None,
        ),
        "paperline-cmi-rm": (
            pd.DataFrame({"prompt": ["a calm piano piece"], "audio": [str(clip)]}),
            ["alignment", "musicality", "reward"],
        ),
        "paperline-llm": (
            pd.DataFrame({"prompt": ["What is the capital of France?"], "system": [""]}),
            ["reply"],
        ),
    }


def answer(uri: str, natural: dict) -> str:
    name = uri.removeprefix("models:/").split("@")[0]
    info = mlflow.models.get_model_info(uri)
    assert info.signature is not None, f"{uri}: no signature"
    assert info.saved_input_example_info is not None, f"{uri}: no input example"
    if name.startswith("paperline-tabular"):  # the zoo's best and each family's best
        natural[name] = (example_rows(), ["prediction", "uncertainty"])
    assert name in natural, f"{uri}: no natural input for it here; add one (the contract)"
    asked, columns = natural[name]
    out = mlflow.pyfunc.load_model(uri).predict(asked)
    if columns is not None:
        assert list(out.columns) == columns and len(out) == len(asked), f"{uri}: {out}"
        first = out.iloc[0].to_dict()
        if "label" in first:
            assert first["label"] in ("supported", "hallucinated"), uri
        if "verdict" in first:
            assert out["verdict"].isin(["malicious", "benign"]).all(), uri
            assert out["malicious_probability"].between(0, 1).all(), uri
        for text in ("code", "answer", "reply"):
            assert text not in first or isinstance(first[text], str), uri
        return json.dumps(first, default=str)
    if name == "paperline-embedder":
        norms = np.linalg.norm(np.asarray(out), axis=1)
        assert len(norms) == len(asked) and np.allclose(norms, 1, atol=1e-4), f"{uri}: {norms}"
        return f"{np.asarray(out).shape} unit vectors"
    # the transformers pipelines: one text per input
    assert len(out) == len(asked) and all(isinstance(o, str) for o in out), f"{uri}: {out}"
    return json.dumps(out[0])


def main() -> None:
    natural = natural_inputs()
    for uri in json.loads(sys.argv[1]):
        print(uri, answer(uri, natural)[:200], flush=True)


if __name__ == "__main__":
    main()
