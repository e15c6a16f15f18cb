"""deltastack.study: the Ray Tune grid task × model × seed, one MLflow run per trial.

Each trial is a Tune function trainable (one small model: a TorchTrainer per trial would add
a worker group for nothing); it reports every `eval_every` steps with a checkpoint, so a
killed study resumes: finished trials are kept, unfinished ones restart from their last
checkpoint. MLflow's Tune callback runs in this process (one writer for the SQLite store)
and logs each trial as a child of one study run, which also gets the table and curves.
Outputs: `results.json` (dvc metrics), `results.md` (the table: in-distribution accuracy
beside accuracy at the longest test lengths), `curves/<task>.csv` (dvc plots: accuracy by
test length, one column per model) and `claims.json` (the paper's claims against the
per-sequence comparisons, tasks/deltastack/claims.py).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core import evidence, sweep, tracking
from tasks.core.evidence import Estimate, claims_value
from tasks.core.io import Folder, atomic_path
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.deltastack.baseline import baseline_sequences
from tasks.deltastack.claims import (
    CONTEXT_FREE,
    SETS,
    Sequences,
    TaskEvidence,
    build_claims,
    task_evidence,
    units,
)
from tasks.deltastack.params import DeltaStackParams
from tasks.deltastack.train import bucket_name, buckets, train_trial

log = get_logger("paperline.deltastack.study")
STATE_FILE = "state.pt"


def fit_trial(trial: dict[str, Any], folder: Path, log: Any, *, params: dict[str, Any]) -> dict:
    """One trial of the core sweep (task, model, seed; `params` the section): trains,
    logging every `eval_every` steps and saving a resumable state in `folder`, so a trial
    of a killed study continues from its last evaluation; its last metrics as the state."""
    import torch

    settings = DeltaStackParams.model_validate(params)
    torch.set_num_threads(settings.training.torch_threads)
    progress = folder / STATE_FILE
    resume = torch.load(progress, weights_only=False) if progress.exists() else None
    last: dict[str, Any] = {}

    def report(metrics: dict[str, Any], state: dict[str, Any] | None) -> None:
        numbers = {k: v for k, v in metrics.items() if isinstance(v, int | float) and k != "step"}
        log.add(metrics["step"], numbers)
        log.flush()
        with atomic_path(progress) as temp:
            torch.save(state, temp)
        last.clear()
        last.update(metrics)

    train_trial(trial["task"], trial["model"], trial["seed"], settings, report, resume)
    numbers = {k: v for k, v in last.items() if isinstance(v, int | float)}
    return {"step": last["step"], "curve": [numbers], "resumed_from": [], "metrics": last}


def run_grid(params: DeltaStackParams, ctx: StageContext, parent_run: str) -> list[dict]:
    """Fit (or resume) the grid; one row per trial with its final metrics."""
    import ray

    gpus = params.study.gpus_per_trial if ray.cluster_resources().get("GPU", 0) else 0
    trials = [
        {"task": task, "model": model, "seed": seed}
        for task in params.tasks
        for model in params.models
        for seed in params.budget.seeds
    ]
    concurrent = params.study.max_concurrent_trials or max(
        1, int(ray.cluster_resources().get("CPU", 1) // params.study.cpus_per_trial)
    )
    results = sweep.run_trials(
        functools.partial(fit_trial, params=params.model_dump(mode="json")),
        trials,
        ctx,
        name="deltastack-study",
        names=[f"{t['task']}-{t['model']}-seed{t['seed']}" for t in trials],
        storage=ctx.scratch("ray", "tune", "deltastack"),
        experiment=params.experiment,
        parent_run=parent_run,
        sources=sorted(Path(__file__).parent.glob("*.py")),  # a code change starts afresh
        threads=params.training.torch_threads,
        resources={"cpu": params.study.cpus_per_trial, "gpu": gpus},
        max_concurrent=concurrent,
    )
    sweep.mark_finished(results)
    return [{**result.trial, **result.trained.state["metrics"]} for result in results]


def pooled_sequences(rows: list[dict], params: DeltaStackParams) -> dict[str, Sequences]:
    """Per task, each arm's per-sequence accuracies on the in-distribution set and the
    longest bucket, concatenated over seeds in seed order: position i is the same test
    sequence for every arm, the majority-answer baseline included."""
    pooled: dict[str, Sequences] = {}
    for task in params.tasks:
        arms: Sequences = {m: {s: [] for s in SETS} for m in (*params.models, "baseline")}
        for seed in params.budget.seeds:
            for model in params.models:
                (row,) = [
                    r for r in rows if (r["task"], r["model"], r["seed"]) == (task, model, seed)
                ]
                for name in SETS:
                    arms[model][name] += row[f"sequences_{name}"]
            for name, scores in baseline_sequences(task, seed, params).items():
                arms["baseline"][name] += scores
        pooled[task] = arms
    return pooled


def model_summary(own: list[dict], names: list[str]) -> dict[str, Any]:
    """One model on one task, mean over seeds: token accuracy per bucket and inside."""
    by_length = {n: round(float(np.mean([r[f"accuracy_{n}"] for r in own])), 4) for n in names}
    return {
        "in_distribution_accuracy": round(
            float(np.mean([r["accuracy_in_distribution"] for r in own])), 4
        ),
        "test_accuracy": round(float(np.mean(list(by_length.values()))), 4),
        "longest_accuracy": by_length[names[-1]],
        "by_length": by_length,
        "train_accuracy": round(float(np.mean([r["train_accuracy"] for r in own])), 4),
    }


def interval(estimate: Estimate) -> dict[str, float]:
    return {
        "estimate": round(estimate.value, 4),
        "ci_low": round(estimate.low, 4),
        "ci_high": round(estimate.high, 4),
    }


def comparison_summary(found: TaskEvidence) -> dict[str, Any]:
    """DeltaStack − DeltaNet on the longest bucket: better / worse / tie by its interval,
    "at chance" when neither arm beats the baseline there."""
    difference = found.versus.difference
    side = evidence.verdict(difference, "greater")
    answer = {"supported": "better", "contradicted": "worse", "inconclusive": "tie"}[side]
    answer = "at chance" if found.at_chance else answer
    return {
        "deltastack_minus_deltanet": interval(difference),
        "p_value": round(found.versus.p_value, 4),
        "at_chance": found.at_chance,
        "deltastack_vs_deltanet": answer,
        "deltastack_beats_deltanet": answer == "better",
    }


def summarize(
    rows: list[dict], params: DeltaStackParams
) -> tuple[dict[str, Any], list[TaskEvidence]]:
    """Mean over seeds per task, model and bucket; the per-sequence intervals against the
    baseline and between DeltaStack and DeltaNet at the longest lengths."""
    names = [bucket_name(b) for b in buckets(params.lengths.test_buckets)]
    longest = names[-1]
    sequences = pooled_sequences(rows, params)
    unit_names = units(params, longest)
    tasks: dict[str, Any] = {}
    found = []
    for task in params.tasks:
        task_found = task_evidence(task, sequences[task], unit_names, len(params.budget.seeds))
        found.append(task_found)
        baseline = sequences[task]["baseline"]
        models = {}
        for model in params.models:
            own = [r for r in rows if r["task"] == task and r["model"] == model]
            models[model] = model_summary(own, names) | {
                f"{name}_over_chance": interval(task_found.over_baseline[model][name])
                for name in SETS
            }
        entry: dict[str, Any] = {
            "chance": {name: round(float(np.mean(baseline[name])), 4) for name in SETS},
            "models": models,
        }
        if task_found.versus is not None:
            entry |= comparison_summary(task_found)
        tasks[task] = entry
    wins = [t for t, e in tasks.items() if e.get("deltastack_beats_deltanet")]
    results = {
        "preset": params.preset,
        "trials": len(rows),
        "seeds": params.budget.seeds,
        "steps": params.budget.steps,
        "in_distribution_lengths": params.lengths.in_distribution,
        "longest_bucket": longest,
        "test_sequences_per_bucket": params.budget.eval_examples * len(params.budget.seeds),
        "deltastack_beats_deltanet": len(wins),
        "tasks": tasks,
    }
    return results, found


def table_markdown(results: dict[str, Any], params: DeltaStackParams) -> str:
    longest = results["longest_bucket"]
    low, high = params.lengths.in_distribution
    header = [f"{m} {kind}" for m in params.models for kind in ("in-dist", longest)]
    lines = [
        f"# DeltaStack vs DeltaNet: accuracy in-distribution and at test lengths {longest}",
        "",
        f"Preset `{results['preset']}`: {results['steps']} steps, seeds {results['seeds']}, "
        f"train lengths {params.lengths.train_min}–{params.lengths.train_max}. Masked per-token "
        f"accuracy, mean over seeds, on in-distribution lengths {low}–{high} (own RNG stream) "
        f"and on test lengths {longest}. Chance: the majority-answer baseline on the same "
        "sequences (in-dist / longest). The paper expects DeltaStack ahead on the context-free "
        f"tasks ({', '.join(CONTEXT_FREE)}). The last column: DeltaStack − DeltaNet per-sequence "
        f"accuracy at {longest} with its 95% interval, paired over the "
        f"{results['test_sequences_per_bucket']} test sequences (all seeds); a tie when the "
        "interval holds 0, at chance when neither model beats the baseline there.",
        "",
        "| task | chance | " + " | ".join(header) + " | DeltaStack − DeltaNet |",
        "|---|---|" + "---|" * (len(header) + 1),
    ]
    for task, entry in results["tasks"].items():
        chance = entry["chance"]
        cells = [
            f"{entry['models'][m][key]:.3f}"
            for m in params.models
            for key in ("in_distribution_accuracy", "longest_accuracy")
        ]
        verdict = "—"
        if "deltastack_vs_deltanet" in entry:
            answer = {"better": "yes", "worse": "no", "tie": "tie", "at chance": "at chance"}
            gap = entry["deltastack_minus_deltanet"]
            verdict = (
                f"{answer[entry['deltastack_vs_deltanet']]} ({gap['estimate']:+.3f} "
                f"[{gap['ci_low']:+.3f}, {gap['ci_high']:+.3f}])"
            )
        lines.append(
            f"| {task} | {chance['in_distribution']:.3f} / {chance['longest']:.3f} | "
            + " | ".join(cells)
            + f" | {verdict} |"
        )
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
        results, found = summarize(rows, params)
        claims = claims_value(build_claims(found, params, results["longest_bucket"]))
        table = table_markdown(results, params)
        curves = Folder(
            {f"{task}.csv": curves_csv(entry, params) for task, entry in results["tasks"].items()}
        )
        mlflow.log_dict(results, "results.json")
        mlflow.log_dict(claims, "claims.json")
        mlflow.log_text(table, "results.md")
        for name, text in curves.items():
            mlflow.log_text(text, f"curves/{name}")
        mlflow.log_metric("deltastack_beats_deltanet", results["deltastack_beats_deltanet"])
    for task, entry in results["tasks"].items():
        if "deltastack_minus_deltanet" in entry:
            log.info(
                "deltastack %s: DeltaStack − DeltaNet at %s = %+.3f (%s)",
                task,
                results["longest_bucket"],
                entry["deltastack_minus_deltanet"]["estimate"],
                entry["deltastack_vs_deltanet"],
            )
    return {"results": results, "table": table, "curves": curves, "claims": claims}


STAGE = Stage(
    name="deltastack.study",
    run=run,
    params_key="deltastack",
    inputs={},
    outputs={
        "results": Output.metrics("models/deltastack/results.json"),
        "table": Output.in_git("models/deltastack/results.md"),
        "curves": Output.plots("models/deltastack/curves"),
        "claims": Output.claims_json("models/deltastack/claims.json"),
    },
    uses_ray=True,
    headline="models/deltastack/results.json:deltastack_beats_deltanet",
    top_plots={
        "deltastack-even-pairs": {
            "title": "even_pairs: accuracy by test length (trained on lengths 3-60)",
            "template": "linear",
            "x": "length",
            "y": {"models/deltastack/curves/even_pairs.csv": ["deltastack", "deltanet"]},
            "x_label": "test length (bucket midpoint)",
            "y_label": "masked per-token accuracy",
        },
        "deltastack-reverse-string": {
            "title": "reverse_string: accuracy by test length (trained on lengths 3-60)",
            "template": "linear",
            "x": "length",
            "y": {"models/deltastack/curves/reverse_string.csv": ["deltastack", "deltanet"]},
            "x_label": "test length (bucket midpoint)",
            "y_label": "masked per-token accuracy",
        },
        "deltastack-dyck": {
            "title": "dyck: accuracy by test length (trained on lengths 3-60)",
            "template": "linear",
            "x": "length",
            "y": {"models/deltastack/curves/dyck.csv": ["deltastack", "deltanet"]},
            "x_label": "test length (bucket midpoint)",
            "y_label": "masked per-token accuracy",
        },
        "deltastack-stack-manipulation": {
            "title": "stack_manipulation: accuracy by test length (trained on lengths 3-60)",
            "template": "linear",
            "x": "length",
            "y": {"models/deltastack/curves/stack_manipulation.csv": ["deltastack", "deltanet"]},
            "x_label": "test length (bucket midpoint)",
            "y_label": "masked per-token accuracy",
        },
    },
)
