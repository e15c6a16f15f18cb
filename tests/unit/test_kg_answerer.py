"""The kg answerer on tiny inputs: its training text never holds an evaluation question nor
a held-out fact, exact match does not reward copying a path that ends elsewhere, batched
generation with left padding answers as one-by-one does, and the claims per stratum."""

import random

import pytest

from tasks.core.causal_lm_train import gpt2_config
from tasks.kg import eval_evidence
from tasks.kg.answerer_corpus import (
    FACT,
    QA,
    QA_PATH,
    build_corpus,
    fact_id,
    path_facts,
    prompt,
)
from tasks.kg.answering import AnswerRequest, ExtractiveReader, exact
from tasks.kg.eval import answer_all, answer_requests, question_items
from tasks.kg.splits import question_key

LANGUAGES = ["en", "de"]


def multihal_row(n: int, subject: str, prop: str, obj: str, middle: str | None = None) -> dict:
    path = [subject, prop, obj] if middle is None else [subject, prop, middle, "P17", obj]
    labels = {"en": path, "de": [p if p[0] == "Q" else f"{p}-de" for p in path]}
    question = f"What is the {prop} of {subject}?" if middle is None else f"Via {subject} {prop}?"
    return {
        "id": f"qa{n}-000",
        "qa_id": f"qa{n}",
        "input": question,
        "output": obj,
        "judged_score": 5,
        "hops": len(path) // 2,
        "path": path,
        "trip_labels": {lang: " ".join(parts) for lang, parts in labels.items()},
        "path_labels": labels,
    }


@pytest.fixture
def kg_rows():
    rng = random.Random(0)
    rows = [
        multihal_row(n, f"Q{100 + n}", f"P{rng.randint(1, 9)}", f"Q{rng.randint(1, 50)}")
        for n in range(120)
    ]
    rows += [multihal_row(200 + n, f"Q{100 + n}", "P5", "Q9", middle="Q77") for n in range(20)]
    splits = {"train": set(), "dev": set(), "test": set()}
    for n, row in enumerate(rows):
        splits[("train", "train", "dev", "test")[n % 4]].add(question_key(row["input"]))
    return rows, splits


def test_training_text_holds_no_eval_question_and_no_held_out_fact(kg_rows):
    rows, splits = kg_rows
    documents, strata, counts = build_corpus(
        rows, splits, held_out_fraction=0.5, context_fraction=0.5, languages=LANGUAGES, seed=1
    )
    kinds = {d["kind"] for d in documents}
    assert kinds == {FACT, QA, QA_PATH}  # it learns to recall and to read
    items = question_items(rows, splits["test"], None)
    assert {i["question_key"] for i in items} == set(strata) == splits["test"]
    text = "\n".join(d["text"] for d in documents).casefold()
    trained = {f for d in documents for f in d["facts"]}
    for item in items:  # no evaluation question (or its text) is trained on
        assert item["question_key"] not in {d["question"] for d in documents}
        assert item["question_key"] not in text
    held_out = [i for i in items if strata[i["question_key"]] == "held_out"]
    seen = [i for i in items if strata[i["question_key"]] == "seen"]
    assert held_out and seen
    by_question = {question_key(r["input"]): r for r in rows}
    for item in held_out:  # neither as a fact nor inside a trained path
        for fact in path_facts(by_question[item["question_key"]]["path"]):
            assert fact_id(fact) not in trained and fact_id(fact).casefold() not in text
    for item in seen:  # its facts are there: it can be recalled
        assert {fact_id(f) for f in path_facts(item["path"])} <= trained
    assert all(d["question"] in splits["train"] for d in documents if d["kind"] in (QA, QA_PATH))
    assert counts["test_questions_held_out"] == len(held_out)


def test_reading_pairs_never_ask_a_held_out_question_or_use_a_held_out_fact(kg_rows):
    from tasks.kg.answerer_corpus import READING, Vocabulary

    rows, splits = kg_rows
    triples = sorted({f for r in rows for f in path_facts(r["path"])} | {("Q1", "P1", "Q2")})
    vocabulary = Vocabulary({"P1": {"en": "one", "de": "eins"}}, {"Q2": "human"})
    documents, strata, counts = build_corpus(
        rows,
        splits,
        held_out_fraction=0.5,
        context_fraction=0.5,
        languages=LANGUAGES,
        seed=1,
        triples=triples,
        vocabulary=vocabulary,
        reading_pairs=60,
    )
    reading = [d for d in documents if d["kind"] == READING]
    assert counts["documents_reading"] == len(reading) > 0
    asked = splits["dev"] | splits["test"]
    held_out_facts = {
        fact_id(f)
        for r in rows
        if strata.get(question_key(r["input"])) == "held_out"
        for f in path_facts(r["path"])
    }
    assert not {d["question"] for d in reading} & asked
    assert not {f for d in reading for f in d["facts"]} & held_out_facts
    assert any(len(d["facts"]) == 2 for d in reading)  # 2-hop chains too
    for document in reading:  # kg.qa's template, the type entity by its name
        if document["facts"] == ["Q1 P1 Q2"]:
            assert document["text"].endswith("Question: What is the one of Q1?\nAnswer: human")


def test_a_train_question_that_shares_a_held_out_fact_is_dropped(kg_rows):
    rows, splits = kg_rows
    held = build_corpus(
        rows, splits, held_out_fraction=0.99, context_fraction=1.0, languages=LANGUAGES, seed=1
    )
    documents, strata, counts = held
    held_out_facts = {
        fact_id(f)
        for r in rows
        if strata.get(question_key(r["input"])) == "held_out"
        for f in path_facts(r["path"])
    }
    # 2-hop train questions run through Q77 → Q9 (P17), a fact of held-out 2-hop questions
    assert counts["train_items_dropped_sharing_held_out_facts"] > 0
    assert not held_out_facts & {f for d in documents for f in d["facts"]}


