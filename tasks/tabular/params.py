"""params.yaml `tabular:` section: the split, the synthetic generator, the uncertainty model,
the model zoo's sweep and the uncertainty plots.

The default is a tiny sweep (two configurations per family, a few epochs, a subsample of
the training rows) that keeps the area's stages within about 90 s on two CPU cores;
profiles/standard.yaml widens the sweep and trains longer on every training row.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tasks.core.strict_model import StrictModel

Family = Literal["mlp", "plr", "tabm", "retrieval", "triplet"]
FAMILIES: tuple[str, ...] = ("mlp", "plr", "tabm", "retrieval", "triplet")


class SplitParams(StrictModel):
    """A fixed split by a seeded permutation of the rows: train / dev / test shares."""

    seed: int = 0
    dev: float = Field(default=0.16, gt=0, lt=1)
    test: float = Field(default=0.2, gt=0, lt=1)

    @model_validator(mode="after")
    def _train_left(self) -> SplitParams:
        if self.dev + self.test >= 0.9:
            raise ValueError("dev + test must leave at least 10% of the rows for train")
        return self


class SyntheticParams(StrictModel):
    """y = f(x) + exp(g(x))·ε, x ~ U[-1, 1]^features, ε ~ N(0, 1) (tasks/tabular/synthetic.py)."""

    rows: int = Field(default=8000, ge=100)
    features: int = Field(default=8, ge=5, description="the first five carry f and g")
    seed: int = 0
    noise_offset: float = Field(default=-1.0, description="g(x)'s constant: exp(-1) ≈ 0.37")
    noise_scale: float = Field(default=0.9, ge=0, description="g(x)'s spread around it")


class UncertaintyParams(StrictModel):
    """CatBoost RMSEWithUncertainty: per-sample data uncertainty (the predicted variance)."""

    iterations: int = Field(default=300, ge=10)
    depth: int = Field(default=6, ge=1, le=16)
    learning_rate: float = Field(default=0.1, gt=0)
    early_stopping_rounds: int = Field(default=50, ge=1, description="on the dev split")
    threads: int = Field(default=2, ge=1)
    seed: int = 0
    spearman_tolerance: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="on the synthetic test split the Spearman correlation of the estimated "
        "and the true exp(g(x)) must reach this (tests and the metrics' pass flag)",
    )


class SearchSpace(StrictModel):
    """Random search: each trial draws one value of every list (families use what they need)."""

    learning_rate: list[float] = Field(default_factory=lambda: [1e-3, 3e-3], min_length=1)
    weight_decay: list[float] = Field(default_factory=lambda: [0.0, 1e-4], min_length=1)
    d_block: list[int] = Field(default_factory=lambda: [64, 128], min_length=1)
    n_blocks: list[int] = Field(default_factory=lambda: [2], min_length=1)
    dropout: list[float] = Field(default_factory=lambda: [0.0, 0.1], min_length=1)
    d_embedding: list[int] = Field(default_factory=lambda: [16], min_length=1)
    n_frequencies: list[int] = Field(default_factory=lambda: [16, 32], min_length=1)
    frequency_init_scale: list[float] = Field(default_factory=lambda: [0.01, 0.1], min_length=1)
    k: list[int] = Field(default_factory=lambda: [8], min_length=1, description="TabM members")
    temperature: list[float] = Field(default_factory=lambda: [1.0], min_length=1)
    candidates: list[int] = Field(
        default_factory=lambda: [512], min_length=1, description="retrieval: neighbours per batch"
    )
    triplet_weight: list[float] = Field(default_factory=lambda: [0.1, 0.3], min_length=1)
    triplet_margin: list[float] = Field(default_factory=lambda: [0.2], min_length=1)


class ZooParams(StrictModel):
    families: list[Family] = Field(default_factory=lambda: list(FAMILIES), min_length=1)
    trials: int = Field(default=2, ge=1, description="configurations per family")
    epochs: int = Field(default=12, ge=1)
    patience: int = Field(default=4, ge=1, description="epochs without a better dev MSE")
    batch_size: int = Field(default=256, ge=8)
    train_rows: int | None = Field(
        default=4000, ge=100, description="training rows per trial (a seeded subsample); null = all"
    )
    retrieval_bank: int = Field(
        default=2048, ge=16, description="training rows a retrieval model keeps for inference"
    )
    seed: int = 0
    replicates: list[int] = Field(
        default_factory=lambda: [1, 2],
        description="further training seeds of each chosen configuration and of the matched "
        "triplet ablation: the claims span [seed, *replicates]",
    )
    max_concurrent_trials: int = Field(default=1, ge=1, description="keep 1 with a SQLite store")
    cpus_per_trial: float = Field(default=1, gt=0)
    torch_threads: int = Field(default=1, ge=1, description="intra-op threads per trial")
    search: SearchSpace = SearchSpace()

    @model_validator(mode="after")
    def _reference(self) -> ZooParams:
        if "mlp" not in self.families:
            raise ValueError("families must include mlp: every comparison is against it")
        if len(set(self.replicates)) != len(self.replicates) or self.seed in self.replicates:
            raise ValueError(
                f"replicates {self.replicates} must be distinct seeds other than seed {self.seed}"
            )
        return self

    @property
    def seeds(self) -> list[int]:
        return [self.seed, *self.replicates]


class EvaluateParams(StrictModel):
    bins: int = Field(default=5, ge=2, description="uncertainty bins (quantiles) of the test split")


class TabularParams(StrictModel):
    experiment: str = "paperline-tabular"
    registered_model: str = "paperline-tabular"
    split: SplitParams = SplitParams()
    synthetic: SyntheticParams = SyntheticParams()
    uncertainty: UncertaintyParams = UncertaintyParams()
    zoo: ZooParams = ZooParams()
    evaluate: EvaluateParams = EvaluateParams()


SECTION = TabularParams  # params.yaml `tabular`, registered with tasks.core.params
