"""kvcache.study: accuracy by task × press × compression ratio × length, and the claims.

One Ray task per test item, longest first so the workers finish together; each worker loads
the core LLM once (`llm.local`: llm-import's SmolLM2-135M-Instruct by default, or any
checkpoint folder or registry URI, on any device) and answers an item with one prefill,
the full cache and every press at every ratio decoded from it (tasks/kvcache/scoring.py).
MLflow: one study run with a child run per press (its accuracy per kind, length and ratio).
Outputs: every item's answer (`study.parquet`), `results.json` (dvc metrics: the full-cache
baseline per kind and length, accuracy per press and ratio, memory), `results.md`,
`accuracy_vs_ratio.csv` and `curves/<kind>.csv` (dvc plots: accuracy against the ratio, one
column per press; ratio 0 is the full cache) and `claims.json` (tasks/kvcache/claims.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core import evidence, ray_runtime, tracking
from tasks.core.causal_lm import load_causal_lm, max_positions
from tasks.core.io import Folder, read_parquet
from tasks.core.llm_params import SERVICE_KEYS, LocalBackendParams
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.kvcache.claims import build_claims, setting_notes
from tasks.kvcache.compressed import use_masked_attention
from tasks.kvcache.needles import copy_one_needle
from tasks.kvcache.params import KvCacheParams, PressParams
from tasks.kvcache.scoring import FULL, answer_item, arm_groups, check_positions, encode

log = get_logger("paperline.kvcache.study")
DATA = "data/processed/kvcache"
MODEL_DIR = "models/kvcache"
LLM_FOLDER = "models/llm/checkpoint"


def load_model(local: LocalBackendParams, root: str, tracking_uri: str | None) -> tuple:
    """The core LLM (`llm.local`), its attention able to mask a head's evicted positions."""
    spec = local.model
    if not spec.startswith("models:/") and not Path(spec).is_absolute():
        spec = str(Path(root) / spec)
    model, tokenizer = load_causal_lm(spec, local.device, local.dtype, tracking_uri)
    use_masked_attention(model)
    return model, tokenizer


@functools.cache
def worker_model(local: str, root: str, tracking_uri: str | None) -> tuple:
    """The model, loaded once per Ray worker process (the worker answers many items)."""
    return load_model(LocalBackendParams.model_validate_json(local), root, tracking_uri)


def answer_items(
    items: pa.Table, local: str, root: str, study: dict, tracking_uri: str | None
) -> pa.Table:
    """Ray task: every arm on each item of `items` (one prefill per item)."""
    import torch

    settings = LocalBackendParams.model_validate_json(local)
    torch.set_num_threads(settings.threads or study["torch_threads"])
    model, tokenizer = worker_model(local, root, tracking_uri)
    press = PressParams.model_validate(study["press"])
    groups = arm_groups(study["presses"], study["ratios"], study["arms_per_batch"])
    results = []
    for row in items.to_pylist():
        started = time.perf_counter()
        item = encode(tokenizer, row)
        check_positions(item, max_positions(model), study["answer_slack"])
        results += answer_item(model, tokenizer, item, groups, press, study["answer_slack"])
        log.info(
            "%s: %d tokens, %.1f s", row["id"], len(item.context), time.perf_counter() - started
        )
    return pa.Table.from_pylist(results)


def cell_means(table: pa.Table) -> list[dict[str, Any]]:
    frame = table.select(["kind", "length", "press", "ratio", "score", "kv_bytes", "full_kv_bytes"])
    grouped = frame.group_by(["kind", "length", "press", "ratio"]).aggregate(
        [("score", "mean"), ("score", "count"), ("kv_bytes", "sum"), ("full_kv_bytes", "sum")]
    )
    rows = grouped.to_pylist()
    return sorted(rows, key=lambda r: (r["kind"], r["length"], r["press"], r["ratio"]))


def pooled(rows: list[dict], keys: tuple[str, ...]) -> dict[tuple, float]:
    """Mean score over items, pooled over everything but `keys` (cells hold equal counts)."""
    sums: dict[tuple, list[float]] = {}
    for row in rows:
        entry = sums.setdefault(tuple(row[k] for k in keys), [0.0, 0.0])
        entry[0] += row["score_mean"] * row["score_count"]
        entry[1] += row["score_count"]
    return {key: total / count for key, (total, count) in sums.items()}


