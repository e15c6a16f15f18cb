"""aoeb.evaluate: every encoder on every assembled task's test split, MTEB-style; the
leaderboard with its intervals and baselines; the claims.

For each (encoder, task) the test queries are ranked (tasks/aoeb/encoders.search), the run
kept as a TREC file (`paperline aoeb score` re-scores it) and scored with MTEB's metrics
(tasks/aoeb/metrics.py); an encoder that cannot run a task (a text encoder on a
text-to-image task) is listed as skipped with the reason. Two baselines sit beside the
encoders (tasks/aoeb/chance.py): `random`, a seeded random ranking of each query's
candidates, run and scored like an encoder on every task, and `chance`, its expectation.
nDCG@10 per task, and pooled over the text tasks' queries, carries a 95% bootstrap interval
over the test queries (tasks.core.evidence). claims.json (tasks/aoeb/claims.py) tests the
fine-tuned embedder against its base, paired over test queries, and each encoder against
each task's chance level. This stage is the only reader of the test split; every choice
(the fine-tune's checkpoint) is made on dev upstream. Outputs: an MTEB-style result JSON and
TREC run per pair, the leaderboard as dvc metrics, a table, a plot and claims.json; the
leaderboard and the claims also go to MLflow.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from tasks.aoeb.benchmark import RetrievalTask, read_tasks
from tasks.aoeb.chance import chance_by_query, random_run
from tasks.aoeb.claims import chance_claims, finetune_claims, query_mean
from tasks.aoeb.encoders import Run, UnsupportedTask, default_cache, make_encoder, search
from tasks.aoeb.metrics import MAIN_K, per_query_scores, retrieval_scores
from tasks.aoeb.params import AoebParams
from tasks.aoeb.trec import run_text
from tasks.core import evidence, tracking
from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.core.text_encoders import model_folder

log = get_logger("paperline.aoeb.evaluate")
TASKS, TOKENIZER = "data/processed/aoeb/tasks", "models/tokenizer"
SPLIT = "test"  # read here only, once
RANDOM, CHANCE = "random", "chance"  # the baseline rows
PerQuery = dict[str, float]  # test query id -> nDCG@10
Rows = dict[str, dict[str, PerQuery]]  # row (encoder, random) -> task -> per query


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


def per_query_ndcg(qrels: Mapping[str, Mapping[str, int]], run: Run) -> PerQuery:
    """nDCG@10 of each query of the run that has a relevant document (MTEB's scored set)."""
    query_ids, values = per_query_scores(qrels, run, [MAIN_K])
    return dict(zip(query_ids, values[f"ndcg_at_{MAIN_K}"].tolist(), strict=True))


def text_task_names(tasks: Sequence[RetrievalTask]) -> list[str]:
    return [t.declaration.name for t in tasks if t.declaration.modality == "text"]


def board_entry(by_task: Mapping[str, float], tasks: Sequence[RetrievalTask]) -> dict[str, Any]:
    """nDCG@10 by task and capability, its mean over the tasks run and over the text tasks."""
    capability = {t.declaration.name: t.declaration.capability for t in tasks}
    by_capability: dict[str, list[float]] = {}
    for name, score in by_task.items():
        by_capability.setdefault(capability[name], []).append(score)
    own_text = [by_task[name] for name in text_task_names(tasks) if name in by_task]
    return {
        "by_task": {k: round(v, 4) for k, v in sorted(by_task.items())},
        "by_capability": {k: round(fmean(v), 4) for k, v in sorted(by_capability.items())},
        "mean": round(fmean(by_task.values()), 4) if by_task else None,
        "mean_text_tasks": round(fmean(own_text), 4) if own_text else None,
    }


def leaderboard(
    results: dict[str, dict[str, float]],
    skipped: dict[str, dict[str, str]],
    tasks: list[RetrievalTask],
    params: AoebParams,
) -> dict[str, Any]:
    """Per encoder: nDCG@10 by task and capability, its mean over the tasks it ran and over
    the text tasks every text encoder runs; the fine-tune against its base."""
    board: dict[str, Any] = {
        encoder: {**board_entry(by_task, tasks), "skipped": skipped.get(encoder, {})}
        for encoder, by_task in results.items()
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


def query_estimates(per_query: Rows) -> dict[str, dict[str, evidence.Estimate]]:
    """Per row and task: mean nDCG@10 over the test queries with its bootstrap interval
    (none for a task with fewer than two queries)."""
    return {
        row: {
            task: query_mean(list(values.values()))
            for task, values in by_task.items()
            if len(values) >= 2
        }
        for row, by_task in per_query.items()
    }


def pooled_estimate(
    by_task: Mapping[str, PerQuery], text_tasks: Sequence[str]
) -> evidence.Estimate | None:
    """Mean nDCG@10 over every test query of the text tasks the row ran (each query once)."""
    values = [v for task in text_tasks if task in by_task for v in by_task[task].values()]
    return query_mean(values) if len(values) >= 2 else None


def interval_fields(
    estimates: Mapping[str, evidence.Estimate], pooled: evidence.Estimate | None
) -> dict[str, Any]:
    """A row's intervals: per task, and over the text tasks' queries pooled."""
    return {
        "intervals": {t: [round(e.low, 4), round(e.high, 4)] for t, e in sorted(estimates.items())},
        "queries": {t: e.n for t, e in sorted(estimates.items())},
        "pooled_text_tasks": None
        if pooled is None
        else {
            "ndcg_at_10": round(pooled.value, 4),
            "ci_low": round(pooled.low, 4),
            "ci_high": round(pooled.high, 4),
            "n": pooled.n,
        },
    }


def chance_levels(chance: Mapping[str, PerQuery]) -> dict[str, float]:
    """Each task's chance level: the mean over its test queries of their expected nDCG@10."""
    return {task: fmean(values.values()) for task, values in chance.items() if values}


def with_baselines(
    board: dict[str, Any],
    per_query: Rows,
    estimates: Mapping[str, Mapping[str, evidence.Estimate]],
    random_scores: Mapping[str, float],
    chance: Mapping[str, float],
    tasks: list[RetrievalTask],
) -> dict[str, Any]:
    """The board with intervals on every encoder (`estimates`: `query_estimates` of
    `per_query`), the random row and the chance row."""
    text_tasks = text_task_names(tasks)
    for encoder, entry in board["encoders"].items():
        pooled = pooled_estimate(per_query.get(encoder, {}), text_tasks)
        entry.update(interval_fields(estimates.get(encoder, {}), pooled))
    random_pooled = pooled_estimate(per_query.get(RANDOM, {}), text_tasks)
    board[RANDOM] = {
        **board_entry(random_scores, tasks),
        **interval_fields(estimates.get(RANDOM, {}), random_pooled),
    }
    board[CHANCE] = board_entry(chance, tasks)
    return board


def _cell(value: float | None, interval: Sequence[float] | None = None) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def _pooled_cell(entry: Mapping[str, Any]) -> str:
    pooled = entry.get("pooled_text_tasks")
    if not pooled:
        return "—"
    return _cell(pooled["ndcg_at_10"], (pooled["ci_low"], pooled["ci_high"]))


def leaderboard_table(board: dict[str, Any], tasks: list[RetrievalTask]) -> str:
    names = [t.declaration.name for t in tasks]
    lines = [
        "# AOEB leaderboard (nDCG@10 on the test splits, [95% CI over test queries])",
        "",
        "| encoder | "
        + " | ".join(names)
        + " | mean | mean (text tasks) | pooled (text-task queries) |",
        "|---" * (len(names) + 4) + "|",
    ]
    rows = dict(board["encoders"])
    rows |= {name: board[name] for name in (RANDOM, CHANCE) if name in board}
    for encoder, entry in rows.items():
        intervals = entry.get("intervals", {})
        cells = [_cell(entry["by_task"].get(n), intervals.get(n)) for n in names]
        cells += [_cell(entry["mean"]), _cell(entry["mean_text_tasks"]), _pooled_cell(entry)]
        lines.append(f"| {encoder} | " + " | ".join(cells) + " |")
    if CHANCE in board:
        lines += [
            "",
            "random: each query's candidates in a seeded random order; chance: its expected "
            "nDCG@10 (exact, no interval). Intervals: BCa bootstrap over the test queries.",
        ]
    if versus := board["finetuned_vs_base"]:
        lines += [
            "",
            f"{versus['finetuned']} vs its base {versus['base']} over the text "
            f"tasks: {versus['finetuned_mean_text_tasks']:.4f} vs "
            f"{versus['base_mean_text_tasks']:.4f} ({versus['gain']:+.4f}).",
        ]
        if paired := versus.get("paired_pooled"):
            lines.append(
                f"Paired over {paired['n']} test queries pooled: {paired['difference']:+.4f} "
                f"[{paired['ci_low']:+.4f}, {paired['ci_high']:+.4f}], permutation p "
                f"{paired['p_value']:.4f}, {paired['verdict']}."
            )
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
    rows = dict(board["encoders"])
    rows |= {name: board[name] for name in (RANDOM, CHANCE) if name in board}
    for encoder, entry in rows.items():
        for capability, score in entry["by_capability"].items():
            writer.writerow([f"{capability} · {encoder}", score])
    return buffer.getvalue()


def paired_summary(claims: Sequence[evidence.Claim]) -> dict[str, Any] | None:
    """The pooled fine-tune-vs-base claim, as the leaderboard shows it."""
    for claim in claims:
        if claim.id == "aoeb.finetuned_beats_base.pooled":
            return {
                "difference": round(claim.estimate, 4),
                "ci_low": round(claim.ci_low, 4),
                "ci_high": round(claim.ci_high, 4),
                "p_value": round(claim.p_value or 0.0, 4),
                "n": claim.n,
                "verdict": claim.verdict,
            }
    return None


class Scorer:
    """Scores runs on the test split: MTEB's metrics, per-query nDCG@10 and the files."""

    def __init__(self, k_values: Sequence[int]) -> None:
        self.k_values = list(k_values)
        self.files: dict[str, Any] = {}
        self.per_query: Rows = {}

    def score(self, row: str, task: RetrievalTask, ranked: Run) -> float:
        name, qrels = task.declaration.name, task.qrels[SPLIT]
        scores = retrieval_scores(qrels, ranked, self.k_values)
        self.per_query.setdefault(row, {})[name] = per_query_ndcg(qrels, ranked)
        self.files[f"{row}/{name}.json"] = mteb_result(task, row, scores)
        self.files[f"{row}/{name}.trec"] = run_text(ranked, row)
        log.info("aoeb.evaluate: %s on %s: nDCG@10 %.4f", row, name, scores["main_score"])
        return scores["main_score"]


def run(params: AoebParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import mlflow

    settings = params.evaluate
    tasks = read_tasks(inputs["tasks"])
    scratch = ctx.scratch("aoeb", "models")
    tracking.configure(ctx.runtime.mlflow, ctx.root)

    def folder_of(reference: str) -> Path:
        folder = model_folder(reference, scratch, ctx.root)
        return with_tokenizer(folder, inputs["tokenizer"], scratch)

    scorer = Scorer(settings.k_values)
    results: dict[str, dict[str, float]] = {}
    skipped: dict[str, dict[str, str]] = {}
    depth = max(settings.k_values)
    for encoder_params in settings.encoders:
        encoder = make_encoder(encoder_params, folder_of)
        results[encoder.name] = {}
        for task in tasks:
            name = task.declaration.name
            try:
                ranked = search(
                    encoder,
                    task,
                    SPLIT,
                    depth,
                    index=settings.index,
                    cache_dir=default_cache(ctx.root),
                )
            except UnsupportedTask as reason:
                skipped.setdefault(encoder.name, {})[name] = str(reason)
                continue
            results[encoder.name][name] = scorer.score(encoder.name, task, ranked)
    random_scores = {
        task.declaration.name: scorer.score(
            RANDOM, task, random_run(task, SPLIT, depth, settings.random.seed)
        )
        for task in tasks
    }
    chance = chance_levels({t.declaration.name: chance_by_query(t, SPLIT) for t in tasks})
    board = leaderboard(results, skipped, tasks, params)
    estimates = query_estimates(scorer.per_query)
    board = with_baselines(board, scorer.per_query, estimates, random_scores, chance, tasks)
    claims = evaluation_claims(scorer.per_query, estimates, chance, tasks, params)
    if board["finetuned_vs_base"]:
        board["finetuned_vs_base"]["paired_pooled"] = paired_summary(claims)
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
        mlflow.log_dict(evidence.claims_value(claims), "claims.json")
    for claim in claims:
        log.info(
            "aoeb.evaluate: %s: %.4f [%.4f, %.4f] n=%d %s",
            claim.id,
            claim.estimate,
            claim.ci_low,
            claim.ci_high,
            claim.n,
            claim.verdict,
        )
    return {
        "results": Folder(scorer.files),
        "leaderboard": board,
        "table": table,
        "plot": leaderboard_csv(board),
        "claims": evidence.claims_value(claims),
    }


def evaluation_claims(
    per_query: Rows,
    estimates: Mapping[str, Mapping[str, evidence.Estimate]],
    chance: Mapping[str, float],
    tasks: list[RetrievalTask],
    params: AoebParams,
) -> list[evidence.Claim]:
    """The fine-tune against its base, then every encoder (not the random row) against
    each task's chance level."""
    settings = params.evaluate
    capability = {t.declaration.name: t.declaration.capability for t in tasks}
    by_encoder = {e.name: estimates[e.name] for e in settings.encoders if e.name in estimates}
    return finetune_claims(
        per_query,
        settings.compare.finetuned,
        settings.compare.base,
        text_task_names(tasks),
        settings.claims.min_queries,
        [params.finetune.seed],
        settings.compare.baseline,
    ) + chance_claims(by_encoder, chance, capability, settings.claims.min_queries)


STAGE = Stage(
    name="aoeb.evaluate",
    run=run,
    params_key="aoeb",
    params=("aoeb.evaluate", "aoeb.finetune.seed"),
    inputs={
        "tasks": TASKS,
        "tokenizer": TOKENIZER,
        "base": "models/mmbert/decay",
        "embedder": "models/embedder/model",
        "image_tower": "models/embedder/image_tower",
    },
    outputs={
        "results": "data/processed/aoeb/results",
        "leaderboard": Output.metrics("data/processed/aoeb/leaderboard.json"),
        "table": Output.in_git("data/processed/aoeb/leaderboard.md"),
        "plot": Output.in_git("data/processed/aoeb/leaderboard.csv"),
        "claims": Output.claims_json("data/processed/aoeb/claims.json"),
    },
    headline="data/processed/aoeb/leaderboard.json:finetuned_vs_base.gain",
    top_plots={
        "aoeb-leaderboard": {
            "title": "AOEB: nDCG@10 by capability and encoder (test splits)",
            "template": "bar_horizontal",
            "x": "ndcg_at_10",
            "y": {"data/processed/aoeb/leaderboard.csv": "entry"},
            "x_label": "nDCG@10",
            "y_label": "capability · encoder",
        }
    },
)
