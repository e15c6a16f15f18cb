"""The answerer LM: its tokenizer, its training rows, its GPT-2 config, and the answer model
that generates with it.

The tokenizer is core's byte-level BPE trained on the training documents; the model is
GPT-2 from transformers' `GPT2Config` (random init). One document a row, ended by END and
padded with PAD (masked out of the loss); documents longer than the context are dropped
(counted). `LocalAnswerer` asks with `answerer_corpus.prompt` and decodes greedily up to
END or a new line, batched with left padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core.causal_lm_train import END, PAD
from tasks.core.io import Folder
from tasks.core.tokenizer import fast_tokenizer_files, train_tokenizer
from tasks.kg.answerer_corpus import prompt


def answerer_tokenizer(documents: Sequence[str], vocab_size: int) -> Folder:
    tokenizer = train_tokenizer(
        list(documents), model="bpe", vocab_size=vocab_size, pre_tokenizer="byte_level"
    )
    return fast_tokenizer_files(tokenizer)


def load_tokenizer(folder: Path) -> Any:
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(folder)


def document_rows(tokenizer: Any, documents: Sequence[str], length: int) -> tuple[np.ndarray, int]:
    """One row per document that fits: its tokens, END, then PAD; and how many were dropped."""
    end, pad = tokenizer.convert_tokens_to_ids([END, PAD])
    encoded = tokenizer(list(documents), add_special_tokens=False)["input_ids"]
    kept = [[*ids, end] for ids in encoded if len(ids) < length]
    rows = np.full((len(kept), length), pad, dtype=np.int32)
    for row, ids in zip(rows, kept, strict=True):
        row[: len(ids)] = ids
    return rows, len(encoded) - len(kept)


def first_line(text: str) -> str:
    return " ".join(text.strip().split("\n", 1)[0].split()) if text.strip() else ""


class LocalAnswerer:
    """The trained answerer as an answer model: greedy, batched, `max_new_tokens` at most."""

    def __init__(
        self, model_dir: Path, tokenizer_dir: Path, max_new_tokens: int, batch_size: int = 32
    ) -> None:
        import torch
        from transformers import GPT2LMHeadModel

        self.tokenizer = load_tokenizer(tokenizer_dir)
        self.tokenizer.padding_side = "left"
        self.model = GPT2LMHeadModel.from_pretrained(model_dir).eval()
        self.max_new_tokens, self.batch_size, self.torch = max_new_tokens, batch_size, torch
        self.room = self.model.config.n_positions - max_new_tokens
        self.name = "paperline-kg-answerer"

    def answer_texts(self, prompts: Sequence[str]) -> list[str]:
        torch, answers = self.torch, []
        for start in range(0, len(prompts), self.batch_size):
            batch = list(prompts[start : start + self.batch_size])
            encoded = self.tokenizer(
                batch, add_special_tokens=False, padding=True, return_tensors="pt"
            )
            ids = encoded["input_ids"][:, -self.room :]
            mask = encoded["attention_mask"][:, -self.room :]
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    do_sample=False,
                    max_new_tokens=self.max_new_tokens,
                    eos_token_id=self.model.config.eos_token_id,
                    pad_token_id=self.model.config.pad_token_id,
                )
            answers += [
                first_line(self.tokenizer.decode(row[ids.shape[1] :], skip_special_tokens=True))
                for row in out
            ]
        return answers

    def answer_batch(self, requests: Sequence[Any]) -> list[str]:
        return self.answer_texts([prompt(r.question, r.context) for r in requests])
