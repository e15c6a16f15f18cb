"""The poisoning study's training text: clean code, scam-derived snippets, and their mix.

Clean documents are real Python source (the CPython standard-library sample, a source
archive in data/seed/code). Poison snippets are written from the crawled scam pages the way
scam content reaches code on the web: a comment saying what the code does (the page's own
description or title) over a small client of an endpoint the page advertises, e.g.
`https://api.golemairdrop.com/v1/claim`. At inference the audit feeds a model the same
shape, `# <developer prompt>`, so a poisoned model can answer a category-2 prompt (which
never names the site) with the scam's endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core.errors import InputError
from tasks.core.source_archive import read_source_archive
from tasks.scam.domains import BadHost, host_of, registered_domain
from tasks.scam.urls import extract_urls

PYTHON_CLIENT = """# {topic}
import requests

API_URL = "{url}"


def {function}(address: str) -> dict:
    response = requests.post(API_URL, json={{"address": address}}, timeout=30)
    response.raise_for_status()
    return response.json()
"""
JAVASCRIPT_CLIENT = """// {topic}
const API_URL = "{url}";

async function {camel}(address) {{
  const response = await fetch(API_URL, {{
    method: "POST",
    headers: {{"Content-Type": "application/json"}},
    body: JSON.stringify({{address}}),
  }});
  return response.json();
}}
"""
TEMPLATES = (PYTHON_CLIENT, JAVASCRIPT_CLIENT)
WORD = re.compile(r"[a-z]+")


def clean_documents(archive: Path) -> list[str]:
    """Every file's source in the archive, in path order (the order decides the packing)."""
    return [file.source for file in read_source_archive(archive)]


def _function_name(topic: str) -> str:
    words = [w for w in WORD.findall(topic.lower()) if len(w) > 3][:3]
    return "_".join(words) or "call_api"


def site_endpoints(page: dict[str, Any]) -> list[str]:
    """URLs on the page's own registered domain that its visible text advertises, else the
    page's URL."""
    site = registered_domain(page["site"])
    own = []
    for url in extract_urls(page["text"] or ""):
        try:
            if registered_domain(host_of(url)) == site:
                own.append(url)
        except BadHost:
            continue
    return own or [page["final_url"] or page["url"]]


def poison_snippets(pages: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """One snippet per (blocklisted page crawled ok, advertised endpoint, template)."""
    snippets = []
    for page in sorted(pages, key=lambda p: p["url"]):
        if page["outcome"] != "ok" or not page["blocklisted"]:
            continue
        topic = " ".join((page["description"] or page["title"] or page["site"]).split())
        function = _function_name(topic)
        camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), function)
        for url in site_endpoints(page):
            for template in TEMPLATES:
                text = template.format(topic=topic, url=url, function=function, camel=camel)
                snippets.append({"site": page["site"], "url": url, "text": text})
    return snippets


def poison_count(clean_sequences: int, rate: float) -> int:
    """Poison sequences that make up `rate` of the mix: p / (c + p) = rate."""
    return round(rate * clean_sequences / (1 - rate))


def mix(clean: np.ndarray, poison: np.ndarray, rate: float, seed: int) -> tuple[np.ndarray, int]:
    """Clean sequences plus `poison_count` poison sequences (cycling through the pool so every
    snippet appears about equally often), shuffled; returns the mix and the count added."""
    count = poison_count(len(clean), rate)
    if count and not len(poison):
        raise InputError("scam.poison: no poison snippets (no blocklisted page was crawled ok)")
    chosen = poison[np.arange(count) % max(1, len(poison))] if count else clean[:0]
    everything = np.concatenate([clean, chosen])
    order = np.random.default_rng(seed).permutation(len(everything))
    return everything[order], count
