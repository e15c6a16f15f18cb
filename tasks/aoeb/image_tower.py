"""The image tower for text-to-image retrieval: a small CNN into a text encoder's space.

RGB pictures resized to `image_size`² (64×64 by default), scaled to [-1, 1] → stride-2
conv blocks (conv, batch norm, ReLU) → global average pool → a linear projection to
`embed_dim` (the text encoder's hidden size) → L2-normalised. It starts random; a CLIP-style
contrastive fine-tune against a text encoder aligns the two. A tower folder holds
`config.json` (the architecture) and `model.safetensors` (the state_dict), like a
transformers folder; `ImageTextEncoder` (tasks/aoeb/encoders.py) pairs one with a text encoder.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from tasks.core.errors import InputError
from tasks.core.module_folder import load_module, save_module

ImageSource = Path | bytes  # a PNG/JPEG file, or its bytes


@dataclass(frozen=True)
class TowerConfig:
    embed_dim: int = 384  # the text encoder's hidden size (MiniLM-L6: 384)
    image_size: int = 64
    channels: tuple[int, ...] = (16, 32, 64, 128)  # one stride-2 block each


class ImageTower(nn.Module):
    def __init__(self, config: TowerConfig) -> None:
        super().__init__()
        self.config = config
        blocks: list[nn.Module] = []
        width = 3
        for channels in config.channels:
            blocks += [
                nn.Conv2d(width, channels, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(channels),
                nn.ReLU(inplace=True),
            ]
            width = channels
        self.features = nn.Sequential(*blocks)
        self.projection = nn.Linear(width, config.embed_dim)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """(batch, 3, size, size) in [-1, 1] → (batch, embed_dim), unit length."""
        pooled = self.features(pixels).mean(dim=(2, 3))
        return nn.functional.normalize(self.projection(pooled), dim=-1)


def pixels(images: Sequence[ImageSource], size: int) -> torch.Tensor:
    """(batch, 3, size, size) float tensor in [-1, 1]; an unreadable picture names itself."""
    from PIL import Image, UnidentifiedImageError

    arrays = []
    for index, image in enumerate(images):
        try:
            with Image.open(io.BytesIO(image) if isinstance(image, bytes) else image) as picture:
                rgb = picture.convert("RGB")
                if rgb.size != (size, size):
                    rgb = rgb.resize((size, size), Image.Resampling.BILINEAR)
                arrays.append(np.asarray(rgb, dtype=np.float32))
        except (OSError, UnidentifiedImageError) as exc:
            where = image if isinstance(image, Path) else f"image #{index}"
            raise InputError(f"{where}: not a readable picture ({exc})") from None
    batch = np.stack(arrays).transpose(0, 3, 1, 2) / 127.5 - 1.0
    return torch.from_numpy(np.ascontiguousarray(batch, dtype=np.float32))


def embed_images(tower: ImageTower, images: Sequence[ImageSource], batch: int = 64) -> np.ndarray:
    """(len(images), embed_dim) float32 unit vectors."""
    tower.eval()
    out = [np.zeros((0, tower.config.embed_dim), np.float32)]
    with torch.inference_mode():
        for start in range(0, len(images), batch):
            chunk = pixels(images[start : start + batch], tower.config.image_size)
            out.append(tower(chunk).numpy().astype(np.float32))
    return np.concatenate(out)


def save(tower: ImageTower, folder: Path) -> None:
    """Write `config.json` and `model.safetensors` into `folder` (each atomically)."""
    save_module(tower, folder)


def build(config: dict) -> ImageTower:
    return ImageTower(TowerConfig(**{**config, "channels": tuple(config["channels"])}))


def load(folder: Path) -> ImageTower:
    """The tower saved in `folder`, in eval mode."""
    return load_module(
        folder, build, "not an image tower; save one with tasks.aoeb.image_tower.save"
    )
