"""Answer models behind one interface: question (+ optional KG context) → answer text.

- `ExtractiveReader` (offline; a reader, not an LLM): with a KG path as context it answers
  with the last entity of the path that the question does not mention (a path runs from
  the question's subject to its answer); without context it abstains ("").
- `OpenAIAnswerer` (production): any OpenAI-compatible chat endpoint, MultiHal's
  temperature 1; the KG path goes in the prompt as context for KG-RAG.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tasks.core.llm import ChatModel
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
        self.chat = ChatModel(
            params.base_url,
            params.model,
            params.api_key_env,
            params.temperature,
            params_key="kg.eval.answer_backend",
            offline_choice="extractive",
        )
        self.name = self.chat.name

    def answer(self, question: str, path: Sequence[str] | None) -> str:
        prefix = f"Knowledge-graph path: {' '.join(path)}\n" if path else ""
        return self.chat.ask(ANSWER_PROMPT.format(context=prefix, question=question))


def make_answer_model(params: EvalParams) -> AnswerModel:
    return OpenAIAnswerer(params) if params.answer_backend == "openai" else ExtractiveReader()
