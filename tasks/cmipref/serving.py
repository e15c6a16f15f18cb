"""What a registry consumer calls: `paperline-cmi-rm` as an MLflow pyfunc.

`RewardModel`: rows of `prompt` (the instruction text), the clip as `audio` (a file path)
or `audio_array` (mono samples at the trained sample rate), optional `lyrics` and optional
`reference_audio` (a path) → `alignment` and `musicality` rewards and `reward`, their mean.
Clips are cut or zero-padded to the trained length and turned into log-mels, texts into
the frozen text encoder's vectors (shipped with the model), as cmipref.evaluate does.
Rewards rank clips of one prompt; they are not calibrated across prompts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
import pandas as pd

from tasks.cmipref.reward_model import LYRICS, REFERENCE, TEXT


def present(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, float):
        return value == value  # NaN: pandas' missing value
    return len(value) > 0


class RewardModel(mlflow.pyfunc.PythonModel):
    def __init__(self, text_encoder: dict[str, Any], sample_rate: int, seconds: float) -> None:
        self.text_encoder, self.sample_rate, self.seconds = text_encoder, sample_rate, seconds

    def load_context(self, context: Any) -> None:
        from tasks.cmipref.reward_model import load
        from tasks.core.text_encoders import EncoderParams, make_encoder

        self.model = load(Path(context.artifacts["model"])).eval()
        folder = context.artifacts["text_encoder"]
        spec = {**self.text_encoder, "options": {**self.text_encoder["options"], "model": folder}}
        self.encoder = make_encoder(EncoderParams(**spec), folder_of=Path)

    def mel(self, value: Any) -> np.ndarray:
        from tasks.cmipref.audio import crop, decode, log_mel

        if isinstance(value, str):
            audio = decode(Path(value), self.sample_rate)
        else:
            audio = np.asarray(value, np.float32)
        samples = int(self.seconds * self.sample_rate)
        return log_mel(crop(audio, samples), self.sample_rate, self.model.config.n_mels)

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        import torch

        rows = model_input.to_dict("records")
        clips = [r["audio"] if present(r.get("audio")) else r.get("audio_array") for r in rows]
        if not all(present(c) for c in clips):
            raise ValueError("every row needs `audio` (a path) or `audio_array` (samples)")
        mels = np.stack([self.mel(c) for c in clips])
        reference = np.zeros_like(mels)
        flags = np.zeros((len(rows), 3), np.float32)
        flags[:, TEXT] = 1.0
        texts = self.encoder.encode_documents([str(r["prompt"]) for r in rows])
        lyrics = np.zeros_like(texts)
        for i, row in enumerate(rows):
            if present(row.get("lyrics")):
                flags[i, LYRICS] = 1.0
                lyrics[i] = self.encoder.encode_documents([str(row["lyrics"])])[0]
            if present(row.get("reference_audio")):
                flags[i, REFERENCE] = 1.0
                reference[i] = self.mel(row["reference_audio"])
        tensor = torch.as_tensor
        with torch.no_grad():
            rewards = self.model(
                tensor(mels), tensor(texts), tensor(lyrics), tensor(reference), tensor(flags)
            ).numpy()
        return pd.DataFrame(
            {
                "alignment": rewards[:, 0],
                "musicality": rewards[:, 1],
                "reward": rewards.mean(axis=1),
            }
        )
