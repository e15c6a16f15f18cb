"""Sequence classifiers for the study: embedding → blocks → per-position logits.

`deltastack` and `deltanet` stack pre-norm blocks (mixer + SiLU MLP, residuals); the
baselines are an LSTM and a causal Transformer with sinusoidal positions (no learned
position table, so it runs at test lengths it never saw).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tasks.deltastack.layers import DeltaNet, DeltaStack, Mode
from tasks.deltastack.params import ModelParams

MODELS = ("deltastack", "deltanet", "lstm", "transformer")


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, mode: Mode = "chunk") -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(out.transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
    def __init__(self, mixer: nn.Module, d_model: int) -> None:
        super().__init__()
        self.mixer, self.mixer_norm = mixer, nn.RMSNorm(d_model)
        self.mlp_norm = nn.RMSNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.SiLU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor, mode: Mode) -> torch.Tensor:
        x = x + self.mixer(self.mixer_norm(x), mode)
        return x + self.mlp(self.mlp_norm(x))


def sinusoidal_positions(length: int, width: int, device: torch.device) -> torch.Tensor:
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    frequency = torch.exp(
        torch.arange(0, width, 2, device=device, dtype=torch.float32) * (-math.log(1e4) / width)
    )
    table = torch.zeros(length, width, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class SequenceModel(nn.Module):
    def __init__(self, kind: str, vocab_size: int, num_classes: int, params: ModelParams) -> None:
        super().__init__()
        if kind not in MODELS:
            raise ValueError(f"model '{kind}': expected one of {', '.join(MODELS)}")
        self.kind, width = kind, params.d_model
        self.embed = nn.Embedding(vocab_size, width)
        if kind == "lstm":
            self.lstm = nn.LSTM(width, width, num_layers=params.num_layers, batch_first=True)
        else:
            self.blocks = nn.ModuleList(
                Block(self._mixer(kind, params), width) for _ in range(params.num_layers)
            )
        self.norm = nn.RMSNorm(width)
        self.head = nn.Linear(width, num_classes)

    @staticmethod
    def _mixer(kind: str, params: ModelParams) -> nn.Module:
        if kind == "transformer":
            return CausalSelfAttention(params.d_model, params.num_heads)
        shared = {
            "conv_size": params.conv_size,
            "chunk_size": params.chunk_size,
            "negative_eigenvalues": params.negative_eigenvalues,
        }
        if kind == "deltanet":
            return DeltaNet(params.d_model, params.num_heads, **shared)
        return DeltaStack(
            params.d_model,
            params.num_heads,
            stack_size=params.stack_size,
            kappa=params.stack_kappa,
            **shared,
        )

    def set_stack_size(self, size: int) -> None:
        for module in self.modules():
            if isinstance(module, DeltaStack):
                module.stack_size = size

    def forward(self, tokens: torch.Tensor, mode: Mode = "chunk") -> torch.Tensor:
        x = self.embed(tokens)
        if self.kind == "lstm":
            x = self.lstm(x)[0]
        else:
            if self.kind == "transformer":
                x = x + sinusoidal_positions(x.shape[1], x.shape[2], x.device)
            for block in self.blocks:
                x = block(x, mode)
        return self.head(self.norm(x))
