"""The encoder: transformers' ModernBertForMaskedLM built from a preset, never downloaded.

`small` and `base` are mmBERT's published shapes (JHU-CLSP/mmBERT configs); `tiny` keeps
the same architecture (GLU, pre-norm, RoPE, local/global alternation) small enough to
train the embedded default on two CPU cores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        global_attn_every_n_layers=2,
        local_attention=64,
    ),
    "small": dict(
        hidden_size=384,
        intermediate_size=1152,
        num_hidden_layers=22,
        num_attention_heads=6,
        global_attn_every_n_layers=3,
        local_attention=128,
    ),
    "base": dict(
        hidden_size=768,
        intermediate_size=1152,
        num_hidden_layers=22,
        num_attention_heads=12,
        global_attn_every_n_layers=3,
        local_attention=128,
    ),
}
MAX_POSITIONS = 8192  # mmBERT's mid/decay context


def load_tokenizer(folder: Path | str) -> Any:
    """The fast tokenizer trained by corpus.tokenizer ([CLS] [SEP] [PAD] [MASK] [UNK])."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(folder))


def build_config(preset: str, tokenizer: Any) -> Any:
    from transformers import ModernBertConfig

    shape = dict(PRESETS[preset])
    every = shape.pop("global_attn_every_n_layers")
    layer_types = [
        "sliding_attention" if i % every else "full_attention"
        for i in range(shape["num_hidden_layers"])
    ]
    return ModernBertConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=MAX_POSITIONS,
        layer_types=layer_types,
        pad_token_id=tokenizer.pad_token_id,
        cls_token_id=tokenizer.cls_token_id,
        bos_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        eos_token_id=tokenizer.sep_token_id,
        sparse_prediction=True,  # logits only at masked positions: the vocab head dominates
        **shape,
    )


def build_model(preset: str, tokenizer: Any) -> Any:
    from transformers import ModernBertForMaskedLM

    return ModernBertForMaskedLM(build_config(preset, tokenizer))


def load_model(folder: Path | str) -> Any:
    from transformers import ModernBertForMaskedLM

    return ModernBertForMaskedLM.from_pretrained(str(folder))
