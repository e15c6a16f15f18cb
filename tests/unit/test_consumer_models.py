"""The registry consumer's contract on tiny models built from configs: each wrapper logged
with tasks.core.consumer to a temporary SQLite store, registered, loaded back by alias with
`mlflow.pyfunc.load_model` and asked its natural input; MLflow shows a signature and an
input example for each; publish refuses a model logged without them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tasks.core import consumer, tracking, training
from tasks.core.errors import UserError
from tests.conftest import word_level_tokenizer

CARD = tracking.ModelCard(
    name="tiny", summary="s", training_data="t", intended_use="u", limitations="l"
)
WORDS = (
    "who founded the city of rome romulus what is the capital of france paris path founded by "
    "capital river flows into sea def fetch price return requests get url json"
)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A SQLite store for this module; MLflow's URIs (and the MLFLOW_TRACKING_URI it
    exports) as they were afterwards, so later tests' subprocesses use their own store."""
    import os

    import mlflow
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    folder = tmp_path_factory.mktemp("mlflow")
    tracking_before, registry_before = tracking_utils._tracking_uri, registry_utils._registry_uri
    env_before = os.environ.get("MLFLOW_TRACKING_URI")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    yield mlflow.create_experiment("consumer", artifact_location=(folder / "a").as_uri())
    mlflow.set_tracking_uri(tracking_before)
    mlflow.set_registry_uri(registry_before)
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    if env_before is not None:
        os.environ["MLFLOW_TRACKING_URI"] = env_before


def registered(store, name: str, log) -> object:
    """Log with `log()` in a run, check the contract, register as name@candidate and load it
    back by alias as a registry consumer does."""
    import mlflow

    with mlflow.start_run(experiment_id=store):
        info = log()
    logged = consumer.require_contract(info.model_uri)
    assert logged.signature is not None and logged.saved_input_example_info is not None
    tracking.register_model(info.model_uri, name, CARD, "candidate")
    uri = f"models:/{name}@candidate"
    shown = mlflow.models.get_model_info(uri)
    assert shown.signature is not None and shown.saved_input_example_info is not None
    return mlflow.pyfunc.load_model(uri)


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tokenizer")
    word_level_tokenizer(WORDS, folder, pair=True)
    return folder


def bert(tokenizer_folder: Path, target: Path, head: str) -> Path:
    """A random 1-layer BERT (`head`: BertModel, BertForMaskedLM, ...) beside the tokenizer."""
    import shutil

    import torch
    import transformers

    shutil.copytree(tokenizer_folder, target)
    vocab = len(transformers.AutoTokenizer.from_pretrained(target))
    config = transformers.BertConfig(
        vocab_size=vocab,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=2,
    )
    torch.manual_seed(0)
    getattr(transformers, head)(config).save_pretrained(target)
    return target


def gpt2(tokenizer, target: Path, positions: int) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    end, pad = tokenizer.convert_tokens_to_ids(["[SEP]", "[PAD]"])
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=positions,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=end,
        eos_token_id=end,
        pad_token_id=pad,
    )
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(target)
    return target


def bpe_tokenizer(files: dict, folder: Path) -> Path:
    from tasks.core.io import write_file

    for name, data in files.items():
        write_file(folder / name, data)
    return folder


def test_publish_refuses_a_model_logged_without_signature_or_example(store, tmp_path):
    import mlflow

    class Echo(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input, params=None):
            return model_input

    queued = []
    trained = training.TrainedModel(tmp_path, {}, None, tmp_path, {})
    with mlflow.start_run(experiment_id=store), pytest.raises(UserError, match="signature"):
        training.publish(
            trained,
            SimpleNamespace(after_commit=queued.append),
            card=CARD,
            log_model=lambda card: mlflow.pyfunc.log_model(name="m", python_model=Echo()).model_uri,
            registered_model="never-registered",
        )
    assert queued == []  # nothing left to register


def test_halludetect_names_its_label_and_probability(store, tokenizer_folder, tmp_path):
    from tasks.kg.serving import HalluDetectModel

    folder = bert(tokenizer_folder, tmp_path / "det", "BertForSequenceClassification")
    rows = pd.DataFrame(
        {
            "question": ["who founded rome", "what is the capital of france"],
            "answer": ["romulus", "rome"],
            "path": ["rome founded by romulus", "france capital paris"],
        }
    )
    model = registered(
        store,
        "tiny-halludetect",
        lambda: consumer.log_pyfunc_model(
            HalluDetectModel(0.5, 32), "model", CARD, rows, artifacts={"model": folder}
        ),
    )
    out = model.predict(rows)
    assert list(out.columns) == ["label", "probability"] and len(out) == 2
    assert set(out["label"]) <= {"supported", "hallucinated"}
    assert ((out["probability"] >= 0) & (out["probability"] <= 1)).all()
    flagged = out["probability"] >= 0.5
    assert (out["label"][flagged] == "hallucinated").all()


