"""DeltaNet and DeltaStack token mixers in pure PyTorch (CPU or CUDA).

DeltaNet (Yang et al. 2024): q, k, v from linear maps, a causal short convolution and SiLU;
q and k L2-normalised per head; β = σ(·), or 2σ(·) to allow negative eigenvalues of the
state transition; a delta-rule memory per head read with q / √d_k; RMSNorm per head.

DeltaStack adds a soft stack per head, itself a delta-rule memory over `stack_size` slots.
Each token picks push / pop / no-op (softmax of three logits); the pointer
c_t = clamp(Σ_{s≤t}(push_s − pop_s), 0, S − 1) is a float64 running sum; a pointer is read
as the soft address a(c)_i = softmax_i(−softplus(κ)·|i − c|). The stack memory is written
twice per token, pop then push: key a(c_{t−1}), value 0, strength pop_t; key a(c_t), value
v_t, strength push_t. Reading it with the push address gives r_t, and the main memory
stores v_t − r_{t−1}. Both writes and the read are one delta rule over the interleaved 2T
steps, so the layer stays parallel over the sequence (chunkwise form). The read is
unscaled (the address sums to 1), so it does not change when the stack grows at test time.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tasks.deltastack.delta_rule import delta_rule_chunkwise, delta_rule_recurrent

Mode = Literal["chunk", "recurrent"]


class ShortConvolution(nn.Module):
    """Causal depthwise 1-D convolution over time, then SiLU."""

    def __init__(self, channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(
            channels, channels, kernel_size, groups=channels, bias=False, padding=kernel_size - 1
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        length = x.shape[1]
        return F.silu(self.conv(x.transpose(1, 2))[..., :length].transpose(1, 2))


def delta_rule(mode: Mode, *args: torch.Tensor, scale: float, chunk_size: int) -> torch.Tensor:
    if mode == "recurrent":
        return delta_rule_recurrent(*args, scale=scale)[0]
    return delta_rule_chunkwise(*args, scale=scale, chunk_size=chunk_size)[0]


class DeltaNet(nn.Module):
    def __init__(
        self,
        d_model: int,
        num_heads: int,
        conv_size: int = 4,
        negative_eigenvalues: bool = True,
        chunk_size: int = 32,
    ) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of num_heads {num_heads}")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.negative_eigenvalues, self.chunk_size = negative_eigenvalues, chunk_size
        self.q_proj, self.k_proj, self.v_proj = (
            nn.Linear(d_model, d_model, bias=False) for _ in range(3)
        )
        self.q_conv, self.k_conv, self.v_conv = (
            ShortConvolution(d_model, conv_size) for _ in range(3)
        )
        self.b_proj = nn.Linear(d_model, num_heads, bias=False)
        self.o_norm = nn.RMSNorm(self.head_dim)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)

    def heads(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, H·d) → (B, H, T, d)
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, -1).transpose(1, 2)

    def qkv_beta(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q = F.normalize(self.heads(self.q_conv(self.q_proj(x))), dim=-1)
        k = F.normalize(self.heads(self.k_conv(self.k_proj(x))), dim=-1)
        v = self.heads(self.v_conv(self.v_proj(x)))
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)  # (B, H, T)
        return q, k, v, beta * 2.0 if self.negative_eigenvalues else beta

    def values(self, x: torch.Tensor, v: torch.Tensor, mode: Mode) -> torch.Tensor:
        return v

    def forward(self, x: torch.Tensor, mode: Mode = "chunk") -> torch.Tensor:
        q, k, v, beta = self.qkv_beta(x)
        v = self.values(x, v, mode)
        out = delta_rule(mode, q, k, v, beta, scale=self.head_dim**-0.5, chunk_size=self.chunk_size)
        out = self.o_norm(out).transpose(1, 2).reshape(x.shape)
        return self.o_proj(out)


class DeltaStack(DeltaNet):
    def __init__(
        self,
        d_model: int,
        num_heads: int,
        stack_size: int = 64,
        conv_size: int = 4,
        negative_eigenvalues: bool = True,
        chunk_size: int = 32,
        kappa: float = 2.0,
    ) -> None:
        super().__init__(d_model, num_heads, conv_size, negative_eigenvalues, chunk_size)
        self.stack_size = stack_size  # may be raised for test lengths (no parameter depends on it)
        self.action_proj = nn.Linear(d_model, num_heads * 3, bias=False)  # push, pop, no-op
        self.kappa = nn.Parameter(torch.tensor(kappa))

    def actions(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, length, _ = x.shape
        logits = self.action_proj(x).view(batch, length, self.num_heads, 3)
        probs = torch.softmax(logits.float(), dim=-1).transpose(1, 2)  # (B, H, T, 3)
        return probs[..., 0].to(x.dtype), probs[..., 1].to(x.dtype)

    def pointers(self, push: torch.Tensor, pop: torch.Tensor) -> torch.Tensor:
        """c_t for t = −1 … T−1 (c_{−1} = 0), shape (B, H, T + 1)."""
        running = torch.cumsum((push - pop).double(), dim=-1)
        running = F.pad(running, (1, 0))
        return running.clamp(0, self.stack_size - 1).to(push.dtype)

    def address(self, pointer: torch.Tensor) -> torch.Tensor:  # (…) → (…, S)
        slots = torch.arange(self.stack_size, device=pointer.device, dtype=pointer.dtype)
        distance = (slots - pointer[..., None]).abs()
        return torch.softmax(-F.softplus(self.kappa) * distance, dim=-1)

    def stack_reads(
        self, v: torch.Tensor, push: torch.Tensor, pop: torch.Tensor, mode: Mode
    ) -> torch.Tensor:
        """r_t, the stack's top after token t's pop and push: (B, H, T, d_v)."""
        batch, heads, length, d_v = v.shape
        addresses = self.address(self.pointers(push, pop))  # (B, H, T + 1, S)
        keys = torch.stack([addresses[:, :, :-1], addresses[:, :, 1:]], dim=3)
        values = torch.stack([torch.zeros_like(v), v], dim=3)
        strengths = torch.stack([pop, push], dim=3)
        keys, values = keys.flatten(2, 3), values.flatten(2, 3)  # pop, push, pop, push, …
        out = delta_rule(
            mode, keys, keys, values, strengths.flatten(2, 3), scale=1.0, chunk_size=self.chunk_size
        )
        return out[:, :, 1::2]

    def values(self, x: torch.Tensor, v: torch.Tensor, mode: Mode) -> torch.Tensor:
        push, pop = self.actions(x)
        reads = self.stack_reads(v, push, pop, mode)
        return v - F.pad(reads, (0, 0, 1, 0))[:, :, :-1]  # v_t − r_{t−1}, r_{−1} = 0
