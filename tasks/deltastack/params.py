"""params.yaml `deltastack:` section: tasks, lengths, the model shapes and the study budget.

`preset` names one entry of `budgets`: `tiny` is the embedded default (2 CPU cores, minutes),
`full` DeltaStack's own setting (2 blocks, 4 heads, d 128, batch 256, 6000 steps, 3 seeds)
for a GPU. Both run the same code.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tasks.core.strict_model import StrictModel

TASKS = (
    "parity",
    "even_pairs",
    "cycle_nav",
    "mod_arith_no_brack",
    "mod_arith_w_brack",
    "reverse_string",
    "duplicate_string",
    "dyck",
    "stack_manipulation",
)
ModelName = Literal["deltastack", "deltanet", "lstm", "transformer"]
TaskName = Literal[TASKS]  # type: ignore[valid-type]


class ModelParams(StrictModel):
    d_model: int = Field(default=128, ge=8)
    num_layers: int = Field(default=2, ge=1)
    num_heads: int = Field(default=4, ge=1)
    conv_size: int = Field(default=4, ge=1, description="DeltaNet's short convolution")
    chunk_size: int = Field(default=32, ge=1, description="steps per chunk of the delta rule")
    negative_eigenvalues: bool = Field(default=True, description="β = 2σ(·) instead of σ(·)")
    stack_size: int = Field(default=64, ge=2, description="DeltaStack slots while training")
    eval_stack_size: int = Field(default=256, ge=2, description="slots at test lengths")
    stack_kappa: float = Field(default=2.0, description="initial address sharpness κ")


class Budget(StrictModel):
    """How much of the grid to run and how long to train each trial."""

    seeds: list[int] = Field(min_length=1)
    steps: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    learning_rate: float = Field(gt=0)
    eval_every: int = Field(ge=1, description="steps between test-length evaluations")
    eval_examples: int = Field(ge=1, description="examples per test-length bucket")
    model: ModelParams = ModelParams()


class LengthParams(StrictModel):
    train_min: int = Field(default=3, ge=1)
    train_max: int = Field(default=60, ge=1)
    test_buckets: list[int] = Field(
        default_factory=lambda: [60, 100, 150, 200, 256],
        min_length=2,
        description="edges of the test-length buckets (inclusive ends); the last is longest",
    )
    in_distribution: list[int] = Field(
        default_factory=lambda: [41, 60],
        min_length=2,
        max_length=2,
        description="[min, max] of the in-distribution set: lengths inside the training range, "
        "drawn from their own RNG stream",
    )

    @model_validator(mode="after")
    def _ordered(self) -> LengthParams:
        if self.train_min > self.train_max:
            raise ValueError("train_min must not exceed train_max")
        if sorted(set(self.test_buckets)) != self.test_buckets:
            raise ValueError("test_buckets must be strictly increasing")
        low, high = self.in_distribution
        if not self.train_min <= low <= high <= self.train_max:
            raise ValueError(
                f"in_distribution [{low}, {high}] must lie inside the training lengths "
                f"[{self.train_min}, {self.train_max}]"
            )
        return self


class TrainingParams(StrictModel):
    weight_decay: float = Field(default=0.01, ge=0, description="not on embeddings")
    warmup_share: float = Field(default=0.15, ge=0, lt=1, description="then cosine to min_lr")
    min_learning_rate: float = Field(default=1e-5, ge=0)
    grad_clip: float = Field(default=1.0, gt=0)
    torch_threads: int = Field(default=1, ge=1, description="intra-op threads per trial")


class StudyParams(StrictModel):
    max_concurrent_trials: int | None = Field(default=None, ge=1, description="None: Ray's CPUs")
    cpus_per_trial: float = Field(default=1, gt=0)
    gpus_per_trial: float = Field(default=0.25, ge=0, description="used only where CUDA is")


TINY = Budget(
    seeds=[0],
    steps=150,
    batch_size=32,
    learning_rate=3e-3,
    eval_every=150,
    eval_examples=96,
    model=ModelParams(d_model=32, num_layers=1, num_heads=2),
)
FULL = Budget(
    seeds=[0, 1, 2],
    steps=6000,
    batch_size=256,
    learning_rate=2e-3,
    eval_every=200,
    eval_examples=512,
    model=ModelParams(),
)


class DeltaStackParams(StrictModel):
    preset: str = "tiny"
    experiment: str = "paperline-deltastack"
    tasks: list[TaskName] = Field(default_factory=lambda: list(TASKS), min_length=1)
    models: list[ModelName] = Field(
        default_factory=lambda: ["deltastack", "deltanet", "lstm", "transformer"], min_length=1
    )
    lengths: LengthParams = LengthParams()
    training: TrainingParams = TrainingParams()
    study: StudyParams = StudyParams()
    budgets: dict[str, Budget] = Field(
        default_factory=lambda: {"tiny": TINY, "full": FULL}, min_length=1
    )

    @model_validator(mode="after")
    def _known_preset(self) -> DeltaStackParams:
        if self.preset not in self.budgets:
            raise ValueError(
                f"preset '{self.preset}' is not one of budgets: {', '.join(self.budgets)}"
            )
        return self

    @property
    def budget(self) -> Budget:
        return self.budgets[self.preset]


SECTION = DeltaStackParams  # params.yaml `deltastack`, registered with tasks.core.params
