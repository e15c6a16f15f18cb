"""KV-cache presses with NVIDIA kvpress's `ScorerPress` semantics, for transformers 5.

kvpress pins transformers < 5.3, so its contract is reimplemented here: a press is a
context manager over a model (`with press(model): model(context)`) that hooks every
attention module (`*.self_attn` with a `layer_idx`); after a module's prefill forward it
scores every cached key of that layer per KV head, `score(module, hidden_states, keys,
values, attentions, kwargs) -> (batch, kv_heads, T)`, keeps the `int(T · (1 − ratio))`
highest-scoring positions (in their original order) and writes them back into the
`DynamicCache` layer (`cache.layers[i].keys / .values`). Decoding steps pass through.
Pruning a layer right after its own forward is the same as pruning after the whole
prefill: the later layers' context states were computed from the unpruned layer.

Scorers (kvpress's, the ManifoldKV variants from the author's description):
- random: uniform noise (seeded per layer);
- streamingllm: keep `sinks` first tokens and the most recent ones;
- knorm: −‖k‖₂;
- snapkv: attention of the last `window` context queries to each earlier key, averaged over
  those queries, pooled over `kernel` neighbours, averaged over the query heads of each KV
  group; the window itself is always kept;
- keydiff: −cos(k, mean of the L2-normalised keys);
- manifoldkv (L2), manifoldkv_l1, manifoldkv_linf: the distance of k to the keys' centroid
  (mean over the sequence, per head) in that norm; manifoldkv_cosine: 1 − cos(k, centroid),
  the ablation's cosine arm;
- windowed_manifoldkv: L2 distance to the centroid of the key's own window of
  `centroid_window` tokens (the paper's 4,096).
"""

from __future__ import annotations

import abc
import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from tasks.core.errors import UserError


def attention_modules(model: Any) -> list[Any]:
    """The model's self-attention modules, each with its cache layer index."""
    found = [
        module
        for name, module in model.named_modules()
        if name.endswith("self_attn") and isinstance(getattr(module, "layer_idx", None), int)
    ]
    if not found:
        raise UserError(
            f"{type(model).__name__} has no `self_attn` modules with a layer_idx; a press needs "
            "a transformers decoder with a dynamic KV cache"
        )
    return found


def kept_indices(scores: torch.Tensor, n_kept: int) -> torch.Tensor:
    """Per (batch, head), the positions of the `n_kept` highest scores, in ascending order."""
    return scores.topk(n_kept, dim=-1).indices.sort(dim=-1).values