def test_answerer_answers_with_and_without_a_path(store, tmp_path):
    from tasks.kg.answerer_lm import answerer_tokenizer, load_tokenizer
    from tasks.kg.serving import AnswererModel

    documents = [
        f"Path: Q{i} P1 Q{i + 1}\nQuestion: What is P1 of Q{i}?\nAnswer: Q{i + 1}"
        for i in range(30)
    ]
    tokenizer_dir = bpe_tokenizer(answerer_tokenizer(documents, 300), tmp_path / "tok")
    model_dir = gpt2(load_tokenizer(tokenizer_dir), tmp_path / "lm", 48)
    rows = pd.DataFrame(
        {"question": ["What is P1 of Q3?", "What is P1 of Q4?"], "path": ["Q3 P1 Q4", None]}
    )
    model = registered(
        store,
        "tiny-answerer",
        lambda: consumer.log_pyfunc_model(
            AnswererModel(4),
            "answerer",
            CARD,
            rows,
            artifacts={"model": model_dir, "tokenizer": tokenizer_dir},
        ),
    )
    out = model.predict(pd.DataFrame({"question": ["What is P1 of Q9?"]}))  # path is optional
    assert list(out.columns) == ["answer"] and isinstance(out["answer"][0], str)


def test_url_guard_scores_url_strings(store, tmp_path):
    from tasks.scam.guard_model import CharCNN, GuardConfig, model_files
    from tasks.scam.serving import UrlGuardModel

    folder = tmp_path / "guard"
    folder.mkdir()
    network = CharCNN(GuardConfig(max_length=32, embedding_dim=8, channels=8, threshold=0.5))
    for name, content in model_files(network).items():
        data = content if isinstance(content, bytes) else json.dumps(content).encode()
        (folder / name).write_bytes(data)
    example = pd.DataFrame({"url": ["https://docs.python.org/3/", "golemairdrop.com/claim"]})
    model = registered(
        store,
        "tiny-url-guard",
        lambda: consumer.log_pyfunc_model(
            UrlGuardModel(), "model", CARD, example, artifacts={"model": folder}
        ),
    )
    out = model.predict(pd.DataFrame({"url": ["HTTPS://WWW.Example.ORG/login?x=1", "no host://"]}))
    assert list(out.columns) == ["malicious_probability", "verdict"]
    assert 0 <= out["malicious_probability"][0] <= 1 and out["verdict"][0] in {
        "malicious",
        "benign",
    }
    assert out["verdict"][1] == "invalid" and np.isnan(out["malicious_probability"][1])


def test_code_lm_never_generates_past_its_positions(store, tmp_path):
    from tasks.scam.code_lm import code_tokenizer, load_tokenizer
    from tasks.scam.serving import CodeLmModel

    code = ["def fetch_price():\n    return requests.get(URL).json()\n"] * 20
    tokenizer_dir = bpe_tokenizer(code_tokenizer(code, 300), tmp_path / "tok")
    model_dir = gpt2(load_tokenizer(tokenizer_dir), tmp_path / "lm", 16)
    example = pd.DataFrame({"prompt": ["fetch the price of a token", "def fetch_price():"]})
    model = registered(
        store,
        "tiny-code-lm",
        lambda: consumer.log_pyfunc_model(
            CodeLmModel(),
            "code_lm",
            CARD,
            example,
            artifacts={"model": model_dir, "tokenizer": tokenizer_dir},
            params={"max_new_tokens": 8},
        ),
    )
    out = model.predict(pd.DataFrame({"prompt": ["def fetch_price():"]}))
    assert list(out.columns) == ["code"] and isinstance(out["code"][0], str)
    # more new tokens than the model has positions: capped, no IndexError
    long = model.predict(
        pd.DataFrame({"prompt": ["def fetch_price(): " * 20]}), params={"max_new_tokens": 500}
    )
    assert isinstance(long["code"][0], str)


def test_embedder_pools_one_unit_vector_per_text_as_the_evaluation(
    store, tokenizer_folder, tmp_path
):
    from tasks.aoeb.serving import EmbedderModel
    from tasks.core.text_encoders import EncoderOptions, TransformersEncoder

    folder = bert(tokenizer_folder, tmp_path / "emb", "BertModel")
    texts = ["the capital of france is paris", "romulus founded rome"]
    model = registered(
        store,
        "tiny-embedder",
        lambda: consumer.log_pyfunc_model(
            EmbedderModel({"instructions": True}),
            "model",
            CARD,
            pd.DataFrame({"text": texts}),
            artifacts={"model": folder},
            params={"instruction": ""},
        ),
    )
    vectors = model.predict(pd.DataFrame({"text": texts}))
    evaluation = TransformersEncoder(
        "e", folder, EncoderOptions(model=str(folder), instructions=True)
    )
    assert vectors.shape == (2, 16)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, evaluation.encode_documents(texts), atol=1e-5)
    queries = model.predict(pd.DataFrame({"text": texts}), params={"instruction": "find the city"})
    np.testing.assert_allclose(
        queries, evaluation.encode_queries(texts, "find the city"), atol=1e-5
    )


