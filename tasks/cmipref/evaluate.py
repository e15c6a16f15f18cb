"""cmipref.evaluate: the reward model against the offline judges on the held-out truth set.

Both score the test prompts' pairs (every candidate pair with a clear truth gap); the test
prompts are checked to be unseen in pretraining, fine-tuning and dev. Preference accuracy
is the share of pairs whose better side (by true quality) a scorer picks, overall and per
dimension, by modality, by truth-confidence bucket (<3, =3, >3; the annotators' analogue)
and by the judge's own confidence bucket; a judge whose two presentation orders disagree
scores 0.5 on that pair, as a "both" verdict does in the paper. Every interval resamples
prompts (tasks/cmipref/significance.py). The reward model is compared with each judge
paired over prompts. Top-k: for every test prompt the reward model ranks its candidates;
the true quality of its top k is compared with a random choice (the mean over candidates)
and with the judge's own per-clip ranking. The claims go to claims.json
(tasks/cmipref/claims.py).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.cmipref import claims
from tasks.cmipref.features import build_bank, clips_of
from tasks.cmipref.generate import audio_file
from tasks.cmipref.judges import make_judge
from tasks.cmipref.label import combine, confidence, judge_pairs
from tasks.cmipref.params import CmiprefParams, JudgeParams
from tasks.cmipref.reward_model import load
from tasks.cmipref.significance import (
    DIMENSIONS,
    Credits,
    accuracy_estimate,
    compare,
    comparison_fields,
    gain_fields,
    mean_over_prompts,
    prompt_accuracies,
    prompt_credits,
    prompt_gains,
    rate_fields,
)
from tasks.cmipref.truth import pair_truth
from tasks.core import evidence, tracking
from tasks.core.errors import InputError
from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import collect, map_table
from tasks.core.stage import Output, Stage, StageContext
from tasks.core.text_encoders import make_encoder

log = get_logger("paperline.cmipref.evaluate")
MODEL, PAIRS, TRUTH, AUDIO, LABELS = (
    "models/cmi_rm/model",
    "data/interim/cmipref/pairs.parquet",
    "data/interim/cmipref/truth.parquet",
    "data/interim/cmipref/audio",
    "data/processed/cmipref/pseudo_labels.parquet",
)
CLIPS_PER_TASK = 40  # whole clips a judge scores per Ray task (top-k ranking)
DISTILLATION = "cmipref.rm_beats_judge"
SCORERS = ("reward_model", "judge")
Estimates = dict[str, dict[str, evidence.Estimate | None]]  # scorer → breakdown → interval
Comparisons = dict[str, dict[str, tuple[evidence.Comparison | None, int]]]  # judge → dim → …
Gains = dict[int, tuple[list[float], evidence.Estimate | None]]  # k → per-prompt gains, mean


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


def accuracy_estimates(credits: Credits) -> Estimates:
    return {
        scorer: {name: accuracy_estimate(by_prompt) for name, by_prompt in breakdowns.items()}
        for scorer, breakdowns in credits.items()
    }


def accuracy_table(credits: Credits, estimates: Estimates) -> dict[str, dict[str, Any]]:
    """scorer → breakdown → {accuracy, ci_low, ci_high, pairs, prompts}: pooled over pairs,
    the interval resampling prompts."""
    return {
        scorer: {
            name: rate_fields(by_prompt, estimates[scorer][name])
            for name, by_prompt in breakdowns.items()
        }
        for scorer, breakdowns in credits.items()
    }


def judge_comparisons(credits: Credits, judges: Sequence[str]) -> Comparisons:
    """judge → dimension → (reward model − judge paired over prompts, prompts compared)."""
    result: Comparisons = {}
    for judge in judges:
        result[judge] = {}
        for dim in DIMENSIONS:
            a, b = prompt_accuracies(credits, "reward_model", judge, dim)
            result[judge][dim] = (compare(a, b), len(a))
    return result


def top_k_gains(
    candidates: list[dict[str, Any]], score: Mapping[str, float], k_values: Sequence[int]
) -> Gains:
    """k → per-prompt gains of the top k by `score` over a random pick, and their mean."""
    result: Gains = {}
    for k in k_values:
        gains = list(prompt_gains(candidates, score, k).values())
        result[k] = (gains, mean_over_prompts(gains))
    return result


def top_k_gain(
    candidates: list[dict[str, Any]], score: Mapping[str, float], k_values: list[int]
) -> dict[str, dict[str, Any]]:
    """top_k → the mean over prompts of (true quality of the top k by `score`) − (mean over
    all candidates, what a random pick of k gets in expectation), with its interval."""
    gains = top_k_gains(candidates, score, k_values)
    return {f"top_{k}": gain_fields(*gains[k]) for k in k_values}


def top_k_versus(
    candidates: list[dict[str, Any]],
    score: Mapping[str, float],
    baseline: Mapping[str, float],
    k_values: Sequence[int],
) -> dict[str, dict[str, Any]]:
    """top_k → `score`'s top-k gain minus `baseline`'s, paired over prompts."""
    result = {}
    for k in k_values:
        ours, theirs = prompt_gains(candidates, score, k), prompt_gains(candidates, baseline, k)
        a, b = list(ours.values()), [theirs[p] for p in ours]
        result[f"top_{k}"] = comparison_fields(compare(a, b), len(a))
    return result


def score_clips(
    batch: pa.Table, judge: dict[str, Any], sample_rate: int, audio_root: str
) -> pa.Table:
    """One Ray task (map_table): a judge's whole-clip (musicality, alignment) scores."""
    scorer = make_judge(JudgeParams(**judge), sample_rate)
    root = Path(audio_root)
    rows = batch.to_pylist()
    asked = [
        (
            audio_file(root, r["audio"]),
            r["prompt"],
            audio_file(root, r["reference_audio"]) if r["reference_audio"] else None,
        )
        for r in rows
    ]
    scores = scorer.clip_scores_many(asked)
    return pa.table(
        {
            "audio": [r["audio"] for r in rows],
            "musicality": [s[0] for s in scores],
            "alignment": [s[1] for s in scores],
        }
    )


