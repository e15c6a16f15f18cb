"""params.yaml `toy:` section."""

from __future__ import annotations

from pydantic import Field

from tasks.core.strict_model import StrictModel


class ToyParams(StrictModel):
    rows: int = Field(400, ge=20)
    slope: float = 0.5
    noise: float = 1.0
    seed: int = 0


SECTION = ToyParams  # params.yaml `toy`, registered with tasks.core.params