def test_reward_model_scores_a_clip_by_path_or_samples(store, tokenizer_folder, tmp_path):
    from tasks.cmipref.audio import flac_bytes
    from tasks.cmipref.reward_model import CmiRewardModel, RewardModelConfig, save
    from tasks.cmipref.serving import RewardModel
    from tasks.core.text_encoders import EncoderParams

    encoder = bert(tokenizer_folder, tmp_path / "enc", "BertModel")
    save(
        CmiRewardModel(RewardModelConfig(text_dim=16, n_mels=16, d_model=16, heads=2)),
        tmp_path / "rm",
    )
    rate = 8000
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(rate) / rate)).astype(np.float32)
    clip = tmp_path / "clip.flac"
    clip.write_bytes(flac_bytes(tone, rate))
    example = pd.DataFrame(
        [
            {
                "prompt": "a calm tone",
                "audio": str(clip),
                "audio_array": None,
                "lyrics": "la la",
                "reference_audio": str(clip),
            },
            {
                "prompt": "a calm tone",
                "audio": None,
                "audio_array": tone[:2000].tolist(),
                "lyrics": None,
                "reference_audio": None,
            },
        ]
    )
    spec = EncoderParams(name="tiny", kind="mmbert", options={"model": str(encoder)}).model_dump()
    model = registered(
        store,
        "tiny-cmi-rm",
        lambda: consumer.log_pyfunc_model(
            RewardModel(spec, rate, 1.0),
            "model",
            CARD,
            example,
            artifacts={"model": tmp_path / "rm", "text_encoder": encoder},
        ),
    )
    out = model.predict(pd.DataFrame({"prompt": ["a calm tone"], "audio": [str(clip)]}))
    assert list(out.columns) == ["alignment", "musicality", "reward"] and len(out) == 1
    assert np.isfinite(out.to_numpy()).all()
    assert out["reward"][0] == pytest.approx((out["alignment"][0] + out["musicality"][0]) / 2)


def test_transformers_models_log_their_signature_and_example(store, tokenizer_folder, tmp_path):
    """mmbert (fill-mask) and a causal LM (text-generation) keep the transformers flavour that
    other stages load; their pyfunc gets an inferred signature and a stored example."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    folder = bert(tokenizer_folder, tmp_path / "mlm", "BertForMaskedLM")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = registered(
        store,
        "tiny-mmbert",
        lambda: tracking.log_transformers_model(
            AutoModelForMaskedLM.from_pretrained(folder),
            tokenizer,
            "model",
            CARD,
            task="fill-mask",
            input_example=["the capital of france is [MASK]"],
        ),
    )
    filled = model.predict(["who founded [MASK]"])
    assert len(filled) >= 1
    generate = registered(
        store,
        "tiny-causal-lm",
        lambda: tracking.log_transformers_model(
            AutoModelForCausalLM.from_pretrained(gpt2(tokenizer, tmp_path / "gen", 32)),
            tokenizer,
            "model",
            CARD,
            task="text-generation",
            input_example=["the capital of france is"],
            model_config={"max_new_tokens": 3, "do_sample": False},
        ),
    )
    (text,) = generate.predict(["who founded rome"])
    assert isinstance(text, str)


def test_the_core_llm_pyfunc_answers_prompts_with_replies(store, tmp_path):
    """paperline-llm's wrapper on a tiny chat checkpoint: prompts (and a system message) in,
    one reply per prompt out; the checkpoint travels as the `checkpoint` artifact."""
    from tasks.llm.serving import PARAMS, LLMPyfunc
    from tests.unit.tiny_llm import save_tiny_checkpoint

    folder = save_tiny_checkpoint(tmp_path / "checkpoint")
    example = pd.DataFrame({"prompt": ["What is the capital of France?"], "system": [""]})
    model = registered(
        store,
        "tiny-llm",
        lambda: consumer.log_pyfunc_model(
            LLMPyfunc(batch_size=2),
            "model",
            CARD,
            example,
            artifacts={"checkpoint": folder},
            params={**PARAMS, "max_new_tokens": 4},
            optional=["system"],
        ),
    )
    asked = pd.DataFrame({"prompt": ["Hello", "Who founded Rome?", "Tea"]})
    out = model.predict(asked, params={"max_new_tokens": 3})
    assert list(out.columns) == ["reply"] and len(out) == 3
    assert all(isinstance(reply, str) for reply in out["reply"])
    with_system = pd.DataFrame({"prompt": ["Hello"], "system": ["Answer in one word."]})
    assert len(model.predict(with_system, params={"max_new_tokens": 2})) == 1
