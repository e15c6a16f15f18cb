"""llm-import's check that the conversion works: next-token loss on real text.

Windows of the seed's English text (UDHR, CPython docstrings) at each of `lengths` tokens,
`passages` per length at seeded offsets; per window the mean negative log-likelihood of
every token after the first. The null is a unigram model of the same token stream (add-one
smoothed, fitted on the whole stream, windows included, so it is favoured): a broken
conversion (wrong tensor layout, lost dequantisation) predicts no better than it, a working
one far better. Paired over windows: mean NLL difference (LLM − unigram), BCa interval.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from tasks.core import evidence
from tasks.core.errors import UserError
from tasks.core.llm_params import SanityParams


def window_starts(total: int, length: int, count: int, seed: int) -> list[int]:
    if total <= length:
        raise UserError(
            f"llm.sanity: the text has {total} tokens, too few for windows of {length}; "
            "lower llm.sanity.lengths"
        )
    rng = np.random.default_rng([seed, length])
    return sorted(int(s) for s in rng.integers(0, total - length, count))


def window_nll(model: Any, ids: list[int]) -> float:
    import torch

    tokens = torch.tensor([ids], device=next(model.parameters()).device)
    with torch.no_grad():
        logits = model(input_ids=tokens).logits[0, :-1].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    picked = logprobs.gather(1, tokens[0, 1:].unsqueeze(1))
    return float(-picked.mean())


def unigram_nll(counts: Counter, total: int, vocab: int, ids: list[int]) -> float:
    return float(np.mean([-math.log((counts[i] + 1) / (total + vocab)) for i in ids[1:]]))


def evaluate(model: Any, tokenizer: Any, text: str, settings: SanityParams) -> dict[str, Any]:
    """Per length: both models' mean NLL, the paired difference with its interval, and
    whether the LLM is better than the null; perplexities for the model card."""
    stream = tokenizer(text, add_special_tokens=False)["input_ids"]
    counts, vocab = Counter(stream), len(tokenizer)
    found: dict[str, Any] = {"tokens": len(stream)}
    for length in settings.lengths:
        windows = [
            stream[start : start + length]
            for start in window_starts(len(stream), length, settings.passages, settings.seed)
        ]
        llm = [window_nll(model, w) for w in windows]
        null = [unigram_nll(counts, len(stream), vocab, w) for w in windows]
        result = evidence.paired(llm, null, "text windows")
        gap = result.difference
        found[str(length)] = {
            "llm_nll": round(result.a, 4),
            "unigram_nll": round(result.b, 4),
            "perplexity": round(math.exp(result.a), 2),
            "difference": round(gap.value, 4),
            "ci": [round(gap.low, 4), round(gap.high, 4)],
            "n": gap.n,
            "method": gap.method,
            "verdict": evidence.verdict(gap, "less"),
        }
    return found
