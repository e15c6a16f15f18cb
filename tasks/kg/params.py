"""params.yaml `kg:` section: the Wikidata slice, QA input, linking, SPARQL mining, judging."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tasks.core.ray_train import ScalingParams
from tasks.core.strict_model import StrictModel

LANGUAGES = ("ar", "de", "en", "es", "ru", "zh")  # CoDEx-S property labels


class SliceParams(StrictModel):
    languages: list[str] = Field(default_factory=lambda: list(LANGUAGES), min_length=1)
    include_valid: bool = Field(default=True, description="valid.txt triples are true facts")


class QaSourceParams(StrictModel):
    """One of MultiHal's QA sources, from the Hugging Face hub or local files."""

    name: Literal["truthfulqa", "halueval", "halubench", "felm", "simpleqa", "defan", "shroom"]
    path: str = Field(description="hub dataset id, or a local csv/json/jsonl/parquet file")
    config: str | None = None
    split: str = "test"
    max_rows: int | None = Field(default=None, ge=1)


class QaParams(StrictModel):
    one_hop_questions: int = Field(default=300, ge=0, description="from CoDEx-S valid.txt")
    two_hop_questions: int = Field(default=150, ge=0, description="2-hop compositions")
    simpleqa_rows: int = Field(default=100, ge=0, description="sample of the local SimpleQA")
    seed: int = 13
    sources: list[QaSourceParams] = Field(default_factory=list, description="hub/local extras")


class LinkingParams(StrictModel):
    """Offline: a label/alias index read from the endpoint. Production: Falcon 2.0, then
    Wikidata's wbsearchentities for what Falcon misses."""

    backend: Literal["index", "falcon", "wikidata_search"] = "index"
    falcon_url: str = "https://labs.tib.eu/falcon/falcon2/api?mode=long&k=3&db=1"
    wikidata_api_url: str = "https://www.wikidata.org/w/api.php"
    language: str = "en"
    max_ngram: int = Field(default=6, ge=1, description="index: longest span looked up")
    max_objects: int = Field(default=5, ge=1, description="MultiHal: answer + optional, ≤ 5")


class SparqlParams(StrictModel):
    """The endpoint and how the miner talks to it."""

    backend: Literal["oxigraph", "wikidata"] = "oxigraph"
    wikidata_url: str = "https://query.wikidata.org/sparql"
    user_agent: str = (
        "paperline-kg/0.1 (https://github.com/paperline/paperline; paperline@example.org)"
    )
    pairs_per_query: int = Field(default=100, ge=1, description="(subject, object) in VALUES")
    page_size: int = Field(default=10_000, ge=1, description="LIMIT per page")
    timeout_seconds: float = Field(default=60, gt=0)
    retries: int = Field(default=5, ge=0)
    backoff_seconds: float = Field(default=0.5, ge=0, description="doubles each retry")
    max_backoff_seconds: float = Field(default=60, gt=0)
    concurrency: int = Field(default=2, ge=1, description="queries in flight (Wikidata asks ≤ 5)")
    cache: str = Field(default=".paperline/kg/sparql-cache.sqlite", description="responses")


class MineParams(StrictModel):
    max_hops: Literal[1, 2] = 2
    stop_at_first_hit: bool = Field(default=True, description="MultiHal: 2 hops only if 1 fails")
    removed_properties: list[str] = Field(
        default_factory=lambda: ["P10", "P18", "P51", "P989", "P2717"],
        description="dropped besides ids_to_remove.json and ' ID'/'URL' labels",
    )


class JudgeParams(StrictModel):
    """Offline: a documented deterministic scorer. Production: an OpenAI-compatible LLM."""

    backend: Literal["heuristic", "openai"] = "heuristic"
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "meta-llama/Llama-3.3-70B-Instruct"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.3, ge=0)
    top_paths: int = Field(default=10, ge=1, description="more paths → pick top-10 twice")
    min_score: int = Field(default=4, ge=1, le=5, description="keep paths scored ≥ this")
    seed: int = 13


class ExamplesParams(StrictModel):
    """Detector examples: (question, path in one language, candidate answer) → supported?"""

    test_fraction: float = Field(default=0.2, gt=0, lt=1, description="of questions, by hash")
    dev_fraction: float = Field(default=0.15, gt=0, lt=1, description="epochs, threshold")
    languages_per_path: int = Field(default=2, ge=1, description="label languages sampled")
    seed: int = 13

    @model_validator(mode="after")
    def _some_questions_left_to_train(self) -> ExamplesParams:
        if self.test_fraction + self.dev_fraction >= 1:
            raise ValueError("test_fraction + dev_fraction must be < 1 (the rest trains)")
        return self


