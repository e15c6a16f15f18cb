"""KV-cache presses with NVIDIA kvpress's semantics, for transformers 5.

kvpress pins transformers < 5.3, so its contract is reimplemented here. A press decides,
per layer and KV head, which context positions stay in the cache: `keep_mask(layer) ->
bool (batch, kv_heads, T)`. A `ScorerPress` scores every cached key, `score(module,
hidden_states, keys, values, attentions, kwargs) -> (batch, kv_heads, T)`, and keeps the
`int(T · (1 − ratio))` highest (at least one); `BlockPress` runs a scorer block by block
as KeyDiff does; `AdaKVPress` turns a scorer's per-head budgets into one budget per layer
shared across heads. The presses see what kvpress's forward hook sees after the context's
prefill: the layer's cached (post-RoPE) keys and values, the attention module, and the
layer's input hidden states and rotary embeddings of the last context tokens (recorded by
tasks/kvcache/compressed.py, which applies the masks).

Scorers (kvpress's, the ManifoldKV variants from the author's description):
- random: uniform noise (seeded per layer);
- streamingllm: keep `sinks` first tokens and the most recent ones;
- knorm: −‖k‖₂;
- snapkv: attention of the last `window` context queries to each earlier key, averaged over
  those queries, pooled over `kernel` neighbours, averaged over the query heads of each KV
  group; the window itself is always kept;
- keydiff: −cos(k, mean of the L2-normalised keys), block-wise (`BlockPress`, 128-token
  blocks, as the KeyDiff paper runs it);
- adakv_snapkv: SnapKV's scores with AdaKV's head-wise budgets (each head keeps at least
  `alpha` of an even share, the rest goes to the layer's highest scores);
- manifoldkv (L2), manifoldkv_l1, manifoldkv_linf: the distance of k to the keys' centroid
  (mean over the sequence, per head) in that norm; manifoldkv_cosine: 1 − cos(k, centroid),
  the ablation's cosine arm;
- windowed_manifoldkv: L2 distance to the centroid of the key's own window of
  `centroid_window` tokens (the paper's 4,096).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
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


@dataclass(frozen=True)
class LayerState:
    """One attention layer after the context's prefill, as a press sees it."""

    module: Any
    keys: torch.Tensor  # (batch, kv_heads, T, head_dim), post-RoPE
    values: torch.Tensor
    hidden_states: torch.Tensor  # the layer's input, last `window` context tokens
    kwargs: dict[str, Any]  # position_embeddings: (cos, sin) of those tokens


