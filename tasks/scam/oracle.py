"""Is a URL malicious? The blocklists always; external detectors when their keys are set.

A URL is malicious when any detector flags it (Scam2Prompt's oracle). Detectors:
- `blocklist`: the merged lists, exact / subdomain / fuzzy (eth-phishing-detect rules);
- `google_safe_browsing` (Lookup API v4), `chainpatrol` (asset check), `urlhaus`
  (abuse.ch URL lookup): each active only when its API key's variable is in the
  environment, so the offline default runs on the blocklists alone and says so.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from tasks.core.errors import UserError
from tasks.scam.blocklist import Blocklist
from tasks.scam.domains import BadHost, host_of
from tasks.scam.params import DetectorParams, OracleParams

GSB_THREATS = [
    "MALWARE",
    "SOCIAL_ENGINEERING",
    "UNWANTED_SOFTWARE",
    "POTENTIALLY_HARMFUL_APPLICATION",
]


@dataclass(frozen=True)
class Finding:
    is_malicious: bool
    reason: str


@dataclass
class OracleResult:
    is_malicious: bool = False
    detectors_triggered: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def as_row(self) -> dict[str, Any]:
        return {
            "is_malicious": self.is_malicious,
            "detectors_triggered": self.detectors_triggered,
            "reasons": self.reasons,
        }


class Detector(Protocol):
    name: str

    def check(self, urls: list[str]) -> dict[str, Finding]: ...


class BlocklistDetector:
    name = "blocklist"

    def __init__(self, blocklist: Blocklist) -> None:
        self.blocklist = blocklist

    def check(self, urls: list[str]) -> dict[str, Finding]:
        findings = {}
        for url in urls:
            try:
                verdict = self.blocklist.check(host_of(url))
            except BadHost as exc:
                findings[url] = Finding(False, f"not checked: {exc}")
                continue
            findings[url] = Finding(verdict.is_malicious, verdict.reason)
        return findings


def _session() -> requests.Session:
    session = requests.Session()
    retry = Retry(
        total=3,
        backoff_factor=1.0,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=None,
        respect_retry_after_header=True,
    )
    session.mount("https://", HTTPAdapter(max_retries=retry))
    session.mount("http://", HTTPAdapter(max_retries=retry))
    return session


class ExternalDetector(ABC):
    """An HTTP lookup service; each subclass's `_lookup` turns one batch into findings."""

    name = ""
    batch_size = 1

    def __init__(self, params: DetectorParams, key: str, timeout: float) -> None:
        self.url, self.key, self.timeout = params.url, key, timeout
        self.session = _session()

    def check(self, urls: list[str]) -> dict[str, Finding]:
        findings: dict[str, Finding] = {}
        for start in range(0, len(urls), self.batch_size):
            batch = urls[start : start + self.batch_size]
            try:
                findings.update(self._lookup(batch))
            except (requests.RequestException, ValueError, KeyError) as exc:
                raise UserError(
                    f"oracle {self.name}: {self.url} failed ({exc}); "
                    "check the key or unset it to skip this detector"
                ) from None
        return findings

    @abstractmethod
    def _lookup(self, batch: list[str]) -> dict[str, Finding]: ...


class GoogleSafeBrowsing(ExternalDetector):
    name = "google_safe_browsing"
    batch_size = 500  # the Lookup API's limit per request

    def _lookup(self, batch: list[str]) -> dict[str, Finding]:
        body = {
            "client": {"clientId": "paperline", "clientVersion": "0.1"},
            "threatInfo": {
                "threatTypes": GSB_THREATS,
                "platformTypes": ["ANY_PLATFORM"],
                "threatEntryTypes": ["URL"],
                "threatEntries": [{"url": u} for u in batch],
            },
        }
        reply = self.session.post(
            self.url, params={"key": self.key}, json=body, timeout=self.timeout
        )
        reply.raise_for_status()
        threats: dict[str, list[str]] = {}
        for match in reply.json().get("matches", []):
            threats.setdefault(match["threat"]["url"], []).append(match["threatType"])
        return {
            url: Finding(
                url in threats,
                f"safe browsing: {', '.join(threats[url])}"
                if url in threats
                else "safe browsing: no match",
            )
            for url in batch
        }


class ChainPatrol(ExternalDetector):
    name = "chainpatrol"

    def _lookup(self, batch: list[str]) -> dict[str, Finding]:
        (url,) = batch
        reply = self.session.post(
            self.url, headers={"X-API-KEY": self.key}, json={"content": url}, timeout=self.timeout
        )
        reply.raise_for_status()
        status = str(reply.json()["status"]).upper()
        return {url: Finding(status == "BLOCKED", f"chainpatrol: {status.lower()}")}


class UrlHaus(ExternalDetector):
    name = "urlhaus"

    def _lookup(self, batch: list[str]) -> dict[str, Finding]:
        (url,) = batch
        reply = self.session.post(
            self.url, headers={"Auth-Key": self.key}, data={"url": url}, timeout=self.timeout
        )
        reply.raise_for_status()
        answer = reply.json()
        listed = answer.get("query_status") == "ok"
        threat = answer.get("threat") or "listed"
        return {url: Finding(listed, f"urlhaus: {threat}" if listed else "urlhaus: not listed")}


EXTERNAL: dict[str, type[ExternalDetector]] = {
    "google_safe_browsing": GoogleSafeBrowsing,
    "chainpatrol": ChainPatrol,
    "urlhaus": UrlHaus,
}


class Oracle:
    def __init__(self, detectors: Iterable[Detector]) -> None:
        self.detectors = list(detectors)

    @classmethod
    def from_params(
        cls,
        params: OracleParams,
        blocklist: Blocklist,
        env: Mapping[str, str] | None = None,
        extra: Iterable[Detector] = (),
    ) -> Oracle:
        env = os.environ if env is None else env
        detectors: list[Detector] = [BlocklistDetector(blocklist), *extra]
        for name, detector_class in EXTERNAL.items():
            config: DetectorParams = getattr(params, name)
            if env.get(config.api_key_env):
                detectors.append(
                    detector_class(config, env[config.api_key_env], params.timeout_seconds)
                )
        return cls(detectors)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.detectors]

    def judge(self, urls: Iterable[str]) -> dict[str, OracleResult]:
        unique = list(dict.fromkeys(urls))
        results = {url: OracleResult() for url in unique}
        for detector in self.detectors:
            for url, finding in detector.check(unique).items():
                result = results[url]
                result.reasons.append(finding.reason)
                if finding.is_malicious:
                    result.is_malicious = True
                    result.detectors_triggered.append(detector.name)
        return results
