"""deltastack.study: the Ray Tune grid task × model × seed, one MLflow run per trial.

Each trial is a Tune function trainable (one small model: a TorchTrainer per trial would add
a worker group for nothing); it reports every `eval_every` steps with a checkpoint, so a
killed study resumes: finished trials are kept, unfinished ones restart from their last
checkpoint. MLflow's Tune callback runs in this process (one writer for the SQLite store)
and logs each trial as a child of one study run, which also gets the table and curves.
Outputs: `results.json` (dvc metrics), `results.md` (the table), `curves/<task>.csv`
(dvc plots: accuracy by test length, one column per model).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core import ray_runtime, tracking
from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.scratch import FINISHED_FILE, fingerprint, prepare_scratch
from tasks.core.stage import Stage, StageContext
from tasks.deltastack.params import DeltaStackParams
from tasks.deltastack.train import bucket_name, buckets, train_trial

log = get_logger("paperline.deltastack.study")
STATE_FILE = "state.pt"


def trainable(config: dict[str, Any], params: dict[str, Any]) -> None:
    """One trial: config holds the grid point (task, model, seed); params the section."""
    import torch
    from ray import tune

    settings = DeltaStackParams.model_validate(params)
    torch.set_num_threads(settings.training.torch_threads)
    checkpoint = tune.get_checkpoint()
    resume = None
    if checkpoint:
        with checkpoint.as_directory() as folder:
            resume = torch.load(Path(folder) / STATE_FILE, weights_only=False)

    def report(metrics: dict[str, Any], state: dict[str, Any] | None) -> None:
        with tempfile.TemporaryDirectory() as folder:
            torch.save(state, Path(folder) / STATE_FILE)
            tune.report(
                {**metrics, "timesteps_total": metrics["step"]},
                checkpoint=tune.Checkpoint.from_directory(folder),
            )

    train_trial(config["task"], config["model"], config["seed"], settings, report, resume)


def run_grid(params: DeltaStackParams, ctx: StageContext, parent_run: str) -> list[dict]:
    """Fit (or resume) the grid; one row per trial with its final metrics."""
    import ray
    from ray import tune
    from ray.air.integrations.mlflow import MLflowLoggerCallback

    section = params.model_dump(mode="json")
    folder = ctx.scratch("ray", "tune", "deltastack")
    code = sorted(Path(__file__).parent.glob("*.py"))  # a code change starts the grid afresh
    resuming = prepare_scratch(folder, fingerprint(section, code))
    gpus = params.study.gpus_per_trial if ray.cluster_resources().get("GPU", 0) else 0
    resources = {"cpu": params.study.cpus_per_trial, "gpu": gpus}
    function = tune.with_resources(tune.with_parameters(trainable, params=section), resources)
    restore = resuming and tune.Tuner.can_restore(str(folder / "study"))
    if restore:
        log.info("deltastack.study: resuming the grid from %s", folder / "study")
    tuner = ray_runtime.tuner(
        function,
        name="study",
        storage=folder,
        restore=restore,
        param_space={
            "task": tune.grid_search(params.tasks),
            "model": tune.grid_search(params.models),
            "seed": tune.grid_search(params.budget.seeds),
        },
        tune_config=tune.TuneConfig(max_concurrent_trials=params.study.max_concurrent_trials),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        callbacks=[
            MLflowLoggerCallback(
                tracking_uri=tracking.tracking_uri(ctx.runtime.mlflow, ctx.root),
                experiment_name=params.experiment,
                tags={"mlflow.parentRunId": parent_run, "preset": params.preset},
            )
        ],
    )
    grid = tuner.fit()
    rows = []
    for result in grid:
        config = result.config
        if result.error:
            raise RuntimeError(f"deltastack trial {config} failed: {result.error}")
        rows.append({**{k: config[k] for k in ("task", "model", "seed")}, **result.metrics})
    (folder / FINISHED_FILE).write_text("done", encoding="utf-8")
    return rows


def summarize(rows: list[dict], params: DeltaStackParams) -> dict[str, Any]:
    """Mean over seeds per task, model and bucket; does DeltaStack beat DeltaNet at the
    longest lengths by more than the measurement noise?"""
    names = [bucket_name(b) for b in buckets(params.lengths.test_buckets)]
    longest = names[-1]
    sequences = params.budget.eval_examples * len(params.budget.seeds)
    tasks: dict[str, Any] = {}
    for task in params.tasks:
        models = {}
        for model in params.models:
            own = [r for r in rows if r["task"] == task and r["model"] == model]
            by_length = {
                n: round(float(np.mean([r[f"accuracy_{n}"] for r in own])), 4) for n in names
            }
            models[model] = {
                "test_accuracy": round(float(np.mean(list(by_length.values()))), 4),
                "longest_accuracy": by_length[longest],
                "by_length": by_length,
                "train_accuracy": round(float(np.mean([r["train_accuracy"] for r in own])), 4),
            }
        entry: dict[str, Any] = {"models": models}
        if {"deltastack", "deltanet"} <= set(models):
            ours = models["deltastack"]["longest_accuracy"]
            theirs = models["deltanet"]["longest_accuracy"]
            margin, noise = ours - theirs, noise_margin(ours, theirs, sequences)
            verdict = "tie" if abs(margin) <= noise else "better" if margin > 0 else "worse"
            entry |= {
                "deltastack_minus_deltanet": round(margin, 4),
                "noise_margin": round(noise, 4),
                "deltastack_vs_deltanet": verdict,
                "deltastack_beats_deltanet": verdict == "better",
            }
        tasks[task] = entry
    wins = [t for t, e in tasks.items() if e.get("deltastack_beats_deltanet")]
    return {
        "preset": params.preset,
        "trials": len(rows),
        "seeds": params.budget.seeds,
        "steps": params.budget.steps,
        "longest_bucket": longest,
        "test_sequences_per_bucket": sequences,
        "deltastack_beats_deltanet": len(wins),
        "tasks": tasks,
    }


def noise_margin(ours: float, theirs: float, sequences: int) -> float:
    """Two standard errors of the difference of two accuracies measured on `sequences` test
    sequences each. Sequences, not tokens, are the independent units (a sequence's tokens
    are scored together), so this is conservative for tasks with many tokens per sequence."""
    variance = (ours * (1 - ours) + theirs * (1 - theirs)) / max(1, sequences)
    return 2 * float(np.sqrt(variance))


CONTEXT_FREE = ("dyck", "reverse_string", "stack_manipulation")


def table_markdown(results: dict[str, Any], params: DeltaStackParams) -> str:
    longest = results["longest_bucket"]
    lines = [
        f"# DeltaStack vs DeltaNet: accuracy at test lengths {longest}",
        "",
        f"Preset `{results['preset']}`: {results['steps']} steps, seeds {results['seeds']}, "
        f"train lengths {params.lengths.train_min}–{params.lengths.train_max}. Masked per-token "
        "accuracy, mean over seeds. The paper expects DeltaStack ahead on the context-free tasks "
        f"({', '.join(CONTEXT_FREE)}). A difference within ± two standard errors "
        f"({results['test_sequences_per_bucket']} test sequences per bucket) is a tie.",
        "",
        "| task | " + " | ".join(params.models) + " | DeltaStack beats DeltaNet? |",
        "|---|" + "---|" * (len(params.models) + 1),
    ]
    for task, entry in results["tasks"].items():
        cells = [f"{entry['models'][m]['longest_accuracy']:.3f}" for m in params.models]
        verdict = "—"
        if "deltastack_vs_deltanet" in entry:
            answer = {"better": "yes", "worse": "no", "tie": "tie"}[entry["deltastack_vs_deltanet"]]
            margin, noise = entry["deltastack_minus_deltanet"], entry["noise_margin"]
            verdict = f"{answer} ({margin:+.3f} ± {noise:.3f})"
        lines.append(f"| {task} | " + " | ".join(cells) + f" | {verdict} |")
    return "\n".join(lines) + "\n"


def curves_csv(entry: dict[str, Any], params: DeltaStackParams) -> str:
    lines = ["length," + ",".join(params.models)]
    for bucket in buckets(params.lengths.test_buckets):
        name = bucket_name(bucket)
        cells = [f"{entry['models'][m]['by_length'][name]:.4f}" for m in params.models]
        lines.append(f"{(bucket[0] + bucket[1]) // 2}," + ",".join(cells))
    return "\n".join(lines) + "\n"


def run(params: DeltaStackParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
    import mlflow

    budget = params.budget
    log.info(
        "deltastack.study: preset %s, %d tasks × %d models × %d seeds, %d steps each",
        params.preset,
        len(params.tasks),
        len(params.models),
        len(budget.seeds),
        budget.steps,
    )
    with tracking.start_run(
        params.experiment,
        ctx.runtime.mlflow,
        run_name=f"study-{params.preset}",
        tags={"preset": params.preset},
        root=ctx.root,
    ) as parent:
        mlflow.log_params(
            {
                "preset": params.preset,
                "steps": budget.steps,
                "batch_size": budget.batch_size,
                "d_model": budget.model.d_model,
                "num_layers": budget.model.num_layers,
            }
        )
        rows = run_grid(params, ctx, parent.info.run_id)
        results = summarize(rows, params)
        table = table_markdown(results, params)
        curves = Folder(
            {f"{task}.csv": curves_csv(entry, params) for task, entry in results["tasks"].items()}
        )
        mlflow.log_dict(results, "results.json")
        mlflow.log_text(table, "results.md")
        for name, text in curves.items():
            mlflow.log_text(text, f"curves/{name}")
        mlflow.log_metric("deltastack_beats_deltanet", results["deltastack_beats_deltanet"])
    for task, entry in results["tasks"].items():
        if "deltastack_minus_deltanet" in entry:
            log.info(
                "deltastack %s: DeltaStack − DeltaNet at %s = %+.3f",
                task,
                results["longest_bucket"],
                entry["deltastack_minus_deltanet"],
            )
    return {"results": results, "table": table, "curves": curves}


STAGE = Stage(
    name="deltastack.study",
    run=run,
    params_key="deltastack",
    inputs={},
    outputs={
        "results": "models/deltastack/results.json",
        "table": "models/deltastack/results.md",
        "curves": "models/deltastack/curves",
    },
    uses_ray=True,
    headline="models/deltastack/results.json:deltastack_beats_deltanet",
)
