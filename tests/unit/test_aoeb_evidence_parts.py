"""AOEB's evidence: chance levels and the random row, choices on dev, the claims, and the
leaderboard's intervals and baseline rows."""

from __future__ import annotations

import math
import shutil
from statistics import fmean

import numpy as np
import pytest

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration
from tasks.aoeb.chance import chance_by_query, expected_random_ndcg, random_run
from tasks.aoeb.claims import chance_claims, finetune_claims, slug
from tasks.aoeb.encoders import search
from tasks.aoeb.evaluate import (
    chance_levels,
    evaluation_claims,
    leaderboard,
    leaderboard_table,
    per_query_ndcg,
    query_estimates,
    with_baselines,
)
from tasks.aoeb.finetune import checkpoint_steps, choose_on_dev
from tasks.aoeb.metrics import retrieval_scores
from tasks.aoeb.params import AoebParams, EvaluateParams
from tasks.aoeb.selection import best_candidate, split_ndcg, split_view
from tasks.core import evidence
from tasks.core.text_encoders import (
    BM25Encoder,
    EncoderOptions,
    EncoderParams,
    TransformersEncoder,
)
from tests.unit.test_aoeb_encoders import tiny_bert  # noqa: F401  (a fixture)

WORDS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "olive", "peach", "pear", "plum"]


def pooled_task(queries: int, pool: int, split: str = "test") -> RetrievalTask:
    """Each query ranked against its own pool of `pool` documents, one of them relevant."""
    corpus, texts, qrels, candidates = {}, {}, {}, {}
    for q in range(queries):
        ids = [f"h{q}-s{i}" for i in range(pool)]
        corpus |= {
            d: {"title": "", "text": f"{WORDS[i % len(WORDS)]} {d}"} for i, d in enumerate(ids)
        }
        texts[f"h{q}-q"] = f"{WORDS[0]} question {q}"
        qrels[f"h{q}-q"] = {ids[0]: 1}
        candidates[f"h{q}-q"] = ids
    declaration = TaskDeclaration("Pools", "memory", splits=(split,), has_candidates=True)
    return RetrievalTask(declaration, corpus, texts, {split: qrels}, candidates)


def corpus_task(name: str = "Words", capability: str = "code") -> RetrievalTask:
    """Ten documents, one per fruit word; query i asks for word i (dev and test halves)."""
    corpus = {f"d{i}": {"title": "", "text": f"{word} is a fruit"} for i, word in enumerate(WORDS)}
    queries = {f"q{i}": f"which fruit is {word}" for i, word in enumerate(WORDS)}
    qrels = {
        "dev": {f"q{i}": {f"d{i}": 1} for i in range(5)},
        "test": {f"q{i}": {f"d{i}": 1} for i in range(5, 10)},
    }
    declaration = TaskDeclaration(name, capability, splits=("dev", "test"))
    return RetrievalTask(declaration, corpus, queries, qrels)


# ---------------------------------------------------------------- chance and the random row


def test_the_chance_level_of_one_relevant_among_seven_is_the_mean_discount():
    expected = fmean(1 / math.log2(r + 2) for r in range(7))  # ≈ 0.5197
    judged = {"s0": 1}
    assert expected_random_ndcg(judged, {f"s{i}" for i in range(7)}, 10) == pytest.approx(expected)
    assert expected == pytest.approx(0.5197, abs=1e-4)
    # 450 candidates: only the first ten ranks count
    many = {f"d{i}" for i in range(450)}
    reach = sum(1 / math.log2(r + 2) for r in range(10))
    assert expected_random_ndcg({"d0": 1}, many, 10) == pytest.approx(reach / 450)
    assert math.isnan(expected_random_ndcg({"d0": 0}, many, 10))


def test_graded_chance_matches_a_monte_carlo_of_random_rankings():
    # the multi-hop shape: an answer sheet (2) and a bridge sheet (1) among 30 candidates
    judged, candidates = {"a": 2, "b": 1}, [f"d{i}" for i in range(28)] + ["a", "b"]
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(4000):
        order = [candidates[i] for i in rng.permutation(len(candidates))]
        ranked = {doc: float(len(order) - r) for r, doc in enumerate(order)}
        draws.append(retrieval_scores({"q": judged}, {"q": ranked}, [10])["main_score"])
    chance = expected_random_ndcg(judged, set(candidates), 10)
    assert fmean(draws) == pytest.approx(chance, abs=0.01)