def gather_positions(states: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    expanded = indices.unsqueeze(-1).expand(-1, -1, -1, states.shape[-1])
    return states.gather(2, expanded).contiguous()


@dataclass
class ScorerPress(abc.ABC):
    """kvpress's ScorerPress: `score` every key, keep the top `int(T · (1 − ratio))`."""

    compression_ratio: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.compression_ratio < 1:
            raise UserError(f"compression ratio {self.compression_ratio} is outside [0, 1)")

    @abc.abstractmethod
    def score(
        self,
        module: Any,
        hidden_states: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        attentions: torch.Tensor | None,
        kwargs: dict[str, Any],
    ) -> torch.Tensor:
        """A score per key (batch, heads, positions): each press says which keys matter."""

    def compress(
        self,
        module: Any,
        hidden_states: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        attentions: torch.Tensor | None,
        kwargs: dict[str, Any],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.compression_ratio == 0:
            return keys, values
        scores = self.score(module, hidden_states, keys, values, attentions, kwargs)
        n_kept = int(keys.shape[2] * (1 - self.compression_ratio))
        indices = kept_indices(scores, n_kept)
        return gather_positions(keys, indices), gather_positions(values, indices)

    def forward_hook(self, module: Any, args: tuple, kwargs: dict, output: Any) -> Any:
        hidden_states = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        if cache is None:
            raise UserError("a press needs the forward pass to use a DynamicCache (use_cache)")
        layer = cache.layers[module.layer_idx]
        if layer.keys.shape[-2] != hidden_states.shape[1]:
            return output  # a decoding step (the cache held tokens before): pass through
        attentions = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        keys, values = self.compress(
            module, hidden_states, layer.keys, layer.values, attentions, kwargs
        )
        layer.keys, layer.values = keys, values
        return output

    @contextlib.contextmanager
    def __call__(self, model: Any) -> Iterator[None]:
        hooks = [
            module.register_forward_hook(self.forward_hook, with_kwargs=True)
            for module in attention_modules(model)
        ]
        try:
            yield
        finally:
            for hook in hooks:
                hook.remove()


@dataclass
class RandomPress(ScorerPress):
    seed: int = 0

    def score(self, module, hidden_states, keys, values, attentions, kwargs):
        generator = torch.Generator(device=keys.device).manual_seed(
            self.seed * 1009 + module.layer_idx
        )
        return torch.rand(keys.shape[:-1], generator=generator, device=keys.device)


@dataclass
class StreamingLLMPress(ScorerPress):
    n_sink: int = 4

    def score(self, module, hidden_states, keys, values, attentions, kwargs):
        length = keys.shape[2]
        n_pruned = length - int(length * (1 - self.compression_ratio))
        scores = torch.ones(keys.shape[:-1], device=keys.device)
        scores[:, :, self.n_sink : self.n_sink + n_pruned] = 0
        return scores


@dataclass
class KnormPress(ScorerPress):
    def score(self, module, hidden_states, keys, values, attentions, kwargs):
        return -keys.norm(dim=-1)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def window_attention(
    module: Any, hidden_states: torch.Tensor, keys: torch.Tensor, window: int, kwargs: dict
) -> torch.Tensor:
    """Softmax attention of the last `window` queries to every key, (batch, heads, window,
    T), recomputed from the module's q_proj (and q_norm where it has one) and the layer's
    rotary embeddings, causal inside the window (kvpress's compute_window_attention)."""
    batch, length, _ = hidden_states.shape
    head_dim = keys.shape[-1]
    queries = module.q_proj(hidden_states[:, -window:]).view(batch, window, -1, head_dim)
    if hasattr(module, "q_norm"):
        queries = module.q_norm(queries)
    queries = queries.transpose(1, 2)
    cos, sin = kwargs["position_embeddings"]
    cos, sin = cos[:, -window:].unsqueeze(1), sin[:, -window:].unsqueeze(1)
    queries = queries * cos + rotate_half(queries) * sin
    groups = queries.shape[1] // keys.shape[1]
    expanded = keys.repeat_interleave(groups, dim=1)
    logits = queries @ expanded.transpose(-1, -2) / math.sqrt(head_dim)
    future = torch.ones(window, length, dtype=torch.bool, device=keys.device).triu(
        length - window + 1
    )
    logits = logits.masked_fill(future, float("-inf"))
    return torch.softmax(logits.float(), dim=-1)


@dataclass
class SnapKVPress(ScorerPress):
    window_size: int = 64
    kernel_size: int = 5

    def score(self, module, hidden_states, keys, values, attentions, kwargs):
        batch, kv_heads, length, _ = keys.shape
        window = self.window_size
        if length <= window:
            return torch.ones(keys.shape[:-1], device=keys.device)
        if attentions is not None:  # eager attention already returned the weights
            weights = attentions[..., -window:, :].float()
        else:
            weights = window_attention(module, hidden_states, keys, window, kwargs)
        scores = weights[..., :-window].mean(dim=-2)
        scores = F.avg_pool1d(
            scores, kernel_size=self.kernel_size, padding=self.kernel_size // 2, stride=1
        )
        groups = scores.shape[1] // kv_heads
        scores = scores.view(batch, kv_heads, groups, length - window).mean(2)
        return F.pad(scores, (0, window), value=scores.max().item())


@dataclass
class KeyDiffPress(ScorerPress):
    def score(self, module, hidden_states, keys, values, attentions, kwargs):
        anchor = F.normalize(keys, p=2, dim=-1).mean(dim=2, keepdim=True)
        return -F.cosine_similarity(keys, anchor, dim=-1)


def centroid_distance(keys: torch.Tensor, centroid: torch.Tensor, norm: str) -> torch.Tensor:
    """Distance of each key to `centroid` (broadcast over the sequence) in `norm`."""
    if norm == "cosine":
        return 1 - F.cosine_similarity(keys, centroid.expand_as(keys), dim=-1)
    offset = keys - centroid
    if norm == "l1":
        return offset.abs().sum(dim=-1)
    if norm == "linf":
        return offset.abs().amax(dim=-1)
    return offset.norm(dim=-1)


@dataclass
class ManifoldKVPress(ScorerPress):
    """ManifoldKV: keep the keys farthest from the centroid of the head's keys."""

    norm: str = "l2"  # l2 (the paper's), l1, linf, cosine

    def score(self, module, hidden_states, keys, values, attentions, kwargs):
        return centroid_distance(keys, keys.mean(dim=2, keepdim=True), self.norm)


@dataclass
class WindowedManifoldKVPress(ScorerPress):
    """ManifoldKV with one centroid per window of `window_size` tokens."""

    window_size: int = 4096

    def score(self, module, hidden_states, keys, values, attentions, kwargs):
        parts = []
        for start in range(0, keys.shape[2], self.window_size):
            window = keys[:, :, start : start + self.window_size]
            parts.append(centroid_distance(window, window.mean(dim=2, keepdim=True), "l2"))
        return torch.cat(parts, dim=-1)


def press_factories(settings: Any) -> dict[str, Callable[[float], ScorerPress]]:
    """Press name → a constructor from the compression ratio (settings: PressParams)."""
    return {
        "random": lambda r: RandomPress(r, seed=settings.seed),
        "streamingllm": lambda r: StreamingLLMPress(r, n_sink=settings.sinks),
        "knorm": lambda r: KnormPress(r),
        "snapkv": lambda r: SnapKVPress(
            r, window_size=settings.snapkv_window, kernel_size=settings.snapkv_kernel
        ),
        "keydiff": lambda r: KeyDiffPress(r),
        "manifoldkv": lambda r: ManifoldKVPress(r, norm="l2"),
        "manifoldkv_l1": lambda r: ManifoldKVPress(r, norm="l1"),
        "manifoldkv_linf": lambda r: ManifoldKVPress(r, norm="linf"),
        "manifoldkv_cosine": lambda r: ManifoldKVPress(r, norm="cosine"),
        "windowed_manifoldkv": lambda r: WindowedManifoldKVPress(
            r, window_size=settings.centroid_window
        ),
    }


def make_press(name: str, ratio: float, settings: Any) -> ScorerPress:
    factories = press_factories(settings)
    if name not in factories:
        raise UserError(f"press '{name}' is not one of: {', '.join(factories)}")
    return factories[name](ratio)