def judge_clip_scores(
    candidates: list[dict[str, Any]], params: CmiprefParams, audio_root: Path
) -> dict[str, float]:
    """The first judge's whole-clip musicality + alignment, z-scored per prompt (empty for
    a judge that only compares pairs)."""
    judge = params.label.judges[0]
    if not hasattr(make_judge(judge, params.generate.sample_rate), "clip_scores_many"):
        return {}
    columns = ("prompt_id", "audio", "prompt", "reference_audio")
    table = pa.Table.from_pylist([{k: c[k] for k in columns} for c in candidates])
    scored = collect(
        map_table(
            table,
            score_clips,
            batch_size=CLIPS_PER_TASK,
            jit_warmup=True,
            judge=judge.model_dump(),
            sample_rate=params.generate.sample_rate,
            audio_root=str(audio_root),
        )
    ).to_pylist()
    raw = {row["audio"]: (row["musicality"], row["alignment"]) for row in scored}
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


def held_out_check(test: pa.Table, labels: pa.Table, pairs: pa.Table) -> dict[str, int]:
    """Test prompts must be unseen in training: none among the pseudo-labelled pairs'
    prompts (pretraining) or the truth-labelled split's (fine-tuning and dev)."""
    tested = set(test.column("prompt_id").to_pylist())
    finetune = pairs.filter(pc.equal(pairs["split"], "finetune"))
    trained = set(labels.column("prompt_id").to_pylist()) | set(
        finetune.column("prompt_id").to_pylist()
    )
    if shared := sorted(tested & trained):
        raise InputError(
            f"cmipref.evaluate: test prompts {', '.join(shared[:5])} also trained or tuned "
            "the reward model; regenerate the splits (dvc repro cmipref-generate)"
        )
    return {"test_prompts": len(tested), "training_prompts": len(trained), "shared": 0}


