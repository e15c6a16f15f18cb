"""aoeb.evaluate: every encoder on every assembled task, MTEB-style, and the leaderboard.

For each (encoder, task) the test queries are ranked (tasks/aoeb/encoders.search), the run
kept as a TREC file (`paperline aoeb score` re-scores it) and scored with MTEB's metrics
(tasks/aoeb/metrics.py); an encoder that cannot run a task (a text encoder on a
text-to-image task) is listed as skipped with the reason. Outputs: an MTEB-style result
JSON per pair, the leaderboard (capability × encoder, main score nDCG@10) as dvc metrics,
a table and a plot, the fine-tuned embedder next to its base, and the same in MLflow.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from statistics import fmean
from typing import Any

from tasks.aoeb.benchmark import RetrievalTask, read_tasks
from tasks.aoeb.encoders import UnsupportedTask, default_cache, make_encoder, search
from tasks.aoeb.metrics import retrieval_scores
from tasks.aoeb.params import AoebParams
from tasks.aoeb.trec import run_text
from tasks.core import tracking
from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.stage import Stage, StageContext
from tasks.core.text_encoders import model_folder

log = get_logger("paperline.aoeb.evaluate")
TASKS, TOKENIZER = "data/processed/aoeb/tasks", "models/tokenizer"


def with_tokenizer(folder: Path, tokenizer: Path, scratch: Path) -> Path:
    """A model folder transformers can load with its tokenizer: the folder itself, or (for
    the mlm checkpoints, which keep the tokenizer apart) a scratch copy joined with it."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if (folder / "tokenizer.json").exists() or "model_type" not in config:
        return folder  # complete, or not a transformers model (an image tower)
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    joined = scratch / f"{folder.name}-{digest}"
    shutil.rmtree(joined, ignore_errors=True)
    joined.mkdir(parents=True)
    for source in (folder, tokenizer):
        for path in source.iterdir():
            if path.is_file() and path.name != "README.md":
                shutil.copyfile(path, joined / path.name)
    return joined


def mteb_result(task: RetrievalTask, encoder: str, scores: dict[str, float]) -> dict[str, Any]:
    """MTEB's TaskResult layout (no timings: the file must not change on a re-run)."""
    declaration = task.declaration
    return {
        "task_name": declaration.name,
        "model_name": encoder,
        "capability": declaration.capability,
        "modality": declaration.modality,
        "scores": {
            "test": [
                {
                    **{k: round(v, 6) for k, v in scores.items()},
                    "hf_subset": "default",
                    "languages": ["eng-Latn"],
                }
            ]
        },
    }


def leaderboard(
    results: dict[str, dict[str, float]],
    skipped: dict[str, dict[str, str]],
    tasks: list[RetrievalTask],
    params: AoebParams,
) -> dict[str, Any]:
    """Per encoder: nDCG@10 by task and capability, its mean over the tasks it ran and over
    the text tasks every text encoder runs; the fine-tune against its base."""
    capability = {t.declaration.name: t.declaration.capability for t in tasks}
    text_tasks = [t.declaration.name for t in tasks if t.declaration.modality == "text"]
    board: dict[str, Any] = {}
    for encoder, by_task in results.items():
        by_capability: dict[str, list[float]] = {}
        for name, score in by_task.items():
            by_capability.setdefault(capability[name], []).append(score)
        own_text = [by_task[name] for name in text_tasks if name in by_task]
        board[encoder] = {
            "by_task": {k: round(v, 4) for k, v in sorted(by_task.items())},
            "by_capability": {k: round(fmean(v), 4) for k, v in sorted(by_capability.items())},
            "mean": round(fmean(by_task.values()), 4) if by_task else None,
            "mean_text_tasks": round(fmean(own_text), 4) if own_text else None,
            "skipped": skipped.get(encoder, {}),
        }
    comparison = params.evaluate.compare
    fine, base = board.get(comparison.finetuned), board.get(comparison.base)
    versus = None
    if fine and base:
        versus = {
            "finetuned": comparison.finetuned,
            "base": comparison.base,
            "finetuned_mean_text_tasks": fine["mean_text_tasks"],
            "base_mean_text_tasks": base["mean_text_tasks"],
            "gain": round(fine["mean_text_tasks"] - base["mean_text_tasks"], 4),
        }
    return {"main_metric": "ndcg_at_10", "encoders": board, "finetuned_vs_base": versus}


