"""The URL guard as a detector: flags a URL whose host scores P(malicious) ≥ threshold.

Advisory and not independent of what it judges: a learned guess from the host's characters,
trained on the blocklisted hosts themselves. So it is no part of the audit's oracle. The
audit reports it in its own column (`GuardColumn`), and only on URLs whose registered domain
was not in the guard's training split (the model folder's `train_domains.txt`): a host it
was trained on would be graded by its own answer key.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import InputError
from tasks.scam.domains import BadHost, host_of, is_ip, registered_domain
from tasks.scam.guard_data import TRAIN_DOMAINS
from tasks.scam.guard_model import CharCNN, load_model, score_hosts
from tasks.scam.oracle import Finding


class UrlGuardDetector:
    name = "url_guard"

    def __init__(self, model: CharCNN, threshold: float | None = None) -> None:
        self.model = model
        self.threshold = model.config.threshold if threshold is None else threshold

    @classmethod
    def load(cls, folder: Path, threshold: float | None = None) -> UrlGuardDetector:
        return cls(load_model(folder), threshold)

    def check(self, urls: list[str]) -> dict[str, Finding]:
        findings, hosts = {}, {}
        for url in urls:
            try:
                host = host_of(url)
            except BadHost as exc:
                findings[url] = Finding(False, f"not checked: {exc}")
                continue
            if is_ip(host):
                findings[url] = Finding(False, "url_guard: not scored (an IP address)")
            else:
                hosts[url] = host
        unique = list(dict.fromkeys(hosts.values()))
        scores = dict(zip(unique, score_hosts(self.model, unique), strict=True))
        for url, host in hosts.items():
            p = scores[host]
            flagged = p >= self.threshold
            sign = "≥" if flagged else "<"
            findings[url] = Finding(flagged, f"url_guard: p={p:.3f} {sign} {self.threshold:g}")
        return {url: findings[url] for url in urls}


@dataclass(frozen=True)
class GuardVerdict:
    scored: bool  # False: its registered domain was in the guard's training split (or no host)
    flagged: bool
    reason: str


def read_train_domains(folder: Path) -> frozenset[str]:
    path = folder / TRAIN_DOMAINS
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        raise InputError(
            f"{path}: missing; the guard's training domains travel with it (dvc repro scam-guard)"
        ) from None
    return frozenset(line.strip() for line in lines if line.strip())


class GuardColumn:
    """The guard's verdicts on hosts it did not see in training; the rest are not scored."""

    def __init__(self, detector: UrlGuardDetector, train_domains: frozenset[str]) -> None:
        self.detector, self.train_domains = detector, train_domains

    @classmethod
    def load(cls, folder: Path, threshold: float | None = None) -> GuardColumn:
        return cls(UrlGuardDetector.load(folder, threshold), read_train_domains(folder))

    def judge(self, urls: Iterable[str]) -> dict[str, GuardVerdict]:
        verdicts, unseen = {}, []
        for url in dict.fromkeys(urls):
            try:
                domain = registered_domain(host_of(url))
            except BadHost as exc:
                verdicts[url] = GuardVerdict(False, False, f"url_guard: not scored ({exc})")
                continue
            if domain in self.train_domains:
                reason = f"url_guard: not scored ({domain} is in its training split)"
                verdicts[url] = GuardVerdict(False, False, reason)
            else:
                unseen.append(url)
        for url, finding in self.detector.check(unseen).items():
            verdicts[url] = GuardVerdict(True, finding.is_malicious, finding.reason)
        return verdicts
