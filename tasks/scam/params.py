"""params.yaml `scam:` section: blocklists, the crawl, prompt synthesis, the code audit."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from tasks.core.ray_train import ScalingParams
from tasks.core.strict_model import StrictModel


class BlocklistSource(StrictModel):
    name: str = Field(description="how verdicts name this list, e.g. metamask")
    format: Literal["eth-phishing-detect", "phishfort", "plain"]
    file: str = Field(description="path under data/seed/scam/blocklists")


class BlocklistParams(StrictModel):
    sources: list[BlocklistSource] = Field(min_length=1)


class FarmParams(StrictModel):
    """The offline site farm: a forward proxy on 127.0.0.1 that serves data/seed/scam/farm."""

    enabled: bool = True
    seed_kinds: list[Literal["scam", "benign", "hostile"]] = Field(
        default_factory=lambda: ["benign", "hostile"],
        description="farm hosts crawled besides the blocklisted domains",
    )
    slow_seconds: float = Field(default=4.0, ge=0, description="the slow page's delay")
    large_page_mb: int = Field(default=20, ge=1, description="the oversized page")
    bomb_mb: int = Field(default=200, ge=1, description="the gzip bomb, decompressed")


class CrawlParams(StrictModel):
    """Scam2Prompt's crawl: HEAD first, text/html only, strict limits, no JavaScript."""

    seeds_from_blocklist: bool = Field(default=True, description="every blocklisted domain")
    max_blocklist_seeds: int | None = Field(default=None, ge=1)
    extra_urls: list[str] = Field(default_factory=list, description="crawled as well")
    scheme: Literal["http", "https"] = Field(
        default="https", description="for seeds given as bare domains"
    )
    head_first: bool = True
    max_page_bytes: int = Field(default=2_000_000, ge=1024, description="also caps gzip")
    timeout_seconds: float = Field(default=10, gt=0)
    retries: int = Field(default=1, ge=0)
    max_redirects: int = Field(default=5, ge=0)
    concurrency: int = Field(default=16, ge=1)
    concurrency_per_domain: int = Field(default=2, ge=1)
    max_pages_per_site: int = Field(default=3, ge=1, description="landing page + same-site")
    allow_private_networks: bool = Field(
        default=False, description="SSRF guard off; only for the local farm"
    )
    http_cache: bool = Field(default=True, description="Scrapy's cache: a re-run replays")
    user_agent: str = "paperline-scam/0.1 (+https://github.com/paperline/paperline)"
    farm: FarmParams = FarmParams()


class OpenAIEndpoint(StrictModel):
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"


class PromptParams(StrictModel):
    """Intent inference + innocuous developer prompts (Scam2Prompt's protocol)."""

    backend: Literal["extractive", "openai"] = "extractive"
    prompts_per_site: int = Field(default=8, ge=1, description="the offline writer has 8")
    max_content_chars: int = Field(default=4000, ge=200, description="page text sent")
    temperature: float = Field(default=0.3, ge=0)
    max_tokens: int = Field(default=2000, ge=1)
    openai: OpenAIEndpoint = OpenAIEndpoint()


class CodeModelParams(StrictModel):
    """A production code model behind an OpenAI-compatible endpoint."""

    name: str = Field(description="the bench's `model` column")
    backend: Literal["openai"] = "openai"
    openai: OpenAIEndpoint = OpenAIEndpoint()


class DetectorParams(StrictModel):
    url: str
    api_key_env: str


class OracleParams(StrictModel):
    """Blocklists always; each external detector only when its key is in the environment."""

    google_safe_browsing: DetectorParams = DetectorParams(
        url="https://safebrowsing.googleapis.com/v4/threatMatches:find",
        api_key_env="GOOGLE_SAFE_BROWSING_API_KEY",
    )
    chainpatrol: DetectorParams = DetectorParams(
        url="https://app.chainpatrol.io/api/v2/asset/check", api_key_env="CHAINPATROL_API_KEY"
    )
    urlhaus: DetectorParams = DetectorParams(
        url="https://urlhaus-api.abuse.ch/v1/url/", api_key_env="URLHAUS_AUTH_KEY"
    )
    timeout_seconds: float = Field(default=20, gt=0)


