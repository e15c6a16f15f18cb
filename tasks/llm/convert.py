"""GGUF → a plain transformers checkpoint, once: safetensors (fp32) + tokenizer + template.

transformers dequantises the GGUF tensors while loading (Q4_1 → float32) and records the
GGUF's quantisation in the config; the model is saved without it, so the checkpoint loads
as an ordinary fp32 Llama in seconds, without the gguf package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.core.progress import get_logger

log = get_logger("paperline.llm.convert")


def load_gguf(path: Path) -> tuple[Any, Any]:
    """(model in fp32, tokenizer) read from the GGUF file (tens of seconds on 2 cores)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    )
    return model.eval(), tokenizer


def save_plain(model: Any, tokenizer: Any, folder: Path) -> Path:
    """Save without the GGUF quantisation record (the weights are already dequantised)."""
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def max_logit_difference(a: Any, b: Any, ids: list[int]) -> float:
    """Largest |logit| difference of two models on the same tokens (the saved checkpoint
    must reproduce the converted model exactly)."""
    import torch

    tokens = torch.tensor([ids])
    with torch.no_grad():
        left, right = a(input_ids=tokens).logits, b(input_ids=tokens).logits
    return float((left - right).abs().max())
