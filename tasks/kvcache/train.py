"""kvcache.train: a small Llama-style GQA decoder that retrieves needles, registered as
`paperline-kv-lm`.

The vocabulary is built from the train split (tasks/kvcache/lm.py); the model is
transformers' LlamaForCausalLM from a LlamaConfig (`num_kv_heads` < `num_heads`), trained
from scratch with the shared harness (Ray Train, one MLflow run, checkpoints a killed run
resumes from) on context + question + answer (and each needle asked on its own), the loss
on the answer tokens only (tasks/kvcache/train_loop.py). Its full-cache accuracy on the
dev split, per kind and length, is the first thing to read: compression results mean
something only where it is high. Outputs: the model folder (weights, config, tokenizer,
model card), metrics.json and the loss curve; the MLflow model (transformers flavour,
text-generation) is registered with alias `candidate` once the outputs are committed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core import tracking, training
from tasks.core.io import Folder, read_json, read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Stage, StageContext
from tasks.core.tokenizer import fast_tokenizer
from tasks.core.train_loop import STATE_FILE
from tasks.kvcache.lm import build_tokenizer, llama_config
from tasks.kvcache.needles import question
from tasks.kvcache.params import KvCacheParams
from tasks.kvcache.scoring import FULL, encode, score_items
from tasks.kvcache.train_loop import train_loop

log = get_logger("paperline.kvcache.train")
DATA = "data/processed/kvcache"
MODEL_DIR = "models/kvcache"


def training_sequences(
    tokenizer: Any, rows: list[dict], ask_every_needle: bool, seed: int
) -> dict[str, list]:
    """Token ids of context + question + answer, then (with `ask_every_needle`, where the
    item's needles have distinct keys) a single-key question and answer for each of its
    needles in a shuffled order; the positions of every answer token and the context length."""
    sequences, answers, lengths = [], [], []
    for index, item in enumerate(encode(tokenizer, rows)):
        row = item.row
        parts = [(item.question, ids(tokenizer, " " + " ".join(row["answers"])))]
        keys, values = list(row["needle_keys"]), list(row["needle_values"])
        if ask_every_needle and len(set(keys)) == len(keys):
            order = np.random.default_rng([seed, index]).permutation(len(keys))
            parts += [
                (
                    ids(tokenizer, " " + question("single", [keys[j]])),
                    ids(tokenizer, " " + values[j]),
                )
                for j in order
            ]
        sequence, positions = list(item.context), []
        for asked_ids, answer_ids in parts:
            sequence += asked_ids
            positions += range(len(sequence), len(sequence) + len(answer_ids))
            sequence += answer_ids
        sequences.append(sequence)
        answers.append(positions)
        lengths.append(len(item.context))
    return {"sequences": sequences, "answer_positions": answers, "context_lengths": lengths}


def ids(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def dev_accuracy(model: Any, tokenizer: Any, rows: list[dict], batch_size: int) -> dict:
    """Full-cache accuracy per kind and length (RULER string_match_all, mean over items)."""
    results = score_items(model, tokenizer, encode(tokenizer, rows), FULL, 0.0, None, batch_size)
    cells: dict[str, list[float]] = {}
    for row in results:
        cells.setdefault(f"{row['kind']}@{row['length']}", []).append(row["score"])
    table = {cell: round(float(np.mean(scores)), 4) for cell, scores in sorted(cells.items())}
    return {"cells": table, "overall": round(float(np.mean([r["score"] for r in results])), 4)}


def consumer_config(rows: list[dict], tokenizer: Any) -> dict[str, Any]:
    """The registered pipeline's defaults: greedy, as many new tokens as the longest answer."""
    longest = max(
        len(tokenizer(" " + " ".join(r["answers"]), add_special_tokens=False)["input_ids"])
        for r in rows
    )
    return {"max_new_tokens": longest, "do_sample": False}


def model_card(params: KvCacheParams, metrics: dict) -> tracking.ModelCard:
    shape = params.train.model
    return tracking.ModelCard(
        name=params.train.registered_model,
        summary=(
            f"A Llama-style decoder (transformers LlamaForCausalLM: {shape.num_layers} layers, "
            f"hidden {shape.hidden_size}, {shape.num_heads} query heads sharing "
            f"{shape.num_kv_heads} KV heads, RoPE, {metrics['parameters']:,} parameters) that "
            "answers RULER-style needle questions; the model the KV-cache presses are compared on."
        ),
        training_data=(
            f"kvcache.tasks' train split: {metrics['train_items']} needle items of kinds "
            f"{', '.join(params.train.kinds)} on UDHR English and CPython docstrings, contexts "
            f"of {params.tasks.train_lengths} word tokens"
            + (", each needle also asked on its own" if params.train.ask_every_needle else "")
            + f"; the loss is on the answer tokens only; {metrics['steps']} steps of batch "
            f"{params.train.batch_size}."
        ),
        intended_use="Comparing KV-cache compression presses on needle retrieval (kvcache.study).",
        limitations=(
            "A word-level vocabulary of the haystack's frequent words (others are [UNK]); "
            "trained only at short lengths, so accuracy falls beyond them; not a language model "
            "for free text."
        ),
        metrics={"dev_full_cache_accuracy": metrics["dev"]["overall"]},
    )


def run(params: KvCacheParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import torch
    from transformers import LlamaForCausalLM

    settings = params.train
    pools = read_json(inputs["tasks_metrics"])
    train_rows = [
        r for r in read_parquet(inputs["train"]).to_pylist() if r["kind"] in settings.kinds
    ]
    texts = [f"{r['context']} {r['question']}" for r in train_rows]
    tokenizer = fast_tokenizer(
        build_tokenizer(texts, pools["keys"], pools["values"], settings.model.haystack_words)
    )
    data = training_sequences(tokenizer, train_rows, settings.ask_every_needle, settings.seed)
    config = {
        "model_config": llama_config(
            settings.model, len(tokenizer), tokenizer.pad_token_id
        ).to_dict(),
        "pad_id": tokenizer.pad_token_id,
        "checkpoint_every": max(1, settings.steps // 2),
        **settings.model_dump(
            include={
                "seed",
                "steps",
                "batch_size",
                "learning_rate",
                "warmup_steps",
                "weight_decay",
                "log_every",
            }
        ),
    }
    log.info(
        "kvcache.train: %d train sequences, vocabulary %d, %d steps",
        len(data["sequences"]),
        len(tokenizer),
        settings.steps,
    )
    trained = training.train(
        training.TrainingJob(
            name="kvcache.train",
            train_loop=train_loop,
            config=config,
            sources=[inputs["train"], inputs["tasks_metrics"]],
            scaling=settings,
            max_failures=settings.max_failures,
            experiment=settings.experiment,
            run_name="needle-lm",
            lineage=[f"{DATA}/train.parquet"],
            data=data,
        ),
        ctx,
    )
    torch.set_num_threads(settings.torch_threads)
    model = LlamaForCausalLM.from_pretrained(trained.checkpoint).eval()
    dev = dev_accuracy(
        model, tokenizer, read_parquet(inputs["dev"]).to_pylist(), params.study.batch_size
    )
    state = trained.state
    metrics = {
        "steps": state["step"],
        "resumed_from": state["resumed_from"],
        "final_loss": round(state["curve"][-1]["loss"], 5),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocabulary": len(tokenizer),
        "train_items": len(train_rows),
        "dev": dev,
    }
    log.info("kvcache.train: dev full-cache accuracy %s", dev["cells"])
    card = model_card(params, metrics)
    curve = training.curve_csv(state["curve"])
    training.publish(
        trained,
        ctx,
        card=card,
        log_model=lambda registry_card: (
            tracking.log_transformers_model(
                model,
                tokenizer,
                "model",
                registry_card,
                task="text-generation",
                input_example=[min(texts, key=len)],  # context + question, as the study asks
                model_config=consumer_config(train_rows, tokenizer),
            ).model_uri
        ),
        registered_model=settings.registered_model,
        alias="candidate",
        metrics=metrics,
        files={"curves/loss.csv": curve},
    )
    folder = Folder(
        {
            p.name: p
            for p in trained.checkpoint.iterdir()
            if p.is_file() and p.suffix != ".pt" and p.name != STATE_FILE
        }
    )
    with tempfile.TemporaryDirectory() as saved:
        tokenizer.save_pretrained(saved)
        for path in Path(saved).iterdir():
            folder[path.name] = path.read_bytes()
    folder["model_card.md"] = card.to_markdown()
    return {"model": folder, "metrics": metrics, "curve": curve}


STAGE = Stage(
    name="kvcache.train",
    run=run,
    params_key="kvcache",
    params=("kvcache.tasks.train_lengths", "kvcache.train", "kvcache.study.batch_size"),
    inputs={
        "train": f"{DATA}/train.parquet",
        "dev": f"{DATA}/dev.parquet",
        "tasks_metrics": f"{DATA}/tasks_metrics.json",
    },
    outputs={
        "model": f"{MODEL_DIR}/lm",
        "metrics": f"{MODEL_DIR}/train_metrics.json",
        "curve": f"{MODEL_DIR}/loss.csv",
    },
    uses_ray=True,
    headline=f"{MODEL_DIR}/train_metrics.json:dev.overall",
)
