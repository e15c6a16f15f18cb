"""params.yaml `corpus:` section."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from tasks.core.strict_model import StrictModel


class HuggingFaceSourceParams(StrictModel):
    """Stream any `datasets` dataset, e.g. FineWeb2 with one config per language."""

    path: str = "HuggingFaceFW/fineweb-2"
    configs: list[str | None] = Field(default_factory=lambda: ["arb_Arab", "deu_Latn", "zho_Hans"])
    data_files: str | list[str] | None = None
    split: str = "train"
    streaming: bool = True
    text_field: str = "text"
    id_field: str | None = "id"
    lang_field: str | None = "language"
    script_field: str | None = "language_script"
    max_docs_per_config: int = Field(default=1000, ge=1)


class IngestParams(StrictModel):
    source: Literal["udhr", "huggingface"] = "udhr"
    min_chars: int = Field(default=1, ge=0)
    huggingface: HuggingFaceSourceParams = HuggingFaceSourceParams()


class LanguageIdParams(StrictModel):
    """py3langid (bundled model, 97 languages) relabels only when at least `min_confidence`.

    `off` trusts the declared labels (UDHR's are authoritative, and most of its languages are
    outside the model's 97); `fill_undetermined` labels `und` documents; `override` also
    replaces a declared language the model confidently disagrees with.
    """

    mode: Literal["off", "fill_undetermined", "override"] = "off"
    min_confidence: float = Field(default=0.95, ge=0, le=1)


class FilterParams(StrictModel):
    max_chars: int = Field(default=1_000_000, ge=1)
    min_script_fraction: float = Field(default=0.5, ge=0, le=1)
    language_id: LanguageIdParams = LanguageIdParams()
    min_words: int = Field(default=3, ge=0)
    max_words: int = Field(default=100_000, ge=1)
    min_mean_word_length: float = Field(default=1.0, ge=0)
    max_mean_word_length: float = Field(default=20.0, gt=0)
    max_symbol_word_ratio: float = Field(default=0.1, ge=0)
    max_duplicate_line_fraction: float = Field(default=0.3, ge=0, le=1)
    max_char_repetition: float = Field(default=0.2, ge=0, le=1)
    char_repetition_ngram: int = Field(default=10, ge=2)
    batch_size: int = Field(default=2048, ge=1)
    num_workers: int | None = Field(default=None, ge=1, description="Ray tasks; null = auto")


class DedupParams(StrictModel):
    """Exact (hash of the normalized text), then MinHash + LSH near-duplicates."""

    num_perm: int = Field(default=128, ge=2)
    shingle_size: int = Field(default=3, ge=1, description="words per shingle")
    threshold: float = Field(default=0.8, gt=0, lt=1)
    bands: int | None = Field(default=None, ge=1, description="with rows; null = optimal")
    rows: int | None = Field(default=None, ge=1)
    verify: bool = True  # keep only candidate pairs whose estimated Jaccard ≥ threshold
    seed: int = 1
    batch_size: int = Field(default=2048, ge=1)
    num_workers: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _bands_and_rows_together(self) -> DedupParams:
        if (self.bands is None) != (self.rows is None):
            raise ValueError("set both bands and rows, or neither")
        if self.bands and self.bands * self.rows > self.num_perm:
            raise ValueError("bands × rows exceeds num_perm")
        return self

    def banding(self) -> tuple[int, int]:
        from tasks.corpus.minhash import optimal_bands

        if self.bands and self.rows:
            return self.bands, self.rows
        return optimal_bands(self.threshold, self.num_perm)


class PhaseParams(StrictModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    languages: int | Literal["all"] = Field(description="top-N languages by count, or all")
    temperature: float = Field(gt=0, le=1, description="p(l) ∝ n(l)^temperature")
    token_budget: int = Field(ge=1)
    mask_ratio: float = Field(gt=0, lt=1)
    sequence_length: int = Field(ge=8)
    reference_column: str = Field(description="language_counts.csv column for this phase")
    source: HuggingFaceSourceParams | None = Field(
        default=None, description="production: pack this phase from a hub dataset, not the corpus"
    )

    @field_validator("languages")
    @classmethod
    def _positive(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("expected a positive number of languages or 'all'")
        return value


def _mmbert_phases() -> list[PhaseParams]:
    """mmBERT's three phases, with language counts and budgets scaled to the embedded default."""
    return [
        PhaseParams(
            name="pretrain",
            languages=20,
            temperature=0.7,
            token_budget=400_000,
            mask_ratio=0.30,
            sequence_length=128,
            reference_column="pretrain",
        ),
        PhaseParams(
            name="mid",
            languages=60,
            temperature=0.5,
            token_budget=150_000,
            mask_ratio=0.15,
            sequence_length=256,
            reference_column="ext",
        ),
        PhaseParams(
            name="decay",
            languages="all",
            temperature=0.3,
            token_budget=100_000,
            mask_ratio=0.05,
            sequence_length=256,
            reference_column="decay-all",
        ),
    ]


class ControlArmParams(StrictModel):
    """A control arm beside phase `arm_of`: its temperature, token budget, mask ratio and
    sequence length, on phase `languages_of`'s languages only (mmBERT's decay-cont beside
    decay-all: does adding languages in the decay phase help them, or does any more
    training?)."""

    name: str = Field(default="decay_cont", pattern=r"^[a-z][a-z0-9_]*$")
    arm_of: str = "decay"
    languages_of: str = "mid"
    reference_column: str = Field(
        default="decay-mid", description="language_counts.csv column (with reference counts)"
    )


class ScheduleParams(StrictModel):
    use_reference_counts: bool = True  # rank and weight by mmBERT's production token counts
    phases: list[PhaseParams] = Field(default_factory=_mmbert_phases, min_length=1)
    controls: list[ControlArmParams] = Field(default_factory=list)

    @model_validator(mode="after")
    def _controls_name_phases(self) -> ScheduleParams:
        names = {p.name for p in self.phases}
        for control in self.controls:
            if control.name in names:
                raise ValueError(f"controls: {control.name!r} is already a phase name")
            for field in ("arm_of", "languages_of"):
                if getattr(control, field) not in names:
                    raise ValueError(
                        f"controls: {control.name}: {field} {getattr(control, field)!r} "
                        f"is not a phase ({', '.join(sorted(names))})"
                    )
        return self

    @model_validator(mode="after")
    def _phases_grow(self) -> ScheduleParams:
        names = [p.name for p in self.phases]
        if len(set(names)) != len(names):
            raise ValueError(f"phase names must be unique, got {names}")
        sizes = [float("inf") if p.languages == "all" else p.languages for p in self.phases]
        if sizes != sorted(sizes):
            raise ValueError("each phase must have at least as many languages as the one before")
        return self


class TokenizerParams(StrictModel):
    model: Literal["bpe", "unigram"] = "bpe"  # mmBERT uses Gemma 2's (SentencePiece BPE)
    vocab_size: int = Field(default=8000, ge=100)
    pre_tokenizer: Literal["metaspace", "byte_level"] = Field(
        default="metaspace", description="metaspace: SentencePiece-style words; byte_level: code"
    )
    training_chars: int = Field(default=2_000_000, ge=1000, description="size of the mix")
    mix_phase: str | None = Field(default=None, description="phase whose p(l) mixes; null=last")
    fertility_docs_per_script: int = Field(default=200, ge=1)
    seed: int = 0


class PackParams(StrictModel):
    shard_sequences: int = Field(default=1024, ge=1, description="sequences per Parquet shard")
    heldout_tokens_per_language: int = Field(
        default=128, ge=0, description="tail of each language's last document kept out of training"
    )
    heldout_max_fraction: float = Field(default=0.1, ge=0, lt=1, description="of its tokens")
    heldout_min_tokens: int = Field(default=16, ge=1, description="shorter tails are not held out")
    batch_size: int = Field(default=2048, ge=1)
    num_workers: int | None = Field(default=None, ge=1)
    seed: int = 0


class CorpusParams(StrictModel):
    ingest: IngestParams = IngestParams()
    filter: FilterParams = FilterParams()
    dedup: DedupParams = DedupParams()
    schedule: ScheduleParams = ScheduleParams()
    tokenizer: TokenizerParams = TokenizerParams()
    pack: PackParams = PackParams()


SECTION = CorpusParams  # params.yaml `corpus`, registered with tasks.core.params
SECTION_REQUIRED = True  # a params.yaml without it is refused, not run on defaults
