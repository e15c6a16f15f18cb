"""scam.blocklist: the seed blocklists parsed, normalized and merged into one table.

Formats: MetaMask eth-phishing-detect `config.json` (blacklist, whitelist, fuzzylist with
its Levenshtein `tolerance`), PhishFort `domains.json` (a JSON array), plain one-per-line
lists (`#` comments). Matching follows eth-phishing-detect's detector: an allow entry
(the whitelist) wins, then block entries match the host or any subdomain of it, then the
host minus its TLD (and a leading `www.`) is compared with each fuzzy target minus its TLD.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from rapidfuzz.distance import Levenshtein

from tasks.core.errors import InputError
from tasks.core.io import read_parquet
from tasks.core.stage import Output, Stage, StageContext
from tasks.scam.domains import BadHost, normalize_host
from tasks.scam.params import BlocklistSource, ScamParams

SCHEMA = pa.schema(
    [
        ("domain", pa.string()),
        ("kind", pa.string()),
        ("source", pa.string()),
        ("tolerance", pa.int16()),
    ]
)
KINDS = ("block", "allow", "fuzzy")


@dataclass(frozen=True)
class Entry:
    domain: str
    kind: str  # block | allow | fuzzy
    source: str
    tolerance: int | None = None


def _line_of(text: str, value: Any) -> int:
    position = text.find(json.dumps(value))
    return text.count("\n", 0, position) + 1 if position >= 0 else 1


def _load_json(path: Path) -> tuple[Any, str]:
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text), text
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None


def _entries(
    values: Any,
    kind: str,
    source: BlocklistSource,
    path: Path,
    text: str,
    key: str,
    tolerance: int | None = None,
) -> Iterator[Entry]:
    if not isinstance(values, list):
        raise InputError(f"{path}: line {_line_of(text, key)}: '{key}' must be a list of domains")
    for value in values:
        line = _line_of(text, value)
        if not isinstance(value, str):
            raise InputError(f"{path}: line {line}: {key} entry {value!r} is not a domain string")
        try:
            domain = normalize_host(value)
        except BadHost as exc:
            raise InputError(f"{path}: line {line}: {exc}; fix or remove the entry") from None
        yield Entry(domain, kind, source.name, tolerance)


def parse_eth_phishing_detect(path: Path, source: BlocklistSource) -> Iterator[Entry]:
    config, text = _load_json(path)
    if not isinstance(config, dict) or "blacklist" not in config:
        raise InputError(f"{path}: line 1: not an eth-phishing-detect config (no 'blacklist')")
    tolerance = config.get("tolerance", 3)  # the detector's DEFAULT_TOLERANCE
    if not isinstance(tolerance, int) or tolerance < 0:
        line = _line_of(text, "tolerance")
        raise InputError(f"{path}: line {line}: 'tolerance' must be a non-negative integer")
    yield from _entries(config["blacklist"], "block", source, path, text, "blacklist")
    yield from _entries(config.get("whitelist", []), "allow", source, path, text, "whitelist")
    yield from _entries(
        config.get("fuzzylist", []), "fuzzy", source, path, text, "fuzzylist", tolerance
    )


def parse_phishfort(path: Path, source: BlocklistSource) -> Iterator[Entry]:
    domains, text = _load_json(path)
    yield from _entries(domains, "block", source, path, text, "domains")


def parse_plain(path: Path, source: BlocklistSource) -> Iterator[Entry]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            value = line.split("#", 1)[0].strip()
            if not value:
                continue
            if any(c.isspace() for c in value):
                raise InputError(f"{path}: line {number}: expected one domain per line")
            try:
                yield Entry(normalize_host(value), "block", source.name)
            except BadHost as exc:
                raise InputError(f"{path}: line {number}: {exc}; fix or remove it") from None


PARSERS = {
    "eth-phishing-detect": parse_eth_phishing_detect,
    "phishfort": parse_phishfort,
    "plain": parse_plain,
}


def read_sources(folder: Path, sources: Iterable[BlocklistSource]) -> list[Entry]:
    entries: dict[tuple[str, str, str], Entry] = {}
    for source in sources:
        path = folder / source.file
        if not path.is_file():
            raise InputError(f"scam.blocklist.sources: {path} is missing; fix its `file`")
        for entry in PARSERS[source.format](path, source):
            entries.setdefault((entry.domain, entry.kind, entry.source), entry)
    return sorted(entries.values(), key=lambda e: (e.kind, e.domain, e.source))


@dataclass(frozen=True)
class Verdict:
    is_malicious: bool
    match: str  # allow | exact | subdomain | fuzzy | none
    domain: str = ""  # the list entry that matched
    source: str = ""
    distance: int | None = None

    @property
    def reason(self) -> str:
        if self.match == "none":
            return "on no list"
        if self.match == "fuzzy":
            return (
                f"fuzzy: within edit distance {self.distance} of {self.domain} "
                f"({self.source} fuzzylist)"
            )
        where = {"allow": "allowlist", "exact": "blocklist", "subdomain": "blocklist"}[self.match]
        return f"{self.match}: {self.domain} on the {self.source} {where}"


def _fuzzy_form(host: str) -> str:
    form = ".".join(host.split(".")[:-1])
    return form.removeprefix("www.")


class Blocklist:
    """Every list merged; `check(host)` is eth-phishing-detect's verdict over all of them."""

    def __init__(self, entries: Iterable[Entry]) -> None:
        self.entries = list(entries)
        self._allow = {e.domain: e for e in self.entries if e.kind == "allow"}
        self._block = {e.domain: e for e in self.entries if e.kind == "block"}
        self._fuzzy = [(_fuzzy_form(e.domain), e) for e in self.entries if e.kind == "fuzzy"]

    @classmethod
    def from_table(cls, path: Path) -> Blocklist:
        rows = read_parquet(path).to_pylist()
        return cls(Entry(r["domain"], r["kind"], r["source"], r["tolerance"]) for r in rows)

    def blocked_domains(self) -> list[str]:
        return sorted(self._block)

    @staticmethod
    def _suffix_match(host: str, table: Mapping[str, Entry]) -> Entry | None:
        labels = host.split(".")
        for start in range(len(labels)):
            entry = table.get(".".join(labels[start:]))
            if entry is not None:
                return entry
        return None

    def check(self, host: str) -> Verdict:
        host = normalize_host(host)
        if allowed := self._suffix_match(host, self._allow):
            return Verdict(False, "allow", allowed.domain, allowed.source)
        if blocked := self._suffix_match(host, self._block):
            match = "exact" if blocked.domain == host else "subdomain"
            return Verdict(True, match, blocked.domain, blocked.source)
        form = _fuzzy_form(host)
        for target_form, entry in self._fuzzy:
            tolerance = entry.tolerance or 0
            distance = Levenshtein.distance(form, target_form, score_cutoff=tolerance)
            if tolerance and distance <= tolerance:
                return Verdict(True, "fuzzy", entry.domain, entry.source, distance)
        return Verdict(False, "none")


