"""The delta rule, two ways: a step-by-step recurrence (the reference) and the chunkwise form.

State S (d_k × d_v) per head: S_t = S_{t−1} + β_t k_t (v_t − S_{t−1}ᵀ k_t)ᵀ, o_t = S_tᵀ q_t.
The chunkwise form (Yang et al. 2024, the WY representation) handles a chunk of C steps with
matrix products: inside a chunk the corrected values U = T (V − K S) with
T = (I + tril(diag(β) K Kᵀ, −1))⁻¹ diag(β), outputs Q S + tril(Q Kᵀ) U and the next state
S + Kᵀ U; only the C-step triangular solve is sequential. Shapes: q, k (B, H, T, d_k),
v (B, H, T, d_v), beta (B, H, T); `scale` multiplies q.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def delta_rule_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    scale: float = 1.0,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step at a time; returns (outputs (B, H, T, d_v), final state (B, H, d_k, d_v))."""
    batch, heads, length, d_k = k.shape
    d_v = v.shape[-1]
    if state is None:
        state = k.new_zeros(batch, heads, d_k, d_v)
    outputs = []
    for t in range(length):
        k_t, v_t, b_t = k[:, :, t], v[:, :, t], beta[:, :, t, None]
        predicted = torch.einsum("bhkv,bhk->bhv", state, k_t)
        state = state + torch.einsum("bhk,bhv->bhkv", k_t, b_t * (v_t - predicted))
        outputs.append(torch.einsum("bhkv,bhk->bhv", state, q[:, :, t] * scale))
    return torch.stack(outputs, dim=2), state


def delta_rule_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    scale: float = 1.0,
    state: torch.Tensor | None = None,
    chunk_size: int = 32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunk by chunk; equal to `delta_rule_recurrent` up to float rounding."""
    batch, heads, length, d_k = k.shape
    d_v = v.shape[-1]
    pad = (-length) % chunk_size  # padded steps have β = 0 and k = 0: they change nothing
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        beta = F.pad(beta, (0, pad))
    chunks = q.shape[2] // chunk_size

    def split(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(batch, heads, chunks, chunk_size, *x.shape[3:])

    q, k, v, beta = split(q * scale), split(k), split(v), split(beta)
    eye = torch.eye(chunk_size, dtype=k.dtype, device=k.device)
    strictly_lower = torch.tril(torch.ones_like(eye), diagonal=-1)
    causal = torch.tril(torch.ones_like(eye))
    # (I + diag(β) tril(K Kᵀ, −1)) W = diag(β) [K | V], all chunks at once
    gram = (k @ k.transpose(-1, -2)) * strictly_lower
    system = eye + beta[..., None] * gram
    solved = torch.linalg.solve_triangular(
        system, beta[..., None] * torch.cat([k, v], dim=-1), upper=False, unitriangular=True
    )
    w, u = solved[..., :d_k], solved[..., d_k:]
    attention = (q @ k.transpose(-1, -2)) * causal
    if state is None:
        state = k.new_zeros(batch, heads, d_k, d_v)
    outputs = []
    for c in range(chunks):  # the only loop: over chunks, carrying the state
        corrected = u[:, :, c] - w[:, :, c] @ state
        outputs.append(q[:, :, c] @ state + attention[:, :, c] @ corrected)
        state = state + k[:, :, c].transpose(-1, -2) @ corrected
    out = torch.cat(outputs, dim=2)[:, :, :length]
    return out, state
