"""Held-out MLM loss per language and per language tier (when a language joined training).

Tiers follow the corpus schedule: `pretrain` languages are trained from the start,
`mid` languages join in the mid phase, `decay` languages are seen only in the decay phase
(mmBERT's claim: adding them late, at low temperature, still helps them). Every model
(each phase's, and the decay_cont control arm's) is scored on the same masked positions
(fixed seed), so losses compare across models.

The claims (claims.json) pair decay-all with its control decay-cont over languages: on the
decay-tier languages (the claim), and on the pretrain tier (no harm beyond a margin).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core import evidence, tracking
from tasks.core.errors import InputError
from tasks.core.io import read_json, read_parquet
from tasks.core.progress import get_logger, track
from tasks.core.stage import Output, Stage, StageContext
from tasks.mlm.params import ARMS, PHASES, EvalParams, MlmParams
from tasks.mlm.phases import STATE_FILE, find_phase_run

log = get_logger("paperline.mlm.evaluate")

TIERS = PHASES  # a tier is named after the phase in which its languages first appear
# pretrain-tier loss may rise this much (nats) under decay-all vs decay-cont and still count
# as "no harm": about the run-to-run spread of one language's held-out loss at this scale
NO_HARM_MARGIN = 0.05
PAPER = "mmBERT"
SIMPLIFICATIONS = [
    "a 4-layer, 128-wide encoder (preset tiny) instead of mmBERT-small/base",
    "UDHR translations (one document per language) instead of FineWeb2 / 3T tokens",
    "held-out masked-LM loss on each language's UDHR tail, not downstream tasks (TiQuAD, FoQA)",
    "one seed; the interval is over languages only",
]


def language_tiers(manifests: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """language → the first phase (in training order) whose manifest lists it."""
    tiers: dict[str, str] = {}
    for phase in PHASES:
        for lang in manifests[phase]["languages"]:
            tiers.setdefault(lang, phase)
    return tiers


def heldout_losses(
    model: Any, tokenizer: Any, heldout: pa.Table, params: EvalParams
) -> dict[str, dict[str, float]]:
    """{lang: {loss, masked_tokens}}: mean cross-entropy over the masked held-out tokens."""
    import torch
    import torch.nn.functional as F

    from tasks.mlm.masking import Masker

    masker = Masker(tokenizer, params.mask_ratio, params.seed)
    langs = heldout.column("lang").to_pylist()
    rows = heldout.column("input_ids").to_pylist()
    totals = torch.zeros(len(rows), dtype=torch.float64)
    counts = torch.zeros(len(rows), dtype=torch.float64)
    model.eval()
    with torch.no_grad():
        for start in range(0, len(rows), params.batch_size):
            chunk = rows[start : start + params.batch_size]
            width = max(len(r) for r in chunk)
            ids = torch.full((len(chunk), width), tokenizer.pad_token_id, dtype=torch.long)
            for i, row in enumerate(chunk):
                ids[i, : len(row)] = torch.tensor(row)
            batch = masker(ids, step=start)  # same positions for every phase's model
            labels = batch["labels"]
            if not (labels != -100).any():
                continue
            logits = model(**batch).logits  # sparse: one row per masked position, row-major
            positions = (labels != -100).nonzero()[:, 0] + start
            losses = F.cross_entropy(logits.float(), labels[labels != -100], reduction="none")
            totals.index_add_(0, positions, losses.double())
            counts.index_add_(0, positions, torch.ones_like(losses, dtype=torch.float64))
    result: dict[str, list[float]] = {}
    for lang, total, count in zip(langs, totals.tolist(), counts.tolist(), strict=True):
        kept = result.setdefault(lang, [0.0, 0.0])
        kept[0] += total
        kept[1] += count
    return {
        lang: {"loss": total / count, "masked_tokens": int(count)}
        for lang, (total, count) in sorted(result.items())
        if count
    }


def tier_losses(
    per_language: Mapping[str, Mapping[str, float]], tiers: Mapping[str, str]
) -> dict[str, dict[str, float]]:
    """{tier: {loss (macro mean over its languages), languages}}; tiers without text omitted."""
    grouped: dict[str, list[float]] = {}
    for lang, scores in per_language.items():
        if lang in tiers:
            grouped.setdefault(tiers[lang], []).append(scores["loss"])
    return {
        tier: {"loss": sum(grouped[tier]) / len(grouped[tier]), "languages": len(grouped[tier])}
        for tier in TIERS
        if tier in grouped
    }


def tier_table(by_phase: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """Markdown: one row per tier, one column per model (eval loss after that phase or arm)."""
    phases = [p for p in ARMS if p in by_phase]
    lines = ["| languages first trained in | " + " | ".join(f"after {p}" for p in phases) + " |"]
    lines.append("|---" * (len(phases) + 1) + "|")
    for tier in TIERS:
        cells = [by_phase[p].get(tier) for p in phases]
        if not any(cells):
            continue
        count = next(c["languages"] for c in cells if c)
        shown = [f"{c['loss']:.3f}" if c else "–" for c in cells]
        lines.append(f"| {tier} ({count} languages) | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


def per_language_csv(
    by_phase: Mapping[str, Mapping[str, Mapping[str, float]]], tiers: Mapping[str, str]
) -> str:
    langs = sorted({lang for scores in by_phase.values() for lang in scores})
    lines = ["lang,tier," + ",".join(ARMS)]
    for lang in langs:
        losses = [by_phase[p].get(lang, {}).get("loss") for p in ARMS]
        shown = ["" if x is None else f"{x:.5f}" for x in losses]
        lines.append(f"{lang},{tiers.get(lang, 'unseen')}," + ",".join(shown))
    return "\n".join(lines) + "\n"


def tier_curve_csv(by_phase: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """dvc plots: eval loss of each tier after each phase (x: phase index)."""
    lines = ["phase_index,phase," + ",".join(TIERS)]
    for index, phase in enumerate(PHASES, start=1):
        cells = [by_phase[phase].get(t, {}).get("loss") for t in TIERS]
        lines.append(f"{index},{phase}," + ",".join("" if c is None else f"{c:.5f}" for c in cells))
    return "\n".join(lines) + "\n"


def paired_losses(
    per_language: Mapping[str, Mapping[str, Mapping[str, float]]],
    tiers: Mapping[str, str],
    tier: str,
) -> tuple[list[float], list[float]]:
    """Held-out loss after decay-all and after decay-cont, per language of `tier`."""
    langs = [
        lang
        for lang, first in sorted(tiers.items())
        if first == tier and lang in per_language["decay"] and lang in per_language["decay_cont"]
    ]
    return (
        [per_language["decay"][lang]["loss"] for lang in langs],
        [per_language["decay_cont"][lang]["loss"] for lang in langs],
    )


def decay_claims(
    per_language: Mapping[str, Mapping[str, Mapping[str, float]]],
    tiers: Mapping[str, str],
    seeds: list[int],
) -> list[evidence.Claim]:
    """decay-all against its control decay-cont, paired over languages: claims about a
    training schedule, so decided only over ≥ 3 training `seeds`."""
    late_all, late_cont = paired_losses(per_language, tiers, "decay")
    late = evidence.paired(late_all, late_cont, "decay-tier languages")
    early_all, early_cont = paired_losses(per_language, tiers, "pretrain")
    early = evidence.paired(early_all, early_cont, "pretrain-tier languages")
    common = dict(
        paper=PAPER,
        arms=["decay-all", "decay-cont"],
        simplifications=SIMPLIFICATIONS,
        reproduce="dvc repro mlm-evaluate",
        kind="claim",
        seeds=seeds,
    )
    return [
        evidence.Claim.of(
            late.difference,
            "less",
            p_value=late.p_value,
            id="mlm.decay_all_helps_late_languages",
            primary=True,
            claim=(
                "Adding the low-resource languages only in the short decay phase (decay-all) "
                "helps them more than continuing on the earlier languages (decay-cont)."
            ),
            paper_value=(
                "1,833 languages in the decay phase; the decay-all model beats decay-cont on "
                "low-resource tasks (e.g. Tigrinya and Faroese QA)"
            ),
            metric="held-out MLM loss, decay-all − decay-cont, on languages first seen in decay",
            **common,
        ),
        evidence.Claim.of(  # non-inferiority: the interval against the margin (no p: it tests 0)
            early.difference,
            "less",
            null=NO_HARM_MARGIN,
            id="mlm.decay_all_keeps_early_languages",
            claim=(
                "Spreading the decay phase over 1,833 languages does not cost the high-resource "
                "languages of pretraining."
            ),
            paper_value="mmBERT keeps its high-resource scores (XNLI, GLUE) with decay-all",
            metric=(
                "held-out MLM loss, decay-all − decay-cont, on pretrain-tier languages "
                f"(no harm: below +{NO_HARM_MARGIN} nats)"
            ),
            **common,
        ),
    ]


def run(params: MlmParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    """mlm.evaluate: every phase's model on the held-out text, per language and tier."""
    import mlflow

    from tasks.mlm.model import load_model, load_tokenizer

    heldout = read_parquet(inputs["heldout"])
    manifests = {phase: read_json(inputs[f"{phase}_manifest"]) for phase in PHASES}
    tiers = language_tiers(manifests)
    tokenizer = load_tokenizer(inputs["pretrain"])
    per_language: dict[str, dict[str, dict[str, float]]] = {}
    by_tier: dict[str, dict[str, dict[str, float]]] = {}
    for phase in track(ARMS, "mlm.evaluate", unit="model"):
        model = load_model(inputs[phase])
        per_language[phase] = heldout_losses(model, tokenizer, heldout, params.eval)
        by_tier[phase] = tier_losses(per_language[phase], tiers)
    table = tier_table(by_tier)
    log.info("held-out MLM loss by language tier:\n%s", table)
    tracking.configure(ctx.runtime.mlflow, ctx.root)
    client = mlflow.MlflowClient()
    experiment = tracking.ensure_experiment(params.experiment, ctx.runtime.mlflow, ctx.root)
    runs = {phase: find_phase_run(experiment, inputs[phase]) for phase in ARMS}
    if any(run is None for run in runs.values()):
        raise InputError(
            "mlm.evaluate: the MLflow store has no run for some phase's weights "
            f"({tracking.tracking_uri(ctx.runtime.mlflow, ctx.root)}); "
            "re-run the mlm stages (`dvc repro -f`)"
        )
    for phase, found in runs.items():
        step = read_json(inputs[phase] / STATE_FILE)["last_step"]
        for tier, scores in by_tier[phase].items():
            client.log_metric(found.info.run_id, f"eval_loss_{tier}", scores["loss"], step=step)
        card = (inputs[phase] / "model_card.md").read_text(encoding="utf-8")
        for version in client.search_model_versions(f"run_id = '{found.info.run_id}'"):
            client.update_model_version(
                version.name,
                version.version,
                description=card + "\n## Held-out MLM loss by language tier\n\n" + table,
            )
    parent = runs["decay"].data.tags["mlflow.parentRunId"]
    client.log_text(parent, table, "eval/tiers.md")
    client.log_text(parent, per_language_csv(per_language, tiers), "eval/per_language.csv")
    for phase in ARMS:
        for tier, scores in by_tier[phase].items():
            client.log_metric(parent, f"eval_loss_{tier}_after_{phase}", scores["loss"])
    claims = decay_claims(per_language, tiers, [params.training.seed])
    client.log_dict(parent, evidence.claims_value(claims), "eval/claims.json")
    client.set_terminated(parent)
    metrics = {
        phase: {tier: round(scores["loss"], 5) for tier, scores in by_tier[phase].items()}
        for phase in ARMS
    }
    metrics["languages_per_tier"] = {t: s["languages"] for t, s in by_tier["decay"].items()}
    return {
        "claims": evidence.claims_value(claims),
        "metrics": metrics,
        "table": table,
        "per_language": per_language_csv(per_language, tiers),
        "tier_curve": tier_curve_csv(by_tier),
    }


