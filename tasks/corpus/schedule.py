"""corpus.schedule: which languages each mmBERT phase samples, and how often.

Languages enter by rank of available tokens n(l): counted in this corpus (in characters,
since the tokenizer is trained after this stage and words are not comparable across
scripts), or mmBERT's production token counts from `language_counts.csv` (the phase's
column) when `use_reference_counts` is set. Phase i takes the top-N_i languages, always
including every language of phase i−1, and samples language l with

    p_i(l) = n(l)^τ_i / Σ_{l' ∈ L_i} n(l')^τ_i

so a lower temperature τ flattens the mix toward the low-resource tail (mmBERT: 0.7, 0.5,
0.3). Only languages present in this corpus can be scheduled.

A control arm (`controls`, mmBERT's decay-cont) takes one phase's settings and token budget
on an earlier phase's languages: beside decay-all, it separates "adding languages in the
decay phase helps them" from "any more training helps". Controls are packed and trained like
phases but are not in the phase sequence (`schedule["controls"]`).
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core.errors import InputError
from tasks.core.io import read_parquet
from tasks.core.stage import Output, Stage, StageContext
from tasks.corpus.params import ControlArmParams, PhaseParams, ScheduleParams


def sampling_probabilities(counts: Mapping[str, float], temperature: float) -> dict[str, float]:
    """p(l) ∝ n(l)^τ over the given languages."""
    weights = {lang: float(n) ** temperature for lang, n in counts.items() if n > 0}
    total = sum(weights.values())
    return {lang: w / total for lang, w in weights.items()}


def corpus_counts(docs: pa.Table) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for lang, n in zip(
        docs.column("lang").to_pylist(), docs.column("n_chars").to_pylist(), strict=True
    ):
        counts[lang] += n
    return dict(counts)


def reference_counts(path: Path) -> dict[str, dict[str, int]]:
    """language_counts.csv as {column: {language: tokens}}."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except FileNotFoundError:
        raise InputError(f"{path}: missing; copy mmBERT's statistics/language_counts.csv") from None
    columns: dict[str, dict[str, int]] = {}
    for number, row in enumerate(rows, start=2):
        for column, value in row.items():
            if column == "language":
                continue
            try:
                columns.setdefault(column, {})[row["language"]] = int(value)
            except (TypeError, ValueError):
                raise InputError(
                    f"{path}: line {number}: column {column!r}: expected an integer, got {value!r}"
                ) from None
    return columns


def _phase_languages(
    counts: Mapping[str, float], phase: PhaseParams, previous: list[str]
) -> list[str]:
    ranked = sorted(
        (lang for lang, n in counts.items() if n > 0), key=lambda lang: (-counts[lang], lang)
    )
    limit = len(ranked) if phase.languages == "all" else phase.languages
    chosen = list(previous)
    for lang in ranked:
        if len(chosen) >= limit:
            break
        if lang not in chosen:
            chosen.append(lang)
    return sorted(chosen, key=lambda lang: (-counts.get(lang, 0), lang))


def _counts(
    available: Mapping[str, int],
    reference: Mapping[str, Mapping[str, int]],
    column_name: str | None,
    where: str,
    inherited: Mapping[str, float],
) -> dict[str, float]:
    """Each available language's count: the reference column's (a language the column
    lacks keeps its `inherited` count), or the corpus's characters without a column."""
    if column_name is None:
        return dict(available)
    if column_name not in reference:
        raise InputError(
            f"params.yaml: corpus.schedule: {where}: reference_column {column_name!r} is not "
            f"in language_counts.csv ({', '.join(reference)})"
        )
    column = reference[column_name]
    return {lang: column.get(lang) or inherited.get(lang, 0) for lang in available}


def plan_phases(
    available: Mapping[str, int], params: ScheduleParams, reference: Mapping[str, Mapping[str, int]]
) -> list[dict[str, Any]]:
    """The phase plan: languages, counts and sampling probabilities per phase."""
    plans: list[dict[str, Any]] = []
    previous: list[str] = []
    previous_counts: Mapping[str, float] = {}
    for phase in params.phases:
        column = phase.reference_column if params.use_reference_counts else None
        counts = _counts(available, reference, column, f"phase {phase.name}", previous_counts)
        languages = _phase_languages(counts, phase, previous)
        phase_counts = {lang: counts[lang] for lang in languages}
        plans.append(
            {
                **phase.model_dump(exclude={"languages"}),
                "language_rule": phase.languages,
                "languages": languages,
                "counts": phase_counts,
                "probabilities": sampling_probabilities(phase_counts, phase.temperature),
            }
        )
        previous, previous_counts = languages, phase_counts
    return plans