def test_copying_a_path_that_ends_elsewhere_earns_nothing(kg_rows):
    rows, splits = kg_rows
    items = question_items(rows, splits["test"], 4)
    wrong_end = [
        {
            **item,
            "trip_labels": {k: f"{v} P31 Q999999" for k, v in item["trip_labels"].items()},
            "path_labels": {k: [*v, "P31", "Q999999"] for k, v in item["path_labels"].items()},
        }
        for item in items
    ]
    requests = answer_requests(wrong_end, LANGUAGES, {})

    class PathEndCopier:
        name = "copier"

        def answer_batch(self, asked):
            return [r.context.split()[-1] if r.context else "" for r in asked]

    copied = answer_all(PathEndCopier(), [r["request"] for r in requests])
    baseline = ExtractiveReader().answer_batch([r["request"] for r in requests])
    for row, answer, read in zip(requests, copied, baseline, strict=True):
        assert not exact(answer, row["golds"]) and not exact(read, row["golds"])
    assert exact(" q1 ", ["Q1"]) and not exact("", [""])  # abstaining never scores


def test_prompt_is_the_training_document_up_to_the_answer():
    from tasks.kg.answerer_corpus import qa_document

    document = qa_document("What is  P1 of Q1?", "Q2", "Q1 P1 Q2")
    assert document == "Path: Q1 P1 Q2\nQuestion: What is P1 of Q1?\nAnswer: Q2"
    assert document.startswith(prompt("What is P1 of Q1?", "Q1 P1 Q2"))
    assert prompt("q?", None) == "Question: q?\nAnswer:"


def test_local_answerer_batches_with_left_padding_as_one_by_one(tmp_path, kg_rows):
    from transformers import GPT2Config, GPT2LMHeadModel

    from tasks.core.io import write_file
    from tasks.kg.answerer_lm import (
        LocalAnswerer,
        answerer_tokenizer,
        document_rows,
        load_tokenizer,
    )
    from tasks.kg.params import AnswererModelParams

    rows, splits = kg_rows
    documents, _, _ = build_corpus(
        rows, splits, held_out_fraction=0.5, context_fraction=0.5, languages=LANGUAGES, seed=1
    )
    texts = [d["text"] for d in documents]
    for name, data in answerer_tokenizer(texts, 300).items():
        write_file(tmp_path / "tokenizer" / name, data)
    tokenizer = load_tokenizer(tmp_path / "tokenizer")
    shape = AnswererModelParams(vocab_size=300, context=48, hidden=16, layers=1, heads=2)
    sequences, dropped = document_rows(tokenizer, texts, 48)
    assert sequences.shape == (len(texts) - dropped, 48)
    config = gpt2_config(tokenizer, shape)
    GPT2LMHeadModel(GPT2Config(**config)).save_pretrained(tmp_path / "model")
    answerer = LocalAnswerer(tmp_path / "model", tmp_path / "tokenizer", 6, batch_size=8)
    asked = [
        AnswerRequest("What is the P1 of Q100?", "Q100 P1 Q3"),
        AnswerRequest("Via Q101 P5?", None),
        AnswerRequest("What is the P2 of Q102?", "Q102 P2 Q7 P17 Q9 and a longer path"),
    ]
    together = answerer.answer_batch(asked)
    alone = [answerer.answer_batch([r])[0] for r in asked]
    assert together == alone and all("\n" not in a for a in together)


def test_claims_per_language_and_stratum_pair_the_same_questions():
    answers = []
    for n in range(30):
        stratum = "seen" if n % 2 else "held_out"
        for mode in ("kg_rag", "vanilla"):
            right = mode == "kg_rag" and n % 3 != 0 or (mode == "vanilla" and stratum == "seen")
            answers.append(
                {
                    "language": "en",
                    "mode": mode,
                    "question_key": f"q{n}",
                    "stratum": stratum,
                    "exact": right,
                    "hallucination": 0.2 + n % 5 / 100 if mode == "kg_rag" else 0.72,
                }
            )
    claims = eval_evidence.eval_claims(
        answers, ["en"], "lm", eval_evidence.simplifications(False, "no model", "lm"), [0, 1, 2]
    )
    ids = [c.id for c in claims]
    assert ids == [
        "kg.kg_rag_exact_gain_held_out",
        "kg.kg_rag_exact_gain_seen_en",
        "kg.kg_rag_exact_gain_held_out_en",
        "kg.kg_rag_lowers_hallucination_en",
    ]
    pooled, held_out, lowers = claims[0], claims[2], claims[3]
    assert pooled.primary and [c.primary for c in claims[1:]] == [False] * 3
    assert pooled.estimate == held_out.estimate  # one language: the pooled gain is its gain
    assert held_out.n == 15 and held_out.verdict == "supported" and held_out.unit == "questions"
    assert held_out.method.startswith("exact McNemar")
    assert lowers.estimate == pytest.approx(0.5) and lowers.verdict == "supported"
    assert any("translation did not run" in s for s in claims[0].simplifications)
    one_seed = eval_evidence.eval_claims(answers, ["en"], "lm", ["a simplification"], [13])
    assert {c.verdict for c in one_seed} == {"inconclusive"}
    cell = eval_evidence.cell([{"exact": True}, {"exact": False}], "exact")
    assert cell["mean"] == 0.5 and cell["ci_low"] < 0.5 < cell["ci_high"]
