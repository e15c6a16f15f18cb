"""The area's decoder and its word-level vocabulary; loading any causal LM to evaluate.

The vocabulary (transformers' WordLevel via `tokenizers`: lowercase, `\\w+|[^\\w\\s]+`
words): the special tokens, every needle key and value, then the most frequent words of
the training contexts and questions; other words are `[UNK]`. The model is transformers'
`LlamaForCausalLM` from a `LlamaConfig` with fewer KV heads than query heads (GQA).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tasks.core.errors import UserError
from tasks.core.tokenizer import SPECIAL_TOKENS
from tasks.kvcache.haystack import words
from tasks.kvcache.needles import template_words
from tasks.kvcache.params import ModelParams

DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def build_tokenizer(texts: list[str], keys: list[str], values: list[str], size: int) -> Any:
    """A WordLevel tokenizer: specials, the templates' words, keys, values, then the `size`
    most frequent other words of `texts`."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    reserved = [*SPECIAL_TOKENS, *template_words(), *keys, *values]
    taken = set(reserved)
    counts = Counter(w for text in texts for w in words(text) if w not in taken)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:size]
    vocabulary = {word: index for index, word in enumerate(reserved + [w for w, _ in ranked])}
    tokenizer = Tokenizer(WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


def llama_config(settings: ModelParams, vocab_size: int, pad_id: int) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=settings.hidden_size,
        intermediate_size=settings.intermediate_size,
        num_hidden_layers=settings.num_layers,
        num_attention_heads=settings.num_heads,
        num_key_value_heads=settings.num_kv_heads,
        max_position_embeddings=settings.max_positions,
        rope_parameters={"rope_type": "default", "rope_theta": settings.rope_theta},
        tie_word_embeddings=True,
        pad_token_id=pad_id,
        bos_token_id=None,
        eos_token_id=None,
    )


def causal_classes(model_type: str) -> set[str]:
    """The classes AutoModelForCausalLM builds for `model_type` (empty: none)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    names = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, ())
    return {names} if isinstance(names, str) else set(names)


def is_causal_lm(config: Any) -> bool:
    """A causal-LM family, saved as a causal LM (a BERT saved as BertForMaskedLM is not,
    although BERT has a decoder head class)."""
    classes = causal_classes(config.model_type)
    saved_as = getattr(config, "architectures", None) or []
    return bool(classes) and (not saved_as or bool(classes & set(saved_as)))


def load_local(path: Path, device: str = "cpu", dtype: str = "float32") -> tuple[Any, Any]:
    """A checkpoint folder → (causal LM, tokenizer); one line when it is not a causal LM."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if not path.is_dir():
        raise UserError(
            f"{path}: no such model folder; give a checkpoint folder or models:/name@alias"
        )
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        first = str(error).splitlines()[0]
        raise UserError(f"{path}: not a transformers checkpoint ({first})") from None
    if not is_causal_lm(config):
        saved_as = ", ".join(getattr(config, "architectures", None) or []) or "no head"
        raise UserError(
            f"{path}: a '{config.model_type}' checkpoint ({saved_as}) is not a causal LM; "
            "give a decoder checkpoint such as Llama or Qwen3"
        )
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, DTYPES[dtype]))
    return model.to(device).eval(), AutoTokenizer.from_pretrained(path)


def load_registered(uri: str, device: str = "cpu", dtype: str = "float32") -> tuple[Any, Any]:
    """`models:/name@alias` (or /version) from the MLflow registry → (causal LM, tokenizer)."""
    import mlflow
    import torch
    from mlflow.exceptions import MlflowException

    try:
        parts = mlflow.transformers.load_model(uri, return_type="components")
    except MlflowException as error:
        first = str(error).splitlines()[0]
        raise UserError(f"{uri}: cannot load it from the registry ({first})") from None
    model = parts["model"]
    if not is_causal_lm(model.config):
        raise UserError(f"{uri}: a '{model.config.model_type}' model is not a causal LM")
    model = model.to(device=device, dtype=getattr(torch, DTYPES[dtype]))
    return model.eval(), parts["tokenizer"]


def load_causal_lm(spec: str, device: str = "cpu", dtype: str = "float32") -> tuple[Any, Any]:
    """A local folder or a registry URI → (causal LM, tokenizer), quietly (no progress
    bars: an error after loading stays one line)."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    if spec.startswith("models:/"):
        return load_registered(spec, device, dtype)
    return load_local(Path(spec), device, dtype)


def max_positions(model: Any) -> int | None:
    return getattr(model.config.get_text_config(), "max_position_embeddings", None)
