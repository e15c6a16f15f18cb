"""cmipref.evaluate: the reward model against the offline judges on the held-out truth set.

Both score the test prompts' pairs (every candidate pair with a clear truth gap).
Preference accuracy is the share of pairs whose better side (by true quality) a scorer
picks, overall and per dimension, by modality and by truth-confidence bucket (<3, =3, >3);
a judge whose two presentation orders disagree scores 0.5 on that pair, as a "both"
verdict does in the paper. Top-k: for every test prompt the reward model ranks its
candidates; the true quality of its top k is compared with a random choice (the mean over
candidates) and with the judge's own per-clip ranking.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from tasks.cmipref.features import build_bank, clips_of
from tasks.cmipref.generate import audio_file
from tasks.cmipref.judges import make_judge
from tasks.cmipref.label import combine, judge_pairs
from tasks.cmipref.params import CmiprefParams
from tasks.cmipref.reward_model import load
from tasks.cmipref.truth import confidence_bucket, pair_truth, sign
from tasks.core import tracking
from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Stage, StageContext
from tasks.core.text_encoders import make_encoder

log = get_logger("paperline.cmipref.evaluate")
MODEL, PAIRS, TRUTH, AUDIO = (
    "models/cmi_rm/model",
    "data/interim/cmipref/pairs.parquet",
    "data/interim/cmipref/truth.parquet",
    "data/interim/cmipref/audio",
)
SCORERS = ("reward_model", "judge")


def clip_rewards(
    model_folder: Path, rows: list[dict[str, Any]], params: CmiprefParams, audio_root: Path
) -> dict[str, np.ndarray]:
    """audio path → [alignment, musicality] rewards under its own prompt."""
    import torch

    model = load(model_folder)
    clips = clips_of(rows, ("audio", "reference_audio"))
    texts = [r["prompt"] for r in rows] + [r["lyrics"] for r in rows if r["lyrics"]]
    bank = build_bank(
        clips,
        texts,
        audio_root,
        params.generate.sample_rate,
        params.generate.seconds,
        model.config.n_mels,
        make_encoder(params.train.text_encoder),
    )
    index = bank.prompt_indices(rows)
    clip_rows = np.array([bank.clip_row[r["audio"]] for r in rows])
    mels, texts_t = torch.as_tensor(bank.mels), torch.as_tensor(bank.texts)
    with torch.no_grad():
        prompt = (
            texts_t[index["text"]],
            texts_t[index["lyrics"]],
            mels[index["reference"]],
            torch.as_tensor(index["present"]),
        )
        rewards = model(mels[clip_rows], *prompt).numpy()
    return {row["audio"]: rewards[i] for i, row in enumerate(rows)}


def candidates_with_prompts(pairs: list[dict[str, Any]], truth: list[dict[str, Any]]):
    """Every test clip with its prompt's columns."""
    prompts = {p["prompt_id"]: p for p in pairs}
    return [
        {
            **{
                k: prompts[t["prompt_id"]][k]
                for k in ("prompt", "lyrics", "reference_audio", "modality")
            },
            **t,
        }
        for t in truth
        if t["prompt_id"] in prompts
    ]


def credit(margin: float, true: int, consistent: bool = True) -> float:
    """1 for the truth's side, 0 for the other, 0.5 for a tie or an order-inconsistent call."""
    if not consistent or sign(margin) == 0:
        return 0.5
    return float(sign(margin) == true)


