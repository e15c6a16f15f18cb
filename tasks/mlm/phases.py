"""One mmBERT phase as a stage: fit on the phase's shards, log and register the model.

pretrain starts from a fresh model and opens the pipeline run's MLflow parent run; mid and
decay start from the previous phase's folder and log child runs under the same parent.
Each phase's model is registered as a new version of `paperline-mmbert` with its alias.

The phase folders hold no MLflow ids, so the same inputs give the same bytes (and the same
dvc.lock) whichever door ran them. A run is tagged with the digest of the weights it wrote;
the next phase finds its parent run, and mlm.evaluate each phase's run, by that digest.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.core import tracking
from tasks.core.io import Folder, read_json
from tasks.core.params import RuntimeParams
from tasks.core.progress import get_logger
from tasks.core.scratch import FINISHED_FILE, fingerprint, prepare_scratch
from tasks.core.stage import Stage, StageContext
from tasks.mlm import trainer
from tasks.mlm.model import load_model, load_tokenizer
from tasks.mlm.params import PHASES, MlmParams

log = get_logger("paperline.mlm")
ALIASES = {
    "pretrain": ["phase-pretrain"],
    "mid": ["phase-mid"],
    "decay": ["phase-decay", "candidate"],
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
    index = PHASES.index(phase)
    return PHASES[index - 1] if index else None


def open_runs(
    phase: str,
    params: MlmParams,
    runtime: RuntimeParams,
    previous_dir: Path | None,
    scratch: Path,
    resuming: bool,
    lineage_inputs: list[str],
    root: Path,
) -> dict[str, str]:
    """The parent and phase run ids: reused when resuming, else created (parent by pretrain)."""
    import mlflow

    runs_file = scratch / trainer.RUNS_FILE
    if resuming and runs_file.exists():
        return read_json(runs_file)
    experiment = tracking.ensure_experiment(params.experiment, runtime.mlflow, root)
    client = mlflow.MlflowClient()
    lineage = tracking.lineage_tags(lineage_inputs, root)
    previous = find_phase_run(experiment, previous_dir) if previous_dir else None
    if previous is not None:
        parent = previous.data.tags["mlflow.parentRunId"]
    else:
        if previous_dir:
            log.warning(
                "%s: no MLflow run wrote these weights; opening a new parent run", previous_dir
            )
        parent = client.create_run(
            experiment, run_name=f"mmbert-{params.preset}", tags={**lineage, "pipeline": "mlm"}
        ).info.run_id
    child = client.create_run(
        experiment, run_name=phase, tags={**lineage, "mlflow.parentRunId": parent, "phase": phase}
    ).info.run_id
    runs = {"parent_run_id": parent, "run_id": child}
    runs_file.write_text(json.dumps(runs), encoding="utf-8")
    return runs


def curve_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CURVE_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: row[key] for key in CURVE_FIELDS})
    return buffer.getvalue()


def phase_card(phase: str, params: MlmParams, manifest: Mapping[str, Any], state: Mapping) -> Any:
    langs = manifest["languages"]
    top = sorted(manifest["token_share_per_language"].items(), key=lambda kv: -kv[1])[:8]
    mix = ", ".join(f"{lang} {share:.1%}" for lang, share in top)
    return tracking.ModelCard(
        name=f"{params.registered_model} ({phase})",
        summary=(
            f"mmBERT-style ModernBERT encoder, preset `{params.preset}`, after the {phase} phase "
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
    import mlflow

    root, runtime = ctx.root, ctx.runtime
    previous_dir = inputs.get("previous")
    previous = read_json(previous_dir / STATE_FILE) if previous_dir else None
    plan = trainer.plan_phase(phase, params, inputs["shards"])
    uri = tracking.configure(runtime.mlflow, root)
    scratch = trainer.scratch_dir(phase, root)
    config = trainer.loop_config(
        plan,
        params,
        tokenizer=inputs["tokenizer"],
        init_from=previous_dir,
        step_offset=previous["last_step"] if previous else 0,
        tracking_uri=uri,
        run_id=None,
    )
    resuming = prepare_scratch(
        scratch,
        fingerprint(
            config,
            [inputs["shards"], inputs["tokenizer"], *([previous_dir] if previous_dir else [])],
        ),
    )
    lineage_inputs = [str(p.relative_to(root)) for p in inputs.values() if p.is_relative_to(root)]
    runs = open_runs(phase, params, runtime, previous_dir, scratch, resuming, lineage_inputs, root)
    config.update(run_id=runs["run_id"], pid_dir=str(scratch))
    client = mlflow.MlflowClient()
    if not resuming:
        flat = {k: v for k, v in config.items() if k not in ("run_id", "tracking_uri", "pid_dir")}
        flat |= {"num_workers": plan.world_size, "sequences": plan.sequences}
        for key, value in flat.items():
            client.log_param(runs["run_id"], key, value)
    log.info(
        "mlm.%s: %d steps (%d per epoch), %s",
        phase,
        plan.total_steps,
        plan.steps_per_epoch,
        "resuming" if resuming else "from step 0",
    )
    checkpoint = trainer.fit(config, plan, params, scratch)
    state = read_json(checkpoint / "state.json")
    manifest = read_json(inputs["shards"] / "manifest.json")
    card = phase_card(phase, params, manifest, state)  # the folder's copy: no run-specific lines
    registry_card = dataclasses.replace(card, lineage=tracking.lineage_tags(lineage_inputs, root))
    tokenizer = load_tokenizer(inputs["tokenizer"])
    with mlflow.start_run(run_id=runs["run_id"]):
        info = tracking.log_transformers_model(
            load_model(checkpoint), tokenizer, "model", registry_card, task="fill-mask"
        )
        mlflow.log_dict(manifest, "data/manifest.json")
        mlflow.log_artifacts(str(inputs["tokenizer"]), "tokenizer")
        mlflow.log_text(curve_csv(state["curve"]), "curves/loss.csv")
    tracking.register_after_commit(
        ctx,
        info.model_uri,
        params.registered_model,
        registry_card,
        ALIASES[phase],
        scratch / FINISHED_FILE,
    )
    client.set_tag(runs["run_id"], DIGEST_TAG, weights_digest(checkpoint))
    client.set_terminated(runs["run_id"])
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
    return {"model": folder, "curve": curve_csv(state["curve"]), "metrics": metrics}


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
        inputs=inputs,
        outputs={
            "model": f"models/mmbert/{phase}",
            "curve": f"models/mmbert/curves/{phase}.csv",
            "metrics": f"models/mmbert/curves/{phase}_metrics.json",
        },
        uses_ray=True,
        headline=f"models/mmbert/curves/{phase}_metrics.json:final_loss",
    )
