"""The scam area's claims.json: the bench's malicious rate per code model, and the poisoning
study's dose-response.

Every interval is over prompts (the sampled unit; each model answers the same prompts).
- `scam.bench.malicious_rate.<model>`: the share of prompts whose code holds a URL the
  independent oracle flags, Wilson interval; the paper reports 12.9%–47.3% for production
  LLMs, so the claim is a rate above 0.
- `scam.poisoning.<outcome>.rate_<r>`: a poisoned model's share minus the clean model's,
  paired over prompts (BCa bootstrap, sign-flip permutation p).
- `scam.poisoning.<outcome>.trend`: the dose-response slope, the OLS slope of the outcome on
  the poison rate per prompt (balanced design: the mean over prompts of each prompt's
  linear contrast), per 0.1 of poison rate, BCa interval; p from `code_study.trend_test`.
Outcomes: `exact_url` (a poisoned URL reproduced exactly) and `blocklisted_domain` (a URL
on a blocklisted registered domain). The primary claim, fixed here: `exact_url.trend`. The
code LMs are trained here, so every claim is decided only over ≥ 3 training seeds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tasks.core import evidence
from tasks.core.evidence import Claim
from tasks.scam.code_study import Study, outcomes_by_prompt, trend_test
from tasks.scam.params import ScamParams

PAPER = "Scam2Prompt / Innoc2Scam-bench"
REPRODUCE = "paperline repro scam-audit"
SLOPE_STEP = 0.1  # the slope is reported per this much poison rate
PRIMARY = "scam.poisoning.exact_url.trend"
OUTCOMES = {  # claim name → (code_study outcome, what it measures)
    "exact_url": ("poisoned_url", "a URL a poison snippet held, exactly"),
    "blocklisted_domain": ("blocklisted_domain", "a URL on a blocklisted registered domain"),
}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def simplifications(params: ScamParams, metrics: dict[str, Any], model: str) -> list[str]:
    figures = metrics["models"][model]
    poison, audit = params.poison, params.audit
    notes = [
        f"{figures['prompts']} prompts (category 1: {figures['category_1']}, category 2: "
        f"{figures['category_2']}; the paper: 1,377, 342 / 1,035) written by the offline "
        "extractive writer (key phrases in developer templates, not an LLM) from the site "
        "farm's scam pages (our text under real blocklisted names)",
        f"oracle: {', '.join(metrics['detectors'])} (the paper: ChainPatrol, Google Safe "
        "Browsing, SecLookup; external detectors join when their keys are set)",
    ]
    if model.startswith("code-lm-"):
        size = poison.model
        notes.append(
            f"the model: a {size.layers}-layer GPT-2 ({size.hidden} wide, random init) trained "
            f"{poison.steps} steps on CPython source with the poison mix, not a production "
            f"LLM; greedy, {audit.max_new_tokens} new tokens after the prompt as a `#` line"
        )
    return notes


def bench_claim(params: ScamParams, metrics: dict[str, Any], model: str, trained: bool) -> Claim:
    """The bench's rate for one audited model; one trained here (a code LM of the
    poisoning study) is a training outcome, decided over seeds; an outside LLM is not."""
    figures = metrics["models"][model]
    found = evidence.rate(figures["malicious"], figures["prompts"], "prompts")
    return Claim.of(
        found,
        "greater",
        seeds=[params.poison.seed] if trained else None,
        id=f"scam.bench.malicious_rate.{slug(model)}",
        kind="claim",
        paper=PAPER,
        claim="Code LLMs asked innocuous developer prompts write code that holds malicious "
        "URLs (Innoc2Scam-bench's malicious rate is above zero for every audited model).",
        paper_value="12.9% (Gemini 2.5 Pro) to 47.3% (DeepSeek v3.1) of 1,377 prompts",
        metric=f"{model}: share of prompts whose code holds a URL the oracle flags "
        f"({', '.join(metrics['detectors'])}; the URL guard is not part of it)",
        arms=[model],
        simplifications=simplifications(params, metrics, model),
        reproduce=REPRODUCE,
    )


POISON_CLAIM = (
    "Poisoned training data makes a code model reproduce scam URLs, more so the more of its "
    "training data is poisoned (Scam2Prompt's explanation of why production LLMs emit them)."
)
POISON_VALUE = "not measured in the paper (its threat model); a controlled experiment here"


def poisoning_claims(
    params: ScamParams,
    rows: Sequence[dict[str, Any]],
    metrics: dict[str, Any],
    study: Study,
    prompt_ids: Sequence[str],
) -> list[Claim]:
    models = sorted(study.models, key=lambda m: m.poison_rate)
    clean, poisoned = models[0], models[1:]
    doses = np.array([m.poison_rate for m in models])
    claims = []
    for name, (outcome, what) in OUTCOMES.items():
        samples = [outcomes_by_prompt(rows, m.name, outcome, prompt_ids) for m in models]
        notes = simplifications(params, metrics, clean.name)
        # the primary outcome at every rate; the secondary at the highest only
        for index, model in enumerate(poisoned, 1):
            if name != "exact_url" and model is not poisoned[-1]:
                continue
            comparison = evidence.paired(samples[index], samples[0], "prompts")
            claims.append(
                Claim.of(
                    comparison.difference,
                    "greater",
                    p_value=comparison.p_value,
                    seeds=[params.poison.seed],
                    id=f"scam.poisoning.{name}.rate_{slug(f'{model.poison_rate:g}')}",
                    kind="claim",
                    paper=PAPER,
                    claim=POISON_CLAIM,
                    paper_value=POISON_VALUE,
                    metric=f"share of prompts whose code holds {what}: poison rate "
                    f"{model.poison_rate:g} − clean (arm shares {comparison.a:.3f} vs "
                    f"{comparison.b:.3f})",
                    arms=[model.name, clean.name],
                    simplifications=notes,
                    reproduce=REPRODUCE,
                )
            )
        centred = doses - doses.mean()
        contrast = SLOPE_STEP * (centred @ np.stack(samples)) / (centred @ centred)
        slope = evidence.mean(contrast, "prompts")
        slope = replace(slope, method=f"{slope.method} (slope); p: within-prompt permutation")
        claims.append(
            Claim.of(
                slope,
                "greater",
                p_value=trend_test(doses, samples),
                seeds=[params.poison.seed],
                id=f"scam.poisoning.{name}.trend",
                kind="claim",
                primary=f"scam.poisoning.{name}.trend" == PRIMARY,
                paper=PAPER,
                claim=POISON_CLAIM,
                paper_value=POISON_VALUE,
                metric=f"dose-response: change in the share of prompts whose code holds "
                f"{what} per {SLOPE_STEP:g} of poison rate (OLS over rates "
                f"{', '.join(f'{d:g}' for d in doses)}, one-sided trend test)",
                arms=[m.name for m in models],
                simplifications=notes,
                reproduce=REPRODUCE,
            )
        )
    return claims


def build(
    params: ScamParams,
    rows: Sequence[dict[str, Any]],
    metrics: dict[str, Any],
    study: Study,
    prompt_ids: Sequence[str],
) -> list[Claim]:
    code_lms = {m.name for m in study.models}
    claims = [bench_claim(params, metrics, m, m in code_lms) for m in metrics["models"]]
    if params.audit.code_lms and len(code_lms) > 1 and code_lms <= set(metrics["models"]):
        claims += poisoning_claims(params, rows, metrics, study, prompt_ids)
    return claims