def plan_control(
    control: ControlArmParams,
    plans: list[dict[str, Any]],
    available: Mapping[str, int],
    params: ScheduleParams,
    reference: Mapping[str, Mapping[str, int]],
) -> dict[str, Any]:
    """The control arm's plan: phase `arm_of`'s settings on phase `languages_of`'s languages."""
    by_name = {plan["name"]: plan for plan in plans}
    arm, source = by_name[control.arm_of], by_name[control.languages_of]
    column = control.reference_column if params.use_reference_counts else None
    counts = _counts(available, reference, column, f"control {control.name}", source["counts"])
    phase_counts = {lang: counts[lang] for lang in source["languages"]}
    return {
        **{key: arm[key] for key in ("temperature", "token_budget", "mask_ratio")},
        **{key: arm[key] for key in ("sequence_length", "source")},
        "name": control.name,
        "reference_column": control.reference_column,
        "control_of": control.arm_of,
        "language_rule": f"the languages of {control.languages_of}",
        "languages": source["languages"],
        "counts": phase_counts,
        "probabilities": sampling_probabilities(phase_counts, arm["temperature"]),
    }


def share_curves(plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """dvc plots rows: language rank (in the last phase) → share in each phase."""
    order = plans[-1]["languages"]
    return [
        {
            "rank": rank,
            "language": lang,
            **{plan["name"]: round(plan["probabilities"].get(lang, 0.0), 8) for plan in plans},
        }
        for rank, lang in enumerate(order, start=1)
    ]


def schedule_metrics(plans: list[dict[str, Any]]) -> dict[str, Any]:
    metrics = {}
    for plan in plans:
        probs = plan["probabilities"].values()
        entropy = -sum(p * math.log(p) for p in probs if p > 0)
        metrics[plan["name"]] = {
            "languages": len(plan["languages"]),
            "temperature": plan["temperature"],
            "top_language_share": round(max(probs), 6),
            "smallest_share": round(min(probs), 8),
            "effective_languages": round(math.exp(entropy), 2),
        }
    return metrics


def _csv(rows: list[dict[str, Any]]) -> str:
    header = list(rows[0])
    lines = [",".join(header)] + [",".join(str(row[k]) for k in header) for row in rows]
    return "\n".join(lines) + "\n"


def run(params: ScheduleParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    docs = read_parquet(inputs["docs"], columns=["lang", "n_chars"])
    reference = reference_counts(inputs["reference_counts"]) if params.use_reference_counts else {}
    available = corpus_counts(docs)
    plans = plan_phases(available, params, reference)
    controls = [plan_control(c, plans, available, params, reference) for c in params.controls]
    schedule = {
        "count_source": "reference" if params.use_reference_counts else "corpus_characters",
        "available_characters": dict(sorted(available.items())),
        "phases": plans,
        "controls": controls,
    }
    return {
        "schedule": schedule,
        "shares": _csv(share_curves(plans)),
        "metrics": schedule_metrics(plans + controls),
    }


STAGE = Stage(
    name="corpus.schedule",
    run=run,
    params_key="corpus.schedule",
    inputs={
        "docs": "data/interim/corpus/dedup.parquet",
        "reference_counts": "data/seed/mmbert/language_counts.csv",
    },
    outputs={
        "schedule": "data/processed/corpus/schedule.json",
        "shares": Output.plots("data/processed/corpus/language_shares.csv"),
        "metrics": Output.metrics("data/processed/corpus/schedule_metrics.json"),
    },
    headline="data/processed/corpus/schedule_metrics.json:decay.languages",
    top_plots={
        "language-shares": {
            "title": "Language sampling share by rank, per phase (p ∝ n^τ)",
            "template": "linear",
            "x": "rank",
            "y": {"data/processed/corpus/language_shares.csv": ["pretrain", "mid", "decay"]},
            "x_label": "language rank (by available tokens)",
            "y_label": "sampling share",
        }
    },
)
