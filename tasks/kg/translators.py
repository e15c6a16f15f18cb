"""Translators behind one interface: English texts → one target language, order kept.

- `NllbTranslator` (production, MultiHal's choice): an NLLB-200 checkpoint on disk (e.g.
  facebook/nllb-200-distilled-600M) run through transformers: the tokenizer's `src_lang`
  is the source code (eng_Latn) and generation starts with the target's code
  (`forced_bos_token_id`, deu_Latn …). Any M2M100-architecture checkpoint with NLLB codes
  in its tokenizer works (the tests use a tiny random one).
- `OpenAITranslator`: any OpenAI-compatible chat endpoint.
There is no offline translator: with no model configured, nothing is translated and the
stage says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from tasks.core.errors import UserError
from tasks.core.llm import ChatModel
from tasks.kg.params import TranslateParams


class Translator(Protocol):
    name: str

    def translate(self, texts: Sequence[str], target: str) -> list[str]:
        """`texts` in the target language (an NLLB-200 code such as deu_Latn)."""
        ...


class NllbTranslator:
    def __init__(self, params: TranslateParams, model: str) -> None:
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        folder = Path(model)
        if not (folder / "config.json").is_file():
            raise UserError(
                f"kg.translate.model: {folder} is not a transformers checkpoint folder (no "
                "config.json); download an NLLB-200 checkpoint (facebook/nllb-200-distilled-"
                "600M) there or set kg.translate.model: null"
            )
        source = params.codes.get(params.source_language)
        if source is None:
            raise UserError(
                f"kg.translate.codes: no NLLB-200 code for the source language "
                f"{params.source_language!r}; add one (e.g. en: eng_Latn)"
            )
        self.tokenizer = AutoTokenizer.from_pretrained(folder, src_lang=source)
        self.model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
        self.params = params
        self.name = f"transformers:{folder.name}"

    def target_id(self, target: str) -> int:
        token = self.tokenizer.convert_tokens_to_ids(target)
        if token is None or token == self.tokenizer.unk_token_id:
            raise UserError(
                f"kg.translate: {target!r} is not a language code of the tokenizer in "
                f"{self.params.model}; fix kg.translate.codes"
            )
        return token

    def translate(self, texts: Sequence[str], target: str) -> list[str]:
        import torch

        forced, size, result = self.target_id(target), self.params.batch_size, []
        for start in range(0, len(texts), size):
            batch = list(texts[start : start + size])
            encoded = self.tokenizer(batch, return_tensors="pt", padding=True, truncation=True)
            with torch.no_grad():
                out = self.model.generate(
                    **encoded,
                    forced_bos_token_id=forced,
                    max_new_tokens=self.params.max_new_tokens,
                    num_beams=self.params.num_beams,
                    do_sample=False,
                )
            result += [
                t.strip() for t in self.tokenizer.batch_decode(out, skip_special_tokens=True)
            ]
        return result


TRANSLATE_PROMPT = (
    "Translate the text below from {source} into the language with NLLB-200 code {target}. "
    "Keep Wikidata ids (Q…, P…) unchanged. Reply with the translation only.\n\n{text}"
)


class OpenAITranslator:
    def __init__(self, params: TranslateParams) -> None:
        self.chat = ChatModel(
            params.base_url,
            params.openai_model,
            params.api_key_env,
            0.0,
            params_key="kg.translate.backend",
            offline_choice="transformers with kg.translate.model: null",
        )
        self.params = params
        self.name = self.chat.name

    def translate(self, texts: Sequence[str], target: str) -> list[str]:
        source = self.params.codes.get(self.params.source_language, self.params.source_language)
        return [
            self.chat.ask(TRANSLATE_PROMPT.format(source=source, target=target, text=text))
            for text in texts
        ]


def make_translator(params: TranslateParams) -> tuple[Translator | None, str]:
    """The configured translator, or None and why nothing will be translated."""
    if params.backend == "openai":
        return OpenAITranslator(params), ""
    if params.model is None:
        return None, (
            "no translation model configured: kg.translate.model is null (set it to a local "
            "NLLB-200 checkpoint, or use kg.translate.backend: openai)"
        )
    return NllbTranslator(params, params.model), ""
