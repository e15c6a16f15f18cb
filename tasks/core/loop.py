"""The one optimizer loop every training stage and trial runs: steps, clipping, the
learning-rate schedule, log points, checkpoints and resume.

A stage says what is its own: the model and optimizer, its batches (an epoch's, or one drawn
per step), the loss of a batch, and a `Reporter` that turns a log point into a curve point
and reports it (to Ray Train with a checkpoint, to Tune, or to a list). The loop keeps the
progress state (`fresh_state`): `step`, `epoch`, `epoch_batches` (batches of the current
epoch already trained on, which a resumed run skips), the `curve` and the steps it
`resumed_from`. Everything in it must be JSON: checkpoints store it as `state.json`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import count
from typing import Any, Protocol


def fresh_state(**extra: Any) -> dict[str, Any]:
    """The progress of a run that has not started (`extra`: a stage's own counters)."""
    return {"step": 0, "epoch": 0, "epoch_batches": 0, "curve": [], "resumed_from": [], **extra}


@dataclass(frozen=True)
class LoopPlan:
    """How long to train and when to stop and look. `steps` or `epochs` ends the run; the
    unit of `log_every` and `checkpoint_every` is the step when `steps` is set, the epoch
    otherwise. The last step is always a log point and a checkpoint; `checkpoint_at` adds
    steps of its own (dev evaluations at irregular steps)."""

    steps: int | None = None
    epochs: int | None = None
    log_every: int = 1
    checkpoint_every: int = 0
    checkpoint_at: frozenset[int] = frozenset()
    grad_clip: float | None = None

    def __post_init__(self) -> None:
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("a LoopPlan ends after `steps` or after `epochs`, exactly one")

    def finished(self, state: dict[str, Any]) -> bool:
        if self.steps is not None:
            return state["step"] >= self.steps
        return state["epoch"] >= self.epochs

    def looks_at(self, unit: int, last: bool) -> tuple[bool, bool]:
        """(a log point, a checkpoint) after `unit` steps or epochs."""
        checkpoint = last or unit in self.checkpoint_at
        if self.checkpoint_every:
            checkpoint = checkpoint or unit % self.checkpoint_every == 0
        return checkpoint or unit % self.log_every == 0, checkpoint


@dataclass
class Window:
    """What happened since the last log point: each step's loss, the sums a stage's loss
    function returned beside it (tokens, right predictions …), the learning rate the last
    step used, and when the window opened."""

    losses: list[float] = field(default_factory=list)
    sums: Counter = field(default_factory=Counter)
    learning_rate: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    @property
    def loss(self) -> float:
        return sum(self.losses) / max(1, len(self.losses))

    @property
    def seconds(self) -> float:
        return max(time.perf_counter() - self.started, 1e-9)


class Reporter(Protocol):
    def point(self, state: dict[str, Any], window: Window) -> dict[str, Any]:
        """The curve point of this log point (the loop appends it to `state["curve"]`)."""

    def report(self, state: dict[str, Any], point: dict[str, Any], checkpoint: bool) -> bool:
        """Send the point on, with a checkpoint when asked; True stops the run here."""


def run_loop(
    model: Any,
    optimizer: Any,
    loss_of: Callable[[Any], Any],
    plan: LoopPlan,
    state: dict[str, Any],
    reporter: Reporter,
    *,
    epoch_batches: Callable[[int], Iterable[Any]] | None = None,
    next_batch: Callable[[dict[str, Any]], Any] | None = None,
    scheduler: Any = None,
) -> dict[str, Any]:
    """Train until the plan ends (or the reporter stops it) and return the state.

    The batches come from `epoch_batches(epoch)` (deterministic per epoch, so a resumed run
    skips the `epoch_batches` it had trained on) or, for data drawn per step, from
    `next_batch(state)`, one endless epoch. `loss_of(batch)` returns the loss, or
    (loss, sums) with counts to add up over the window."""
    if (epoch_batches is None) == (next_batch is None):
        raise ValueError("run_loop takes `epoch_batches` or `next_batch`, exactly one")
    import torch

    window = Window()
    while not plan.finished(state):
        model.train()  # evaluations at log points may have left it in eval mode
        if epoch_batches is not None:
            seen = state["epoch_batches"]
            batches: Iterable[Any] = epoch_batches(state["epoch"])
        else:
            seen, batches = 0, (next_batch(state) for _ in count())
        stopped, trained = False, False
        for position, batch in enumerate(batches):
            trained = True
            if position < seen:
                continue  # trained on before a resume
            result = loss_of(batch)
            loss, sums = result if isinstance(result, tuple) else (result, {})
            loss.backward()
            if plan.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), plan.grad_clip)
            window.learning_rate = optimizer.param_groups[0]["lr"]
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            state["step"] += 1
            state["epoch_batches"] = position + 1
            window.losses.append(loss.item())
            window.sums.update(sums)
            if plan.steps is None:
                continue
            log, checkpoint = plan.looks_at(state["step"], plan.finished(state))
            if log:
                stopped = _look(state, window, reporter, checkpoint)
                model.train()
                window = Window()
            if stopped or plan.finished(state):
                break
        if stopped or (plan.steps is not None and plan.finished(state)):
            break
        if not trained:
            raise ValueError(f"epoch {state['epoch']} has no batches: fewer rows than a batch?")
        state["epoch"] += 1
        state["epoch_batches"] = 0
        if plan.epochs is not None:
            log, checkpoint = plan.looks_at(state["epoch"], plan.finished(state))
            if log and _look(state, window, reporter, checkpoint):
                break
            if log:
                window = Window()
    return state


def _look(state: dict[str, Any], window: Window, reporter: Reporter, checkpoint: bool) -> bool:
    point = reporter.point(state, window)
    state["curve"].append(point)
    return bool(reporter.report(state, point, checkpoint))
