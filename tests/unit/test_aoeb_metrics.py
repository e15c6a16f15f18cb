"""The aoeb retrieval metrics against pytrec_eval (trec_eval itself), the readers, the CLI."""

import json
import random

import pytest
import pytrec_eval
from typer.testing import CliRunner

from tasks.aoeb.metrics import (
    DEFAULT_K,
    MEASURES,
    parse_k,
    per_query_scores,
    query_coverage,
    retrieval_scores,
)
from tasks.aoeb.trec import read_qrels, read_run
from tasks.core.cli import app
from tasks.core.errors import InputError

TREC_NAMES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P"}
# Ids whose code-point order differs from a naive guess: case, digits, prefixes, non-ASCII.
ODD_IDS = ["a", "aa", "B", "b", "10", "9", "doc-é", "doc-z", "ß", "中文", "Z", "_x"]


def random_case(seed: int, queries: int = 120, pool: int = 80, max_run: int = 40):
    """Qrels and a run with graded and negative relevance, tied scores, queries without a
    relevant document or without qrels, judged documents the run misses, short runs."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(pool)] + ODD_IDS
    qrels, run = {}, {}
    for q in range(queries):
        qid = f"q{q}"
        tie_heavy = rng.random() < 0.5
        retrieved = rng.sample(docs, rng.randrange(0, max_run))
        run[qid] = {
            doc: float(rng.randrange(4)) if tie_heavy else round(rng.uniform(-1, 1), 2)
            for doc in retrieved
        }
        if rng.random() < 0.1:
            continue  # a run query with no qrels at all
        judged = rng.sample(docs, rng.randrange(0, 12))
        qrels[qid] = {doc: rng.choice([-1, 0, 0, 1, 1, 2, 3]) for doc in judged}
    for q in range(queries, queries + 5):  # judged queries the run lacks
        qrels[f"q{q}"] = {"d1": 1}
    return qrels, run


def reference(qrels, run, ks):
    """pytrec_eval's per-query values under our keys, for queries with a relevant document;
    MRR@k from trec_eval's recip_rank (1/rank of the first relevant document, uncut)."""
    cut = ",".join(map(str, ks))
    measures = {f"{name}.{cut}" for name in TREC_NAMES.values()} | {"recip_rank"}
    evaluated = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    out = {}
    for qid, values in evaluated.items():
        if not any(rel > 0 for rel in qrels[qid].values()):
            continue
        row = {}
        for ours, theirs in TREC_NAMES.items():
            row.update({f"{ours}_at_{k}": values[f"{theirs}_{k}"] for k in ks})
        rr = values["recip_rank"]
        row.update({f"mrr_at_{k}": rr if rr and round(1 / rr) <= k else 0.0 for k in ks})
        out[qid] = row
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("ks", [DEFAULT_K, (1, 2, 7, 33, 5000)])
def test_every_metric_matches_pytrec_eval_per_query(seed, ks):
    qrels, run = random_case(seed)
    expected = reference(qrels, run, ks)
    query_ids, ours = per_query_scores(qrels, run, ks)
    assert sorted(query_ids) == sorted(expected)
    assert len(ours) == len(MEASURES) * len(ks)
    for position, qid in enumerate(query_ids):
        for key, value in expected[qid].items():
            assert ours[key][position] == pytest.approx(value, abs=1e-6), (qid, key)


@pytest.mark.parametrize("seed", [4, 5])
def test_averages_are_mteb_style(seed):
    qrels, run = random_case(seed, queries=300)
    expected = reference(qrels, run, DEFAULT_K)
    scores = retrieval_scores(qrels, run)
    keys = [f"{m}_at_{k}" for m in MEASURES for k in DEFAULT_K]
    assert list(scores) == [*keys, "main_score"]
    for key in keys:
        mean = sum(row[key] for row in expected.values()) / len(expected)
        assert scores[key] == pytest.approx(mean, abs=1e-6), key
    assert scores["main_score"] == scores["ndcg_at_10"]
    assert 0 < scores["ndcg_at_10"] < 1


def test_main_score_is_ndcg_at_10_even_when_not_asked():
    qrels, run = random_case(6)
    scores = retrieval_scores(qrels, run, [1, 5])
    assert set(scores) == {f"{m}_at_{k}" for m in MEASURES for k in (1, 5)} | {"main_score"}
    assert scores["main_score"] == pytest.approx(retrieval_scores(qrels, run)["ndcg_at_10"])


def test_ties_rank_by_document_id_descending_like_trec_eval():
    qrels = {"q": {"B": 1, "aa": 2}}
    run = {"q": {"a": 1.0, "aa": 1.0, "B": 1.0, "b": 1.0, "c": 0.5}}  # trec order: b aa a B c
    _, ours = per_query_scores(qrels, run, [1, 2, 4])
    assert ours["mrr_at_2"][0] == 0.5 and ours["mrr_at_1"][0] == 0.0  # "aa" at rank 2
    assert ours["precision_at_4"][0] == 0.5  # "aa" and "B" in the top 4
    assert ours["map_at_4"][0] == pytest.approx((1 / 2 + 2 / 4) / 2)
    expected = reference(qrels, run, [1, 2, 4])["q"]
    assert {key: ours[key][0] for key in expected} == pytest.approx(expected, abs=1e-12)


