"""The URL guard's examples: labelled hosts, split by registered domain, encoded as characters.

Positives are the blocklists' `block` entries. Negatives are their `allow` entries (the
whitelist) plus the committed data/seed/scam/benign_hosts.txt; a host that is also a
positive is no negative. Fuzzylist targets are real brands, so they are neither.

The split hashes each host's registered domain (xxh3), so every host of one registered
domain lands on the same side and no domain is in two splits.

Encoding: a normalized host (a-z, 0-9, `.`, `-`, `_`) becomes `max_length` ids, one per
character: 0 pads, 1 stands for any other character, then `VOCAB` in order from 2. A host
longer than `max_length` keeps its end (the registered domain and the TLD), padding follows
the characters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xxhash

from tasks.core.errors import InputError
from tasks.scam.blocklist import Entry
from tasks.scam.domains import BadHost, normalize_host, registered_domain
from tasks.scam.params import GuardParams

VOCAB = "abcdefghijklmnopqrstuvwxyz0123456789.-_"
PAD, UNKNOWN = 0, 1
VOCAB_SIZE = len(VOCAB) + 2
_IDS = {char: index for index, char in enumerate(VOCAB, start=2)}
SPLITS = ("train", "validation", "test")
TRAIN_DOMAINS = "train_domains.txt"  # in the model folder: the train split's registered domains
_BUCKETS = 10_000


@dataclass(frozen=True)
class Example:
    host: str
    label: int  # 1 malicious, 0 benign
    domain: str  # the registered domain the split is drawn by
    split: str


def read_benign_hosts(path: Path) -> list[str]:
    """The snapshot's hosts, normalized; `#` starts a comment."""
    hosts = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            value = line.split("#", 1)[0].strip()
            if not value:
                continue
            try:
                hosts.append(normalize_host(value))
            except BadHost as exc:
                raise InputError(f"{path}: line {number}: {exc}; fix or remove it") from None
    return hosts


def labelled_hosts(entries: Iterable[Entry], benign: Iterable[str]) -> dict[str, int]:
    """host → 1 (blocklisted) or 0 (allowlisted or benign, and not blocklisted)."""
    entries = list(entries)
    labels = {e.domain: 1 for e in entries if e.kind == "block"}
    for host in [*(e.domain for e in entries if e.kind == "allow"), *benign]:
        labels.setdefault(host, 0)
    return labels


def split_of(domain: str, validation_share: float, test_share: float) -> str:
    bucket = xxhash.xxh3_64_intdigest(domain.encode("utf-8")) % _BUCKETS / _BUCKETS
    if bucket < test_share:
        return "test"
    return "validation" if bucket < test_share + validation_share else "train"


def build_examples(
    entries: Iterable[Entry], benign: Iterable[str], params: GuardParams
) -> list[Example]:
    labels = labelled_hosts(entries, benign)
    examples = []
    for host, label in sorted(labels.items()):
        domain = registered_domain(host)
        split = split_of(domain, params.validation_share, params.test_share)
        examples.append(Example(host, label, domain, split))
    return examples


def split_summary(examples: list[Example]) -> dict[str, dict[str, int]]:
    summary = {}
    for split in SPLITS:
        own = [e for e in examples if e.split == split]
        positives = sum(e.label for e in own)
        summary[split] = {
            "hosts": len(own),
            "positive": positives,
            "negative": len(own) - positives,
            "registered_domains": len({e.domain for e in own}),
        }
    return summary


def encode_host(host: str, max_length: int) -> list[int]:
    ids = [_IDS.get(char, UNKNOWN) for char in host[-max_length:]]
    return ids + [PAD] * (max_length - len(ids))


def decode_host(ids: Iterable[int]) -> str:
    """The inverse of `encode_host` for a host within `max_length` of the vocabulary."""
    return "".join("?" if i == UNKNOWN else VOCAB[i - 2] for i in ids if i != PAD)


def encode_hosts(hosts: Iterable[str], max_length: int) -> np.ndarray:
    """(len(hosts), max_length) int64 ids."""
    rows = [encode_host(host, max_length) for host in hosts]
    return np.array(rows, dtype=np.int64).reshape(len(rows), max_length)
