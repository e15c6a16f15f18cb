"""Needle tasks: every kind is sound and validated, cells are reproducible, the vocabulary
gives one token per word, and bad models and lengths are one-line errors."""

import numpy as np
import pytest

from tasks.core.errors import UserError
from tasks.kvcache.haystack import haystack_words, words
from tasks.kvcache.lm import build_tokenizer, load_local
from tasks.kvcache.needles import key_pool, problems, string_match_all, value_pool
from tasks.kvcache.params import KINDS, TaskParams
from tasks.kvcache.scoring import check_positions, encode
from tasks.kvcache.tasks import cell_items, validated_table
from tests.conftest import REPO

SETTINGS = TaskParams(lengths=[64], train_lengths=[48])


@pytest.fixture(scope="module")
def stream():
    return haystack_words(
        REPO / "data/seed/udhr/udhr_eng.xml", REPO / "data/seed/code/cpython-3.11.7-stdlib.parquet"
    )


def test_haystack_is_udhr_then_docstrings(stream):
    assert stream[:4] == ["whereas", "recognition", "of", "the"]
    assert len(stream) > 20000 and "argparse" in stream
    assert words("Hello, world!") == ["hello", ",", "world", "!"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_valid_and_its_answers_sit_at_the_needles(stream, kind):
    items = cell_items(SETTINGS, stream, "test", kind, 64, 6)
    table = validated_table(items)
    assert table.num_rows == 6
    for item in items:
        row = item.row()
        assert problems(row) == []
        context = item.context.split(" ")
        assert len(context) == 64
        for value in item.answers:  # right after "the magic pair <key>"
            at = context.index(value)
            assert context[at - 1] in item.asked and context[at - 2] == "pair"
    expected = {"single": 1, "multikey": 3, "multivalue": 2, "multiquery": 2}[kind]
    assert all(len(i.needle_keys) == expected for i in items)
    assert all(len(i.answers) == (1 if kind in ("single", "multikey") else 2) for i in items)
    again = cell_items(SETTINGS, stream, "test", kind, 64, 6)
    assert [i.context for i in again] == [i.context for i in items]
    other = cell_items(SETTINGS, stream, "dev", kind, 64, 6)
    assert [i.context for i in other] != [i.context for i in items]


def test_validation_names_a_broken_item(stream):
    row = cell_items(SETTINGS, stream, "test", "multikey", 64, 1)[0].row()
    moved = {**row, "needle_positions": [p + 1 for p in row["needle_positions"]]}
    assert any("is not at word" in p for p in problems(moved))
    doubled = {**row, "context": row["context"] + " " + row["answers"][0]}
    found = problems(doubled)
    assert any("occurs 2 times" in p for p in found) and any("context tokens" in p for p in found)
    wrong = {**row, "answers": [v for v in row["needle_values"] if v not in row["answers"]][:1]}
    assert any("not the asked needles' values" in p for p in problems(wrong))


def test_pools_avoid_the_haystack(stream):
    keys = key_pool(set(stream))
    assert len(set(keys)) == len(keys) == 256 and not set(keys) & set(stream)
    assert value_pool([100, 104]) == ["100", "101", "102", "103", "104"]


def test_string_match_all_is_the_share_of_answers_found():
    assert string_match_all("412 877", ["412", "877"]) == 1.0
    assert string_match_all("412 [UNK]", ["412", "877"]) == 0.5
    assert string_match_all("", ["412"]) == 0.0


def test_word_level_vocabulary_gives_one_token_per_context_word(stream):
    from tasks.kvcache.train import fast_tokenizer

    items = [i.row() for i in cell_items(SETTINGS, stream, "test", "multiquery", 64, 4)]
    keys, values = key_pool(set(stream)), value_pool([100, 999])
    tokenizer = fast_tokenizer(build_tokenizer([r["context"] for r in items], keys, values, 50))
    for item in encode(tokenizer, items):
        assert len(item.context) == 64
        assert item.answer_tokens == 2
        assert tokenizer.decode(item.question[-1:]) == item.row["asked"][-1]
    with pytest.raises(UserError, match=r"exceed the model's 70 positions; choose a shorter"):
        check_positions(encode(tokenizer, items), 70)
    check_positions(encode(tokenizer, items), 200)


def test_a_model_folder_that_is_not_a_causal_lm_is_one_line(tmp_path):
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=30,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
    )
    BertForMaskedLM(config).save_pretrained(tmp_path)
    with pytest.raises(
        UserError, match=r"'bert' checkpoint \(BertForMaskedLM\) is not a causal LM"
    ):
        load_local(tmp_path)
    with pytest.raises(UserError, match="no such model folder"):
        load_local(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a transformers checkpoint"):
        load_local(tmp_path / "empty")


def test_train_split_mixes_kinds_and_lengths(stream):
    from tasks.kvcache.tasks import generate

    settings = TaskParams(train_items=40, train_lengths=[48, 64], lengths=[64], test_items=2)
    splits = generate(settings, stream)
    train = splits["train"]
    assert len(train) == 40 and {i.length for i in train} == {48, 64}
    assert {i.kind for i in train} == set(KINDS)
    assert len(splits["test"]) == 2 * len(KINDS) and len(splits["dev"]) == 8 * len(KINDS)
    assert np.all([problems(i.row()) == [] for i in train])


def test_training_sequences_label_every_answer_and_only_answers(stream):
    from tasks.kvcache.train import fast_tokenizer, training_sequences
    from tasks.kvcache.train_loop import IGNORE, padded_batch

    rows = [i.row() for i in cell_items(SETTINGS, stream, "train", "multikey", 48, 3)]
    rows += [i.row() for i in cell_items(SETTINGS, stream, "train", "multivalue", 48, 1)]
    keys, values = key_pool(set(stream)), value_pool([100, 999])
    tokenizer = fast_tokenizer(build_tokenizer([r["context"] for r in rows], keys, values, 50))
    plain = training_sequences(tokenizer, rows, ask_every_needle=False, seed=0)
    every = training_sequences(tokenizer, rows, ask_every_needle=True, seed=0)
    assert plain["context_lengths"] == every["context_lengths"] == [48] * 4
    for index, row in enumerate(rows):
        first = tokenizer.convert_ids_to_tokens(plain["sequences"][index])
        assert [first[p] for p in plain["answer_positions"][index]] == row["answers"]
        assert first[-len(row["answers"]) - 1] == row["asked"][-1]
        if row["kind"] == "multikey":  # then each needle once, each answer after its key
            words = tokenizer.convert_ids_to_tokens(every["sequences"][index])
            asked = every["answer_positions"][index][1:]
            assert sorted(words[p] for p in asked) == sorted(row["needle_values"])
            for p in asked:
                assert row["needle_values"][row["needle_keys"].index(words[p - 1])] == words[p]
        else:  # a key shared by two needles is asked only as the item asks it
            assert every["sequences"][index] == plain["sequences"][index]
    ids, mask, labels = padded_batch(every["sequences"], every["answer_positions"], 0)
    assert mask.sum(1).tolist() == [len(s) for s in every["sequences"]]
    for row, positions in enumerate(every["answer_positions"]):
        kept = (labels[row] != IGNORE).nonzero().flatten().tolist()
        assert kept == positions and labels[row, kept].tolist() == ids[row, kept].tolist()
