"""How a transformers causal LM's forward takes its KV cache."""

from __future__ import annotations

import inspect
from typing import Any


def cache_argument(model: Any) -> str:
    """transformers 5 renamed `past_key_values` to `cache` (5.2x); take what forward names."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
