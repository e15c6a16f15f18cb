"""The base of every params section (kept apart so area sections import no root schema)."""

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys and wrong types are rejected; loaded params are read-only."""

    model_config = ConfigDict(extra="forbid", frozen=True)
