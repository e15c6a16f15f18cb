"""DeltaStack's parts: the delta rule's two forms, the stack's semantics, tasks, resume,
the baseline, the paired summary and the claims."""

import io

import numpy as np
import pytest
import torch

from tasks.core.errors import ParamsError
from tasks.core.params import parse_params
from tasks.deltastack.baseline import baseline_sequences, constant_accuracies, majority_answer
from tasks.deltastack.claims import SETS, build_claims
from tasks.deltastack.delta_rule import delta_rule_chunkwise, delta_rule_recurrent
from tasks.deltastack.languages import LANGUAGES, batch
from tasks.deltastack.layers import DeltaNet, DeltaStack
from tasks.deltastack.params import Budget, DeltaStackParams, LengthParams, ModelParams
from tasks.deltastack.study import summarize, table_markdown
from tasks.deltastack.train import buckets, sequence_accuracies, train_trial


def _inputs(length, d_k=8, d_v=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shape = (2, 3, length)
    q = torch.randn(*shape, d_k, generator=generator, dtype=torch.float64)
    k = torch.nn.functional.normalize(
        torch.randn(*shape, d_k, generator=generator, dtype=torch.float64), dim=-1
    )
    v = torch.randn(*shape, d_v, generator=generator, dtype=torch.float64)
    beta = 2 * torch.rand(*shape, generator=generator, dtype=torch.float64)  # negative eigenvalues
    return q, k, v, beta


@pytest.mark.parametrize(("length", "chunk"), [(1, 4), (37, 8), (64, 16), (100, 32)])
def test_chunkwise_delta_rule_equals_the_recurrence(length, chunk):
    q, k, v, beta = _inputs(length)
    state = torch.randn(2, 3, 8, 6, dtype=torch.float64)
    out_r, state_r = delta_rule_recurrent(q, k, v, beta, scale=0.4, state=state)
    out_c, state_c = delta_rule_chunkwise(q, k, v, beta, scale=0.4, state=state, chunk_size=chunk)
    assert torch.allclose(out_c, out_r, atol=1e-5) and torch.allclose(state_c, state_r, atol=1e-5)


def test_the_recurrence_is_the_delta_rule():
    q, k, v, beta = _inputs(3, d_k=4, d_v=2)
    out, state = delta_rule_recurrent(q, k, v, beta)
    expected = torch.zeros(2, 3, 4, 2, dtype=torch.float64)
    for t in range(3):
        k_t, v_t, b_t = k[:, :, t], v[:, :, t], beta[:, :, t, None]
        error = v_t - torch.einsum("bhkv,bhk->bhv", expected, k_t)
        expected = expected + b_t[..., None] * k_t[..., :, None] * error[..., None, :]
    assert torch.allclose(state, expected)
    assert torch.allclose(out[:, :, -1], torch.einsum("bhkv,bhk->bhv", expected, q[:, :, -1]))


@pytest.mark.parametrize("layer_class", [DeltaNet, DeltaStack])
def test_layers_chunkwise_equal_recurrent(layer_class):
    torch.manual_seed(0)
    layer = layer_class(24, 3, chunk_size=8).double()
    x = torch.randn(2, 45, 24, dtype=torch.float64)
    assert torch.allclose(layer(x, "chunk"), layer(x, "recurrent"), atol=1e-5)


def test_a_hand_made_push_pop_sequence_gives_the_expected_stack_tops():
    layer = DeltaStack(8, 1, stack_size=8, kappa=40.0)  # a sharp address: one slot per pointer
    values = torch.eye(4)[None, None]  # A, B, C, D as one-hot values, (1, 1, 4, 4)
    v = torch.cat([values, torch.zeros(1, 1, 3, 4)], dim=2)  # 7 tokens
    #        push A, push B, pop, push C, pop, pop, pop on an empty stack
    push = torch.tensor([[[1.0, 1, 0, 1, 0, 0, 0]]])
    pop = torch.tensor([[[0.0, 0, 1, 0, 1, 1, 1]]])
    v[0, 0, 3] = values[0, 0, 2]  # the fourth token pushes C
    for mode in ("chunk", "recurrent"):
        reads = layer.stack_reads(v, push, pop, mode)[0, 0]
        a, b, c, empty = torch.eye(4)[0], torch.eye(4)[1], torch.eye(4)[2], torch.zeros(4)
        expected = torch.stack([a, b, a, c, a, empty, empty])
        assert torch.allclose(reads, expected, atol=1e-4), (mode, reads)
    assert layer.pointers(push, pop)[0, 0].tolist() == [0, 1, 2, 1, 2, 1, 0, 0]


def test_the_pointer_stays_inside_the_stack():
    layer = DeltaStack(8, 1, stack_size=4)
    pushes = torch.ones(1, 1, 10)
    assert layer.pointers(pushes, torch.zeros_like(pushes)).max() == 3
    assert layer.pointers(torch.zeros_like(pushes), pushes).min() == 0


def _dyck_closes(prefix, suffix):
    stack = []
    for token in prefix + suffix:
        if token in (2, 4):
            stack.append(token)
        elif not stack or stack.pop() + 1 != token:
            return False
    return not stack


def test_tasks_label_what_they_claim():
    rng = np.random.default_rng(7)
    for _ in range(50):
        inputs, targets, mask = LANGUAGES["parity"].sample(rng, 20)
        assert targets[-1] == (1 if inputs.count(2) % 2 == 0 else 2)
        assert mask == [False] * 19 + [True]
        inputs, targets, mask = LANGUAGES["reverse_string"].sample(rng, 9)
        answer = [t for t, m in zip(targets, mask, strict=True) if m]
        assert inputs[9] == 3 and answer == inputs[:9][::-1]
        inputs, targets, mask = LANGUAGES["dyck"].sample(rng, 30)
        prefix = inputs[: inputs.index(1)]
        suffix = [t for t, m in zip(targets, mask, strict=True) if m]
        assert len(prefix) == 30 and _dyck_closes(prefix, suffix)
        inputs, targets, mask = LANGUAGES["mod_arith_w_brack"].sample(rng, 15)
        assert len(inputs) == 16 and inputs[-1] == 12 and 1 <= targets[-1] <= 5
    inputs, targets, _ = LANGUAGES["stack_manipulation"].sample(np.random.default_rng(3), 8)
    stack = []
    for token in inputs[: inputs.index(7)]:
        if token in (1, 2):
            stack.append(token)
        elif token in (3, 4):
            stack.append(token - 2)
        elif stack:
            stack.pop()
    assert targets[inputs.index(7) + 1 :] == (stack[::-1] or [6])


def test_batches_are_padded_masked_and_seeded():
    first = batch(LANGUAGES["dyck"], np.random.default_rng(1), 8, 60, 100)
    again = batch(LANGUAGES["dyck"], np.random.default_rng(1), 8, 60, 100)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    inputs, targets, mask = first
    assert inputs.max() < 6 and not targets[~mask].any() and mask.any(dim=1).sum() >= 1


def test_buckets_cover_the_test_lengths_once():
    assert buckets([60, 100, 256]) == [(60, 100), (101, 256)]


def _params(**budget):
    tiny = Budget(
        seeds=[0],
        steps=6,
        batch_size=4,
        learning_rate=3e-3,
        eval_every=2,
        eval_examples=4,
        model=ModelParams(d_model=16, num_layers=1, num_heads=2, stack_size=8, eval_stack_size=16),
    )
    lengths = {"train_min": 3, "train_max": 8, "test_buckets": [8, 12], "in_distribution": [5, 8]}
    return DeltaStackParams(
        budgets={"t": tiny.model_copy(update=budget)}, preset="t", lengths=lengths
    )


def test_a_trial_resumed_from_its_checkpoint_ends_where_an_unbroken_one_does():
    params = _params()
    states = []

    def keep(metrics, state):  # serialized on the spot, as the Tune trainable does
        saved = io.BytesIO()
        torch.save(state, saved)
        states.append((metrics, saved.getvalue()))

    unbroken = train_trial("dyck", "deltastack", 0, params, keep, device=torch.device("cpu"))
    assert [m["step"] for m, _ in states] == [2, 4, 6]
    resumed_reports = []
    checkpoint = torch.load(io.BytesIO(states[0][1]), weights_only=False)
    resumed = train_trial(
        "dyck",
        "deltastack",
        0,
        params,
        lambda m, s: resumed_reports.append(m),
        resume=checkpoint,
        device=torch.device("cpu"),
    )
    assert [m["step"] for m in resumed_reports] == [4, 6]
    assert resumed == unbroken
    assert resumed_reports[-1]["loss"] == pytest.approx(states[-1][0]["loss"], rel=1e-5)
    assert resumed_reports[-1]["sequences_longest"] == states[-1][0]["sequences_longest"]


def test_a_trial_reports_one_accuracy_per_test_sequence_inside_and_at_the_longest_lengths():
    reports = []
    train_trial("parity", "deltanet", 0, _params(), lambda m, s: reports.append(m))
    last = reports[-1]
    for name in ("in_distribution", "longest"):
        assert len(last[f"sequences_{name}"]) == 4
        assert set(last[f"sequences_{name}"]) <= {0.0, 1.0}  # one scored token per sequence
    assert last["accuracy_in_distribution"] == pytest.approx(
        np.mean(last["sequences_in_distribution"])
    )
    assert last["accuracy_8-12"] == pytest.approx(np.mean(last["sequences_longest"]))


def test_sequence_accuracy_is_the_share_of_a_rows_scored_tokens():
    predicted = torch.tensor([[1, 2, 2, 0], [1, 1, 0, 0]])
    targets = torch.tensor([[1, 2, 1, 0], [0, 2, 0, 0]])
    mask = torch.tensor([[True, True, True, False], [False, True, False, False]])
    assert sequence_accuracies(predicted, targets, mask) == pytest.approx([2 / 3, 0.0])


def test_the_baseline_answers_the_majority_token_of_the_training_distribution():
    params = _params(eval_examples=400)
    assert majority_answer("parity", 0, params) in (1, 2)
    scores = baseline_sequences("parity", 0, params)
    assert len(scores["longest"]) == 400 and set(scores["longest"]) <= {0.0, 1.0}
    assert np.mean(scores["longest"]) == pytest.approx(0.5, abs=0.08)  # parity: a coin
    reverse = batch(LANGUAGES["reverse_string"], np.random.default_rng(0), 3, 4, 4)
    inputs = reverse[0][:, :4].tolist()  # the strings; the answer is each reversed
    expected = [row.count(1) / 4 for row in inputs]
    assert constant_accuracies([reverse], 1) == pytest.approx(expected)


def test_the_in_distribution_lengths_must_lie_inside_the_training_lengths():
    with pytest.raises(ValueError, match=r"in_distribution \[41, 70\] must lie inside"):
        LengthParams(train_min=3, train_max=60, in_distribution=[41, 70])


def _rows(params, task, arms):
    """Trial rows whose per-sequence accuracies are `arms[model](baseline, name)`."""
    rows = []
    for seed in params.budget.seeds:
        baseline = baseline_sequences(task, seed, params)
        for model, make in arms.items():
            sequences = {name: make(baseline[name], name) for name in SETS}
            rows.append(
                {
                    "task": task,
                    "model": model,
                    "seed": seed,
                    "train_accuracy": 0.5,
                    "accuracy_in_distribution": float(np.mean(sequences["in_distribution"])),
                    "accuracy_8-12": float(np.mean(sequences["longest"])),
                    **{f"sequences_{name}": scores for name, scores in sequences.items()},
                }
            )
    return rows


def _study(task, arms, eval_examples=40):
    params = _params(seeds=[0, 1, 2], eval_examples=eval_examples)
    params = params.model_copy(update={"tasks": [task], "models": list(arms)})
    results, found = summarize(_rows(params, task, arms), params)
    claims = build_claims(found, params, results["longest_bucket"])
    return results, table_markdown(results, params), claims


def _right(baseline, name):
    return [1.0] * len(baseline)


def _mostly_wrong(baseline, name):  # right on every 10th sequence: differences vary
    return [float(i % 10 == 0) for i in range(len(baseline))]


def _guess(baseline, name):  # the baseline's own answers: at chance
    return list(baseline)


def _worse_guess(baseline, name):  # below chance: right only where the baseline is and not always
    return [b if i % 3 else 0.0 for i, b in enumerate(baseline)]


def test_summary_pairs_sequences_over_seeds_and_a_real_gap_is_a_win():
    results, table, claims = _study("dyck", {"deltastack": _right, "deltanet": _mostly_wrong})
    entry = results["tasks"]["dyck"]
    assert results["test_sequences_per_bucket"] == 120
    assert entry["models"]["deltastack"]["longest_accuracy"] == 1.0
    assert entry["deltastack_minus_deltanet"]["estimate"] == pytest.approx(0.9)
    assert entry["deltastack_vs_deltanet"] == "better" and entry["deltastack_beats_deltanet"]
    assert results["deltastack_beats_deltanet"] == 1
    assert "| dyck |" in table and "yes (+0.900 [+0.8" in table  # over seeds and sequences
    (claim,) = claims
    assert claim.id == "deltastack.length_generalisation.dyck" and claim.verdict == "supported"
    assert claim.n == 120 and "test sequences of length 8-12" in claim.unit
    assert claim.primary and claim.seeds == [0, 1, 2] and "3 seeds" in claim.method


def test_a_gap_between_two_models_at_chance_is_inconclusive():
    results, table, claims = _study("dyck", {"deltastack": _guess, "deltanet": _worse_guess})
    entry = results["tasks"]["dyck"]
    assert entry["deltastack_minus_deltanet"]["ci_low"] > 0  # the interval alone says "better"
    assert entry["at_chance"] and entry["deltastack_vs_deltanet"] == "at chance"
    assert not entry["deltastack_beats_deltanet"] and "at chance (+" in table
    (claim,) = claims
    assert claim.verdict == "inconclusive" and "both arms are at chance" in claim.reason


def test_a_model_behind_the_other_at_length_is_a_loss_and_contradicts_the_claim():
    results, _, claims = _study("reverse_string", {"deltastack": _mostly_wrong, "deltanet": _right})
    assert results["tasks"]["reverse_string"]["deltastack_vs_deltanet"] == "worse"
    assert claims[0].verdict == "contradicted" and claims[0].estimate == pytest.approx(-0.9)


def test_a_regular_task_learned_in_distribution_is_supported_against_the_baseline():
    results, table, claims = _study("parity", {"deltastack": _right, "deltanet": _guess})
    models = results["tasks"]["parity"]["models"]
    assert models["deltastack"]["in_distribution_accuracy"] == 1.0
    assert models["deltastack"]["in_distribution_over_chance"]["ci_low"] > 0
    assert models["deltanet"]["in_distribution_over_chance"]["estimate"] == 0.0
    chance = results["tasks"]["parity"]["chance"]["in_distribution"]
    (claim,) = claims  # parity is regular: only the in-distribution claim
    assert claim.id == "deltastack.in_distribution.parity" and claim.verdict == "supported"
    assert claim.kind == "check"
    assert claim.estimate == pytest.approx(1 - chance) and claim.arms[1].startswith("majority")
    assert f"| parity | {chance:.3f} / " in table and "| 1.000 | 1.000 | 0." in table
    _, _, (at_chance,) = _study("parity", {"deltastack": _guess, "deltanet": _guess})
    assert at_chance.verdict == "inconclusive"


def test_an_unknown_preset_is_named():
    with pytest.raises(ParamsError, match="deltastack.*preset 'huge'"):
        parse_params({"corpus": {}, "deltastack": {"preset": "huge"}}, source="params.yaml")
