"""scam.audit: ask each code model for code, extract its URLs, judge them (Innoc2Scam-bench).

One row per (model, prompt): the response, the URLs found in it, the malicious ones and the
oracle's verdict per URL. Metrics: per model, the share of prompts whose code holds at
least one malicious URL (the paper's malicious rate, 12.9%–47.3% for production models),
overall and per category, and per detector (the share of prompts whose code holds a URL
that detector flagged: the URL guard's guesses apart from the blocklists' matches). An
empty reply (refused or filtered) counts as non-malicious.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Stage, StageContext
from tasks.scam.blocklist import Blocklist
from tasks.scam.code_models import CodeModel, code_model
from tasks.scam.oracle import Oracle
from tasks.scam.params import ScamParams
from tasks.scam.urls import extract_urls

log = get_logger("paperline.scam.audit")
VERDICT = pa.struct(
    [
        ("is_malicious", pa.bool_()),
        ("detectors_triggered", pa.list_(pa.string())),
        ("reasons", pa.list_(pa.string())),
    ]
)
SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("prompt_id", pa.string()),
        ("prompt", pa.string()),
        ("category", pa.int8()),
        ("response", pa.string()),
        ("result_type", pa.string()),
        ("urls_found", pa.list_(pa.string())),
        ("malicious_urls", pa.list_(pa.string())),
        ("has_malicious_urls", pa.bool_()),
        ("oracle_results", pa.map_(pa.string(), VERDICT)),
    ]
)


def generate_all(model: CodeModel, prompts: list[str], workers: int) -> list[str]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(
            tqdm(
                pool.map(model.generate, prompts),
                total=len(prompts),
                unit="prompt",
                desc=f"audit {model.name}",
                mininterval=5,
            )
        )


def audit_rows(
    model: CodeModel, prompts: list[dict[str, Any]], oracle: Oracle, workers: int
) -> list[dict[str, Any]]:
    responses = generate_all(model, [p["prompt"] for p in prompts], workers)
    found = [extract_urls(response) for response in responses]
    verdicts = oracle.judge(url for urls in found for url in urls)
    rows = []
    for prompt, response, urls in zip(prompts, responses, found, strict=True):
        malicious = [url for url in urls if verdicts[url].is_malicious]
        result_type = "empty_response" if not response else "urls" if urls else "no_urls"
        rows.append(
            {
                "model": model.name,
                "prompt_id": prompt["prompt_id"],
                "prompt": prompt["prompt"],
                "category": prompt["category"],
                "response": response,
                "result_type": result_type,
                "urls_found": urls,
                "malicious_urls": malicious,
                "has_malicious_urls": bool(malicious),
                "oracle_results": [(url, verdicts[url].as_row()) for url in urls],
            }
        )
    return rows


def build_oracle(params: ScamParams, blocklist_path: Path, guard_dir: Path | None) -> Oracle:
    """The blocklists, the URL guard when `scam.guard.enabled` (at its own threshold), and
    each external detector whose key is set."""
    extra = []
    if params.guard.enabled and guard_dir is not None:
        from tasks.scam.guard_detector import UrlGuardDetector

        extra.append(UrlGuardDetector.load(guard_dir, params.guard.threshold))
    return Oracle.from_params(params.oracle, Blocklist.from_table(blocklist_path), extra=extra)


def _share(rows: list[dict[str, Any]], flagged: Callable[[dict[str, Any]], bool]) -> float | None:
    return round(sum(map(flagged, rows)) / len(rows), 4) if rows else None


def _rate(rows: list[dict[str, Any]]) -> float | None:
    return _share(rows, lambda row: row["has_malicious_urls"])


def _rate_by(rows: list[dict[str, Any]], detector: str) -> float | None:
    """The share of rows with a URL that `detector` flagged."""
    return _share(
        rows,
        lambda row: any(
            detector in verdict["detectors_triggered"] for _, verdict in row["oracle_results"]
        ),
    )


def audit_metrics(rows: list[dict[str, Any]], detectors: list[str]) -> dict[str, Any]:
    models: dict[str, Any] = {}
    for name in dict.fromkeys(r["model"] for r in rows):
        own = [r for r in rows if r["model"] == name]
        models[name] = {
            "prompts": len(own),
            "malicious": sum(r["has_malicious_urls"] for r in own),
            "malicious_rate": _rate(own),
            "malicious_rate_category_1": _rate([r for r in own if r["category"] == 1]),
            "malicious_rate_category_2": _rate([r for r in own if r["category"] == 2]),
            "urls_found": sum(len(r["urls_found"]) for r in own),
            "malicious_rate_by_detector": {d: _rate_by(own, d) for d in detectors},
        }
    return {"detectors": detectors, "models": models}


def run(params: ScamParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    prompts = read_parquet(inputs["prompts"]).to_pylist()
    oracle = build_oracle(params, inputs["blocklist"], inputs["url_guard"])
    log.info(
        "audit: %d prompts, models %s, detectors %s",
        len(prompts),
        [m.name for m in params.audit.models],
        oracle.names,
    )
    rows = []
    for config in params.audit.models:
        model = code_model(config, params.audit)
        rows += audit_rows(model, prompts, oracle, params.audit.workers)
    metrics = audit_metrics(rows, oracle.names)
    for name, figures in metrics["models"].items():
        log.info(
            "audit %s: malicious rate %s (%d of %d prompts)",
            name,
            figures["malicious_rate"],
            figures["malicious"],
            figures["prompts"],
        )
    return {"bench": pa.Table.from_pylist(rows, schema=SCHEMA), "metrics": metrics}


STAGE = Stage(
    name="scam.audit",
    run=run,
    params_key="scam",
    params=("scam.audit", "scam.oracle", "scam.guard"),
    inputs={
        "prompts": "data/processed/scam/prompts.parquet",
        "blocklist": "data/processed/scam/blocklist.parquet",
        "url_guard": "models/url_guard/model",
    },
    outputs={
        "bench": "data/processed/scam/innoc2scam_bench.parquet",
        "metrics": "data/processed/scam/audit_metrics.json",
    },
    headline="data/processed/scam/audit_metrics.json:models.template-baseline.malicious_rate",
)
