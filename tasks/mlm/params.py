"""params.yaml `mlm:` section: the encoder preset, the three training phases, Ray Train, Tune."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tasks.core.ray_train import ScalingParams
from tasks.core.strict_model import StrictModel

PHASES = ("pretrain", "mid", "decay")
# control arm → (the phase whose training params it uses, the phase it starts from): the
# corpus packs it beside its phase (corpus.schedule.controls), same steps and token budget
CONTROL_ARMS = {"decay_cont": ("decay", "mid")}
ARMS = PHASES + tuple(CONTROL_ARMS)  # every model the mlm stages train


def training_phase(arm: str) -> str:
    """The phase whose `mlm.phases` section trains `arm` (a control shares its phase's)."""
    return CONTROL_ARMS[arm][0] if arm in CONTROL_ARMS else arm


class PhaseTrainingParams(StrictModel):
    """One phase's optimisation. mmBERT: lr 8e-4 pretrain, 4e-4 mid/decay (small)."""

    learning_rate: float = Field(gt=0)
    epochs: float = Field(default=1.0, gt=0, description="passes over the phase's shards")
    max_steps: int | None = Field(default=None, ge=1)
    warmup_steps: int = Field(default=0, ge=0, description="linear warmup (pretrain only)")
    schedule: Literal["stable", "one_minus_sqrt"] = "stable"
    min_lr_ratio: float = Field(default=0.0, ge=0, le=1)


class TrainingParams(StrictModel):
    batch_size: int = Field(default=32, ge=1, description="sequences per worker per step")
    weight_decay: float = Field(default=8e-5, ge=0)
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = Field(default=1.0, gt=0)
    checkpoint_every: int = Field(default=50, ge=1, description="optimizer steps")
    keep_checkpoints: int = Field(default=2, ge=1)
    max_failures: int = Field(default=2, ge=0, description="worker restarts from a checkpoint")
    log_every: int = Field(default=5, ge=1, description="steps between MLflow metric batches")
    seed: int = 0
    cache_dataset: bool = Field(
        default=True, description="materialize the shards once (false: stream, re-read each epoch)"
    )
    scaling: ScalingParams = ScalingParams()


class EvalParams(StrictModel):
    mask_ratio: float = Field(default=0.15, gt=0, lt=1, description="same for every phase")
    batch_size: int = Field(default=64, ge=1)
    seed: int = 1234


class TuneParams(StrictModel):
    """`paperline tune mlm`: ASHA over learning rate × warmup on the pretrain phase."""

    learning_rates: list[float] = Field(default_factory=lambda: [3e-4, 1e-3, 3e-3], min_length=1)
    warmup_steps: list[int] = Field(default_factory=lambda: [0, 20], min_length=1)
    max_steps: int = Field(default=60, ge=2)
    grace_period: int = Field(default=10, ge=1, description="steps before ASHA may stop a trial")
    reduction_factor: int = Field(default=3, ge=2)
    max_concurrent_trials: int = Field(default=2, ge=1)


class MlmParams(StrictModel):
    preset: Literal["tiny", "small", "base"] = "tiny"
    experiment: str = "paperline-mmbert"
    registered_model: str = "paperline-mmbert"
    training: TrainingParams = TrainingParams()
    phases: dict[Literal["pretrain", "mid", "decay"], PhaseTrainingParams] = Field(
        default_factory=lambda: {
            "pretrain": PhaseTrainingParams(learning_rate=2e-3, warmup_steps=10),
            "mid": PhaseTrainingParams(learning_rate=1e-3),
            "decay": PhaseTrainingParams(learning_rate=1e-3, epochs=2, schedule="one_minus_sqrt"),
        }
    )
    eval: EvalParams = EvalParams()
    tune: TuneParams = TuneParams()

    @model_validator(mode="after")
    def _every_phase(self) -> MlmParams:
        missing = [p for p in PHASES if p not in self.phases]
        if missing:
            raise ValueError(f"phases: add a section for {', '.join(missing)}")
        return self


SECTION = MlmParams  # params.yaml `mlm`, registered with tasks.core.params
