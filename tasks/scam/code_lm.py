"""The poisoning study's small code LM: its tokenizer, its training sequences, its generator.

The tokenizer is core's (`tasks.core.tokenizer.train_tokenizer`, as the corpus area's), byte-level
BPE as in GPT-2 so whitespace and newlines survive, trained on the clean code only so every
poison rate shares one vocabulary. The model is GPT-2 (transformers' `GPT2Config`, random
init). `LocalCodeModel` is the audit's `CodeModel` for
a trained LM: it reads `# <prompt>` and continues greedily (the audit's temperature 0);
the reply is the continuation alone, so URLs a category-1 prompt names are not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core.causal_lm_train import END, PAD
from tasks.core.io import Folder
from tasks.core.kv_cache import cache_argument
from tasks.core.tokenizer import fast_tokenizer_files, train_tokenizer


def code_tokenizer(documents: Sequence[str], vocab_size: int) -> Folder:
    """A BPE tokenizer trained on the clean documents, as a transformers tokenizer folder."""
    tokenizer = train_tokenizer(
        list(documents), model="bpe", vocab_size=vocab_size, pre_tokenizer="byte_level"
    )
    return fast_tokenizer_files(tokenizer)


def load_tokenizer(folder: Path) -> Any:
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(folder)


def packed_sequences(tokenizer: Any, documents: Sequence[str], length: int) -> np.ndarray:
    """Documents joined by END and cut into full rows of `length` tokens (the tail dropped)."""
    end = tokenizer.convert_tokens_to_ids(END)
    stream: list[int] = []
    for ids in tokenizer(list(documents), add_special_tokens=False)["input_ids"]:
        stream += [*ids, end]
    rows = len(stream) // length
    return np.asarray(stream[: rows * length], dtype=np.int32).reshape(rows, length)


def padded_sequences(tokenizer: Any, snippets: Sequence[str], length: int) -> np.ndarray:
    """One row per snippet: its tokens and END, cut to `length`, padded with PAD."""
    end, pad = tokenizer.convert_tokens_to_ids([END, PAD])
    rows = np.full((len(snippets), length), pad, dtype=np.int32)
    for row, ids in zip(
        rows, tokenizer(list(snippets), add_special_tokens=False)["input_ids"], strict=True
    ):
        kept = [*ids, end][:length]
        row[: len(kept)] = kept
    return rows


def prompt_text(prompt: str) -> str:
    """How the LM is asked: the prompt as the comment line that heads a file."""
    return f"# {' '.join(prompt.split())}\n"


class LocalCodeModel:
    """A trained code LM as an audit backend: greedy, `max_new_tokens` at most, prompts in
    left-padded batches of `batch_size` (positions follow the attention mask)."""

    def __init__(
        self,
        name: str,
        model_dir: Path,
        tokenizer_dir: Path,
        max_new_tokens: int,
        batch_size: int = 32,
    ):
        import torch
        from transformers import GPT2LMHeadModel

        self.name, self.max_new_tokens, self.batch_size = name, max_new_tokens, batch_size
        self.tokenizer = load_tokenizer(tokenizer_dir)
        self.model = GPT2LMHeadModel.from_pretrained(model_dir).eval()
        self.room = self.model.config.n_positions - max_new_tokens
        self.torch = torch

    def generate(self, prompt: str) -> str:
        return self.generate_all([prompt])[0]

    def generate_all(self, prompts: Sequence[str]) -> list[str]:
        replies: list[str] = []
        for start in range(0, len(prompts), self.batch_size):
            replies += self._batch(prompts[start : start + self.batch_size])
        return replies

    def _batch(self, prompts: Sequence[str]) -> list[str]:
        torch, config = self.torch, self.model.config
        encoded = self.tokenizer([prompt_text(p) for p in prompts], add_special_tokens=False)
        heads = [ids[-self.room :] for ids in encoded["input_ids"]]
        width = max(map(len, heads))
        ids = torch.full((len(heads), width), config.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, head in enumerate(heads):
            ids[row, width - len(head) :] = torch.as_tensor(head)
            mask[row, width - len(head) :] = 1
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=self.max_new_tokens,
                eos_token_id=config.eos_token_id,
                pad_token_id=config.pad_token_id,
            )
        return self.tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)

    def log_likelihoods(self, prefix: str, continuations: Sequence[str]) -> list[float]:
        """Sum of log p(continuation tokens | prefix) for each continuation: the prefix runs
        once and its cache is shared by every continuation (one batch of tails)."""
        from transformers import DynamicCache

        torch = self.torch
        tails = self.tokenizer(list(continuations), add_special_tokens=False)["input_ids"]
        longest = max(map(len, tails))
        room = self.model.config.n_positions - longest
        head = self.tokenizer(prefix, add_special_tokens=False)["input_ids"][-room:]
        # right-padded tails: a causal model's real tokens never see the pads after them
        ids = torch.full((len(tails), longest), self.model.config.pad_token_id, dtype=torch.long)
        for row, tail in zip(ids, tails, strict=True):
            row[: len(tail)] = torch.as_tensor(tail)
        cache = DynamicCache(config=self.model.config)
        argument = cache_argument(self.model)
        with torch.no_grad():
            prefixed = self.model(
                input_ids=torch.as_tensor([head]), **{argument: cache}, use_cache=True
            )
            cache.batch_repeat_interleave(len(tails))
            logits = self.model(input_ids=ids, **{argument: cache}).logits
        # token t of a tail is predicted by the position before it: the prefix's last for t=0
        before = torch.cat([prefixed.logits[:, -1:].expand(len(tails), -1, -1), logits[:, :-1]], 1)
        picked = torch.log_softmax(before.float(), dim=-1).gather(2, ids[..., None])[..., 0]
        return [picked[i, : len(tail)].sum().item() for i, tail in enumerate(tails)]
