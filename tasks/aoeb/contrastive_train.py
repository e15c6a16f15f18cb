"""Ray Train job for the embedder: InfoNCE with in-batch negatives, from the mmBERT encoder.

Each step takes `batch_size` (query, positive document) pairs whose documents are distinct,
embeds both sides with the encoder (mean pooling over the attention mask, L2-normalised)
and scores every query against every document of the batch: the other documents are the
negatives. The loss is symmetric (query → document and document → query), at a fixed
temperature. Rank 0 logs to the MLflow run and checkpoints with the mlm area's helpers
every `checkpoint_every` steps and at the end; a killed run resumes from the last one.
"""

from __future__ import annotations

from typing import Any

from tasks.core.loop import LoopPlan, Window, run_loop
from tasks.core.ray_train import start_worker
from tasks.core.text_encoders import mean_pool


def batch_order(pairs: list[tuple[str, str]], batch_size: int, seed: int) -> list[list[int]]:
    """An epoch's batches: shuffled pair indices, no document twice in a batch (a repeated
    positive would count as its own negative); leftovers wait for the next batch."""
    import random

    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    batches, current, seen, waiting = [], [], set(), []
    for index in order:
        queue = [*waiting, index]
        waiting = []
        for item in queue:
            document = pairs[item][1]
            if document in seen:
                waiting.append(item)
                continue
            current.append(item)
            seen.add(document)
            if len(current) == batch_size:
                batches.append(current)
                current, seen = [], set()
    return batches


def symmetric_info_nce(logits: Any) -> Any:
    """InfoNCE both ways over a batch's similarity matrix: row i's positive is column i."""
    import torch

    labels = torch.arange(len(logits), device=logits.device)
    cross_entropy = torch.nn.functional.cross_entropy
    return (cross_entropy(logits, labels) + cross_entropy(logits.T, labels)) / 2


def train_loop(config: dict[str, Any]) -> None:
    import ray.train.torch
    from transformers import AutoModel, PreTrainedTokenizerFast

    from tasks.core.train_loop import RayReporter, linear_warmup_training, save_pretrained

    rank, world = start_worker(config)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(config["tokenizer"])
    model = ray.train.torch.prepare_model(AutoModel.from_pretrained(config["init_from"]))
    device = ray.train.torch.get_device()
    optimizer, scheduler, state = linear_warmup_training(model, config)
    pairs = [tuple(p) for p in config["pairs"]]

    def embed(texts: list[str], length: int) -> Any:
        encoded = tokenizer(
            texts, padding=True, truncation=True, max_length=length, return_tensors="pt"
        ).to(device)
        encoded.pop("token_type_ids", None)
        return mean_pool(model(**encoded).last_hidden_state, encoded["attention_mask"])

    def epoch_batches(epoch: int) -> list[list[int]]:
        return batch_order(pairs, config["batch_size"], config["seed"] + epoch)[rank::world]

    def loss_of(batch: list[int]) -> tuple[Any, dict[str, int]]:
        queries = embed([pairs[i][0] for i in batch], config["query_length"])
        documents = embed([pairs[i][1] for i in batch], config["document_length"])
        loss = symmetric_info_nce(queries @ documents.T / config["temperature"])
        return loss, {"pairs": len(batch) * world}

    def point(state: dict[str, Any], window: Window) -> dict[str, Any]:
        return {
            "step": state["step"],
            "loss": window.loss,
            "pairs_per_second": window.sums["pairs"] / window.seconds,
        }

    every = config["checkpoint_every"]
    plan = LoopPlan(steps=config["steps"], log_every=every, checkpoint_every=every, grad_clip=1.0)
    reporter = RayReporter(config, point, save_pretrained(model), optimizer, scheduler)
    run_loop(
        model,
        optimizer,
        loss_of,
        plan,
        state,
        reporter,
        epoch_batches=epoch_batches,
        scheduler=scheduler,
    )
