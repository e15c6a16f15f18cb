"""The URL guard as an oracle detector: flags a URL whose host scores P(malicious) ≥ threshold.

Advisory: a learned guess from the host's characters alone, reported under its own name
(`url_guard`) so the audit can tell its rate from the blocklists'.
"""

from __future__ import annotations

from pathlib import Path

from tasks.scam.domains import BadHost, host_of, is_ip
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