def accuracy_table(
    pairs: list[dict[str, Any]],
    truth: Mapping[str, Mapping[str, Any]],
    margins: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> dict[str, dict[str, dict[str, float]]]:
    """scorer → breakdown → accuracy; margins: scorer → pair → {quality, musicality,
    alignment, consistent}."""
    result: dict[str, dict[str, dict[str, float]]] = {}
    for scorer, by_pair in margins.items():
        hits: dict[str, list[float]] = defaultdict(list)
        for pair in pairs:
            true, margin = truth[pair["pair_id"]], by_pair[pair["pair_id"]]
            for dim in ("quality", "musicality", "alignment"):
                if true[dim]:
                    name = "overall" if dim == "quality" else dim
                    hits[name].append(credit(margin[dim], true[dim], margin["consistent"]))
            overall = credit(margin["quality"], true["quality"], margin["consistent"])
            hits[f"modality {pair['modality']}"].append(overall)
            hits[f"confidence {confidence_bucket(true['confidence'])}"].append(overall)
        result[scorer] = {
            name: {"accuracy": round(float(np.mean(v)), 4), "pairs": len(v)}
            for name, v in sorted(hits.items())
        }
    return result


def top_k_gain(
    candidates: list[dict[str, Any]], score: Mapping[str, float], k_values: list[int]
) -> dict[str, float]:
    """Mean true quality of the top k by `score`, minus the mean over all candidates (what
    a random pick of k gets in expectation), averaged over prompts."""
    by_prompt: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for candidate in candidates:
        by_prompt[candidate["prompt_id"]].append(candidate)
    result = {}
    for k in k_values:
        gains = []
        for clips in by_prompt.values():
            ranked = sorted(clips, key=lambda c: -score[c["audio"]])
            gains.append(
                np.mean([c["quality"] for c in ranked[:k]]) - np.mean([c["quality"] for c in clips])
            )
        result[f"top_{k}"] = round(float(np.mean(gains)), 4)
    return result


def judge_clip_scores(
    candidates: list[dict[str, Any]], params: CmiprefParams, audio_root: Path
) -> dict[str, float]:
    """The first judge's whole-clip musicality + alignment, z-scored per prompt."""
    judge = make_judge(params.label.judges[0], params.generate.sample_rate)
    if not hasattr(judge, "clip_scores"):
        return {}
    raw = {}
    for c in candidates:
        reference = audio_file(audio_root, c["reference_audio"]) if c["reference_audio"] else None
        raw[c["audio"]] = judge.clip_scores(
            audio_file(audio_root, c["audio"]), c["prompt"], reference
        )
    scores = {}
    for prompt_id in {c["prompt_id"] for c in candidates}:
        mine = [c["audio"] for c in candidates if c["prompt_id"] == prompt_id]
        values = np.array([raw[a] for a in mine])
        z = (values - values.mean(0)) / (values.std(0) + 1e-9)
        scores.update({a: float(z[i].sum()) for i, a in enumerate(mine)})
    return scores


def metric_key(name: str) -> str:
    """An MLflow-safe metric name: `judge confidence <3` → `judge_confidence_lt3`."""
    for symbol, word in (("<", "lt"), (">", "gt"), ("=", "eq"), ("+", "_"), (" ", "_")):
        name = name.replace(symbol, word)
    return name


def report_markdown(metrics: dict[str, Any]) -> str:
    table = metrics["accuracy"]
    names = sorted({n for scorer in table.values() for n in scorer})
    lines = [
        "# CMI reward model vs the offline judges (held-out truth set)",
        "",
        "Preference accuracy on the test prompts' pairs; an order-inconsistent judge "
        "verdict scores 0.5.",
        "",
        "| breakdown | pairs | reward model | judge |",
        "|---|---|---|---|",
    ]
    for name in names:
        rm, judge = table["reward_model"].get(name, {}), table["judge"].get(name, {})
        lines.append(
            f"| {name} | {rm.get('pairs', judge.get('pairs', 0))} | "
            f"{rm.get('accuracy', '—')} | {judge.get('accuracy', '—')} |"
        )
    lines += [
        "",
        "Top-k selection: true quality gained over a random pick (mean over prompts).",
        "",
        "| k | reward model | judge |",
        "|---|---|---|",
    ]
    for key, value in metrics["top_k"]["reward_model"].items():
        lines.append(f"| {key} | {value} | {metrics['top_k']['judge'].get(key, '—')} |")
    lines += ["", f"Higher overall: **{metrics['higher_overall']}**.", ""]
    return "\n".join(lines)


def accuracy_csv(table: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["entry", "breakdown", "scorer", "accuracy"])
    for scorer, rows in table.items():
        for name, row in rows.items():
            writer.writerow([f"{name} · {scorer}", name, scorer, row["accuracy"]])
    return buffer.getvalue()


def run(params: CmiprefParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import mlflow

    all_pairs = read_parquet(inputs["pairs"])
    test = all_pairs.filter(pc.equal(all_pairs["split"], "test"))
    pairs = test.to_pylist()
    truth_table = read_parquet(inputs["truth"])
    truth = pair_truth(test, truth_table)
    candidates = candidates_with_prompts(pairs, truth_table.to_pylist())
    log.info("cmipref.evaluate: %d test pairs, %d candidates", len(pairs), len(candidates))
    rewards = clip_rewards(inputs["model"], candidates, params, inputs["audio"])
    rm_margins = {}
    for pair in pairs:
        delta = rewards[pair["audio_a"]] - rewards[pair["audio_b"]]
        rm_margins[pair["pair_id"]] = {
            "alignment": float(delta[0]),
            "musicality": float(delta[1]),
            "quality": float(delta.mean()),
            "consistent": True,
        }
    judged = combine(
        judge_pairs(
            test,
            params.label.judges,
            params.generate.sample_rate,
            inputs["audio"],
            params.label.batch_size,
        )
    )
    judge_margins = {
        pair_id: {
            "alignment": (v["alignment_ab"] + v["alignment_ba"]) / 2,
            "musicality": (v["musicality_ab"] + v["musicality_ba"]) / 2,
            "quality": v["overall"],
            "consistent": v["consistent"],
        }
        for pair_id, v in judged.items()
    }
    table = accuracy_table(pairs, truth, {"reward_model": rm_margins, "judge": judge_margins})
    overall = {s: table[s]["overall"]["accuracy"] for s in SCORERS}
    k_values = params.evaluate.top_k
    rm_scores = {audio: float(r.mean()) for audio, r in rewards.items()}
    judge_scores = judge_clip_scores(candidates, params, inputs["audio"])
    top_k = {
        "reward_model": top_k_gain(candidates, rm_scores, k_values),
        "judge": top_k_gain(candidates, judge_scores, k_values) if judge_scores else {},
    }
    metrics = {
        "test_pairs": len(pairs),
        "test_prompts": len({p["prompt_id"] for p in pairs}),
        "accuracy": table,
        "overall_accuracy": overall,
        "top_k": top_k,
        "higher_overall": "tie"
        if len(set(overall.values())) == 1
        else max(SCORERS, key=lambda s: overall[s]),
    }
    markdown = report_markdown(metrics)
    with tracking.start_run(
        params.evaluate.experiment,
        ctx.runtime.mlflow,
        run_name="cmi-rm-evaluate",
        inputs=[MODEL, PAIRS, TRUTH],
        root=ctx.root,
    ):
        mlflow.log_metrics(
            {
                metric_key(f"{scorer} {name}"): row["accuracy"]
                for scorer, rows in table.items()
                for name, row in rows.items()
            }
        )
        mlflow.log_metrics(
            {f"{s}_gain_{k}": v for s, gains in top_k.items() for k, v in gains.items()}
        )
        mlflow.log_text(markdown, "cmipref_evaluation.md")
    log.info(
        "cmipref.evaluate: accuracy reward model %.3f, judge %.3f; top-1 gain %s vs %s",
        overall["reward_model"],
        overall["judge"],
        top_k["reward_model"].get("top_1"),
        top_k["judge"].get("top_1"),
    )
    return {"metrics": metrics, "report": markdown, "accuracy": accuracy_csv(table)}


STAGE = Stage(
    name="cmipref.evaluate",
    run=run,
    params_key="cmipref",
    params=(
        "cmipref.generate.sample_rate",
        "cmipref.generate.seconds",
        "cmipref.label",
        "cmipref.train.text_encoder",
        "cmipref.evaluate",
    ),
    inputs={"model": MODEL, "pairs": PAIRS, "truth": TRUTH, "audio": AUDIO},
    outputs={
        "metrics": "data/processed/cmipref/eval_metrics.json",
        "report": "data/processed/cmipref/evaluation.md",
        "accuracy": "data/processed/cmipref/accuracy.csv",
    },
    uses_ray=True,
    headline="data/processed/cmipref/eval_metrics.json:overall_accuracy.reward_model",
)