def top_mask(scores: torch.Tensor, n_kept: int) -> torch.Tensor:
    """True at each (batch, head)'s `n_kept` highest scores."""
    mask = torch.zeros(scores.shape, dtype=torch.bool, device=scores.device)
    return mask.scatter(-1, scores.topk(n_kept, dim=-1).indices, True)


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

    def n_kept(self, length: int) -> int:
        """kvpress's `int(T · (1 − ratio))`, but at least one position."""
        return max(1, int(length * (1 - self.compression_ratio)))

    def keep_mask(self, layer: LayerState) -> torch.Tensor:
        keys = layer.keys
        if self.compression_ratio == 0:
            return torch.ones(keys.shape[:-1], dtype=torch.bool, device=keys.device)
        scores = self.score(
            layer.module, layer.hidden_states, keys, layer.values, None, layer.kwargs
        )
        return top_mask(scores, self.n_kept(keys.shape[2]))


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
        n_pruned = length - self.n_kept(length)
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
    rotary embeddings, causal inside the window (kvpress's compute_window_attention).
    `hidden_states` and the embeddings hold at least the last `window` context tokens."""
    batch, length = hidden_states.shape[0], keys.shape[2]
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


@dataclass
class BlockPress:
    """kvpress's BlockPress: keep the first `n_kept` positions, then for each block of
    `block_size` later positions score the kept ones with the block and keep the top
    `n_kept` (the scorer sees only those keys, as in a streaming prefill)."""

    press: ScorerPress
    block_size: int = 128

    @property
    def compression_ratio(self) -> float:
        return self.press.compression_ratio

    def keep_mask(self, layer: LayerState) -> torch.Tensor:
        keys, values = layer.keys, layer.values
        batch, heads, length, _ = keys.shape
        if self.compression_ratio == 0:
            return torch.ones(keys.shape[:-1], dtype=torch.bool, device=keys.device)
        n_kept = self.press.n_kept(length)
        kept = torch.arange(n_kept, device=keys.device).expand(batch, heads, -1)
        for start in range(n_kept, length, self.block_size):
            block = torch.arange(start, min(start + self.block_size, length), device=keys.device)
            current = torch.cat([kept, block.expand(batch, heads, -1)], dim=-1)
            index = current.unsqueeze(-1).expand(-1, -1, -1, keys.shape[-1])
            scores = self.press.score(
                layer.module,
                layer.hidden_states,
                keys.gather(2, index),
                values.gather(2, index),
                None,
                layer.kwargs,
            )
            kept = current.gather(-1, scores.topk(n_kept, dim=-1).indices)
        mask = torch.zeros(keys.shape[:-1], dtype=torch.bool, device=keys.device)
        return mask.scatter(-1, kept, True)


@dataclass
class AdaKVPress:
    """kvpress's AdaKVPress: the layer keeps `n_kept × kv_heads` positions in all, chosen
    by the scorer's highest scores across heads, after each head's top `alpha · n_kept`
    are secured; heads that matter more keep more."""

    press: ScorerPress
    alpha_safeguard: float = 0.2

    @property
    def compression_ratio(self) -> float:
        return self.press.compression_ratio

    def keep_mask(self, layer: LayerState) -> torch.Tensor:
        keys = layer.keys
        batch, heads, length, _ = keys.shape
        if self.compression_ratio == 0:
            return torch.ones(keys.shape[:-1], dtype=torch.bool, device=keys.device)
        scores = self.press.score(
            layer.module, layer.hidden_states, keys, layer.values, None, layer.kwargs
        ).float()
        n_kept = self.press.n_kept(length)
        n_safe = int(n_kept * self.alpha_safeguard)
        if n_safe:
            secured = scores.topk(n_safe, dim=-1).indices
            scores = scores.scatter(-1, secured, torch.finfo(scores.dtype).max)
        chosen = scores.reshape(batch, -1).topk(n_kept * heads, dim=-1).indices
        mask = torch.zeros(batch, heads * length, dtype=torch.bool, device=keys.device)
        return mask.scatter(-1, chosen, True).view(batch, heads, length)


Press = ScorerPress | BlockPress | AdaKVPress


def press_factories(settings: Any) -> dict[str, Callable[[float], Press]]:
    """Press name → a constructor from the compression ratio (settings: PressParams)."""

    def snapkv(r: float) -> SnapKVPress:
        return SnapKVPress(
            r, window_size=settings.snapkv_window, kernel_size=settings.snapkv_kernel
        )

    return {
        "random": lambda r: RandomPress(r, seed=settings.seed),
        "streamingllm": lambda r: StreamingLLMPress(r, n_sink=settings.sinks),
        "knorm": lambda r: KnormPress(r),
        "snapkv": snapkv,
        "keydiff": lambda r: BlockPress(KeyDiffPress(r), block_size=settings.block_size),
        "adakv_snapkv": lambda r: AdaKVPress(snapkv(r), alpha_safeguard=settings.adakv_alpha),
        "manifoldkv": lambda r: ManifoldKVPress(r, norm="l2"),
        "manifoldkv_l1": lambda r: ManifoldKVPress(r, norm="l1"),
        "manifoldkv_linf": lambda r: ManifoldKVPress(r, norm="linf"),
        "manifoldkv_cosine": lambda r: ManifoldKVPress(r, norm="cosine"),
        "windowed_manifoldkv": lambda r: WindowedManifoldKVPress(
            r, window_size=settings.centroid_window
        ),
    }


def make_press(name: str, ratio: float, settings: Any) -> Press:
    factories = press_factories(settings)
    if name not in factories:
        raise UserError(f"press '{name}' is not one of: {', '.join(factories)}")
    return factories[name](ratio)
