"""One mmBERT phase as a stage: fit on the phase's shards, log and register the model.

pretrain starts from a fresh model and opens the pipeline run's MLflow parent run; mid and
decay start from the previous phase's folder and log child runs under the same parent.
The control arm decay_cont (mmBERT's decay-cont) starts from mid, like decay, with decay's
training params on the mid languages only. Each model is registered as a new version of
`paperline-mmbert` with its aliases (decay: `decay-all` and `candidate`; the control:
`decay-cont`).

The phase folders hold no MLflow ids, so the same inputs give the same bytes (and the same
dvc.lock) whichever door ran them. A run is tagged with the digest of the weights it wrote;
the next phase finds its parent run, and mlm.evaluate each phase's run, by that digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.core import tracking, training
from tasks.core.io import Folder, read_json
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.mlm import trainer
from tasks.mlm.model import load_model, load_tokenizer
from tasks.mlm.params import CONTROL_ARMS, PHASES, MlmParams, training_phase
from tasks.mlm.train_loop import train_loop

log = get_logger("paperline.mlm")
ALIASES = {
    "pretrain": ["phase-pretrain"],
    "mid": ["phase-mid"],
    "decay": ["phase-decay", "decay-all", "candidate"],
    "decay_cont": ["decay-cont"],
}
STATE_FILE = "state.json"  # in each phase's folder: steps, tokens, resumes
CURVE_FIELDS = ("step", "phase_step", "loss", "learning_rate", "tokens_seen")  # no timings
MODEL_FILES = ("config.json", "model.safetensors")
DIGEST_TAG = "paperline.weights_sha256"


def weights_digest(model_dir: Path) -> str:
    return hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()


def find_phase_run(experiment: str, model_dir: Path) -> Any | None:
    """The MLflow run that wrote `model_dir`'s weights (None when this store never saw them)."""
    import mlflow

    found = mlflow.MlflowClient().search_runs(
        [experiment],
        filter_string=f"tags.`{DIGEST_TAG}` = '{weights_digest(model_dir)}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return found[0] if found else None


def previous_phase(phase: str) -> str | None:
    """The phase whose model `phase` (or a control arm) starts from."""
    if phase in CONTROL_ARMS:
        return CONTROL_ARMS[phase][1]
    index = PHASES.index(phase)
    return PHASES[index - 1] if index else None


def parent_run(params: MlmParams, ctx: StageContext, previous_dir: Path | None, tags: dict) -> str:
    """The pipeline's parent run: the previous phase's (found by its weights), else a new one."""
    experiment = tracking.ensure_experiment(params.experiment, ctx.runtime.mlflow, ctx.root)
    previous = find_phase_run(experiment, previous_dir) if previous_dir else None
    if previous is not None:
        return previous.data.tags["mlflow.parentRunId"]
    if previous_dir:
        log.warning("%s: no MLflow run wrote these weights; opening a new parent run", previous_dir)
    return tracking.create_run(
        params.experiment,
        ctx.runtime.mlflow,
        run_name=f"mmbert-{params.preset}",
        tags={**tags, "pipeline": "mlm"},
        root=ctx.root,
    )


def phase_card(phase: str, params: MlmParams, manifest: Mapping[str, Any], state: Mapping) -> Any:
    langs = manifest["languages"]
    what = f"{phase} phase"
    if phase in CONTROL_ARMS:
        start = CONTROL_ARMS[phase][1]
        what = f"{phase} control arm ({training_phase(phase)}'s settings on the {start} languages)"
    top = sorted(manifest["token_share_per_language"].items(), key=lambda kv: -kv[1])[:8]
    mix = ", ".join(f"{lang} {share:.1%}" for lang, share in top)
    return tracking.ModelCard(
        name=f"{params.registered_model} ({phase})",
        summary=(
            f"mmBERT-style ModernBERT encoder, preset `{params.preset}`, after the {what} "
            f"(mask ratio {manifest['mask_ratio']}, sequence length {manifest['sequence_length']}, "
            f"sampling temperature {manifest['temperature']})."
        ),
        training_data=(
            f"{len(langs)} languages, {state['tokens']} tokens seen in this phase "
            f"({manifest['tokens']} packed). Largest shares: {mix}. "
            "Eval loss per language tier: see the `mlm.evaluate` table on the parent run."
        ),
        intended_use="Fill-mask and as the encoder behind paperline's embedders and detectors.",
        limitations=(
            "Trained on the embedded default (UDHR translations) unless params name a larger "
            "corpus: a research artefact, not a production multilingual encoder."
        ),
        metrics={
            "final_loss": state["curve"][-1]["loss"],
            "tokens_seen": state["tokens"],
            "steps": state["step"],
        },
    )


def train_phase(
    phase: str, params: MlmParams, inputs: Mapping[str, Path], ctx: StageContext
) -> dict[str, Any]:
    root = ctx.root
    previous_dir = inputs.get("previous")
    previous = read_json(previous_dir / STATE_FILE) if previous_dir else None
    plan = trainer.plan_phase(phase, params, inputs["shards"])
    config = trainer.loop_config(
        plan,
        params,
        tokenizer=inputs["tokenizer"],
        init_from=previous_dir,
        step_offset=previous["last_step"] if previous else 0,
        tracking_uri=None,
        run_id=None,
        pid_dir=ctx.scratch("ray", "mlm", phase),
    )
    lineage_inputs = [str(p.relative_to(root)) for p in inputs.values() if p.is_relative_to(root)]
    log.info("mlm.%s: %d steps (%d per epoch)", phase, plan.total_steps, plan.steps_per_epoch)
    trained = training.train(
        training.TrainingJob(
            name=f"mlm.{phase}",
            train_loop=train_loop,
            config=config,
            sources=[inputs["shards"], inputs["tokenizer"], *filter(None, [previous_dir])],
            scaling=params.training.scaling,
            max_failures=params.training.max_failures,
            experiment=params.experiment,
            run_name=phase,
            lineage=lineage_inputs,
            tags={"phase": phase},
            parent_run=lambda: parent_run(
                params, ctx, previous_dir, tracking.lineage_tags(lineage_inputs, root)
            ),
            params={"num_workers": plan.world_size, "sequences": plan.sequences},
            datasets={"train": trainer.phase_dataset(plan, params)},
            keep_checkpoints=params.training.keep_checkpoints,
        ),
        ctx,
    )
    checkpoint, state = trained.checkpoint, trained.state
    manifest = read_json(inputs["shards"] / "manifest.json")
    card = phase_card(phase, params, manifest, state)  # the folder's copy: no run-specific lines
    tokenizer = load_tokenizer(inputs["tokenizer"])
    training.publish(
        trained,
        ctx,
        card=card,
        log_model=lambda registry_card: (
            tracking.log_transformers_model(
                load_model(checkpoint),
                tokenizer,
                "model",
                registry_card,
                task="fill-mask",
                input_example=[f"The river flows into the {tokenizer.mask_token}."],
            ).model_uri
        ),
        registered_model=params.registered_model,
        alias=ALIASES[phase],
        tags={DIGEST_TAG: weights_digest(checkpoint)},
        files={
            "data/manifest.json": json.dumps(manifest, indent=2),
            "curves/loss.csv": training.curve_csv(state["curve"], CURVE_FIELDS),
        },
        artifacts={"tokenizer": inputs["tokenizer"]},
    )
    folder = Folder({name: checkpoint / name for name in MODEL_FILES})
    for path in Path(inputs["tokenizer"]).iterdir():
        if path.is_file() and path.name != "README.md":
            folder[path.name] = path
    folder["model_card.md"] = card.to_markdown()
    folder[STATE_FILE] = {
        "steps": state["step"],
        "tokens": state["tokens"],
        "resumed_from": state["resumed_from"],
        "first_step": config["step_offset"] + 1,
        "last_step": config["step_offset"] + state["step"],
    }
    log.info(
        "mlm.%s: %d steps, %d tokens, loss %.3f",
        phase,
        state["step"],
        state["tokens"],
        state["curve"][-1]["loss"],
    )
    metrics = {
        "steps": state["step"],
        "tokens_seen": state["tokens"],
        "final_loss": round(state["curve"][-1]["loss"], 5),
        "sequences": plan.sequences,
        "workers": plan.world_size,
        "resumed_from": state["resumed_from"],
    }
    return {
        "model": folder,
        "curve": training.curve_csv(state["curve"], CURVE_FIELDS),
        "metrics": metrics,
    }


def phase_stage(phase: str) -> Stage:
    """The STAGE of tasks/mlm/<phase>.py."""
    inputs = {
        "shards": f"data/processed/corpus/shards/{phase}",
        "tokenizer": "models/tokenizer",
    }
    if prev := previous_phase(phase):
        inputs["previous"] = f"models/mmbert/{prev}"

    def run(params: MlmParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
        return train_phase(phase, params, inputs, ctx)

    return Stage(
        name=f"mlm.{phase}",
        run=run,
        params_key="mlm",
        params=(
            "mlm.preset",
            "mlm.experiment",
            "mlm.registered_model",
            "mlm.training",
            f"mlm.phases.{training_phase(phase)}",
        ),
        inputs=inputs,
        outputs={
            "model": f"models/mmbert/{phase}",
            "curve": Output.plots(f"models/mmbert/curves/{phase}.csv"),
            "metrics": Output.metrics(f"models/mmbert/curves/{phase}_metrics.json"),
        },
        uses_ray=True,
        headline=f"models/mmbert/curves/{phase}_metrics.json:final_loss",
        top_plots={"mlm-loss": LOSS_ACROSS_PHASES} if phase == "decay" else {},
    )


# drawn once the last of the three phases has its curve
LOSS_ACROSS_PHASES = {
    "title": "mmBERT MLM training loss across the three phases",
    "template": "linear",
    "x": "step",
    "y": {f"models/mmbert/curves/{phase}.csv": "loss" for phase in ("pretrain", "mid", "decay")},
    "x_label": "optimizer step (all phases)",
    "y_label": "masked-token cross-entropy",
}
