"""params.yaml `kvcache:` section: the needle tasks and the press study on the core LLM.

Lengths are counted in tokens of the core LLM's tokenizer (the haystack and needles; the
chat template and the instruction add a few dozen more). The model is the core LLM service
(`llm.local`: SmolLM2-135M-Instruct from llm-import by default; a bigger checkpoint or
`device: cuda` go there).
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
    "adakv_snapkv",
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
    kinds: list[Kind] = Field(default_factory=lambda: ["single", "multikey"], min_length=1)
    lengths: list[int] = Field(
        default_factory=lambda: [512, 1536], min_length=1, description="context tokens"
    )
    test_items: int = Field(default=4, ge=2, description="per kind and length")
    keys: int = Field(default=3, ge=2, description="multikey: needles in all (one is asked)")
    values: int = Field(default=2, ge=2, description="multivalue: values of the one key")
    queries: int = Field(default=2, ge=2, description="multiquery: keys asked at once")
    digits: int = Field(default=7, ge=3, le=12, description="needle values: RULER's 7 digits")

    @model_validator(mode="after")
    def _lengths_fit(self) -> TaskParams:
        if min(self.lengths) < 128:
            raise ValueError("every length must be ≥ 128 tokens (the needles must fit)")
        return self


class PressParams(StrictModel):
    """Settings of the presses that have any (kvpress's defaults unless noted)."""

    seed: int = Field(default=0, description="random press")
    sinks: int = Field(default=4, ge=0, description="StreamingLLM attention sinks")
    snapkv_window: int = Field(default=64, ge=1, description="SnapKV: last context tokens")
    snapkv_kernel: int = Field(default=5, ge=1, description="SnapKV: pooling kernel (odd)")
    block_size: int = Field(default=128, ge=1, description="KeyDiff's BlockPress block")
    adakv_alpha: float = Field(
        default=0.2, ge=0, le=1, description="AdaKV: share of a head's budget it always keeps"
    )
    centroid_window: int = Field(
        default=512, ge=1, description="WindowedManifoldKV: tokens per centroid (paper: 4096)"
    )


class StudyParams(StrictModel):
    """kvcache.study: accuracy by task × press × ratio × length on the test split."""

    presses: list[PressName] = Field(default_factory=lambda: list(PRESSES), min_length=1)
    ratios: list[float] = Field(default_factory=lambda: [0.25, 0.5], min_length=1)
    claim_ratio: float = Field(default=0.5, description="claims (a) and (b)")
    windowed_ratio: float = Field(default=0.25, description="claim (c), at the longest length")
    answer_slack: int = Field(
        default=8, ge=0, description="new tokens beyond the gold answer's (room for a reply)"
    )
    arms_per_batch: int = Field(
        default=32, ge=1, description="compressed caches decoded together (memory ∝ this)"
    )
    torch_threads: int = Field(default=1, ge=1, description="per Ray task (llm.local.threads wins)")
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


class KvCacheParams(StrictModel):
    tasks: TaskParams = TaskParams()
    study: StudyParams = StudyParams()
    experiment: str = "paperline-kvcache"


SECTION = KvCacheParams  # params.yaml `kvcache`, registered with tasks.core.params