def test_the_random_row_ranks_only_each_querys_pool_and_lands_on_chance():
    task = pooled_task(queries=600, pool=7)
    run = random_run(task, "test", 100, seed=0)
    assert run == random_run(task, "test", 100, seed=0) != random_run(task, "test", 100, seed=1)
    for qid, ranked in run.items():
        assert sorted(ranked) == sorted(task.candidates[qid])
    chance = chance_by_query(task, "test")
    measured = evidence.mean(list(per_query_ndcg(task.qrels["test"], run).values()), "queries")
    assert measured.low <= fmean(chance.values()) <= measured.high
    assert fmean(chance.values()) == pytest.approx(0.5197, abs=1e-4)


# ---------------------------------------------------------------- choices on dev


def test_the_best_dev_candidate_wins_and_ties_go_to_the_earlier_one():
    scores = {50: {"a": 0.2, "b": 0.4}, 100: {"a": 0.5, "b": 0.3}, 150: {"a": 0.3, "b": 0.5}}
    assert best_candidate(scores) == 100
    assert best_candidate({200: {"a": 0.1}, 50: {"a": 0.1}}) == 50
    with pytest.raises(ValueError, match="no candidate"):
        best_candidate({})


def test_a_pooled_split_embeds_only_its_pools_and_ranks_the_same(tiny_bert):  # noqa: F811
    task = pooled_task(queries=4, pool=3, split="dev")
    task.corpus["other-s0"] = {"title": "", "text": "apple elsewhere"}
    view = split_view(task, "dev")
    assert set(view.corpus) == {d for pool in task.candidates.values() for d in pool}
    assert split_view(corpus_task(), "dev").corpus == corpus_task().corpus  # no pools: all
    encoder = TransformersEncoder("tiny", tiny_bert, EncoderOptions(model=str(tiny_bert)))
    assert search(encoder, view, "dev", 10, use_cache=False) == search(
        encoder, task, "dev", 10, use_cache=False
    )


def test_dev_scores_read_the_dev_queries_only():
    scores = split_ndcg(BM25Encoder("bm25"), [corpus_task()], "dev")
    assert scores == {"Words": 1.0}  # each fruit word names its document
    pictures = corpus_task()
    pictures.declaration = TaskDeclaration("Pics", "multimodal", modality="text-to-image")
    assert split_ndcg(BM25Encoder("bm25"), [pictures], "dev") == {}  # text tasks only


def test_the_checkpoint_is_chosen_on_dev_and_the_last_without_one(tiny_bert, tmp_path):  # noqa: F811
    storage = tmp_path / "storage"
    for step in (50, 100):
        folder = storage / f"step-{step:07d}"
        folder.mkdir(parents=True)
        for name in ("config.json", "model.safetensors"):
            shutil.copyfile(tiny_bert / name, folder / name)
    (storage / "step-0000150").mkdir()  # no weights: not a checkpoint
    checkpoints = checkpoint_steps(storage)
    assert list(checkpoints) == [50, 100]
    chosen, selection = choose_on_dev([corpus_task()], checkpoints, tiny_bert, tmp_path / "s")
    assert chosen == 50  # the same weights score the same: the earlier step
    assert selection["split"] == "dev" and set(selection["mean_by_step"]) == {50, 100}
    no_dev = corpus_task()
    no_dev.qrels.pop("dev")
    assert choose_on_dev([no_dev], checkpoints, tiny_bert, tmp_path / "s")[0] == 100


# ---------------------------------------------------------------- claims


def per_query_rows(rng: np.random.Generator) -> dict:
    """embedder clearly above mmbert on Code (40 queries), level on Tool (30), tiny Memo (5)."""
    base_code = rng.uniform(0, 0.6, 40)
    base_tool = rng.uniform(0, 1, 30)
    return {
        "mmbert": {
            "Code": {f"c{i}": v for i, v in enumerate(base_code)},
            "Tool": {f"t{i}": v for i, v in enumerate(base_tool)},
            "Memo": {f"m{i}": 0.5 for i in range(5)},
        },
        "embedder": {
            "Code": {f"c{i}": v + rng.uniform(0.2, 0.4) for i, v in enumerate(base_code)},
            "Tool": {f"t{i}": v + rng.normal(0, 0.05) for i, v in enumerate(base_tool)},
            "Memo": {f"m{i}": 0.6 for i in range(5)},
        },
    }


