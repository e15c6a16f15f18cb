"""The detector's held-out evidence on tiny inputs: dev-chosen checkpoints and thresholds,
F1 against sklearn, baselines and claims over questions, the training schedule's dev
evaluations, batching that keeps row order, and kg.eval's test-only items."""

from types import SimpleNamespace

import numpy as np
import pytest

from tasks.kg import detector_evidence, detector_train
from tasks.kg.detector import best_evaluation, split_rows
from tasks.kg.eval import question_items
from tasks.kg.splits import questions_by_split, shared_questions


def test_f1_flags_hallucinated_answers_as_sklearn_does():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    for _ in range(20):
        truth, flags = rng.random(30) < 0.5, rng.random(30) < 0.4
        assert detector_evidence.f1(flags, truth) == pytest.approx(f1_score(truth, flags))
    nothing = np.zeros(4, dtype=bool)
    assert detector_evidence.f1(nothing, np.array([True, False, True, False])) == 0.0


def test_the_threshold_maximises_dev_f1_and_is_then_applied_to_test():
    truth = np.array([True, True, False, False, True])
    scores = np.array([0.9, 0.7, 0.6, 0.1, 0.3])
    # ≥ 0.3 flags 4 (3 right): F1 6/7; ≥ 0.7 flags 2 right: F1 0.8
    assert detector_evidence.best_threshold(truth, scores) == pytest.approx(0.3)
    rule = detector_evidence.rule("detector", "d", truth, scores, [0.2, 0.3, 0.95])
    assert rule.flags().tolist() == [False, True, True]
    constant = detector_evidence.rule("flag_all", "f", truth, np.ones(5), np.ones(2))
    assert constant.flags().all()  # the best constant rule for F1 flags every answer


def test_the_best_dev_evaluation_wins_and_ties_keep_fewer_epochs():
    evaluations = [
        {"step": 5, "auroc": 0.7},
        {"step": 10, "auroc": 0.8},
        {"step": 15, "auroc": 0.8},
    ]
    assert best_evaluation(evaluations)["step"] == 10


@pytest.mark.parametrize(
    "epochs, per_epoch, expected",
    [
        (1, 2, [5, 10]),
        (2, 2, [5, 10, 15, 20]),
        (0.5, 2, [5]),
        (1.25, 2, [5, 10, 13]),
        (2, 1, [10, 20]),
    ],
)
def test_dev_is_scored_evenly_within_epochs_and_at_the_last_step(epochs, per_epoch, expected):
    settings = SimpleNamespace(batch_size=10, epochs=epochs, evaluations_per_epoch=per_epoch)
    assert detector_train.evaluation_steps(100, settings) == expected
    assert detector_train.total_steps(100, settings) == expected[-1]


class _Encoded(dict):
    def to(self, device):
        return self


class _LengthTokenizer:
    """Encodes a pair as its character count, so the fake model's score names its row."""

    sep_token = "[SEP]"

    def __call__(self, first, second, **_):
        import torch

        return _Encoded(
            length=torch.tensor(
                [len(a + b) for a, b in zip(first, second, strict=True)], dtype=float
            )
        )


class _LengthModel:
    training, device = True, "cpu"

    def eval(self):
        self.training = False

    def train(self, mode=True):
        self.training = mode

    def __call__(self, length):
        import torch

        return SimpleNamespace(logits=torch.stack([torch.zeros_like(length), length / 50], dim=1))


def test_batching_by_length_returns_scores_in_row_order():
    import math

    questions = ["q" * n for n in (30, 2, 17, 9, 25)]
    columns = {"question": questions, "path_text": ["p"] * 5, "answer": ["a"] * 5}
    model = _LengthModel()
    scores = detector_train.supported_probabilities(
        model, _LengthTokenizer(), columns, max_length=16, batch=2
    )
    lengths = [len(q) + len("p [SEP] a") for q in questions]
    assert scores == pytest.approx([1 / (1 + math.exp(-n / 50)) for n in lengths])
    assert model.training  # back in training mode


def _examples(split_by_question):
    rows = []
    for n in range(60):
        split = split_by_question[n % 3]
        for label in (0, 1):
            rows.append(
                {
                    "qa_id": f"q{n}",
                    "question": f"What is Q{n}?",
                    "split": split,
                    "label": label,
                    "answer": "Q1" if label else "Q2",
                    "path_text": f"Q{n} p Q1",
                }
            )
    return rows


