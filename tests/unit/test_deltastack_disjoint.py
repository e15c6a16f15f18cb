"""The study's evaluation sequences are not training sequences.

Training batches, test buckets and the in-distribution set come from separate RNG streams
of (task, seed), but a stream alone does not make them disjoint: the first test bucket
starts at the longest training length (60), and the in-distribution set lies inside the
training lengths. So the check is by sequence: replay the whole training stream of every
(task, seed) the default runs and look every evaluated prompt up in it.
"""

from pathlib import Path

import numpy as np

from tasks.core.params import load_params
from tasks.deltastack import train
from tasks.deltastack.languages import LANGUAGES
from tasks.deltastack.params import DeltaStackParams

REPO = Path(__file__).resolve().parents[2]


def prompts(batches: list) -> set[tuple[int, ...]]:
    """Each row's input without its trailing zeros (answer dummies and padding): the
    sequence the model reads, which fixes its answer."""
    found = set()
    for inputs, _, _ in batches:
        for row in inputs.tolist():
            found.add(tuple(np.trim_zeros(row, "b")))
    return found


def trained_prompts(task: str, seed: int, params: DeltaStackParams) -> set[tuple[int, ...]]:
    """Every prompt of the training stream, as the trial draws it (no tensors: faster)."""
    language, rng = LANGUAGES[task], train.stream(task, seed, train.TRAINING_STREAM)
    found = set()
    for _ in range(params.budget.steps):
        for inputs, _, _ in train.training_examples(language, rng, params):
            found.add(tuple(np.trim_zeros(inputs, "b")))
    return found


def evaluated_prompts(task: str, seed: int, params: DeltaStackParams) -> set[tuple[int, ...]]:
    language = LANGUAGES[task]
    buckets = train.test_sets(language, seed, params).values()
    inside = train.in_distribution_set(language, seed, params)
    return prompts(inside + [b for s in buckets for b in s])


def test_no_evaluated_sequence_occurs_in_the_training_stream_of_its_seed():
    params = load_params(REPO / "params.yaml").deltastack
    for task in params.tasks:
        for seed in params.budget.seeds:
            evaluated = evaluated_prompts(task, seed, params)
            assert len(evaluated) > 0.9 * params.budget.eval_examples * 5  # 4 buckets + inside
            assert not evaluated & trained_prompts(task, seed, params), (task, seed)


def test_the_check_finds_overlap_where_the_lengths_leave_no_room():
    """Lengths 3–4 of parity have 24 strings: a short stream holds all of them."""
    params = DeltaStackParams.model_validate(
        {
            "tasks": ["parity"],
            "lengths": {"train_min": 3, "train_max": 4, "in_distribution": [3, 4]},
            "budgets": {
                "tiny": {
                    "seeds": [0],
                    "steps": 20,
                    "batch_size": 8,
                    "learning_rate": 1e-3,
                    "eval_every": 20,
                    "eval_examples": 8,
                }
            },
        }
    )
    language = LANGUAGES["parity"]
    inside = prompts(train.in_distribution_set(language, 0, params))
    assert inside & trained_prompts("parity", 0, params)