def test_negative_relevance_counts_as_zero_gain():
    qrels = {"q": {"x": -1, "y": 2}}
    run = {"q": {"x": 2.0, "y": 1.0}}
    _, ours = per_query_scores(qrels, run, [1, 2])
    assert ours["ndcg_at_1"][0] == 0.0
    assert ours["ndcg_at_2"][0] == pytest.approx(reference(qrels, run, [1, 2])["q"]["ndcg_at_2"])


def test_unmatched_queries_are_left_out_and_counted():
    qrels = {"q1": {"a": 1}, "q2": {"a": 0}, "q3": {"b": 2}}
    run = {"q1": {"a": 1.0}, "q2": {"a": 1.0}, "q4": {"a": 1.0}}
    assert query_coverage(qrels, run) == {
        "scored": 1,
        "run_without_relevant": 2,
        "relevant_not_in_run": 1,
    }
    assert retrieval_scores(qrels, run, [1])["ndcg_at_1"] == 1.0
    with pytest.raises(InputError, match="same query ids"):
        retrieval_scores({"other": {"a": 1}}, run)


def test_k_values_are_checked():
    assert parse_k([10, 1, 10]) == (1, 10)
    for bad in ([], [0], [2.5]):
        with pytest.raises(ValueError):
            parse_k(bad)


def write_trec(path, qrels=None, run=None):
    lines = []
    for qid, docs in (qrels or {}).items():
        lines += [f"{qid} 0 {doc} {rel}" for doc, rel in docs.items()]
    for qid, docs in (run or {}).items():
        ranked = sorted(docs.items(), key=lambda item: -item[1])
        lines += [f"{qid} Q0 {d} {r} {s!r} test" for r, (d, s) in enumerate(ranked, 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_readers_agree_with_pytrec_eval_parsers(tmp_path):
    qrels, run = random_case(7, queries=30)
    qrels_path = write_trec(tmp_path / "qrels.txt", qrels=qrels)
    run_path = write_trec(tmp_path / "run.trec", run={q: d for q, d in run.items() if d})
    with open(qrels_path, encoding="utf-8") as handle:
        assert read_qrels(qrels_path) == pytrec_eval.parse_qrel(handle)
    with open(run_path, encoding="utf-8") as handle:
        assert read_run(run_path) == pytrec_eval.parse_run(handle)


def test_beir_qrels_with_header(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq1\tdoc 1\t1\nq1\td2\t0\n\nq2\td3\t2.0\n")
    assert read_qrels(path) == {"q1": {"doc 1": 1, "d2": 0}, "q2": {"d3": 2}}


@pytest.mark.parametrize(
    "reader, text, line, message",
    [
        (read_qrels, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n", 3, "columns"),
        (read_qrels, "q1 0 d1 1\nq1 0 d2 high\n", 2, "not an integer"),
        (read_qrels, "q1 0 d1 0.5\n", 1, "not an integer"),
        (read_qrels, "q1 d1\n", 1, "columns"),
        (read_run, "q1 Q0 d1 1 0.9 t\nq1 Q0 d2 2 0.8\n", 2, "expected 6"),
        (read_run, "q1 Q0 d1 1 0.9 t\nq1 Q0 d2 2 nan t\n", 2, "finite"),
        (read_run, "q1 Q0 d1 1 0.9 t\n\nq1 Q0 d1 2 0.8 t\n", 3, "listed twice"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, reader, text, line, message):
    path = tmp_path / "input.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as caught:
        reader(path)
    assert str(caught.value).startswith(f"{path}: line {line}: ")
    assert "\n" not in str(caught.value)


def test_empty_or_missing_files(tmp_path):
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(InputError, match="no judgments"):
        read_qrels(tmp_path / "empty")
    with pytest.raises(InputError, match="no ranked documents"):
        read_run(tmp_path / "empty")
    with pytest.raises(InputError, match="no such file"):
        read_run(tmp_path / "absent")


def test_cli_prints_mteb_json(tmp_path):
    qrels, run = random_case(8, queries=60)
    qrels_path = tmp_path / "qrels.tsv"
    rows = [f"{q}\t{d}\t{r}" for q, docs in qrels.items() for d, r in docs.items()]
    qrels_path.write_text("\n".join(["query-id\tcorpus-id\tscore", *rows]) + "\n")
    run_path = write_trec(tmp_path / "run.trec", run=run)
    args = ["aoeb", "score", "--qrels", str(qrels_path), "--run", str(run_path), "--k", "1,5,10"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    expected = reference(qrels, {q: d for q, d in run.items() if d}, (1, 5, 10))
    assert list(scores) == [*(f"{m}_at_{k}" for m in MEASURES for k in (1, 5, 10)), "main_score"]
    for key, value in scores.items():
        column = "ndcg_at_10" if key == "main_score" else key
        mean = sum(row[column] for row in expected.values()) / len(expected)
        assert value == pytest.approx(mean, abs=1e-6), key
    assert "judged queries missing from the run" in result.stderr


def test_cli_rejects_bad_k_and_bad_files(tmp_path):
    qrels = write_trec(tmp_path / "qrels.txt", qrels={"q": {"a": 1}})
    run = write_trec(tmp_path / "run.trec", run={"q": {"a": 1.0}})
    runner = CliRunner()
    base = ["aoeb", "score", "--qrels", str(qrels), "--run", str(run)]
    assert runner.invoke(app, [*base, "--k", "1,x"]).exit_code == 2
    assert runner.invoke(app, [*base, "--k", "0"]).exit_code == 2
    run.write_text("q Q0 a 1\n")
    result = runner.invoke(app, base)
    assert isinstance(result.exception, InputError)
    assert f"{run}: line 1:" in str(result.exception)