def test_the_finetune_claims_pool_the_text_tasks_and_split_by_task_where_n_allows():
    rows = per_query_rows(np.random.default_rng(0))
    claims = finetune_claims(rows, "embedder", "mmbert", ["Code", "Tool", "Memo"], 20, [0, 1, 2])
    by_id = {c.id: c for c in claims}
    assert list(by_id) == [
        "aoeb.finetuned_beats_base.pooled",
        "aoeb.finetuned_beats_base.code",
        "aoeb.finetuned_beats_base.tool",
    ]  # Memo has 5 queries: no claim of its own
    assert [c.primary for c in claims] == [True, False, False]
    pooled = by_id["aoeb.finetuned_beats_base.pooled"]
    assert pooled.n == 75 and pooled.unit == "test queries" and pooled.null == 0
    assert by_id["aoeb.finetuned_beats_base.code"].verdict == "supported"
    assert by_id["aoeb.finetuned_beats_base.code"].estimate == pytest.approx(0.3, abs=0.05)
    assert by_id["aoeb.finetuned_beats_base.tool"].verdict == "inconclusive"
    assert all(c.arms == ["embedder", "mmbert"] and c.p_value is not None for c in claims)
    # the base better: contradicted, so a baseline can win
    swapped = finetune_claims(rows, "mmbert", "embedder", ["Code"], 20, [0, 1, 2])
    assert swapped[0].verdict == "contradicted"
    assert finetune_claims(rows, "embedder", "absent", ["Code"], 20, [0]) == []
    # against the strongest simple baseline; one training seed decides nothing
    bm25 = finetune_claims(
        {**rows, "bm25": rows["embedder"]}, "mmbert", "embedder", ["Code"], 20, [0], baseline="bm25"
    )
    assert bm25[-1].id == "aoeb.finetuned_beats_baseline.pooled" and not bm25[-1].primary
    assert {c.verdict for c in bm25} == {"inconclusive"}


def test_chance_claims_use_each_tasks_chance_as_the_null():
    rows = {"enc": {"Memo": {f"m{i}": v for i, v in enumerate([0.5, 0.55, 0.45, 0.58] * 6)}}}
    estimates = query_estimates(rows)
    (claim,) = chance_claims(estimates, {"Memo": 0.5197}, {"Memo": "memory"}, 20)
    assert claim.id == "aoeb.above_chance.memo.enc" and claim.null == 0.5197
    assert claim.kind == "check"
    assert claim.verdict == "inconclusive" and "chance 0.5197" in claim.metric
    assert chance_claims(estimates, {"Memo": 0.1}, {"Memo": "memory"}, 20)[0].verdict == (
        "supported"
    )
    assert chance_claims(estimates, {"Memo": 0.1}, {"Memo": "memory"}, 50) == []  # n < 50
    assert slug("EmbeddedCodeRetrieval") == "embedded_code_retrieval" and slug("mini-LM") == (
        "mini_lm"
    )


# ---------------------------------------------------------------- leaderboard


def test_the_leaderboard_has_intervals_a_random_row_and_a_chance_row():
    tasks = [
        RetrievalTask(TaskDeclaration("Code", "code"), {}, {}, {}),
        RetrievalTask(TaskDeclaration("Tool", "tool"), {}, {}, {}),
    ]
    rng = np.random.default_rng(1)
    rows = per_query_rows(rng)
    for row in rows.values():
        row.pop("Memo")
    rows["random"] = {
        "Code": {f"c{i}": float(v) for i, v in enumerate(rng.uniform(0, 0.05, 40))},
        "Tool": {f"t{i}": float(v) for i, v in enumerate(rng.uniform(0, 0.1, 30))},
    }
    means = {
        row: {t: fmean(v.values()) for t, v in by_task.items()} for row, by_task in rows.items()
    }
    params = AoebParams(
        evaluate=EvaluateParams(
            encoders=[
                EncoderParams(name="mmbert", kind="bm25"),
                EncoderParams(name="embedder", kind="bm25"),
            ]
        )
    )
    board = leaderboard({e: means[e] for e in ("mmbert", "embedder")}, {}, tasks, params)
    estimates = query_estimates(rows)
    chance = chance_levels({"Code": {"c0": 0.01, "c1": 0.01}, "Tool": {"t0": 0.02}})
    board = with_baselines(board, rows, estimates, means["random"], chance, tasks)
    embedder = board["encoders"]["embedder"]
    low, high = embedder["intervals"]["Code"]
    assert low < embedder["by_task"]["Code"] < high and embedder["queries"]["Code"] == 40
    assert embedder["pooled_text_tasks"]["n"] == 70
    assert board["random"]["by_task"]["Code"] == round(means["random"]["Code"], 4)
    assert board["chance"]["by_task"] == {"Code": 0.01, "Tool": 0.02}
    claims = evaluation_claims(rows, estimates, chance, tasks, params)
    ids = [c.id for c in claims]
    assert ids[0] == "aoeb.finetuned_beats_base.pooled"
    assert "aoeb.above_chance.code.embedder" in ids and not any("random" in i for i in ids)
    table = leaderboard_table(board, tasks)
    assert "| random |" in table and "| chance | 0.0100 | 0.0200 |" in table
    assert f"| embedder | {embedder['by_task']['Code']:.4f} [{low:.3f}, {high:.3f}]" in table
