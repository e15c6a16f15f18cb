"""params.yaml `cmipref:` section: clips, pseudo-labelling, the reward model, evaluation."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tasks.core.ray_train import ScalingParams
from tasks.core.strict_model import StrictModel
from tasks.core.text_encoders import EncoderParams

Modality = Literal["text", "text+lyrics", "text+ref", "all"]


class SourceParams(StrictModel):
    """Where the clean clips come from: synthesized, a folder, or a Hugging Face dataset."""

    kind: Literal["synth", "folder", "hub"] = "synth"
    folder: str | None = Field(
        default=None, description="folder: audio files + metadata.jsonl ({file, text, lyrics?})"
    )
    dataset: str | None = Field(default=None, description="hub: dataset id (downloads)")
    revision: str | None = None
    split: str = "train"
    audio_column: str = "audio"
    text_column: str = "text"
    lyrics_column: str | None = None

    @model_validator(mode="after")
    def _location(self) -> SourceParams:
        if self.kind == "folder" and not self.folder:
            raise ValueError("source.kind folder needs source.folder")
        if self.kind == "hub" and not self.dataset:
            raise ValueError("source.kind hub needs source.dataset")
        return self


class GenerateParams(StrictModel):
    source: SourceParams = SourceParams()
    prompts: int = Field(default=112, ge=3, description="prompts (source clips) used")
    candidates: int = Field(default=5, ge=2, description="clips per prompt; the first is clean")
    seconds: float = Field(default=5.0, ge=5.0, le=10.0)
    sample_rate: int = Field(default=16000, ge=8000)
    severity: tuple[float, float] = Field(default=(0.3, 1.0), description="faults' range")
    second_fault_rate: float = Field(default=0.25, ge=0, le=1, description="clips with two")
    modalities: list[Modality] = Field(
        default_factory=lambda: ["text", "text+lyrics", "text+ref", "all"],
        min_length=1,
        description="cycled over the prompts (synth); real clips take what they have",
    )
    test_prompts: int = Field(default=64, ge=1, description="held-out truth set (CMI-Pref)")
    finetune_prompts: int = Field(default=12, ge=1, description="truth-labelled fine-tune set")
    pairs_per_prompt: int = Field(default=8, ge=1, description="pool/fine-tune prompts")
    min_quality_gap: float = Field(default=0.05, ge=0, description="no near-tie pairs")
    seed: int = 0
    batch_size: int = Field(default=8, ge=1, description="prompts per Ray task")

    @model_validator(mode="after")
    def _splits(self) -> GenerateParams:
        if self.test_prompts + self.finetune_prompts >= self.prompts:
            raise ValueError("test_prompts + finetune_prompts must leave prompts for the pool")
        if not 0 < self.severity[0] <= self.severity[1] <= 1:
            raise ValueError("severity must be (low, high) with 0 < low <= high <= 1")
        return self


class JudgeParams(StrictModel):
    """`signal`: librosa features (offline); `openai`: an audio LLM behind that API."""

    backend: Literal["signal", "openai"] = "signal"
    listen_seconds: float = Field(
        default=4.0, gt=0, description="the excerpt of each clip a signal judge hears"
    )
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "Qwen/Qwen3-Omni-30B-A3B-Instruct"
    api_key_env: str = "CMIPREF_JUDGE_API_KEY"
    temperature: float = Field(default=0.0, ge=0)


class LabelParams(StrictModel):
    judges: list[JudgeParams] = Field(
        default_factory=lambda: [JudgeParams()],
        min_length=1,
        description="each judges every pair in both orders; their margins are averaged",
    )
    label_smoothing: float = Field(default=0.1, ge=0, lt=0.5)
    batch_size: int = Field(default=16, ge=1, description="pairs per Ray task")


def default_text_encoder() -> EncoderParams:
    return EncoderParams(name="minilm", kind="minilm")


class SweepParams(StrictModel):
    """The Ray Tune grid `paperline tune cmipref` runs: pretraining only, scored on dev."""

    learning_rate: list[float] = Field(default_factory=lambda: [3e-4, 1e-3, 3e-3], min_length=1)
    modality_dropout: list[float] = Field(default_factory=lambda: [0.1, 0.3], min_length=1)
    steps: int = Field(default=150, ge=1)


class TrainParams(StrictModel):
    text_encoder: EncoderParams = Field(
        default_factory=default_text_encoder,
        description="frozen; minilm (packaged) or this project's mmbert (models/mmbert/decay)",
    )
    n_mels: int = Field(default=64, ge=16)
    d_model: int = Field(default=64, ge=16)
    heads: int = Field(default=4, ge=1)
    prompt_depth: int = Field(default=1, ge=1)
    joint_depth: int = Field(default=2, ge=1)
    dropout: float = Field(default=0.1, ge=0, lt=1)
    modality_dropout: float = Field(default=0.2, ge=0, lt=1)
    batch_size: int = Field(default=32, ge=2)
    pretrain_steps: int = Field(default=400, ge=1, description="on pseudo labels")
    finetune_steps: int = Field(default=150, ge=0, description="on the truth-labelled split")
    learning_rate: float = Field(default=1e-3, gt=0)
    finetune_learning_rate: float = Field(default=3e-4, gt=0)
    weight_decay: float = Field(default=0.01, ge=0)
    checkpoint_every: int = Field(default=100, ge=1)
    seed: int = 0
    scaling: ScalingParams = ScalingParams(cpus_per_worker=1, torch_threads=2)
    max_failures: int = Field(default=1, ge=0)
    sweep: SweepParams = SweepParams()
    experiment: str = "paperline-cmi-rm"
    registered_model: str = "paperline-cmi-rm"

    @model_validator(mode="after")
    def _heads(self) -> TrainParams:
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} must be a multiple of heads {self.heads}")
        return self


class EvaluateParams(StrictModel):
    top_k: list[int] = Field(default_factory=lambda: [1, 2], min_length=1)
    experiment: str = "paperline-cmi-rm"


class CmiprefParams(StrictModel):
    generate: GenerateParams = GenerateParams()
    label: LabelParams = LabelParams()
    train: TrainParams = TrainParams()
    evaluate: EvaluateParams = EvaluateParams()


SECTION = CmiprefParams  # params.yaml `cmipref`, registered with tasks.core.params