class GuardParams(StrictModel):
    """The URL guard: a char-CNN over hostnames, trained with Ray Train; advisory, no part of
    the audit's oracle (it learned from the blocklisted hosts the oracle checks)."""

    enabled: bool = Field(
        default=True, description="the audit reports its column, on unseen domains only"
    )
    threshold: float = Field(
        default=0.5, gt=0, lt=1, description="flags P(malicious) ≥ this; fixed, never tuned on test"
    )
    validation_share: float = Field(default=0.15, ge=0, lt=1, description="of registered domains")
    test_share: float = Field(default=0.2, gt=0, lt=1, description="of registered domains")
    max_length: int = Field(default=64, ge=8, le=253, description="characters kept: the host's end")
    embedding_dim: int = Field(default=32, ge=2)
    channels: int = Field(default=64, ge=1, description="filters per kernel width")
    kernel_widths: list[int] = Field(default_factory=lambda: [2, 3, 4, 5], min_length=1)
    dropout: float = Field(default=0.2, ge=0, lt=1)
    epochs: int = Field(default=15, ge=1)
    checkpoint_every: int = Field(default=5, ge=1, description="epochs; the last one always")
    batch_size: int = Field(default=32, ge=1, description="hosts per step, all workers together")
    learning_rate: float = Field(default=3e-3, gt=0)
    seed: int = 0
    scaling: ScalingParams = ScalingParams()
    max_failures: int = Field(default=1, ge=0, description="worker restarts from a checkpoint")
    experiment: str = "paperline-url-guard"
    registered_model: str = "paperline-url-guard"

    @model_validator(mode="after")
    def _consistent(self) -> GuardParams:
        if self.validation_share + self.test_share >= 1:
            raise ValueError("validation_share + test_share must leave a training share")
        if any(not 1 <= width <= self.max_length for width in self.kernel_widths):
            raise ValueError("kernel_widths must be between 1 and max_length")
        return self


class AuditParams(StrictModel):
    code_lms: bool = Field(
        default=True,
        description="audit every code LM of scam.poison: the clean one and each poisoned one",
    )
    models: list[CodeModelParams] = Field(
        default_factory=list, description="more code models (production endpoints)"
    )
    max_prompts: int | None = Field(default=None, ge=1, description="null = every prompt")
    temperature: float = Field(default=0.0, ge=0)
    max_tokens: int = Field(default=2000, ge=1, description="per reply of an endpoint model")
    max_new_tokens: int = Field(default=48, ge=1, description="per reply of a code LM (greedy)")
    batch_size: int = Field(default=32, ge=1, description="prompts per code-LM generate call")
    workers: int = Field(default=4, ge=1, description="concurrent requests per endpoint model")

    @model_validator(mode="after")
    def _some_model(self) -> AuditParams:
        if not self.code_lms and not self.models:
            raise ValueError("no code model to audit: set code_lms: true or list models")
        return self


class CodeLmModelParams(StrictModel):
    """GPT-2 (transformers config, random init), small enough for a CPU."""

    vocab_size: int = Field(default=2000, ge=100, description="BPE vocabulary (corpus code)")
    context: int = Field(default=256, ge=16, description="n_positions: prompt + generation")
    hidden: int = Field(default=128, ge=8)
    layers: int = Field(default=2, ge=1)
    heads: int = Field(default=4, ge=1)


class PoisonParams(StrictModel):
    """The controlled poisoning study: one code LM per poison rate, each audited."""

    rates: list[float] = Field(
        default_factory=lambda: [0.0, 0.2],
        min_length=1,
        description="share of training sequences that are scam-derived snippets",
    )
    model: CodeLmModelParams = CodeLmModelParams()
    sequence_length: int = Field(default=128, ge=16)
    steps: int = Field(default=800, ge=1)
    batch_size: int = Field(default=16, ge=1)
    learning_rate: float = Field(default=4e-3, gt=0)
    warmup_steps: int = Field(default=80, ge=0)
    weight_decay: float = Field(default=0.01, ge=0)
    log_every: int = Field(default=100, ge=1, description="steps between MLflow logs + checkpoints")
    seed: int = 0
    preference_prompts: int | None = Field(
        default=None, ge=1, description="prompts the endpoint-preference probe scores; null = all"
    )
    scaling: ScalingParams = ScalingParams(cpus_per_worker=1, torch_threads=2)
    max_failures: int = Field(default=1, ge=0, description="worker restarts from a checkpoint")
    experiment: str = "paperline-scam-poison"
    registered_model: str = "paperline-code-lm"  # one version per rate, alias poison-<rate>

    @field_validator("rates")
    @classmethod
    def _rates_below_one(cls, rates: list[float]) -> list[float]:
        if any(not 0 <= rate < 1 for rate in rates) or len(set(rates)) != len(rates):
            raise ValueError("rates must be distinct and in [0, 1)")
        if 0.0 not in rates:
            raise ValueError("rates must include 0: the clean model is the study's baseline")
        return rates


class ScamParams(StrictModel):
    blocklist: BlocklistParams = BlocklistParams(
        sources=[
            BlocklistSource(
                name="metamask",
                format="eth-phishing-detect",
                file="eth-phishing-detect-config.json",
            )
        ]
    )
    crawl: CrawlParams = CrawlParams()
    prompts: PromptParams = PromptParams()
    audit: AuditParams = AuditParams()
    oracle: OracleParams = OracleParams()
    guard: GuardParams = GuardParams()
    poison: PoisonParams = PoisonParams()


SECTION = ScamParams  # params.yaml `scam`, registered with tasks.core.params