def curve_csv(means: dict[tuple, float], presses: list[str], ratios: list[float]) -> str:
    """ratio, then one column per press; ratio 0 is the full cache for every press."""
    full = means[(FULL, 0.0)]
    lines = ["ratio," + ",".join(presses)]
    lines.append("0.0," + ",".join(f"{full:.4f}" for _ in presses))
    for ratio in ratios:
        lines.append(f"{ratio}," + ",".join(f"{means[(p, ratio)]:.4f}" for p in presses))
    return "\n".join(lines) + "\n"


def results_markdown(
    by_press: dict[tuple, float],
    by_kind: dict[tuple, float],
    baseline: dict[str, float],
    kinds: list[str],
    presses: list[str],
    ratios: list[float],
    memory: dict[str, float],
) -> str:
    lines = [
        "# kvcache study: RULER string_match_all on the test split",
        "",
        "Full-cache baseline per kind and length: "
        + ", ".join(f"{cell} {value:.3f}" for cell, value in baseline.items()),
        "",
        "| press | ratio | " + " | ".join(kinds) + " | all | KV kept |",
        "|---|---|" + "---|" * (len(kinds) + 2),
    ]
    rows = [(FULL, 0.0)] + [(p, r) for p in presses for r in ratios]
    for press, ratio in rows:
        cells = " | ".join(f"{by_kind[(press, ratio, k)]:.3f}" for k in kinds)
        kept = memory[f"{ratio}"]
        lines.append(
            f"| {press} | {ratio} | {cells} | {by_press[(press, ratio)]:.3f} | {kept:.2f} |"
        )
    return "\n".join(lines) + "\n"


def log_runs(
    params: KvCacheParams,
    ctx: StageContext,
    rows: list[dict],
    metrics: dict,
    claims: dict,
    lengths: list[int],
) -> None:
    import mlflow

    with tracking.start_run(
        params.experiment,
        ctx.runtime.mlflow,
        run_name="press-study",
        inputs=[f"{DATA}/test.parquet", LLM_FOLDER],
        root=ctx.root,
    ) as study_run:
        mlflow.log_params(
            {
                "presses": ",".join(params.study.presses),
                "ratios": ",".join(str(r) for r in params.study.ratios),
                "lengths": ",".join(str(n) for n in lengths),
                "model": ctx.llm.local.model,
            }
        )
        mlflow.log_dict(metrics, "results.json")
        mlflow.log_dict(claims, "claims.json")
        for press in [FULL, *params.study.presses]:
            with tracking.start_run(
                params.experiment,
                ctx.runtime.mlflow,
                run_name=press,
                parent=study_run.info.run_id,
                root=ctx.root,
            ):
                mlflow.log_metrics(
                    {
                        f"accuracy_{r['kind']}_{r['length']}_r{r['ratio']}": r["score_mean"]
                        for r in rows
                        if r["press"] == press
                    }
                )