def table(entries: list[Entry]) -> pa.Table:
    return pa.Table.from_pylist([e.__dict__ for e in entries], schema=SCHEMA)


def summary(entries: list[Entry]) -> dict[str, Any]:
    counts: dict[str, dict[str, int]] = {}
    for entry in entries:
        per_source = counts.setdefault(entry.source, dict.fromkeys(KINDS, 0))
        per_source[entry.kind] += 1
    return {
        "domains": len({e.domain for e in entries}),
        "block": sum(e.kind == "block" for e in entries),
        "allow": sum(e.kind == "allow" for e in entries),
        "fuzzy": sum(e.kind == "fuzzy" for e in entries),
        "per_source": counts,
    }


def run(params: ScamParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    entries = read_sources(inputs["lists"], params.blocklist.sources)
    return {"blocklist": table(entries), "summary": summary(entries)}


STAGE = Stage(
    name="scam.blocklist",
    run=run,
    params_key="scam",
    params=("scam.blocklist",),
    inputs={"lists": "data/seed/scam/blocklists"},
    outputs={
        "blocklist": "data/processed/scam/blocklist.parquet",
        "summary": Output.metrics("data/processed/scam/blocklist_summary.json"),
    },
    headline="data/processed/scam/blocklist_summary.json:domains",
)