def test_a_question_in_two_splits_is_refused_before_training(tmp_path):
    from tasks.core.errors import InputError

    rows = _examples(("train", "dev", "test"))
    assert not shared_questions(rows) and set(split_rows(rows, tmp_path)) == {
        "train",
        "dev",
        "test",
    }
    leaked = [*rows, {**rows[0], "split": "test", "qa_id": "q0-again"}]
    assert shared_questions(leaked) == {"what is q0?"}
    with pytest.raises(InputError, match="1 question"):
        split_rows(leaked, tmp_path / "examples.parquet")


def test_eval_answers_only_questions_of_the_test_split_once_each():
    examples = _examples(("train", "dev", "test"))
    test = questions_by_split(examples)["test"]

    def row(qa_id, question, output, score=4, hops=1):
        path = ["S", "P", output] if hops == 1 else ["S", "P", "M", "P", output]
        return {
            "id": f"{qa_id}-{hops}",
            "qa_id": qa_id,
            "input": question,
            "output": output,
            "judged_score": score,
            "hops": hops,
            "path": path,
        }

    rows = [row(f"q{n}", f"what is  Q{n}?", "Q1") for n in range(60)]
    rows.append(row("q2-bis", "What is Q2?", "Q7", score=5, hops=2))  # same question, 2 answers
    rows.append(row("other", "Never split?", "Q1"))  # no detector example: not test
    chosen = question_items(rows, test, None)
    assert len(chosen) == 20 and {c["question_key"] for c in chosen} <= test
    (two,) = [c for c in chosen if c["question_key"] == "what is q2?"]
    assert two["golds"] == ["Q1", "Q7"] and two["qa_id"] == "q2-bis"  # best judged path
    assert len(question_items(rows, test, 5)) == 5


def test_claims_state_auroc_against_chance_and_f1_gains_over_questions():
    rng = np.random.default_rng(1)
    rows = [
        {"question": f"What is Q{n}?", "label": label} for n in range(40) for label in (1, 0, 1, 0)
    ]
    labels = np.array([r["label"] for r in rows])
    supported = np.clip(labels * 0.6 + rng.normal(0.2, 0.15, len(rows)), 0, 1)
    truth = detector_evidence.hallucinated(rows)
    detector = detector_evidence.Rule("detector", "detector", 0.5, 1 - supported)
    flag_all = detector_evidence.Rule("flag_all", "flag-every-answer baseline", 1.0, np.ones(160))
    in_path = detector_evidence.Rule("answer_in_path", "answer-in-path", 0.5, 1 - labels * 1.0)
    claims = detector_evidence.detector_claims(
        detector,
        [flag_all, in_path],
        supported,
        rows,
        detector_evidence.simplifications("minilm", 90, 1),
        [0, 1, 2],
    )
    separation, gain, loss = claims
    assert separation.id == "kg.detector_separates_hallucinated_answers"
    assert separation.kind == gain.kind == "check" and loss.kind == "claim"
    assert separation.null == 0.5 and separation.verdict == "supported"
    assert separation.n == 40 and separation.unit == "questions"
    assert gain.id == "kg.detector_f1_over_flag_all" and gain.arms == ["detector", flag_all.name]
    ours = detector_evidence.f1(detector.flags(), truth)
    assert gain.estimate == pytest.approx(ours - detector_evidence.f1(np.ones(160, bool), truth))
    assert gain.verdict == "supported" and gain.ci_low > 0
    # a perfect answer-in-path rule beats the noisy detector: the claim says so
    assert loss.id == "kg.detector_f1_over_answer_in_path" and loss.verdict == "contradicted"


def test_the_answer_in_path_rule_flags_answers_missing_from_the_path():
    rows = [
        {"answer": "Paris", "path_text": "France capital paris"},
        {"answer": "Lyon", "path_text": "France capital Paris"},
    ]
    assert detector_evidence.answer_absent_scores(rows).tolist() == [0.0, 1.0]


def test_the_similarity_baseline_is_the_cosine_of_answer_and_path():
    from tasks.core.backbones import minilm_folder

    rows = [
        {"answer": "Paris", "path_text": "Paris"},
        {"answer": "Paris", "path_text": "France capital Paris"},
        {"answer": "a carburettor", "path_text": "France capital Paris"},
    ]
    scores = detector_evidence.similarity_scores(minilm_folder(), rows)
    assert scores[0] == pytest.approx(1.0, abs=1e-5) and scores[1] > scores[2]
