"""The CMI reward model: log-mel audio encoder, frozen text vectors, two reward heads.

Following CMI-RM (RewardAttentionModel): the prompt side is up to three tokens — the
instruction text and the lyrics (vectors from a frozen text encoder, projected) and a
reference clip (the audio encoder's mean token) — each replaced by a learned null
embedding when missing; a prompt transformer mixes them. The clip's log-mel frames go
through a small strided conv encoder; a joint transformer reads [CLS, prompt tokens, audio
tokens] and two heads (LayerNorm → Linear → ReLU → Linear) give the text-music alignment
reward and the musicality reward from CLS. Trained from scratch here; the paper's MuQ-MuLan
encoders are frozen and pretrained.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tasks.core.module_folder import load_module, save_module

HEADS = ("alignment", "musicality")
TEXT, LYRICS, REFERENCE = 0, 1, 2  # prompt slots; `present` columns in this order


@dataclass(frozen=True)
class RewardModelConfig:
    text_dim: int  # the frozen text encoder's vector size
    n_mels: int = 64
    d_model: int = 64
    heads: int = 4
    prompt_depth: int = 1
    joint_depth: int = 2
    dropout: float = 0.1
    max_tokens: int = 256  # audio tokens (frames / 4): about 32 s at 16 kHz, hop 512


def _transformer(config: RewardModelConfig, depth: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(
        config.d_model,
        config.heads,
        4 * config.d_model,
        config.dropout,
        batch_first=True,
        norm_first=True,
    )
    return nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)


def _head(width: int) -> nn.Sequential:
    return nn.Sequential(
        nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, 1)
    )


class LogMelEncoder(nn.Module):
    """(batch, n_mels, frames) dB → (batch, frames / 4, d_model) tokens."""

    def __init__(self, config: RewardModelConfig) -> None:
        super().__init__()
        d = config.d_model
        self.convs = nn.Sequential(
            nn.Conv1d(config.n_mels, d, 5, stride=2, padding=2),
            nn.GELU(),
            nn.Conv1d(d, d, 5, stride=2, padding=2),
            nn.GELU(),
        )
        self.position = nn.Parameter(torch.zeros(1, config.max_tokens, d))
        self.norm = nn.LayerNorm(d)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        tokens = self.convs(mel / 40.0 + 1.0).transpose(1, 2)  # dB (≤ 0 mostly) → about ±1
        return self.norm(tokens + self.position[:, : tokens.shape[1]])


class CmiRewardModel(nn.Module):
    def __init__(self, config: RewardModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.audio = LogMelEncoder(config)
        self.text_projection = nn.Linear(config.text_dim, d)
        self.lyrics_projection = nn.Linear(config.text_dim, d)
        self.null = nn.Parameter(torch.randn(3, d) * 0.02)  # text, lyrics, reference
        self.slot = nn.Parameter(torch.randn(3, d) * 0.02)
        self.prompt_transformer = _transformer(config, config.prompt_depth)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.segment = nn.Parameter(torch.randn(2, d) * 0.02)  # prompt tokens, audio tokens
        self.joint_transformer = _transformer(config, config.joint_depth)
        self.alignment_head, self.musicality_head = _head(d), _head(d)

    def prompt_tokens(self, text, lyrics, reference_mel, present) -> torch.Tensor:
        """(batch, 3, d): each slot its projection, or the null embedding when absent."""
        reference = self.audio(reference_mel).mean(dim=1)
        slots = torch.stack(
            [self.text_projection(text), self.lyrics_projection(lyrics), reference], dim=1
        )
        mask = present.unsqueeze(-1).to(slots.dtype)
        slots = mask * slots + (1 - mask) * self.null.unsqueeze(0)
        return self.prompt_transformer(slots + self.slot.unsqueeze(0))

    def forward(self, mel, text, lyrics, reference_mel, present) -> torch.Tensor:
        """(batch, 2) rewards: [alignment, musicality]."""
        prompt = self.prompt_tokens(text, lyrics, reference_mel, present) + self.segment[0]
        audio = self.audio(mel) + self.segment[1]
        cls = self.cls.expand(len(mel), -1, -1)
        joint = self.joint_transformer(torch.cat([cls, prompt, audio], dim=1))[:, 0]
        return torch.cat([self.alignment_head(joint), self.musicality_head(joint)], dim=-1)


def bradley_terry_loss(rewards_a, rewards_b, targets) -> torch.Tensor:
    """Mean BCE of P(A ≻ B) = σ(r_A − r_B) against soft targets, per head, plus the overall
    reward (the heads' mean) against the overall target. targets: (batch, 3) =
    [alignment, musicality, overall], each P(A better)."""
    margins = rewards_a - rewards_b
    logits = torch.cat([margins, margins.mean(dim=-1, keepdim=True)], dim=-1)
    return nn.functional.binary_cross_entropy_with_logits(logits, targets)


def save(model: CmiRewardModel, folder: Path) -> None:
    save_module(model, folder)


def load(folder: Path) -> CmiRewardModel:
    return load_module(
        folder,
        lambda config: CmiRewardModel(RewardModelConfig(**config)),
        "not a CMI reward model; run `dvc repro cmipref-train`",
    )
