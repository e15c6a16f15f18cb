"""The core loop (tasks/core/loop.py): when it looks and checkpoints, that a run stopped at a
checkpoint and resumed ends with the weights of an unbroken one, early stopping, clipping;
and that no optimizer loop in tasks/ is written outside it (an AST scan)."""

import ast
import copy
from pathlib import Path

import pytest
import torch

from tasks.core.loop import LoopPlan, fresh_state, run_loop
from tests.conftest import REPO


class Recorder:
    """Keeps every point and, at checkpoints, a deep copy of model, optimizer and state;
    `stop_at` raises there (a killed worker), after the checkpoint was kept."""

    def __init__(self, model, optimizer, stop_at=None, stop_when=None):
        self.model, self.optimizer, self.stop_at, self.stop_when = (
            model,
            optimizer,
            stop_at,
            stop_when,
        )
        self.points, self.checkpoints, self.saved = [], [], None

    def point(self, state, window):
        return {"step": state["step"], "epoch": state["epoch"], "loss": window.loss}

    def report(self, state, point, checkpoint):
        self.points.append(point)
        if checkpoint:
            self.checkpoints.append(state["step"])
            self.saved = copy.deepcopy(
                (self.model.state_dict(), self.optimizer.state_dict(), state)
            )
        if self.stop_at is not None and state["step"] == self.stop_at:
            raise KeyboardInterrupt
        return bool(self.stop_when and self.stop_when(point))


def problem(seed=0):
    data = torch.Generator().manual_seed(0)
    x = torch.randn(64, 3, generator=data)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(64, generator=data)
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)

    def epoch_batches(epoch):
        order = torch.randperm(64, generator=torch.Generator().manual_seed(epoch))
        return (order[i : i + 8] for i in range(0, 64, 8))

    def loss_of(rows):
        return torch.nn.functional.mse_loss(model(x[rows]).squeeze(-1), y[rows])

    return model, optimizer, epoch_batches, loss_of


def test_steps_plan_logs_and_checkpoints_where_asked():
    model, optimizer, batches, loss_of = problem()
    recorder = Recorder(model, optimizer)
    plan = LoopPlan(steps=19, log_every=3, checkpoint_every=6, checkpoint_at=frozenset({10}))
    state = run_loop(
        model, optimizer, loss_of, plan, fresh_state(), recorder, epoch_batches=batches
    )
    assert [p["step"] for p in recorder.points] == [3, 6, 9, 10, 12, 15, 18, 19]
    assert recorder.checkpoints == [6, 10, 12, 18, 19]
    assert state["step"] == 19 and state["epoch"] == 2 and state["epoch_batches"] == 3
    assert state["curve"] == recorder.points


def test_epochs_plan_looks_at_each_epoch_and_checkpoints_every_other_and_the_last():
    model, optimizer, batches, loss_of = problem()
    recorder = Recorder(model, optimizer)
    plan = LoopPlan(epochs=5, checkpoint_every=2)
    state = run_loop(
        model, optimizer, loss_of, plan, fresh_state(), recorder, epoch_batches=batches
    )
    assert [p["epoch"] for p in recorder.points] == [1, 2, 3, 4, 5]
    assert [p["step"] for p in recorder.points] == [8, 16, 24, 32, 40]
    assert recorder.checkpoints == [16, 32, 40]
    assert recorder.points[-1]["loss"] < recorder.points[0]["loss"]  # it learns
    assert state["epoch_batches"] == 0


@pytest.mark.parametrize("stop_at", [12, 16])  # mid-epoch, and at an epoch's last batch
def test_a_run_killed_after_a_checkpoint_resumes_to_the_unbroken_weights(stop_at):
    plan = LoopPlan(steps=30, log_every=4, checkpoint_every=4)
    model, optimizer, batches, loss_of = problem()
    run_loop(
        model,
        optimizer,
        loss_of,
        plan,
        fresh_state(),
        Recorder(model, optimizer),
        epoch_batches=batches,
    )
    unbroken = copy.deepcopy(model.state_dict())

    model, optimizer, batches, loss_of = problem()
    killed = Recorder(model, optimizer, stop_at=stop_at)
    with pytest.raises(KeyboardInterrupt):
        run_loop(model, optimizer, loss_of, plan, fresh_state(), killed, epoch_batches=batches)
    weights, optimizer_state, state = killed.saved
    assert state["step"] == stop_at

    # other initial weights: the checkpoint's replace them
    model, optimizer, batches, loss_of = problem(seed=1)
    model.load_state_dict(weights)
    optimizer.load_state_dict(optimizer_state)
    resumed = Recorder(model, optimizer)
    run_loop(model, optimizer, loss_of, plan, state, resumed, epoch_batches=batches)
    assert resumed.points[0]["step"] == stop_at + 4
    for name, tensor in unbroken.items():
        torch.testing.assert_close(model.state_dict()[name], tensor, rtol=0, atol=0)


