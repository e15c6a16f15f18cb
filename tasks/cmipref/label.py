"""cmipref.label: CMIPref-Pseudo, the pool's pairs labelled by judges, position-consistently.

Every judge hears every pool pair twice, A then B and B then A (Ray tasks, `batch_size`
pairs per task). Per dimension (musicality, alignment) a judge's two margins are put in A's
frame; the pair is kept only when the combined overall verdict has the same side in both
orders (the position-consistency check), and a dimension whose orders disagree gets 0.5.
Margins are scaled by each judge's median absolute margin over the pool, then averaged
over judges. Confidence (1–5) grows with the overall margin (in medians: > 0.5, > 1, > 2)
plus one when every judge and both dimensions agree. Targets are label-smoothed:
(1 − ε)·hard + ε/2. The truth is read only to report the labels' accuracy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.cmipref.generate import audio_file
from tasks.cmipref.judges import Listening, make_judge
from tasks.cmipref.params import CmiprefParams, JudgeParams
from tasks.cmipref.truth import confidence_bucket, pair_truth, sign
from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import collect, map_table
from tasks.core.stage import Output, Stage, StageContext

log = get_logger("paperline.cmipref.label")
PAIRS, TRUTH, AUDIO = (
    "data/interim/cmipref/pairs.parquet",
    "data/interim/cmipref/truth.parquet",
    "data/interim/cmipref/audio",
)


def listenings(pair: Mapping[str, Any], audio_root: Path) -> tuple[Listening, Listening]:
    """The pair presented A-first and B-first."""
    reference = audio_file(audio_root, pair["reference_audio"]) if pair["reference_audio"] else None
    a, b = audio_file(audio_root, pair["audio_a"]), audio_file(audio_root, pair["audio_b"])
    common = {
        "pair_id": pair["pair_id"],
        "prompt": pair["prompt"],
        "lyrics": pair["lyrics"],
        "reference": reference,
    }
    return (
        Listening(**common, first=a, second=b, swapped=False),
        Listening(**common, first=b, second=a, swapped=True),
    )


def judge_batch(
    batch: pa.Table, judges: Sequence[dict], sample_rate: int, audio_root: str
) -> pa.Table:
    """One Ray task (map_table): each judge's margins, both orders, in A's frame."""
    rows: dict[str, list[Any]] = defaultdict(list)
    pairs = batch.to_pylist()
    heard = [listening for pair in pairs for listening in listenings(pair, Path(audio_root))]
    for index, settings in enumerate(judges):
        verdicts = make_judge(JudgeParams(**settings), sample_rate).compare_many(heard)
        for pair, ab, ba in zip(pairs, verdicts[0::2], verdicts[1::2], strict=True):
            rows["pair_id"].append(pair["pair_id"])
            rows["judge"].append(index)
            rows["musicality_ab"].append(ab.musicality)
            rows["musicality_ba"].append(-ba.musicality)
            rows["alignment_ab"].append(ab.alignment)
            rows["alignment_ba"].append(-ba.alignment)
    return pa.table(rows)


def judge_pairs(
    pairs: pa.Table,
    judges: Sequence[JudgeParams],
    sample_rate: int,
    audio_root: Path,
    batch_size: int,
) -> pa.Table:
    settings = [j.model_dump() for j in judges]
    return collect(
        map_table(
            pairs,
            judge_batch,
            batch_size=batch_size,
            jit_warmup=True,
            judges=settings,
            sample_rate=sample_rate,
            audio_root=str(audio_root),
        )
    )


def combine(margins: pa.Table) -> dict[str, dict[str, Any]]:
    """pair_id → per-order A-frame margins per dimension (median-scaled, judge-averaged),
    the overall margin, order consistency, and the judges' agreement."""
    columns = ("musicality_ab", "musicality_ba", "alignment_ab", "alignment_ba")
    by_judge: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in margins.to_pylist():
        by_judge[row["judge"]].append(row)
    scaled: dict[str, list[dict[str, float]]] = defaultdict(list)
    for rows in by_judge.values():
        scale = {c: float(np.median([abs(r[c]) for r in rows])) or 1.0 for c in columns}
        for r in rows:
            scaled[r["pair_id"]].append({c: r[c] / scale[c] for c in columns})
    combined = {}
    for pair_id, per_judge in scaled.items():
        mean = {c: float(np.mean([j[c] for j in per_judge])) for c in columns}
        overall_ab = (mean["musicality_ab"] + mean["alignment_ab"]) / 2
        overall_ba = (mean["musicality_ba"] + mean["alignment_ba"]) / 2
        votes = [sign(j[c]) for j in per_judge for c in columns]
        combined[pair_id] = {
            **mean,
            "overall": (overall_ab + overall_ba) / 2,
            "consistent": sign(overall_ab) == sign(overall_ba) != 0,
            "unanimous": len(set(votes)) == 1 and votes[0] != 0,
        }
    return combined