class DetectorParams(StrictModel):
    """The hallucination detector: a cross-encoder fine-tuned with Ray Train."""

    backbone: Literal["minilm", "mmbert"] = "minilm"
    mmbert_model: str = Field(default="paperline-mmbert", description="registered model")
    mmbert_alias: str = "candidate"
    registered_model: str = "paperline-kg-halludetect"
    experiment: str = "paperline-kg-halludetect"
    max_length: int = Field(default=96, ge=16)
    batch_size: int = Field(default=32, ge=1)
    epochs: float = Field(default=2.0, gt=0, description="at most; the best on dev is kept")
    evaluations_per_epoch: int = Field(default=2, ge=1, description="dev AUROC + checkpoint")
    learning_rate: float = Field(default=5e-5, gt=0)
    weight_decay: float = Field(default=0.01, ge=0)
    warmup_fraction: float = Field(default=0.1, ge=0, lt=1)
    log_every: int = Field(default=10, ge=1)
    num_workers: int = Field(default=1, ge=1)
    cpus_per_worker: float = Field(default=1, gt=0)
    torch_threads: int | None = Field(default=None, ge=1, description="null = cpus_per_worker")
    use_gpu: bool = False
    max_failures: int = Field(default=1, ge=0)
    seed: int = 13


class AnswererModelParams(StrictModel):
    """The answerer's GPT-2 shape (transformers' GPT2Config, random init)."""

    vocab_size: int = Field(default=1500, ge=100, description="BPE trained on the kg text")
    context: int = Field(default=96, ge=16, description="positions; longer documents dropped")
    hidden: int = Field(default=128, ge=8)
    layers: int = Field(default=2, ge=1)
    heads: int = Field(default=4, ge=1)


class AnswererParams(StrictModel):
    """The offline answer model: a small generative LM trained (Ray Train) on the kg
    area's own text: verbalised train-split facts and question → answer pairs, some with a
    rendered path as context and some without."""

    registered_model: str = "paperline-kg-answerer"
    experiment: str = "paperline-kg-answerer"
    held_out_fraction: float = Field(
        default=0.5, gt=0, lt=1, description="of test questions whose facts are kept out"
    )
    context_fraction: float = Field(
        default=0.5, ge=0, le=1, description="train QA pairs shown with their path"
    )
    reading_pairs: int = Field(
        default=1500, ge=0, description="templated pairs with their path from train triples"
    )
    model: AnswererModelParams = AnswererModelParams()
    steps: int = Field(default=500, ge=1)
    batch_size: int = Field(default=32, ge=1)
    learning_rate: float = Field(default=2e-3, gt=0)
    warmup_steps: int = Field(default=50, ge=0)
    weight_decay: float = Field(default=0.01, ge=0)
    log_every: int = Field(default=50, ge=1, description="loss point + checkpoint")
    max_new_tokens: int = Field(default=12, ge=1, description="greedy answer length")
    scaling: ScalingParams = ScalingParams(torch_threads=2)
    max_failures: int = Field(default=1, ge=0)
    seed: int = 13


class EvalParams(StrictModel):
    """MultiHal's KG-RAG vs vanilla comparison. `local`: the answerer kg.answerer trained;
    `openai`: any OpenAI-compatible endpoint (production). The extractive reader is always
    scored too, as a labelled baseline row."""

    answer_backend: Literal["local", "openai"] = "local"
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "meta-llama/Llama-3.3-70B-Instruct"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=1.0, ge=0, description="MultiHal answers at 1")
    max_items: int | None = Field(default=None, ge=1)
    batch_size: int = Field(default=32, ge=1, description="local answerer: prompts a batch")


NLLB_CODES = {
    "ar": "arb_Arab",
    "de": "deu_Latn",
    "en": "eng_Latn",
    "es": "spa_Latn",
    "fr": "fra_Latn",
    "it": "ita_Latn",
    "pt": "por_Latn",
    "ru": "rus_Cyrl",
    "zh": "zho_Hans",
}


class TranslateParams(StrictModel):
    """MultiHal's translation of input, output and trip_labels from English. `transformers`:
    an NLLB-200 checkpoint on disk (`model`: its folder; null = none configured, the stage
    records that nothing was translated); `openai`: an OpenAI-compatible endpoint."""

    backend: Literal["transformers", "openai"] = "transformers"
    model: str | None = Field(default=None, description="local NLLB-200 checkpoint folder")
    source_language: str = "en"
    codes: dict[str, str] = Field(
        default_factory=lambda: dict(NLLB_CODES), description="language → NLLB-200 code"
    )
    batch_size: int = Field(default=16, ge=1)
    max_new_tokens: int = Field(default=128, ge=1)
    num_beams: int = Field(default=1, ge=1)
    base_url: str = "http://127.0.0.1:8000/v1"
    openai_model: str = "meta-llama/Llama-3.3-70B-Instruct"
    api_key_env: str = "OPENAI_API_KEY"
    max_rows: int | None = Field(default=None, ge=1, description="multihal rows translated")


class KgParams(StrictModel):
    slice: SliceParams = SliceParams()
    qa: QaParams = QaParams()
    linking: LinkingParams = LinkingParams()
    sparql: SparqlParams = SparqlParams()
    mine: MineParams = MineParams()
    judge: JudgeParams = JudgeParams()
    examples: ExamplesParams = ExamplesParams()
    detector: DetectorParams = DetectorParams()
    answerer: AnswererParams = AnswererParams()
    eval: EvalParams = EvalParams()
    translate: TranslateParams = TranslateParams()


SECTION = KgParams  # params.yaml `kg`, registered with tasks.core.params