def run(params: KvCacheParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    study = params.study
    test = read_parquet(inputs["test"]).to_pylist()
    kinds = [k for k in params.tasks.kinds if any(r["kind"] == k for r in test)]
    lengths = sorted({r["length"] for r in test})
    local = ctx.llm.local
    uri = (
        tracking.configure(ctx.runtime.mlflow, ctx.root)
        if local.model.startswith("models:/")
        else None
    )
    arms = sum(len(g) for g in arm_groups(study.presses, study.ratios, study.arms_per_batch))
    log.info(
        "kvcache.study: %d items × %d arms (one prefill per item), model %s",
        len(test),
        arms,
        local.model,
    )
    longest_first = sorted(test, key=lambda row: -row["tokens"])  # balances the workers
    refs = ray_runtime.map_table(
        pa.Table.from_pylist(longest_first),
        answer_items,
        batch_size=1,
        num_workers=study.num_workers,
        local=local.model_dump_json(),
        root=str(ctx.root),
        study=study.model_dump(mode="json"),
        tracking_uri=uri,
    )
    answers = ray_runtime.collect(refs)
    rows = cell_means(answers)
    scores: dict[tuple[str, float], dict[str, float]] = {}
    for row in answers.select(["id", "press", "ratio", "score"]).to_pylist():
        scores.setdefault((row["press"], row["ratio"]), {})[row["id"]] = row["score"]
    items: dict[str, dict[int, list[str]]] = {}
    for row in test:
        items.setdefault(row["kind"], {}).setdefault(row["length"], []).append(row["id"])
    notes = setting_notes(local.model, lengths, study.press.centroid_window)
    nulls = {kind: copy_one_needle(kind, params.tasks) for kind in kinds}
    claims = build_claims(scores, items, study, nulls, notes)
    claims_json = evidence.claims_value(claims)
    by_press = pooled(rows, ("press", "ratio"))
    by_kind = pooled(rows, ("press", "ratio", "kind"))
    baseline = {
        f"{r['kind']}@{r['length']}": round(r["score_mean"], 4) for r in rows if r["press"] == FULL
    }
    full_bytes = sum(r["full_kv_bytes_sum"] for r in rows if r["press"] == FULL)
    memory = {
        f"{ratio}": round(
            sum(r["kv_bytes_sum"] for r in rows if r["ratio"] == ratio and r["press"] != FULL)
            / (full_bytes * len(study.presses)),
            4,
        )
        for ratio in study.ratios
    }
    memory["0.0"] = 1.0
    metrics = {
        "items": len(test),
        "full_cache": baseline,
        "accuracy": {
            press: {f"{ratio}": round(by_press[(press, ratio)], 4) for ratio in study.ratios}
            for press in study.presses
        },
        "full_cache_overall": round(by_press[(FULL, 0.0)], 4),
        "kv_kept_share": memory,
        "full_kv_bytes_per_item": int(full_bytes / len(test)),
        "cells": [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in rows
        ],
    }
    log_runs(params, ctx, rows, metrics, claims_json, lengths)
    for claim in claims:
        log.info(
            "kvcache.study: %s = %.4f [%.4f, %.4f] over %d %s: %s",
            claim.id,
            claim.estimate,
            claim.ci_low,
            claim.ci_high,
            claim.n,
            claim.unit,
            claim.verdict,
        )
    curves = Folder(
        {
            f"{kind}.csv": curve_csv(
                {key[:2]: value for key, value in by_kind.items() if key[2] == kind},
                study.presses,
                study.ratios,
            )
            for kind in kinds
        }
    )
    return {
        "answers": answers,
        "metrics": metrics,
        "markdown": results_markdown(
            by_press, by_kind, baseline, kinds, study.presses, study.ratios, memory
        ),
        "curve": curve_csv(by_press, study.presses, study.ratios),
        "curves": curves,
        "claims": claims_json,
    }


STAGE = Stage(
    name="kvcache.study",
    run=run,
    params_key="kvcache",
    params=(
        "kvcache.study",
        "kvcache.tasks.kinds",
        "kvcache.tasks.keys",
        "kvcache.tasks.values",
        "kvcache.tasks.queries",
        "kvcache.experiment",
        *SERVICE_KEYS,
    ),
    inputs={"test": f"{DATA}/test.parquet", "model": LLM_FOLDER},
    outputs={
        "answers": f"{MODEL_DIR}/study.parquet",
        "metrics": Output.metrics(f"{MODEL_DIR}/results.json"),
        "markdown": Output.in_git(f"{MODEL_DIR}/results.md"),
        "curve": Output.plots(f"{MODEL_DIR}/accuracy_vs_ratio.csv"),
        "curves": Output.plots(f"{MODEL_DIR}/curves"),
        "claims": Output.claims_json("models/kvcache/claims.json"),
    },
    uses_ray=True,
    headline=f"{MODEL_DIR}/results.json:full_cache_overall",
    top_plots={
        "kvcache-accuracy": {
            "title": (
                "ManifoldKV study: needle accuracy against the share of the KV cache evicted "
                "(all tasks and lengths)"
            ),
            "template": "linear",
            "x": "ratio",
            "y": {
                "models/kvcache/accuracy_vs_ratio.csv": [
                    "random",
                    "streamingllm",
                    "knorm",
                    "snapkv",
                    "keydiff",
                    "manifoldkv",
                    "manifoldkv_l1",
                    "manifoldkv_linf",
                    "manifoldkv_cosine",
                    "windowed_manifoldkv",
                ]
            },
            "x_label": "compression ratio (share of the KV cache evicted; 0 = full cache)",
            "y_label": "RULER string_match_all",
        }
    },
)
