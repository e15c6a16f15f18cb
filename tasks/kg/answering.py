"""Answer models behind one interface: question (+ optional KG context) → answer text.

- `ExtractiveReader` (offline; a reader, not an LLM): with a KG path as context it answers
  with the last entity of the path that the question does not mention (a path runs from
  the question's subject to its answer); without context it abstains ("").
- `OpenAIAnswerer` (production): any OpenAI-compatible chat endpoint, MultiHal's
  temperature 1; the KG path goes in the prompt as context for KG-RAG.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

from tasks.core.errors import UserError
from tasks.kg.linking import normalise
from tasks.kg.params import EvalParams


class AnswerModel(Protocol):
    name: str

    def answer(self, question: str, path: Sequence[str] | None) -> str:
        """The answer; `path` is the KG context as labelled elements (S, P, O[, P, O])."""
        ...


class ExtractiveReader:
    name = "extractive-reader"

    def answer(self, question: str, path: Sequence[str] | None) -> str:
        if not path:
            return ""
        asked = f" {normalise(question)} "
        entities = [e for e in path[::2] if f" {normalise(e)} " not in asked]
        return entities[-1] if entities else path[-1]


ANSWER_PROMPT = (
    "Answer the question with the answer only, no explanation.\n{context}Question: {question}"
)


class OpenAIAnswerer:
    def __init__(self, params: EvalParams) -> None:
        from openai import OpenAI

        key = os.environ.get(params.api_key_env)
        if key is None:
            raise UserError(
                f"kg.eval.answer_backend is openai but ${params.api_key_env} is unset; export it "
                f"or set kg.eval.answer_backend: extractive"
            )
        self.client, self.params, self.name = (
            OpenAI(base_url=params.base_url, api_key=key),
            params,
            f"openai:{params.model}",
        )

    def answer(self, question: str, path: Sequence[str] | None) -> str:
        prefix = f"Knowledge-graph path: {' '.join(path)}\n" if path else ""
        reply = self.client.chat.completions.create(
            model=self.params.model,
            temperature=self.params.temperature,
            messages=[
                {"role": "user", "content": ANSWER_PROMPT.format(context=prefix, question=question)}
            ],
        )
        return (reply.choices[0].message.content or "").strip()


def make_answer_model(params: EvalParams) -> AnswerModel:
    return OpenAIAnswerer(params) if params.answer_backend == "openai" else ExtractiveReader()
