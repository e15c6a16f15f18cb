"""The URL guard's network: a character CNN over an encoded host → one logit of P(malicious).

Embedding → one Conv1d per kernel width → ReLU → max over the host's positions → dropout →
linear. A model folder holds `model.safetensors` (the state_dict) and `config.json` (the
architecture, the encoding and the decision threshold).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_weights
from safetensors.torch import save as save_weights
from torch import nn

from tasks.core.errors import InputError
from tasks.scam.guard_data import PAD, VOCAB, VOCAB_SIZE, encode_hosts

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


@dataclass(frozen=True)
class GuardConfig:
    max_length: int = 64
    embedding_dim: int = 32
    channels: int = 64
    kernel_widths: tuple[int, ...] = (2, 3, 4, 5)
    dropout: float = 0.2
    vocab: str = VOCAB
    threshold: float = 0.5


class CharCNN(nn.Module):
    def __init__(self, config: GuardConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(VOCAB_SIZE, config.embedding_dim, padding_idx=PAD)
        self.convs = nn.ModuleList(
            nn.Conv1d(config.embedding_dim, config.channels, width)
            for width in config.kernel_widths
        )
        self.dropout = nn.Dropout(config.dropout)
        self.out = nn.Linear(config.channels * len(config.kernel_widths), 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(batch, max_length) int64 ids → (batch,) logits."""
        x = self.embed(ids).transpose(1, 2)
        pooled = []
        for conv in self.convs:
            features = torch.relu(conv(x))
            # a window that starts on padding is not part of the host: 0 never wins the max
            starts_in_host = (ids[:, : features.shape[2]] != PAD).unsqueeze(1)
            pooled.append(features.masked_fill(~starts_in_host, 0.0).amax(dim=2))
        return self.out(self.dropout(torch.cat(pooled, dim=1))).squeeze(1)


def score_hosts(model: CharCNN, hosts: Sequence[str], batch: int = 1024) -> list[float]:
    """P(malicious) per normalized host."""
    model.eval()
    scores: list[float] = []
    with torch.no_grad():
        for start in range(0, len(hosts), batch):
            ids = encode_hosts(hosts[start : start + batch], model.config.max_length)
            scores += torch.sigmoid(model(torch.from_numpy(ids))).tolist()
    return scores


def model_files(model: CharCNN) -> dict[str, Any]:
    """The folder's files: name → bytes or JSON-able dict."""
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    return {WEIGHTS_FILE: save_weights(state), CONFIG_FILE: asdict(model.config)}


def load_model(folder: Path) -> CharCNN:
    try:
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        weights = load_weights((folder / WEIGHTS_FILE).read_bytes())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(
            f"{folder}: not a URL guard model ({exc}); run `dvc repro scam-guard`"
        ) from None
    if config.get("vocab") != VOCAB:
        raise InputError(f"{folder}: trained with another character vocabulary; retrain it")
    config["kernel_widths"] = tuple(config["kernel_widths"])
    model = CharCNN(GuardConfig(**config))
    model.load_state_dict(weights)
    return model.eval()
