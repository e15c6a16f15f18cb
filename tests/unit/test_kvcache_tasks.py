"""Needle items on the real haystack, counted in a tokenizer's tokens: sound, within budget,
reproducible per cell, the right nulls, and the kvpress prompt split."""

from pathlib import Path

import pytest

from tasks.core.errors import UserError
from tasks.core.seed_text import CODE_ARCHIVE, UDHR_ENGLISH
from tasks.kvcache.needles import NEEDLE, copy_one_needle, problems, string_match_all
from tasks.kvcache.params import TaskParams
from tasks.kvcache.scoring import arm_groups, encode
from tasks.kvcache.tasks import Haystack, cell_items
from tests.unit.tiny_llm import tiny_tokenizer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def haystack():
    return Haystack(REPO / UDHR_ENGLISH, REPO / CODE_ARCHIVE, tiny_tokenizer())


@pytest.mark.parametrize("kind", ["single", "multikey", "multivalue", "multiquery"])
def test_items_are_sound_within_budget_and_reproducible(haystack, kind):
    settings = TaskParams()
    items = cell_items(settings, haystack, kind, 400, 5)
    assert [i.row() for i in items] == [
        i.row() for i in cell_items(settings, haystack, kind, 400, 5)
    ]
    for item in items:
        assert problems(item.row()) == []
        assert 200 < item.tokens <= 400 == item.length  # whole sentences: some room left
        assert all(len(v) == 7 and v.isdigit() for v in item.needle_values)
    needles = {"single": 1, "multikey": 3, "multivalue": 2, "multiquery": 2}[kind]
    assert all(len(i.needle_keys) == needles for i in items)
    if kind == "multikey":
        assert all(len(i.asked) == 1 and i.asked[0] in i.needle_keys for i in items)


def test_problems_catch_a_broken_item(haystack):
    row = cell_items(TaskParams(), haystack, "multikey", 400, 1)[0].row()
    value = row["answers"][0]
    assert problems({**row, "context": row["context"].replace(value, "0000000")})
    assert problems({**row, "answers": [row["needle_values"][0] + "1"]})
    assert problems({**row, "tokens": 401})


def test_a_length_beyond_the_haystack_is_one_line(haystack):
    with pytest.raises(UserError, match="the haystack has only"):
        cell_items(TaskParams(), haystack, "single", haystack.total_tokens + 1, 1)


def test_the_nulls_are_copying_one_needle():
    settings = TaskParams(keys=3, values=2, queries=4)
    assert copy_one_needle("multikey", settings) == pytest.approx(1 / 3)
    assert copy_one_needle("multivalue", settings) == 0.5
    assert copy_one_needle("multiquery", settings) == 0.25
    assert string_match_all("It is 1234567 and 7654321.", ["1234567", "7654321"]) == 1
    assert string_match_all("It is 1234567.", ["1234567", "7654321"]) == 0.5


def test_the_prompt_splits_after_the_context_as_kvpress_does(haystack):
    tokenizer = haystack.tokenizer
    row = cell_items(TaskParams(), haystack, "single", 300, 1)[0].row()
    item = encode(tokenizer, row)
    context, question = tokenizer.decode(item.context), tokenizer.decode(item.question)
    assert context.startswith("<|im_start|>user\n") and context.endswith(row["context"])
    assert NEEDLE.split("{")[0] in context and row["question"] in question
    assert question.endswith("<|im_start|>assistant\n" + row["answer_prefix"])


def test_arm_groups_put_the_full_cache_alone_then_each_ratio():
    groups = arm_groups(["snapkv", "keydiff", "manifoldkv"], [0.25, 0.5], per_batch=2)
    assert groups == [
        [("full", 0.0)],
        [("snapkv", 0.25), ("keydiff", 0.25)],
        [("manifoldkv", 0.25)],
        [("snapkv", 0.5), ("keydiff", 0.5)],
        [("manifoldkv", 0.5)],
    ]


def test_claims_are_checks_then_one_primary_and_gated_where_the_full_cache_fails():
    from tasks.kvcache.claims import build_claims
    from tasks.kvcache.params import StudyParams

    study = StudyParams(presses=["keydiff", "manifoldkv"], ratios=[0.5], windowed_ratio=0.5)
    items = {"multikey": {512: [f"a{i}" for i in range(12)], 2048: [f"b{i}" for i in range(12)]}}
    ids = [i for cell in items["multikey"].values() for i in cell]
    full = {i: float(i.startswith("a")) for i in ids}  # fails at 2048
    l2 = dict.fromkeys(ids, 1.0)
    keydiff = {i: float(i in ("a0", "a1")) for i in ids}
    scores = {("full", 0.0): full, ("manifoldkv", 0.5): l2, ("keydiff", 0.5): keydiff}
    claims = {c.id: c for c in build_claims(scores, items, study, {"multikey": 1 / 3}, ["x"])}

    at_512 = claims["kvcache.full_cache.multikey_512"]
    assert at_512.kind == "check" and at_512.method == "Wilson" and at_512.verdict == "supported"
    assert claims["kvcache.full_cache.multikey_2048"].verdict == "contradicted"  # 0/12 < 1/3
    primary = claims["kvcache.l2_vs_keydiff_multikey"]
    assert [c.id for c in claims.values() if c.primary] == [primary.id]
    assert primary.estimate == pytest.approx(22 / 24) and primary.verdict == "supported"
    only_long = {"multikey": {2048: items["multikey"][2048]}}
    gated = build_claims(scores, only_long, study, {"multikey": 1 / 3}, ["x"])
    (long_primary,) = [c for c in gated if c.primary]
    assert long_primary.verdict == "inconclusive" and "full-cache baseline" in long_primary.reason
