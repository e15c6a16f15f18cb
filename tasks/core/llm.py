"""The core LLM service: `open_llm(params.llm)` gives the backend params.yaml names.

`ChatModel` is the production backend, any OpenAI-compatible endpoint (vLLM, Ollama,
llama.cpp server, a hosted API): `base_url` + `model` from params.yaml, the API key only
from the environment variable named there (never logged or written anywhere). The local
backend (tasks/core/llm_local.py) runs the same requests on a transformers checkpoint, by
default SmolLM2-135M-Instruct as `llm-import` converts it. Both answer `ask`, `chat`,
`complete` and `continuation_logprobs`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tasks.core.errors import UserError
from tasks.core.llm_params import LLMParams


class ChatModel:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str,
        temperature: float,
        seed: int | None = None,
        params_key: str = "",
        offline_choice: str = "",
    ) -> None:
        from openai import OpenAI

        key = os.environ.get(api_key_env)
        if key is None:
            raise UserError(
                f"{params_key} is openai but ${api_key_env} is unset; export it (any value for "
                f"a local server) or set {params_key}: {offline_choice}"
            )
        self.client = OpenAI(base_url=base_url, api_key=key)
        self.model, self.temperature, self.seed = model, temperature, seed
        self.name = f"openai:{model}"

    def ask(
        self,
        prompt: str,
        system: str = "",
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> str:
        """One user turn (after an optional system message); the reply's text, stripped."""
        return self.ask_content(prompt, system, max_tokens, seed)

    def ask_content(
        self,
        content: str | list[dict],
        system: str = "",
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> str:
        """Like `ask`, with the user turn as content parts (text, `input_audio`, images)."""
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": content})
        limit = {"max_tokens": max_tokens} if max_tokens else {}
        reply = self.client.chat.completions.create(
            model=self.model,
            temperature=self.temperature,
            seed=self.seed if seed is None else seed,
            messages=messages,
            **limit,
        )
        return (reply.choices[0].message.content or "").strip()

    def chat(
        self,
        conversations: Sequence[list[dict]],
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> list[str]:
        """Each conversation's reply, one request each (the server batches)."""
        replies = []
        for messages in conversations:
            reply = self.client.chat.completions.create(
                model=self.model,
                temperature=self.temperature if temperature is None else temperature,
                seed=self.seed if seed is None else seed,
                messages=list(messages),
                **({"max_tokens": max_new_tokens} if max_new_tokens else {}),
            )
            replies.append((reply.choices[0].message.content or "").strip())
        return replies

    def complete(
        self,
        prompts: Sequence[str],
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> list[str]:
        """Each prompt's continuation, from the completions endpoint (no chat template)."""
        replies = []
        for prompt in prompts:
            reply = self.client.completions.create(
                model=self.model,
                prompt=prompt,
                temperature=self.temperature if temperature is None else temperature,
                seed=self.seed if seed is None else seed,
                **({"max_tokens": max_new_tokens} if max_new_tokens else {}),
            )
            replies.append(reply.choices[0].text.strip())
        return replies

    def continuation_logprobs(
        self, prompts: Sequence[str], continuations: Sequence[str]
    ) -> list[list[float]]:
        """Per-token log-probabilities of each continuation: the completions endpoint with
        `echo` and `max_tokens=0` (vLLM and llama.cpp server answer it; hosted chat-only
        APIs do not, and then this says so)."""
        scored = []
        for prompt, continuation in zip(prompts, continuations, strict=True):
            reply = self.client.completions.create(
                model=self.model, prompt=prompt + continuation, echo=True, max_tokens=0, logprobs=0
            )
            found = reply.choices[0].logprobs
            if found is None or found.text_offset is None:
                raise UserError(
                    f"{self.name}: the server returned no prompt log-probabilities (echo); "
                    "use llm.backend: local or a server that supports echo (vLLM)"
                )
            scored.append(
                [
                    value
                    for value, offset in zip(found.token_logprobs, found.text_offset, strict=True)
                    if offset >= len(prompt) and value is not None
                ]
            )
        return scored


def open_llm(params: LLMParams, root: Path, tracking_uri: str | None = None) -> Any:
    """The backend `params.backend` names: a LocalLLM or a ChatModel."""
    generation = params.generation
    if params.backend == "openai":
        endpoint = params.openai
        return ChatModel(
            endpoint.base_url,
            endpoint.model,
            endpoint.api_key_env,
            generation.temperature,
            generation.seed,
            params_key="llm.backend",
            offline_choice="local",
        )
    from tasks.core.llm_local import LocalLLM

    return LocalLLM.load(params.local, generation, root, tracking_uri)
