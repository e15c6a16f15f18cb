"""Ray Train job for the embedder: InfoNCE with in-batch negatives, from the mmBERT encoder.

Each step takes `batch_size` (query, positive document) pairs whose documents are distinct,
embeds both sides with the encoder (mean pooling over the attention mask, L2-normalised)
and scores every query against every document of the batch: the other documents are the
negatives. The loss is symmetric (query → document and document → query), at a fixed
temperature. Rank 0 logs to the MLflow run and checkpoints with the mlm area's helpers
every `checkpoint_every` steps and at the end; a killed run resumes from the last one.
"""

from __future__ import annotations

import time
from typing import Any

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
    import ray.train
    import ray.train.torch
    import torch
    from transformers import AutoModel, PreTrainedTokenizerFast

    from tasks.core.train_loop import MetricsLog, linear_warmup_training, report_checkpoint

    rank, world = start_worker(config)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(config["tokenizer"])
    model = ray.train.torch.prepare_model(AutoModel.from_pretrained(config["init_from"]))
    device = ray.train.torch.get_device()
    optimizer, scheduler, state = linear_warmup_training(model, config)
    total = config["steps"]
    metrics_log = MetricsLog(config) if rank == 0 and config["run_id"] else None
    pairs = [tuple(p) for p in config["pairs"]]
    temperature = config["temperature"]

    def embed(texts: list[str], length: int) -> Any:
        encoded = tokenizer(
            texts, padding=True, truncation=True, max_length=length, return_tensors="pt"
        ).to(device)
        encoded.pop("token_type_ids", None)
        return mean_pool(model(**encoded).last_hidden_state, encoded["attention_mask"])

    model.train()
    window, started = [], time.perf_counter()
    while state["step"] < total:
        batches = batch_order(pairs, config["batch_size"], config["seed"] + state["epoch"])
        done_in_epoch = state.get("batch_in_epoch", 0)
        for position, batch in enumerate(batches[rank::world]):
            if position < done_in_epoch:
                continue  # seen before a resume
            if state["step"] >= total:
                break
            queries = embed([pairs[i][0] for i in batch], config["query_length"])
            documents = embed([pairs[i][1] for i in batch], config["document_length"])
            loss = symmetric_info_nce(queries @ documents.T / temperature)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            state["step"] += 1
            state["batch_in_epoch"] = position + 1
            window.append(loss.item())
            step = state["step"]
            if step % config["checkpoint_every"] and step != total:
                continue
            seconds = time.perf_counter() - started
            values = {
                "loss": sum(window) / len(window),
                "pairs_per_second": len(window) * len(batch) * world / seconds,
            }
            state["curve"].append({"step": step, **values})
            if metrics_log:
                metrics_log.add(step, values)
                metrics_log.flush()
            report_checkpoint({"step": step, **values}, model, optimizer, scheduler, state)
            window, started = [], time.perf_counter()
        if state["step"] < total:
            state["epoch"] += 1
            state["batch_in_epoch"] = 0