def leaderboard_table(board: dict[str, Any], tasks: list[RetrievalTask]) -> str:
    names = [t.declaration.name for t in tasks]
    lines = [
        "# AOEB leaderboard (nDCG@10, test splits)",
        "",
        "| encoder | " + " | ".join(names) + " | mean | mean (text tasks) |",
        "|---" * (len(names) + 3) + "|",
    ]
    for encoder, entry in board["encoders"].items():
        cells = [entry["by_task"].get(n) for n in names]
        cells += [entry["mean"], entry["mean_text_tasks"]]
        lines.append(
            f"| {encoder} | " + " | ".join("—" if c is None else f"{c:.4f}" for c in cells) + " |"
        )
    if versus := board["finetuned_vs_base"]:
        lines += [
            "",
            f"{versus['finetuned']} vs its base {versus['base']} over the text "
            f"tasks: {versus['finetuned_mean_text_tasks']:.4f} vs "
            f"{versus['base_mean_text_tasks']:.4f} ({versus['gain']:+.4f}).",
        ]
    notes = [
        f"- {encoder} skipped {task}: {why}"
        for encoder, entry in board["encoders"].items()
        for task, why in entry["skipped"].items()
    ]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def leaderboard_csv(board: dict[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["entry", "ndcg_at_10"])
    for encoder, entry in board["encoders"].items():
        for capability, score in entry["by_capability"].items():
            writer.writerow([f"{capability} · {encoder}", score])
    return buffer.getvalue()


def run(params: AoebParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import mlflow

    settings = params.evaluate
    tasks = read_tasks(inputs["tasks"])
    scratch = ctx.scratch("aoeb", "models")
    tracking.configure(ctx.runtime.mlflow, ctx.root)

    def folder_of(reference: str) -> Path:
        folder = model_folder(reference, scratch, ctx.root)
        return with_tokenizer(folder, inputs["tokenizer"], scratch)

    files: dict[str, Any] = {}
    results: dict[str, dict[str, float]] = {}
    skipped: dict[str, dict[str, str]] = {}
    for encoder_params in settings.encoders:
        encoder = make_encoder(encoder_params, folder_of)
        results[encoder.name] = {}
        for task in tasks:
            name = task.declaration.name
            try:
                ranked = search(
                    encoder,
                    task,
                    "test",
                    max(settings.k_values),
                    index=settings.index,
                    cache_dir=default_cache(ctx.root),
                )
            except UnsupportedTask as reason:
                skipped.setdefault(encoder.name, {})[name] = str(reason)
                continue
            scores = retrieval_scores(task.qrels["test"], ranked, settings.k_values)
            results[encoder.name][name] = scores["main_score"]
            files[f"{encoder.name}/{name}.json"] = mteb_result(task, encoder.name, scores)
            files[f"{encoder.name}/{name}.trec"] = run_text(ranked, encoder.name)
            log.info(
                "aoeb.evaluate: %s on %s: nDCG@10 %.4f", encoder.name, name, scores["main_score"]
            )
    board = leaderboard(results, skipped, tasks, params)
    table = leaderboard_table(board, tasks)
    with tracking.start_run(
        settings.experiment,
        ctx.runtime.mlflow,
        run_name="aoeb-leaderboard",
        inputs=[TASKS, *settings.lineage_inputs],
        root=ctx.root,
    ):
        for encoder, entry in board["encoders"].items():
            if entry["mean"] is not None:
                mlflow.log_metric(f"{encoder}.mean_ndcg_at_10", entry["mean"])
        mlflow.log_dict(board, "leaderboard.json")
        mlflow.log_text(table, "leaderboard.md")
    if versus := board["finetuned_vs_base"]:
        log.info(
            "aoeb.evaluate: %s %.4f vs base %s %.4f over the text tasks",
            versus["finetuned"],
            versus["finetuned_mean_text_tasks"],
            versus["base"],
            versus["base_mean_text_tasks"],
        )
    return {
        "results": Folder(files),
        "leaderboard": board,
        "table": table,
        "plot": leaderboard_csv(board),
    }


STAGE = Stage(
    name="aoeb.evaluate",
    run=run,
    params_key="aoeb",
    params=("aoeb.evaluate",),
    inputs={
        "tasks": TASKS,
        "tokenizer": TOKENIZER,
        "base": "models/mmbert/decay",
        "embedder": "models/embedder/model",
        "image_tower": "models/embedder/image_tower",
    },
    outputs={
        "results": "data/processed/aoeb/results",
        "leaderboard": "data/processed/aoeb/leaderboard.json",
        "table": "data/processed/aoeb/leaderboard.md",
        "plot": "data/processed/aoeb/leaderboard.csv",
    },
    headline="data/processed/aoeb/leaderboard.json:finetuned_vs_base.gain",
)
