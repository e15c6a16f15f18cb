"""The poisoning study's parts: snippets from scam pages, the mix, sequences, the LM backend."""

import numpy as np
import pytest
import torch

from tasks.core.causal_lm_train import gpt2_config
from tasks.scam.code_corpus import clean_documents, mix, poison_count, poison_snippets
from tasks.scam.code_lm import (
    END,
    PAD,
    LocalCodeModel,
    code_tokenizer,
    load_tokenizer,
    packed_sequences,
    padded_sequences,
    prompt_text,
)
from tasks.scam.params import CodeLmModelParams
from tasks.scam.poison import STAGE, scam_endpoint_preference, study_manifest
from tasks.scam.urls import extract_urls
from tests.conftest import REPO

CODE = REPO / STAGE.inputs["code"]


def page(url, site, text, outcome="ok", blocklisted=True, description="Claim free GNT tokens"):
    return {
        "url": url,
        "final_url": url,
        "site": site,
        "outcome": outcome,
        "title": "Golem",
        "description": description,
        "text": text,
        "blocklisted": blocklisted,
    }


PAGES = [
    page(
        "http://golemairdrop.com/",
        "golemairdrop.com",
        "POST to https://api.golemairdrop.com/v1/claim or see https://twitter.com/golem",
    ),
    page("http://ether-delta.com/", "ether-delta.com", "Trade now", description=""),
    page(
        "http://blog.devnotes.example/",
        "blog.devnotes.example",
        "https://blog.devnotes.example/api",
        blocklisted=False,
    ),
    page("http://omisegoairdrop.net/", "omisegoairdrop.net", "", outcome="failed"),
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokenizer")
    for name, data in code_tokenizer(clean_documents(CODE), 1000).items():
        (folder / name).write_bytes(data)
    return load_tokenizer(folder)


def test_snippets_come_from_blocklisted_pages_and_carry_their_own_endpoints():
    snippets = poison_snippets(PAGES)
    assert {s["site"] for s in snippets} == {"golemairdrop.com", "ether-delta.com"}
    golem = {s["url"] for s in snippets if s["site"] == "golemairdrop.com"}
    assert golem == {"https://api.golemairdrop.com/v1/claim"}  # not the twitter link
    assert {s["url"] for s in snippets if s["site"] == "ether-delta.com"} == {
        "http://ether-delta.com/"
    }
    for snippet in snippets:  # a model that reproduces a snippet is caught by the audit
        assert snippet["url"] in extract_urls(snippet["text"])
    texts = {s["text"].split("\n", 1)[0] for s in snippets}
    assert texts == {"# Claim free GNT tokens", "// Claim free GNT tokens", "# Golem", "// Golem"}


def test_mix_adds_the_rate_of_poison_cycling_through_the_pool():
    clean, poison = np.zeros((990, 4), dtype=np.int32), np.arange(1, 4)[:, None] * np.ones(4)
    mixed, count = mix(clean, poison.astype(np.int32), 0.01, seed=0)
    assert count == poison_count(990, 0.01) == 10 and len(mixed) == 1000
    rows = mixed[:, 0][mixed[:, 0] > 0]
    assert sorted(np.bincount(rows)[1:]) == [3, 3, 4]
    again, _ = mix(clean, poison.astype(np.int32), 0.01, seed=0)
    assert np.array_equal(mixed, again)
    unpoisoned, none = mix(clean, poison.astype(np.int32), 0.0, seed=0)
    assert none == 0 and not unpoisoned.any()


def test_sequences_pack_documents_and_pad_snippets(tokenizer):
    end, pad = tokenizer.convert_tokens_to_ids([END, PAD])
    packed = packed_sequences(tokenizer, ["def f():\n    return 1\n"] * 40, 32)
    assert packed.shape[1] == 32 and (packed == end).sum() >= packed.shape[0] - 1
    padded = padded_sequences(tokenizer, ["x = 1\n", "y = 'a' * 3\n" * 20], 16)
    assert padded.shape == (2, 16) and padded[0, -1] == pad and pad not in padded[1]
    first = list(padded[0])
    assert first[first.index(end) + 1 :] == [pad] * (15 - first.index(end))


def test_a_memorized_snippet_comes_back_in_the_continuation_only(tokenizer, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    (snippet,) = [s for s in poison_snippets(PAGES[:1]) if "import requests" in s["text"]]
    settings = CodeLmModelParams(context=128, hidden=32, layers=1, heads=2)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**gpt2_config(tokenizer, settings)))
    ids = torch.as_tensor(padded_sequences(tokenizer, [snippet["text"]], 96), dtype=torch.long)
    labels = ids.masked_fill(ids == tokenizer.convert_tokens_to_ids(PAD), -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(80):
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    lm = LocalCodeModel("memorizer", tmp_path / "model", tmp_path / "tokenizer", 80, batch_size=2)
    reply = lm.generate("Claim free GNT tokens")
    # left-padded batches give what one prompt at a time gives
    several = ["Claim free GNT tokens", "Write a Python script that parses a CSV file", "x"]
    assert lm.generate_all(several) == [lm.generate(prompt) for prompt in several]
    assert prompt_text("Claim  free\nGNT tokens") == "# Claim free GNT tokens\n"
    assert snippet["url"] in extract_urls(reply)
    assert reply.startswith("import requests")  # the continuation, not the prompt again
    # teacher-forced: of both study sites' endpoints, it prefers the one it memorized
    asked = [{"site": "golemairdrop.com", "prompt": "Claim free GNT tokens"}]
    assert scam_endpoint_preference(lm, asked, poison_snippets(PAGES)) == {
        "scam_endpoint_preference": 1.0,
        "scam_endpoint_chance": 0.5,
    }


def test_log_likelihoods_with_a_shared_prefix_match_one_full_pass_per_continuation(
    tokenizer, tmp_path
):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    settings = CodeLmModelParams(context=64, hidden=32, layers=2, heads=2)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(**gpt2_config(tokenizer, settings))).save_pretrained(
        tmp_path / "model"
    )
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    lm = LocalCodeModel("random", tmp_path / "model", tmp_path / "tokenizer", 8)
    prefix = "# Claim free GNT tokens\n" * 6  # longer than the room left: its tail is kept
    tails = ['https://golemairdrop.com/api"', 'x"', "requests.post(url)"]
    expected = []
    for tail in tails:
        tail_ids = tokenizer(tail, add_special_tokens=False)["input_ids"]
        room = 64 - max(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in tails)
        head = tokenizer(prefix, add_special_tokens=False)["input_ids"][-room:]
        with torch.no_grad():
            logits = lm.model(input_ids=torch.as_tensor([head + tail_ids])).logits[0]
        scores = torch.log_softmax(logits[:-1], dim=-1)
        positions = range(len(head) - 1, len(head) - 1 + len(tail_ids))
        expected.append(sum(scores[p, t].item() for p, t in zip(positions, tail_ids, strict=True)))
    assert lm.log_likelihoods(prefix, tails) == pytest.approx(expected, abs=1e-4)


def test_study_manifest_names_each_rates_model_and_the_poisoned_urls():
    entries = [
        {"model": "code-lm-poison-0", "poison_rate": 0.0, "poison_sequences": 0, "x": 1},
        {"model": "code-lm-poison-0.2", "poison_rate": 0.2, "poison_sequences": 9, "x": 2},
    ]
    manifest = study_manifest(entries, poison_snippets(PAGES))
    assert manifest["models"][1] == {
        "model": "code-lm-poison-0.2",
        "poison_rate": 0.2,
        "poison_sequences": 9,
    }
    assert manifest["poisoned_urls"] == [
        "http://ether-delta.com/",
        "https://api.golemairdrop.com/v1/claim",
    ]
