"""DeltaStack's parts: the delta rule's two forms, the stack's semantics, tasks, resume."""

import io

import numpy as np
import pytest
import torch

from tasks.core.errors import ParamsError
from tasks.core.params import parse_params
from tasks.deltastack.delta_rule import delta_rule_chunkwise, delta_rule_recurrent
from tasks.deltastack.languages import LANGUAGES, batch
from tasks.deltastack.layers import DeltaNet, DeltaStack
from tasks.deltastack.params import Budget, DeltaStackParams, ModelParams
from tasks.deltastack.study import summarize, table_markdown
from tasks.deltastack.train import buckets, train_trial


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
    lengths = {"train_min": 3, "train_max": 8, "test_buckets": [8, 12]}
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


def _summary(accuracies, eval_examples):
    params = _params(seeds=[0, 1], eval_examples=eval_examples)
    params = params.model_copy(update={"tasks": ["dyck"], "models": ["deltastack", "deltanet"]})
    rows = [
        {
            "task": "dyck",
            "model": model,
            "seed": seed,
            "train_accuracy": 0.5,
            "accuracy_8-12": accuracy,
        }
        for (model, seed), accuracy in zip(
            [("deltastack", 0), ("deltastack", 1), ("deltanet", 0), ("deltanet", 1)],
            accuracies,
            strict=True,
        )
    ]
    results = summarize(rows, params)
    return results, table_markdown(results, params)


def test_summary_averages_seeds_and_calls_a_gap_within_noise_a_tie():
    results, table = _summary([0.9, 0.7, 0.6, 0.9], eval_examples=4)
    entry = results["tasks"]["dyck"]
    assert entry["models"]["deltastack"]["longest_accuracy"] == pytest.approx(0.8)
    assert entry["deltastack_minus_deltanet"] == pytest.approx(0.05)
    # 8 sequences per model: 2·sqrt((0.8·0.2 + 0.75·0.25) / 8) = 0.417
    assert entry["noise_margin"] == pytest.approx(0.4168, abs=1e-4)
    assert entry["deltastack_vs_deltanet"] == "tie" and not entry["deltastack_beats_deltanet"]
    assert results["deltastack_beats_deltanet"] == 0
    assert "| dyck | 0.800 | 0.750 | tie (+0.050 ± 0.417) |" in table


def test_summary_calls_a_gap_beyond_noise_a_win_or_a_loss():
    results, table = _summary([0.95, 0.95, 0.5, 0.5], eval_examples=500)
    assert results["tasks"]["dyck"]["deltastack_vs_deltanet"] == "better"
    assert results["deltastack_beats_deltanet"] == 1 and "| yes (+0.450 ± 0.035) |" in table
    results, table = _summary([0.5, 0.5, 0.95, 0.95], eval_examples=500)
    assert results["tasks"]["dyck"]["deltastack_vs_deltanet"] == "worse"
    assert results["deltastack_beats_deltanet"] == 0 and "| no (-0.450 ± 0.035) |" in table


def test_an_unknown_preset_is_named():
    with pytest.raises(ParamsError, match="deltastack.*preset 'huge'"):
        parse_params({"corpus": {}, "deltastack": {"preset": "huge"}}, source="params.yaml")