def dimension_target(forward: float, backward: float, smoothing: float) -> float:
    """P(A better) for one dimension: smoothed hard label, 0.5 when the orders disagree."""
    if sign(forward) != sign(backward) or sign(forward) == 0:
        return 0.5
    hard = 1.0 if forward > 0 else 0.0
    return (1 - smoothing) * hard + smoothing / 2


def confidence(verdict: Mapping[str, Any]) -> int:
    size = abs(verdict["overall"])
    return 1 + int(size > 0.5) + int(size > 1) + int(size > 2) + int(verdict["unanimous"])


def label_rows(pairs: pa.Table, combined: Mapping[str, Mapping[str, Any]], smoothing: float):
    """The kept (position-consistent) pairs with their pseudo-labels."""
    rows = []
    for pair in pairs.to_pylist():
        verdict = combined[pair["pair_id"]]
        if not verdict["consistent"]:
            continue
        hard = 1.0 if verdict["overall"] > 0 else 0.0
        rows.append(
            {
                "pair_id": pair["pair_id"],
                "prompt_id": pair["prompt_id"],
                **{
                    k: pair[k]
                    for k in (
                        "prompt",
                        "lyrics",
                        "reference_audio",
                        "audio_a",
                        "audio_b",
                        "modality",
                    )
                },
                "preference": (1 - smoothing) * hard + smoothing / 2,
                "preference_musicality": dimension_target(
                    verdict["musicality_ab"], verdict["musicality_ba"], smoothing
                ),
                "preference_alignment": dimension_target(
                    verdict["alignment_ab"], verdict["alignment_ba"], smoothing
                ),
                "confidence": confidence(verdict),
            }
        )
    return rows


def accuracy(hits: list[float]) -> float | None:
    return round(float(np.mean(hits)), 4) if hits else None


def label_quality(
    rows: list[dict[str, Any]],
    combined: Mapping[str, Mapping[str, Any]],
    truth: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Pseudo-label accuracy against the generator's truth: kept pairs (overall and per
    dimension, by confidence), and every judged pair before the consistency filter."""

    def hit(target: float, true: int) -> float | None:
        if true == 0 or target == 0.5:
            return None
        return float((target > 0.5) == (true > 0))

    kept: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        true = truth[row["pair_id"]]
        for name, column, dim in (
            ("overall", "preference", "quality"),
            ("musicality", "preference_musicality", "musicality"),
            ("alignment", "preference_alignment", "alignment"),
        ):
            if (h := hit(row[column], true[dim])) is not None:
                kept[name].append(h)
                if name == "overall":
                    kept[f"confidence {confidence_bucket(row['confidence'])}"].append(h)
    unfiltered = [
        float(sign(v["overall"]) == truth[p]["quality"])
        for p, v in combined.items()
        if truth[p]["quality"]
    ]
    dropped = [
        float(sign(v["overall"]) == truth[p]["quality"])
        for p, v in combined.items()
        if truth[p]["quality"] and not v["consistent"]
    ]
    return {
        "judged_pairs": len(combined),
        "kept_pairs": len(rows),
        "position_consistency": round(len(rows) / max(1, len(combined)), 4),
        "accuracy": {name: accuracy(hits) for name, hits in sorted(kept.items())},
        "pairs_scored": {name: len(hits) for name, hits in sorted(kept.items())},
        "accuracy_before_consistency_filter": accuracy(unfiltered),
        "accuracy_of_dropped_pairs": accuracy(dropped),
    }


def run(params: CmiprefParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    settings = params.label
    pairs = read_parquet(inputs["pairs"])
    pool = pairs.filter(pc.equal(pairs["split"], "pool"))
    log.info(
        "cmipref.label: %d pool pairs, %d judge(s) × 2 orders", pool.num_rows, len(settings.judges)
    )
    margins = judge_pairs(
        pool, settings.judges, params.generate.sample_rate, inputs["audio"], settings.batch_size
    )
    combined = combine(margins)
    rows = label_rows(pool, combined, settings.label_smoothing)
    metrics = label_quality(rows, combined, pair_truth(pool, read_parquet(inputs["truth"])))
    metrics["judges"] = [j.backend for j in settings.judges]
    metrics["modalities"] = {
        m: sum(r["modality"] == m for r in rows) for m in sorted({r["modality"] for r in rows})
    }
    log.info(
        "cmipref.label: kept %d of %d (position-consistent %.0f%%), accuracy %s",
        len(rows),
        pool.num_rows,
        100 * metrics["position_consistency"],
        metrics["accuracy"].get("overall"),
    )
    return {"labels": pa.Table.from_pylist(rows), "metrics": metrics}


STAGE = Stage(
    name="cmipref.label",
    run=run,
    params_key="cmipref",
    params=("cmipref.generate.sample_rate", "cmipref.label"),
    inputs={"pairs": PAIRS, "truth": TRUTH, "audio": AUDIO},
    outputs={
        "labels": "data/processed/cmipref/pseudo_labels.parquet",
        "metrics": Output.metrics("data/processed/cmipref/label_metrics.json"),
    },
    uses_ray=True,
    headline="data/processed/cmipref/label_metrics.json:accuracy.overall",
)
