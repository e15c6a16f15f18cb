"""The fine-tune's parts: training pairs from task folders, batches, pooling."""

import torch

from tasks.aoeb.benchmark import (
    RetrievalTask,
    TaskDeclaration,
    document_text,
    training_pairs,
)
from tasks.aoeb.contrastive_train import batch_order
from tasks.core.text_encoders import mean_pool, query_text


def task(modality="text", instruction="Find the tool"):
    declaration = TaskDeclaration(
        "t", "tool", modality=modality, splits=("train", "test"), query_instruction=instruction
    )
    corpus = {
        "d1": {"title": "dvc repro", "text": "Reproduce stages"},
        "d2": {"title": "", "text": "Push data"},
    }
    qrels = {"train": {"q1": {"d1": 1, "d2": 0}}, "test": {"q2": {"d2": 1}}}
    return RetrievalTask(declaration, corpus, {"q1": "rerun my pipeline", "q2": "upload"}, qrels)


def test_pairs_take_train_positives_only_with_the_instruction():
    assert training_pairs([task()]) == [
        ("Instruct: Find the tool\nQuery: rerun my pipeline", "dvc repro\nReproduce stages")
    ]
    assert training_pairs([task(modality="text-to-image")]) == []
    assert query_text("", "q") == "q" and document_text({"title": "", "text": "x"}) == "x"


def test_batches_never_hold_one_document_twice():
    pairs = [(f"q{i}", f"d{i % 5}") for i in range(40)]
    batches = batch_order(pairs, 4, seed=0)
    assert batches and all(len(b) == 4 for b in batches)
    for batch in batches:
        assert len({pairs[i][1] for i in batch}) == 4
    flat = [i for b in batches for i in b]
    assert len(flat) == len(set(flat)) >= 36  # every pair at most once, few left over
    assert batch_order(pairs, 4, seed=0) == batches != batch_order(pairs, 4, seed=1)


def test_mean_pool_ignores_padding_and_normalises():
    hidden = torch.tensor([[[1.0, 0.0], [3.0, 0.0], [100.0, 100.0]]])
    pooled = mean_pool(hidden, torch.tensor([[1, 1, 0]]))
    assert torch.allclose(pooled, torch.tensor([[1.0, 0.0]]))
