"""Tokenizer training shared by the areas: BPE or Unigram, saved as a transformers
fast-tokenizer folder."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Literal

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from tasks.core.io import Folder
from tasks.core.progress import track

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_tokenizer(
    texts: list[str],
    *,
    model: Literal["bpe", "unigram"] = "bpe",
    vocab_size: int,
    pre_tokenizer: Literal["metaspace", "byte_level"] = "metaspace",
) -> Tokenizer:
    """A tokenizer with [CLS] … [SEP] templates. metaspace: SentencePiece-style words (text);
    byte_level: GPT-2's, which keeps code's whitespace and newlines."""
    if model == "unigram":
        tokenizer = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size,
            special_tokens=SPECIAL_TOKENS,
            unk_token="[UNK]",
            show_progress=False,
        )
    else:
        tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
        byte_level = pre_tokenizer == "byte_level"
        alphabet = pre_tokenizers.ByteLevel.alphabet() if byte_level else []
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=SPECIAL_TOKENS,
            show_progress=False,
            initial_alphabet=alphabet,
        )
    if pre_tokenizer == "byte_level":  # GPT-2's: code keeps its whitespace and newlines
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator(track(texts, "tokenizer: training texts", unit="docs"), trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tokenizer


def fast_tokenizer(tokenizer: Tokenizer) -> Any:
    """A `tokenizers` tokenizer as transformers' PreTrainedTokenizerFast with our special
    tokens ([PAD], [UNK], [CLS], [SEP], [MASK])."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def fast_tokenizer_files(tokenizer: Tokenizer) -> Folder:
    """The files `PreTrainedTokenizerFast.save_pretrained` writes, as an output folder."""
    fast = fast_tokenizer(tokenizer)
    with tempfile.TemporaryDirectory() as folder:
        fast.save_pretrained(folder)
        return Folder({p.name: p.read_bytes() for p in Path(folder).iterdir() if p.is_file()})
