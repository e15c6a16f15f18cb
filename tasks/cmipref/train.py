"""cmipref.train: the CMI reward model on Ray Train, registered as `paperline-cmi-rm`.

Pretraining reads CMIPref-Pseudo (cmipref.label's pairs, label-smoothed targets);
fine-tuning reads the truth-labelled split's pairs (hard targets from the generator's
truth: 1, 0, or 0.5 where a dimension ties), two prompts in three, the third kept as the
dev set that every report scores. Text vectors come from the frozen `text_encoder`
(packaged MiniLM by default, or this project's mmBERT), log-mels from the clips.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from tasks.cmipref import rm_train
from tasks.cmipref.features import FeatureBank, build_bank, clips_of
from tasks.cmipref.generate import audio_file
from tasks.cmipref.params import CmiprefParams, TrainParams
from tasks.cmipref.reward_model import RewardModelConfig
from tasks.cmipref.serving import RewardModel
from tasks.cmipref.truth import pair_truth
from tasks.core import consumer, tracking, training
from tasks.core.errors import InputError
from tasks.core.io import Folder, read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.core.text_encoders import make_encoder

log = get_logger("paperline.cmipref.train")
LABELS, PAIRS, TRUTH, AUDIO = (
    "data/processed/cmipref/pseudo_labels.parquet",
    "data/interim/cmipref/pairs.parquet",
    "data/interim/cmipref/truth.parquet",
    "data/interim/cmipref/audio",
)


def truth_target(sign: int) -> float:
    return 0.5 if sign == 0 else float(sign > 0)


def split_arrays(bank: FeatureBank, rows: Sequence[Mapping[str, Any]], targets: np.ndarray):
    return {**bank.pair_indices(rows), "targets": targets.astype(np.float32)}


def training_data(params: CmiprefParams, inputs: Mapping[str, Path]) -> dict[str, Any]:
    """The feature bank and the pretrain / finetune / dev splits as index arrays."""
    labels = read_parquet(inputs["labels"]).to_pylist()
    pairs = read_parquet(inputs["pairs"])
    truth_pairs = pairs.filter(pc.equal(pairs["split"], "finetune"))
    truth = pair_truth(truth_pairs, read_parquet(inputs["truth"]))
    truth_rows = truth_pairs.to_pylist()
    prompts = sorted({r["prompt_id"] for r in truth_rows})
    dev_prompts = set(prompts[2::3])
    finetune = [r for r in truth_rows if r["prompt_id"] not in dev_prompts]
    dev = [r for r in truth_rows if r["prompt_id"] in dev_prompts]
    if len(labels) < 2 or len(finetune) < 2 or not dev:
        raise InputError(
            f"cmipref.train: {len(labels)} pseudo-labelled pairs in {inputs['labels']}, "
            f"{len(finetune)} fine-tune and {len(dev)} dev pairs; generate more prompts "
            "(cmipref.generate.prompts, finetune_prompts)"
        )
    every = [*labels, *truth_rows]
    clips = clips_of(every, ("audio_a", "audio_b", "reference_audio"))
    texts = [r["prompt"] for r in every] + [r["lyrics"] for r in every if r["lyrics"]]
    settings = params.train
    bank = build_bank(
        clips,
        texts,
        inputs["audio"],
        params.generate.sample_rate,
        params.generate.seconds,
        settings.n_mels,
        make_encoder(settings.text_encoder),
    )

    def hard(rows: list[dict[str, Any]]) -> np.ndarray:
        dims = ("alignment", "musicality", "quality")
        return np.array([[truth_target(truth[r["pair_id"]][d]) for d in dims] for r in rows])

    soft = np.array(
        [[r["preference_alignment"], r["preference_musicality"], r["preference"]] for r in labels]
    )
    return {
        "bank": bank,
        "pretrain": split_arrays(bank, labels, soft),
        "finetune": split_arrays(bank, finetune, hard(finetune)),
        "dev": split_arrays(bank, dev, hard(dev)),
        # a prompt with lyrics and a reference if any, so the signature types both columns
        "example_row": next(
            (r for r in truth_rows if r["lyrics"] and r["reference_audio"]), truth_rows[0]
        ),
    }


def consumer_example(row: dict[str, Any], params: CmiprefParams, audio_root: Path) -> Any:
    """One prompt's clip as a consumer sends it: by path (this machine's) with the prompt's
    lyrics and reference when it has them, then as samples (its first half second) alone."""
    import pandas as pd

    from tasks.cmipref.audio import read_clip

    path = audio_file(audio_root, row["audio_a"])
    head = read_clip(path, params.generate.sample_rate)[: params.generate.sample_rate // 2]
    reference = row["reference_audio"]
    return pd.DataFrame(
        [
            {
                "prompt": row["prompt"],
                "audio": str(path),
                "audio_array": None,
                "lyrics": row["lyrics"] or None,
                "reference_audio": str(audio_file(audio_root, reference)) if reference else None,
            },
            # lyrics and reference are optional: the second row has neither
            {
                "prompt": row["prompt"],
                "audio": None,
                "audio_array": [float(x) for x in head],
                "lyrics": None,
                "reference_audio": None,
            },
        ]
    )


def loop_config(settings: TrainParams, data: dict[str, Any]) -> dict[str, Any]:
    bank: FeatureBank = data["bank"]
    scaling = settings.scaling
    model = RewardModelConfig(
        text_dim=int(bank.texts.shape[1]),
        n_mels=settings.n_mels,
        d_model=settings.d_model,
        heads=settings.heads,
        prompt_depth=settings.prompt_depth,
        joint_depth=settings.joint_depth,
        dropout=settings.dropout,
    )
    return {
        **settings.model_dump(
            include={
                "batch_size",
                "pretrain_steps",
                "finetune_steps",
                "learning_rate",
                "finetune_learning_rate",
                "weight_decay",
                "modality_dropout",
                "checkpoint_every",
                "seed",
            }
        ),
        "torch_threads": scaling.torch_threads or max(1, int(scaling.cpus_per_worker)),
        "model": model.__dict__,
        "mels": bank.mels,
        "texts": bank.texts,
        **{split: data[split] for split in ("pretrain", "finetune", "dev")},
    }


CURVE_FIELDS = (
    "step",
    "loss",
    "dev_accuracy_overall",
    "dev_accuracy_musicality",
    "dev_accuracy_alignment",
)


def reward_model_card(settings: TrainParams, metrics: dict[str, Any]) -> tracking.ModelCard:
    return tracking.ModelCard(
        name=settings.registered_model,
        summary=(
            "A CMI reward model: given a music clip and its prompt (instruction text, optional "
            "lyrics, optional reference clip) it returns two rewards, text-music alignment and "
            "musicality (their mean is the overall reward). Log-mel conv encoder trained from "
            f"scratch, frozen `{settings.text_encoder.name}` text vectors, a prompt transformer "
            f"(depth {settings.prompt_depth}) and a joint transformer (depth "
            f"{settings.joint_depth}, d {settings.d_model}); null embeddings and modality "
            f"dropout ({settings.modality_dropout:g}) for missing lyrics / reference / text."
        ),
        training_data=(
            f"Pretrained {metrics['pretrain_steps']} steps on {metrics['pseudo_pairs']} "
            "CMIPref-Pseudo pairs (judge labels, position-consistent, label-smoothed), then "
            f"fine-tuned {metrics['finetune_steps']} steps on {metrics['finetune_pairs']} "
            "truth-labelled pairs; Bradley-Terry loss on both heads and their mean. Clips are "
            "16 kHz renderings with controlled faults from cmipref.generate."
        ),
        intended_use=(
            "Ranking candidate clips for one prompt (top-k filtering) and scoring preference "
            "pairs; see cmipref.evaluate for held-out accuracy by modality and confidence."
        ),
        limitations=(
            "Trained on a few hundred synthesized clips on CPU: it learns this generator's "
            "faults (noise, clipping, detune, jitter, key/tempo/timbre mismatch), not music "
            "in general. Loading needs paperline installed (pickled tasks.cmipref module); "
            "inputs are log-mels (tasks.cmipref.audio.log_mel) and the text encoder's vectors."
        ),
        metrics={k: float(v) for k, v in metrics.items() if k.startswith("dev_") and v is not None},
    )


ARRAYS = ("mels", "texts", "pretrain", "finetune", "dev")  # handed to workers, not logged


def run(params: CmiprefParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    settings = params.train
    data = training_data(params, inputs)
    config = loop_config(settings, data)
    log.info(
        "cmipref.train: %d pseudo pairs, %d truth pairs, %d + %d steps",
        len(data["pretrain"]["a"]),
        len(data["finetune"]["a"]),
        settings.pretrain_steps,
        settings.finetune_steps,
    )
    trained = training.train(
        training.TrainingJob(
            name="cmipref.train",
            train_loop=rm_train.train_loop,
            config={k: v for k, v in config.items() if k not in ARRAYS},
            data={k: config[k] for k in ARRAYS},
            scaling=settings.scaling,
            max_failures=settings.max_failures,
            experiment=settings.experiment,
            run_name="cmi-rm-train",
            params={f"model.{k}": v for k, v in config["model"].items()},
        ),
        ctx,
    )
    checkpoint, state = trained.checkpoint, trained.state
    last = state["curve"][-1]
    at_pretrain_end = next(p for p in state["curve"] if p["step"] == settings.pretrain_steps)
    metrics = {
        "pseudo_pairs": len(data["pretrain"]["a"]),
        "finetune_pairs": len(data["finetune"]["a"]),
        "dev_pairs": len(data["dev"]["a"]),
        "pretrain_steps": settings.pretrain_steps,
        "finetune_steps": settings.finetune_steps,
        "final_loss": round(last["loss"], 4),
        **{k: round(v, 4) for k, v in last.items() if k.startswith("dev_")},
        **{
            f"pretrain_only_{k}": round(v, 4)
            for k, v in at_pretrain_end.items()
            if k.startswith("dev_")
        },
        "text_encoder": settings.text_encoder.name,
        "resumed_from": state["resumed_from"],
    }
    card = reward_model_card(settings, metrics)
    encoder = make_encoder(settings.text_encoder)  # its folder ships with the model
    training.publish(
        trained,
        ctx,
        card=card,
        log_model=lambda registry_card: (
            consumer.log_pyfunc_model(
                RewardModel(
                    settings.text_encoder.model_dump(),
                    params.generate.sample_rate,
                    params.generate.seconds,
                ),
                "model",
                registry_card,
                consumer_example(data["example_row"], params, inputs["audio"]),
                artifacts={"model": checkpoint, "text_encoder": encoder.folder},
                packages=("torch", "transformers", "sentence-transformers", "librosa", "pandas"),
            ).model_uri
        ),
        registered_model=settings.registered_model,
        metrics=metrics,
        files={"curves/loss.csv": training.curve_csv(state["curve"], CURVE_FIELDS)},
    )
    log.info(
        "cmipref.train: dev accuracy %s (pretrain only %s)",
        metrics.get("dev_accuracy_overall"),
        metrics.get("pretrain_only_dev_accuracy_overall"),
    )
    weights = Folder({name: checkpoint / name for name in ("config.json", "model.safetensors")})
    weights["README.md"] = card.to_markdown()
    return {
        "model": weights,
        "metrics": metrics,
        "curve": training.curve_csv(state["curve"], CURVE_FIELDS),
    }


STAGE = Stage(
    name="cmipref.train",
    run=run,
    params_key="cmipref",
    params=("cmipref.generate.sample_rate", "cmipref.generate.seconds", "cmipref.train"),
    inputs={"labels": LABELS, "pairs": PAIRS, "truth": TRUTH, "audio": AUDIO},
    outputs={
        "model": "models/cmi_rm/model",
        "metrics": Output.metrics("models/cmi_rm/metrics.json"),
        "curve": Output.plots(
            "models/cmi_rm/loss.csv",
            x="step",
            y="loss",
            title="CMI reward model - Bradley-Terry loss (pseudo labels, then truth labels)",
        ),
    },
    uses_ray=True,
    headline="models/cmi_rm/metrics.json:dev_accuracy_overall",
    top_plots={
        "cmipref-dev-accuracy": {
            "title": "CMI reward model: dev-pair accuracy against the truth while training",
            "template": "linear",
            "x": "step",
            "y": {
                "models/cmi_rm/loss.csv": [
                    "dev_accuracy_overall",
                    "dev_accuracy_musicality",
                    "dev_accuracy_alignment",
                ]
            },
            "x_label": "step (pretraining on pseudo labels, then fine-tuning on truth labels)",
            "y_label": "preference accuracy",
        }
    },
)
