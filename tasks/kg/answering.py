"""Answer models behind one interface: requests (question + optional KG path) → answers.

- `LocalAnswerer` (offline default, `tasks.kg.answerer_lm`): the small generative LM that
  kg.answerer trains on the kg area's own text; it recalls facts it saw and reads paths.
- `OpenAIAnswerer` (production): any OpenAI-compatible chat endpoint, MultiHal's
  temperature 1; the KG path goes in the prompt as context for KG-RAG.
- `ExtractiveReader`: a labelled baseline, not an answer model under test: with a path it
  answers with the last entity the question does not mention; without one it abstains.

Exact match is the primary score while answers are ids: the normalised answer equals one of
the question's gold answers. A path whose end is not a gold answer earns a copier nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tasks.core.llm import ChatModel
from tasks.kg.linking import normalise
from tasks.kg.params import EvalParams


@dataclass(frozen=True)
class AnswerRequest:
    question: str
    context: str | None  # the rendered path (KG-RAG) or None (vanilla)
    parts: Sequence[str] | None = None  # the path element by element (the reader's input)


class AnswerModel(Protocol):
    name: str

    def answer_batch(self, requests: Sequence[AnswerRequest]) -> list[str]: ...


def normalised_answer(text: str) -> str:
    return " ".join(text.casefold().split())


def exact(answer: str, golds: Iterable[str]) -> bool:
    """The answer is one of the gold answers (case and spacing aside); an abstention never is."""
    said = normalised_answer(answer)
    return bool(said) and said in {normalised_answer(g) for g in golds}


class ExtractiveReader:
    name = "extractive-reader (baseline)"

    def answer(self, question: str, parts: Sequence[str] | None) -> str:
        if not parts:
            return ""
        asked = f" {normalise(question)} "
        entities = [e for e in parts[::2] if f" {normalise(e)} " not in asked]
        return entities[-1] if entities else parts[-1]

    def answer_batch(self, requests: Sequence[AnswerRequest]) -> list[str]:
        return [self.answer(r.question, r.parts if r.context else None) for r in requests]


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
            offline_choice="local",
        )
        self.name = self.chat.name

    def answer_batch(self, requests: Sequence[AnswerRequest]) -> list[str]:
        return [
            self.chat.ask(
                ANSWER_PROMPT.format(
                    context=f"Knowledge-graph path: {r.context}\n" if r.context else "",
                    question=r.question,
                )
            )
            for r in requests
        ]


def make_answer_model(params: EvalParams, answerer_dir: Path, max_new_tokens: int) -> AnswerModel:
    if params.answer_backend == "openai":
        return OpenAIAnswerer(params)
    from tasks.kg.answerer_lm import LocalAnswerer

    return LocalAnswerer(
        answerer_dir / "model", answerer_dir / "tokenizer", max_new_tokens, params.batch_size
    )
