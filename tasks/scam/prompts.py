"""scam.prompts: each crawled scam site's purpose and innocuous developer prompts.

One site = its crawled pages on a blocklisted domain, landing page first. Category 1: the
prompt names the scam site (its host or registered domain, or any blocklisted domain);
category 2: it does not (the paper's split, 342 / 1,035 in Innoc2Scam-bench).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.scam.blocklist import Blocklist
from tasks.scam.domains import BadHost, registered_domain
from tasks.scam.params import ScamParams
from tasks.scam.prompt_writers import prompt_writer

log = get_logger("paperline.scam.prompts")
HOSTNAME = re.compile(r"\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{1,62}\b")

SCHEMA = pa.schema(
    [
        ("prompt_id", pa.string()),
        ("site", pa.string()),
        ("url", pa.string()),
        ("site_purpose", pa.string()),
        ("prompt", pa.string()),
        ("category", pa.int8()),
        ("generator", pa.string()),
    ]
)


def prompt_category(prompt: str, site: str, blocklist: Blocklist) -> int:
    """1 when the prompt names the site or any blocklisted domain, else 2."""
    text = prompt.lower()
    if site in text or registered_domain(site) in text:
        return 1
    for host in HOSTNAME.findall(text):
        try:
            if blocklist.check(host).is_malicious:
                return 1
        except BadHost:
            continue
    return 2


def site_documents(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per blocklisted site: landing page's URL, title and description, all pages' text."""
    sites: dict[str, list[dict[str, Any]]] = {}
    for page in sorted(pages, key=lambda p: (p["site"], p["depth"], p["url"])):
        if page["outcome"] == "ok" and page["blocklisted"]:
            sites.setdefault(page["site"], []).append(page)
    return [
        {
            "site": site,
            "url": group[0]["final_url"],
            "title": group[0]["title"],
            "description": group[0]["description"],
            "text": "\n".join(p["text"] for p in group),
        }
        for site, group in sites.items()
    ]


def run(params: ScamParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    blocklist = Blocklist.from_table(inputs["blocklist"])
    documents = site_documents(read_parquet(inputs["pages"]).to_pylist())
    writer = prompt_writer(params.prompts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        written = list(
            tqdm(
                pool.map(
                    lambda d: writer.write(d["url"], d["title"], d["description"], d["text"]),
                    documents,
                ),
                total=len(documents),
                desc="scam prompts",
                unit="site",
                mininterval=5,
            )
        )
    rows = []
    for document, result in zip(documents, written, strict=True):
        for n, prompt in enumerate(result.prompts):
            rows.append(
                {
                    "prompt_id": f"{document['site']}-{n:02d}",
                    "site": document["site"],
                    "url": document["url"],
                    "site_purpose": result.purpose,
                    "prompt": prompt,
                    "category": prompt_category(prompt, document["site"], blocklist),
                    "generator": writer.name,
                }
            )
    categories = {c: sum(r["category"] == c for r in rows) for c in (1, 2)}
    log.info(
        "prompts: %d from %d sites (category 1: %d, 2: %d) by %s",
        len(rows),
        len(documents),
        categories[1],
        categories[2],
        writer.name,
    )
    summary = {
        "sites": len(documents),
        "prompts": len(rows),
        "generator": writer.name,
        "category_1": categories[1],
        "category_2": categories[2],
    }
    return {"prompts": pa.Table.from_pylist(rows, schema=SCHEMA), "summary": summary}


STAGE = Stage(
    name="scam.prompts",
    run=run,
    params_key="scam",
    params=("scam.prompts",),
    inputs={
        "pages": "data/interim/scam/pages.parquet",
        "blocklist": "data/processed/scam/blocklist.parquet",
    },
    outputs={
        "prompts": "data/processed/scam/prompts.parquet",
        "summary": Output.metrics("data/processed/scam/prompts_summary.json"),
    },
    headline="data/processed/scam/prompts_summary.json:prompts",
)