def judge_margins(verdicts: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """pair → a judge's A-frame margins (both orders averaged) and its order consistency."""
    return {
        pair_id: {
            "alignment": (v["alignment_ab"] + v["alignment_ba"]) / 2,
            "musicality": (v["musicality_ab"] + v["musicality_ba"]) / 2,
            "quality": v["overall"],
            "consistent": v["consistent"],
        }
        for pair_id, v in verdicts.items()
    }


def judge_verdicts(judged: pa.Table, count: int) -> dict[str, dict[str, dict[str, Any]]]:
    """`judge`: the judges combined as for the pseudo labels; with several, each alone too."""
    verdicts = {"judge": combine(judged)}
    if count > 1:
        for index in range(count):
            verdicts[f"judge_{index}"] = combine(judged.filter(pc.equal(judged["judge"], index)))
    return verdicts


def judge_names(params: CmiprefParams) -> dict[str, str]:
    backends = [j.backend for j in params.label.judges]
    names = {"judge": " + ".join(backends)}
    if len(backends) > 1:
        names.update({f"judge_{i}": b for i, b in enumerate(backends)})
    return names


def build_claims(
    comparisons: Comparisons,
    estimates: Estimates,
    rm_gains: Gains,
    names: Mapping[str, str],
    pairs: Mapping[str, int],
    candidates_per_prompt: int,
    seeds: list[int],
) -> list[evidence.Claim]:
    """The distillation claim per judge, overall (the combined judge's is primary) and per
    dimension; the top-k gain per k; accuracy against chance (overall, musicality) as
    checks; each only where there were at least two prompts to resample."""
    found = []
    for judge, name in names.items():
        suffix = "" if judge == "judge" else judge.removeprefix("judge")
        for dim, (comparison, _) in comparisons[judge].items():
            if comparison is None:
                continue
            claim_id = f"cmipref.rm_beats_judge{suffix}" + ("" if dim == "overall" else f".{dim}")
            primary = judge == "judge" and dim == "overall"
            found.append(
                claims.distillation(
                    comparison, name, pairs.get(dim, 0), claim_id, seeds, dim, primary
                )
            )
    for k, (_, estimate) in rm_gains.items():
        if estimate is not None:
            found.append(claims.top_k(estimate, k, candidates_per_prompt, seeds))
    for dim in ("overall", "musicality"):
        if (estimate := estimates["reward_model"].get(dim)) is not None:
            found.append(claims.accuracy(estimate, dim, pairs[dim]))
    return found


def cell(row: Mapping[str, Any] | None, value: str = "accuracy") -> str:
    """`0.712 [0.65, 0.77]`, or `0.712` without an interval, or — when absent."""
    if not row or row.get(value) is None:
        return "—"
    if row.get("ci_low") is None:
        return f"{row[value]:.3f}"
    return f"{row[value]:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


BREAKDOWNS = ("overall", "musicality", "alignment", "modality", "confidence", "judge confidence")


def breakdown_order(name: str) -> tuple[int, str]:
    """Overall, the dimensions, then modality, truth-confidence and judge-confidence buckets."""
    group = next(i for i, g in enumerate(BREAKDOWNS) if name == g or name.startswith(g + " "))
    return group, name


def report_markdown(metrics: dict[str, Any], claim_rows: Sequence[Any]) -> str:
    table = metrics["accuracy"]
    names = sorted({n for scorer in table.values() for n in scorer}, key=breakdown_order)
    judges = [s for s in table if s != "reward_model"]
    lines = [
        "# CMI reward model vs the offline judges (held-out truth set)",
        "",
        f"{metrics['test_pairs']} pairs from {metrics['test_prompts']} test prompts, none of "
        "them seen in training or tuning. Preference accuracy with a 95% interval that "
        "resamples prompts (pairs of one prompt are not independent); an order-inconsistent "
        "judge verdict scores 0.5. `confidence` is the truth's (the annotators' analogue), "
        "`judge confidence` the judge's own (as in CMIPref-Pseudo).",
        "",
        "| breakdown | pairs | prompts | reward model | " + " | ".join(judges) + " |",
        "|---|---|---|---|" + "---|" * len(judges),
    ]
    for name in names:
        rm = table["reward_model"].get(name, {})
        cells = " | ".join(cell(table[j].get(name)) for j in judges)
        lines.append(
            f"| {name} | {rm.get('pairs', 0)} | {rm.get('prompts', 0)} | {cell(rm)} | {cells} |"
        )
    lines += [
        "",
        "Reward model − judge, paired over prompts (mean of per-prompt accuracies):",
        "",
        "| judge | dimension | difference [95% CI] | p | prompts |",
        "|---|---|---|---|---|",
    ]
    for judge, dims in metrics["versus_judge"].items():
        for dim, row in dims.items():
            lines.append(
                f"| {judge} | {dim} | {cell(row, 'difference')} | {row['p_value']} | "
                f"{row['prompts']} |"
            )
    lines += [
        "",
        "Top-k selection: true quality gained over a random pick (mean over prompts).",
        "",
        "| k | reward model | judge | reward model − judge |",
        "|---|---|---|---|",
    ]
    for key, row in metrics["top_k"]["reward_model"].items():
        judge = metrics["top_k"]["judge"].get(key)
        versus = metrics["top_k_versus_judge"].get(key)
        gains = [cell(row, "gain"), cell(judge, "gain"), cell(versus, "difference")]
        lines.append(f"| {key} | " + " | ".join(gains) + " |")
    overall = metrics["versus_judge"]["judge"]["overall"]
    noise = "inside" if metrics["verdicts"].get(DISTILLATION) == "inconclusive" else "outside"
    lines += [
        "",
        f"Higher overall: **{metrics['higher_overall']}** (reward model − judge "
        f"{cell(overall, 'difference')}: {noise} the noise).",
        "",
        "## Claims",
        "",
        "| claim | estimate [95% CI] | n | verdict |",
        "|---|---|---|---|",
    ]
    for claim in claim_rows:
        lines.append(
            f"| {claim.id} | {claim.estimate:.3f} [{claim.ci_low:.3f}, {claim.ci_high:.3f}] | "
            f"{claim.n} {claim.unit} | {claim.verdict} |"
        )
    return "\n".join([*lines, ""])


def accuracy_csv(table: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["entry", "breakdown", "scorer", "accuracy", "ci_low", "ci_high", "prompts"])
    for scorer, rows in table.items():
        for name, row in rows.items():
            writer.writerow(
                [
                    f"{name} · {scorer}",
                    name,
                    scorer,
                    row["accuracy"],
                    row["ci_low"],
                    row["ci_high"],
                    row["prompts"],
                ]
            )
    return buffer.getvalue()


def reward_margins(
    pairs: Sequence[Mapping[str, Any]], rewards: Mapping[str, np.ndarray]
) -> dict[str, dict[str, Any]]:
    """pair → the reward model's A − B rewards: alignment, musicality and their mean."""
    margins = {}
    for pair in pairs:
        delta = rewards[pair["audio_a"]] - rewards[pair["audio_b"]]
        margins[pair["pair_id"]] = {
            "alignment": float(delta[0]),
            "musicality": float(delta[1]),
            "quality": float(delta.mean()),
            "consistent": True,
        }
    return margins


def measure(
    pairs: list[dict[str, Any]],
    truth: Mapping[str, Mapping[str, Any]],
    margins: Mapping[str, Mapping[str, Mapping[str, Any]]],
    judge_confidence: Mapping[str, int],
) -> tuple[Credits, Estimates, Comparisons]:
    """Per-prompt credits, their accuracy intervals, and the reward model against each judge."""
    credits = prompt_credits(pairs, truth, margins, judge_confidence)
    judges = [scorer for scorer in margins if scorer != "reward_model"]
    return credits, accuracy_estimates(credits), judge_comparisons(credits, judges)


def run(params: CmiprefParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import mlflow

    all_pairs = read_parquet(inputs["pairs"])
    test = all_pairs.filter(pc.equal(all_pairs["split"], "test"))
    held_out = held_out_check(test, read_parquet(inputs["labels"]), all_pairs)
    pairs = test.to_pylist()
    truth_table = read_parquet(inputs["truth"])
    truth = pair_truth(test, truth_table)
    candidates = candidates_with_prompts(pairs, truth_table.to_pylist())
    log.info("cmipref.evaluate: %d test pairs, %d candidates", len(pairs), len(candidates))
    rewards = clip_rewards(inputs["model"], candidates, params, inputs["audio"])
    judged = judge_pairs(
        test,
        params.label.judges,
        params.generate.sample_rate,
        inputs["audio"],
        params.label.batch_size,
    )
    verdicts = judge_verdicts(judged, len(params.label.judges))
    margins = {
        "reward_model": reward_margins(pairs, rewards),
        **{name: judge_margins(v) for name, v in verdicts.items()},
    }
    judge_confidence = {p: confidence(v) for p, v in verdicts["judge"].items()}
    credits, estimates, comparisons = measure(pairs, truth, margins, judge_confidence)
    table = accuracy_table(credits, estimates)
    overall = {s: table[s]["overall"]["accuracy"] for s in SCORERS}
    k_values = params.evaluate.top_k
    rm_scores = {audio: float(r.mean()) for audio, r in rewards.items()}
    rm_gains = top_k_gains(candidates, rm_scores, k_values)
    judge_scores = judge_clip_scores(candidates, params, inputs["audio"])
    found = build_claims(
        comparisons,
        estimates,
        rm_gains,
        judge_names(params),
        {dim: table["reward_model"].get(dim, {}).get("pairs", 0) for dim in DIMENSIONS},
        round(len(candidates) / held_out["test_prompts"]),
        [params.train.seed],
    )
    metrics = {
        "test_pairs": len(pairs),
        "test_prompts": held_out["test_prompts"],
        "held_out": held_out,
        "accuracy": table,
        "overall_accuracy": overall,
        "versus_judge": {
            judge: {dim: comparison_fields(*pair) for dim, pair in dims.items()}
            for judge, dims in comparisons.items()
        },
        "top_k": {
            "reward_model": {f"top_{k}": gain_fields(*rm_gains[k]) for k in k_values},
            "judge": top_k_gain(candidates, judge_scores, k_values) if judge_scores else {},
        },
        "top_k_versus_judge": (
            top_k_versus(candidates, rm_scores, judge_scores, k_values) if judge_scores else {}
        ),
        "higher_overall": "tie"
        if len(set(overall.values())) == 1
        else max(SCORERS, key=lambda s: overall[s]),
        "verdicts": {claim.id: claim.verdict for claim in found},
    }
    markdown = report_markdown(metrics, found)
    claims_json = evidence.claims_value(found)
    with tracking.start_run(
        params.evaluate.experiment,
        ctx.runtime.mlflow,
        run_name="cmi-rm-evaluate",
        inputs=[MODEL, PAIRS, TRUTH, LABELS],
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
            {
                f"{s}_gain_{k}": row["gain"]
                for s, gains in metrics["top_k"].items()
                for k, row in gains.items()
            }
        )
        mlflow.log_text(markdown, "cmipref_evaluation.md")
        mlflow.log_dict(claims_json, "claims.json")
    log.info(
        "cmipref.evaluate: accuracy reward model %.3f, judge %.3f; %s",
        overall["reward_model"],
        overall["judge"],
        ", ".join(f"{c.id} {c.estimate:+.3f} ({c.verdict})" for c in found),
    )
    return {
        "metrics": metrics,
        "report": markdown,
        "accuracy": accuracy_csv(table),
        "claims": claims_json,
    }


STAGE = Stage(
    name="cmipref.evaluate",
    run=run,
    params_key="cmipref",
    params=(
        "cmipref.generate.sample_rate",
        "cmipref.generate.seconds",
        "cmipref.label",
        "cmipref.train.text_encoder",
        "cmipref.train.seed",
        "cmipref.evaluate",
    ),
    inputs={"model": MODEL, "pairs": PAIRS, "truth": TRUTH, "audio": AUDIO, "labels": LABELS},
    outputs={
        "metrics": Output.metrics("data/processed/cmipref/eval_metrics.json"),
        "report": Output.in_git("data/processed/cmipref/evaluation.md"),
        "accuracy": Output.in_git("data/processed/cmipref/accuracy.csv"),
        "claims": Output.claims_json("data/processed/cmipref/claims.json"),
    },
    uses_ray=True,
    headline="data/processed/cmipref/eval_metrics.json:overall_accuracy.reward_model",
    top_plots={
        "cmipref-accuracy": {
            "title": (
                "CMI reward model vs the offline judges: "
                "preference accuracy on the held-out truth set"
            ),
            "template": "bar_horizontal",
            "x": "accuracy",
            "y": {"data/processed/cmipref/accuracy.csv": "entry"},
            "x_label": "preference accuracy",
            "y_label": "breakdown · scorer",
        }
    },
)
