"""params.yaml `kvcache:` section: the needle tasks, the small decoder, its training and the
press study.

Lengths are counted in tokens of the area's word-level tokenizer (one word or punctuation
run = one token), so every context of a (task, length) cell has exactly that many tokens.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tasks.core.strict_model import StrictModel

KINDS = ("single", "multikey", "multivalue", "multiquery")
PRESSES = (
    "random",
    "streamingllm",
    "knorm",
    "snapkv",
    "keydiff",
    "manifoldkv",
    "manifoldkv_l1",
    "manifoldkv_linf",
    "manifoldkv_cosine",
    "windowed_manifoldkv",
)
Kind = Literal[KINDS]  # type: ignore[valid-type]
PressName = Literal[PRESSES]  # type: ignore[valid-type]


class TaskParams(StrictModel):
    """kvcache.tasks: RULER-style needle-in-a-haystack items with the gold answers."""

    seed: int = 0
    kinds: list[Kind] = Field(default_factory=lambda: list(KINDS), min_length=1)
    train_lengths: list[int] = Field(
        default_factory=lambda: [48, 96], min_length=1, description="context tokens (train)"
    )
    train_items: int = Field(default=3000, ge=1, description="train items, kinds and lengths mixed")
    lengths: list[int] = Field(
        default_factory=lambda: [128, 256], min_length=1, description="dev/test context tokens"
    )
    dev_items: int = Field(default=8, ge=1, description="per kind and length")
    test_items: int = Field(default=24, ge=2, description="per kind and length")
    keys: int = Field(default=3, ge=2, description="multikey: needles in all (one is asked)")
    values: int = Field(default=2, ge=2, description="multivalue: values of the one key")
    queries: int = Field(default=2, ge=2, description="multiquery: keys asked at once")
    value_range: list[int] = Field(
        default_factory=lambda: [100, 999],
        min_length=2,
        max_length=2,
        description="[low, high]: needle values are these integers, one token each",
    )

    @model_validator(mode="after")
    def _lengths_fit(self) -> TaskParams:
        low, high = self.value_range
        if not 0 <= low < high:
            raise ValueError("value_range must be [low, high] with 0 ≤ low < high")
        if min(self.train_lengths + self.lengths) < 32:
            raise ValueError("every length must be ≥ 32 tokens (the needles must fit)")
        return self


class ModelParams(StrictModel):
    """A Llama-style decoder built from transformers' LlamaConfig (grouped-query attention)."""

    hidden_size: int = Field(default=64, ge=8)
    intermediate_size: int = Field(default=128, ge=8)
    num_layers: int = Field(default=2, ge=1)
    num_heads: int = Field(default=4, ge=1)
    num_kv_heads: int = Field(default=2, ge=1, description="< num_heads: grouped-query attention")
    max_positions: int = Field(default=2048, ge=64)
    rope_theta: float = Field(default=500000.0, gt=0)
    haystack_words: int = Field(default=1500, ge=0, description="vocabulary: most frequent words")

    @model_validator(mode="after")
    def _grouped(self) -> ModelParams:
        if self.num_heads % self.num_kv_heads or self.hidden_size % self.num_heads:
            raise ValueError("num_heads must divide hidden_size and be a multiple of num_kv_heads")
        return self


class TrainParams(StrictModel):
    """kvcache.train: the decoder on the train split (Ray Train + MLflow), then registered."""

    experiment: str = "paperline-kvcache"
    registered_model: str = "paperline-kv-lm"
    seed: int = 0
    kinds: list[Kind] = Field(
        default_factory=lambda: ["single", "multikey", "multivalue"],
        min_length=1,
        description="train items the LM learns from (multiquery's first value is not the "
        "one after the question's last key, which teaches the wrong copy)",
    )
    ask_every_needle: bool = Field(
        default=True,
        description="after an item's own answer, ask each of its needles (distinct keys) once",
    )
    steps: int = Field(default=400, ge=1)
    batch_size: int = Field(default=32, ge=1)
    learning_rate: float = Field(default=1e-2, gt=0)
    warmup_steps: int = Field(default=30, ge=0)
    weight_decay: float = Field(default=0.01, ge=0)
    log_every: int = Field(default=50, ge=1)
    max_failures: int = Field(default=1, ge=0)
    num_workers: int = Field(default=1, ge=1)
    cpus_per_worker: float = Field(default=1, gt=0)
    torch_threads: int = Field(default=2, ge=1)
    use_gpu: bool = False
    model: ModelParams = ModelParams()


class PressParams(StrictModel):
    """Settings of the presses that have any (kvpress's defaults, window scaled to our lengths)."""

    seed: int = Field(default=0, description="random press")
    sinks: int = Field(default=4, ge=0, description="StreamingLLM attention sinks")
    snapkv_window: int = Field(default=16, ge=1, description="SnapKV: last context tokens")
    snapkv_kernel: int = Field(default=5, ge=1, description="SnapKV: pooling kernel (odd)")
    centroid_window: int = Field(
        default=64, ge=1, description="WindowedManifoldKV: tokens per centroid (paper: 4096)"
    )


class StudyParams(StrictModel):
    """kvcache.study: accuracy by task × press × ratio × length on the test split."""

    presses: list[PressName] = Field(default_factory=lambda: list(PRESSES), min_length=1)
    ratios: list[float] = Field(default_factory=lambda: [0.25, 0.5, 0.75], min_length=1)
    claim_ratio: float = Field(default=0.5, description="claims (a) and (b)")
    windowed_ratio: float = Field(default=0.25, description="claim (c), at the longest length")
    batch_size: int = Field(default=32, ge=1, description="items per forward pass")
    torch_threads: int = Field(default=1, ge=1, description="per Ray task")
    num_workers: int | None = Field(default=None, ge=1, description="Ray tasks at once")
    press: PressParams = PressParams()

    @model_validator(mode="after")
    def _ratios(self) -> StudyParams:
        for ratio in [*self.ratios, self.claim_ratio, self.windowed_ratio]:
            if not 0 <= ratio < 1:
                raise ValueError(f"ratio {ratio} is outside [0, 1)")
        for ratio in (self.claim_ratio, self.windowed_ratio):
            if ratio not in self.ratios:
                raise ValueError(f"ratio {ratio} of a claim must be one of ratios {self.ratios}")
        return self


class EvalParams(StrictModel):
    """`paperline kv eval` and the study's model: ours by default, or any causal LM."""

    model: str = Field(
        default="",
        description="'' = kvcache.train's model; else a local checkpoint or models:/name@alias",
    )
    device: str = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"


class KvCacheParams(StrictModel):
    tasks: TaskParams = TaskParams()
    train: TrainParams = TrainParams()
    study: StudyParams = StudyParams()
    eval: EvalParams = EvalParams()


SECTION = KvCacheParams  # params.yaml `kvcache`, registered with tasks.core.params
