"""An OpenAI-compatible chat endpoint: vLLM, Ollama, llama.cpp server or a hosted API.

`base_url` + `model` come from params.yaml; the API key only from the environment variable
named there (never logged or written anywhere).
"""

from __future__ import annotations

import os

from tasks.core.errors import UserError


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
