"""kvcache.study: accuracy by task × press × compression ratio × length, and the claims.

One Ray task per (kind, length) cell of the test split loads the model once and answers the
cell's items with the full cache and with every press at every ratio (tasks/kvcache/
scoring.py). The model is kvcache.train's by default, or `kvcache.eval.model` (a local
checkpoint or a registry URI), on `kvcache.eval.device` in `dtype`. MLflow: one study run
with a child run per press (its accuracy per kind, length and ratio, and the KV bytes kept).
Outputs: every item's answer (`study.parquet`), `results.json` (dvc metrics: the full-cache
baseline per kind and length, accuracy per press and ratio, memory), `results.md`,
`accuracy_vs_ratio.csv` and `curves/<kind>.csv` (dvc plots: accuracy against the ratio, one
column per press; ratio 0 is the full cache) and `claims.json` (tasks/kvcache/claims.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core import evidence, ray_runtime, tracking
from tasks.core.io import Folder, read_json, read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Stage, StageContext
from tasks.kvcache.claims import build_claims, setting_notes
from tasks.kvcache.lm import load_causal_lm, max_positions
from tasks.kvcache.params import KvCacheParams, PressParams
from tasks.kvcache.scoring import FULL, check_positions, encode, score_items

log = get_logger("paperline.kvcache.study")
DATA = "data/processed/kvcache"
MODEL_DIR = "models/kvcache"


def arms(presses: list[str], ratios: list[float]) -> list[tuple[str, float]]:
    """The full cache, then every press at every ratio."""
    return [(FULL, 0.0)] + [(press, ratio) for press in presses for ratio in ratios]


def answer_cells(
    cells: pa.Table,
    model: str,
    items: list[dict],
    study: dict,
    device: str,
    dtype: str,
    tracking_uri: str | None,
) -> pa.Table:
    """Ray task: every arm on the items of each (kind, length) row of `cells`."""
    import torch

    torch.set_num_threads(study["torch_threads"])
    if tracking_uri:
        import mlflow

        mlflow.set_tracking_uri(tracking_uri)
    lm, tokenizer = load_causal_lm(model, device, dtype)
    settings = PressParams.model_validate(study["press"])
    results = []
    for cell in cells.to_pylist():
        rows = [r for r in items if r["kind"] == cell["kind"] and r["length"] == cell["length"]]
        encoded = encode(tokenizer, rows)
        check_positions(encoded, max_positions(lm))
        for press, ratio in arms(study["presses"], study["ratios"]):
            results += score_items(
                lm, tokenizer, encoded, press, ratio, settings, study["batch_size"]
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
        params.train.experiment,
        ctx.runtime.mlflow,
        run_name="press-study",
        inputs=[f"{DATA}/test.parquet", f"{MODEL_DIR}/lm"],
        root=ctx.root,
    ):
        mlflow.log_params(
            {
                "presses": ",".join(params.study.presses),
                "ratios": ",".join(str(r) for r in params.study.ratios),
                "lengths": ",".join(str(n) for n in lengths),
                "model": params.eval.model or f"{MODEL_DIR}/lm",
            }
        )
        mlflow.log_dict(metrics, "results.json")
        mlflow.log_dict(claims, "claims.json")
        for press in [FULL, *params.study.presses]:
            with mlflow.start_run(run_name=press, nested=True):
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
    model = params.eval.model or str(inputs["model"])
    uri = tracking.configure(ctx.runtime.mlflow, ctx.root) if model.startswith("models:/") else None
    cells = pa.Table.from_pylist([{"kind": k, "length": n} for k in kinds for n in lengths])
    log.info(
        "kvcache.study: %d items, %d cells × %d arms, model %s",
        len(test),
        cells.num_rows,
        len(arms(study.presses, study.ratios)),
        model,
    )
    refs = ray_runtime.map_table(
        cells,
        answer_cells,
        batch_size=1,
        num_workers=study.num_workers,
        model=model,
        items=test,
        study=study.model_dump(mode="json"),
        device=params.eval.device,
        dtype=params.eval.dtype,
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
    pools = read_json(inputs["tasks_metrics"])
    shape = params.train.model
    notes = setting_notes(
        f"a {shape.num_layers}-layer Llama-style model (hidden {shape.hidden_size}, "
        f"{shape.num_heads} query / {shape.num_kv_heads} KV heads)"
        if not params.eval.model
        else f"the model {params.eval.model}",
        lengths,
        study.press.centroid_window,
    )
    claims = build_claims(scores, items, study, 1 / len(pools["values"]), notes)
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
        "kvcache.eval",
        "kvcache.tasks.kinds",
        "kvcache.train.model",
        "kvcache.train.experiment",
    ),
    inputs={
        "test": f"{DATA}/test.parquet",
        "tasks_metrics": f"{DATA}/tasks_metrics.json",
        "model": f"{MODEL_DIR}/lm",
    },
    outputs={
        "answers": f"{MODEL_DIR}/study.parquet",
        "metrics": f"{MODEL_DIR}/results.json",
        "markdown": f"{MODEL_DIR}/results.md",
        "curve": f"{MODEL_DIR}/accuracy_vs_ratio.csv",
        "curves": f"{MODEL_DIR}/curves",
        "claims": f"{MODEL_DIR}/claims.json",
    },
    uses_ray=True,
    headline=f"{MODEL_DIR}/results.json:full_cache_overall",
)