def test_the_reporter_stops_the_run_early():
    model, optimizer, batches, loss_of = problem()
    recorder = Recorder(model, optimizer, stop_when=lambda point: point["epoch"] == 3)
    state = run_loop(
        model,
        optimizer,
        loss_of,
        LoopPlan(epochs=50),
        fresh_state(),
        recorder,
        epoch_batches=batches,
    )
    assert state["epoch"] == 3 and len(state["curve"]) == 3


def test_drawn_batches_and_the_schedule():
    model, optimizer, _, loss_of = problem()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (step + 1))
    drawn, rates = [], []

    def next_batch(state):
        drawn.append(state["step"])
        return torch.arange(state["step"] % 8 * 8, state["step"] % 8 * 8 + 8)

    class Rates(Recorder):
        def point(self, state, window):
            rates.append(window.learning_rate)
            return super().point(state, window)

    plan = LoopPlan(steps=5, log_every=1)
    reporter = Rates(model, optimizer)
    run_loop(
        model,
        optimizer,
        loss_of,
        plan,
        fresh_state(),
        reporter,
        next_batch=next_batch,
        scheduler=scheduler,
    )
    assert drawn == [0, 1, 2, 3, 4]
    assert rates == pytest.approx([0.05 / k for k in range(1, 6)])  # the rate each step used
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.05 / 6)


@pytest.mark.parametrize("clip", [None, 1e-3])
def test_gradients_are_clipped_to_the_plan_s_norm(clip):
    model, _, batches, loss_of = problem()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)  # the step is the gradient
    before = torch.cat([p.detach().clone().flatten() for p in model.parameters()])
    plan = LoopPlan(steps=1, grad_clip=clip)
    run_loop(
        model,
        optimizer,
        loss_of,
        plan,
        fresh_state(),
        Recorder(model, optimizer),
        epoch_batches=batches,
    )
    moved = float((torch.cat([p.detach().flatten() for p in model.parameters()]) - before).norm())
    if clip is None:
        assert moved > 0.1
    else:
        assert moved == pytest.approx(clip, rel=1e-3)


def test_an_epoch_without_batches_and_a_plan_without_an_end_are_errors():
    model, optimizer, _, loss_of = problem()
    with pytest.raises(ValueError, match="epoch 0 has no batches"):
        run_loop(
            model,
            optimizer,
            loss_of,
            LoopPlan(steps=3),
            fresh_state(),
            Recorder(model, optimizer),
            epoch_batches=lambda epoch: [],
        )
    with pytest.raises(ValueError, match="exactly one"):
        LoopPlan(steps=3, epochs=2)
    with pytest.raises(ValueError, match="exactly one"):
        LoopPlan()


# -- no optimizer loop outside the core runner -------------------------------------------

RUNNER = "tasks/core/loop.py"
LOOP_CALLS = ("backward", "clip_grad_norm_", "zero_grad")


def loop_calls(path: Path) -> list[str]:
    """Calls that only an optimizer loop makes: `.backward()`, clipping, `.zero_grad()`,
    and `.step()` on something named like an optimizer."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr, owner = node.func.attr, node.func.value
        owner_name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
        if attr in LOOP_CALLS or (attr == "step" and "optim" in owner_name.lower()):
            found.append(f"{path.name}:{node.lineno}: .{attr}()")
    return found


def test_every_optimizer_loop_goes_through_the_core_runner():
    modules = [p for p in (REPO / "tasks").rglob("*.py") if str(p.relative_to(REPO)) != RUNNER]
    offenders = [call for path in modules for call in loop_calls(path)]
    assert not offenders, "train through tasks.core.loop.run_loop:\n" + "\n".join(offenders)


def test_the_scan_sees_a_hand_written_loop(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""loss.backward() in a docstring is no call."""\n'
        "for batch in batches:\n"
        "    loss = model(batch)\n    loss.backward()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    self.optimizer.step()\n    optimizer.zero_grad()\n    scheduler.step()\n"
    )
    assert [call.split(": ")[1] for call in loop_calls(sample)] == [
        ".backward()",
        ".clip_grad_norm_()",
        ".step()",
        ".zero_grad()",
    ]