STAGE = Stage(
    name="mlm.evaluate",
    run=run,
    params_key="mlm",
    params=("mlm.eval", "mlm.training.seed", "mlm.registered_model", "mlm.experiment"),
    inputs={
        "heldout": "data/processed/corpus/heldout.parquet",
        **{f"{p}_manifest": f"data/processed/corpus/shards/{p}/manifest.json" for p in PHASES},
        **{p: f"models/mmbert/{p}" for p in ARMS},
    },
    outputs={
        "claims": Output.claims_json("models/mmbert/claims.json"),
        "metrics": Output.metrics("models/mmbert/metrics.json"),
        "table": Output.in_git("models/mmbert/eval_table.md"),
        "per_language": "models/mmbert/eval_per_language.csv",
        "tier_curve": Output.plots("models/mmbert/eval_tiers.csv"),
    },
    headline="models/mmbert/metrics.json:decay.decay",
    top_plots={
        "mlm-eval-tiers": {
            "title": "Held-out MLM loss by the phase a language joined, after each phase",
            "template": "linear",
            "x": "phase_index",
            "y": {"models/mmbert/eval_tiers.csv": ["pretrain", "mid", "decay"]},
            "x_label": "after phase (1 pretrain, 2 mid, 3 decay)",
            "y_label": "held-out masked-token cross-entropy",
        }
    },
)
