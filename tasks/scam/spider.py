"""The Scrapy spider for scam sites: HEAD first, text/html only, every outcome recorded.

Safety comes from Scrapy's own settings (see `tasks.scam.crawl.crawl_settings`): the size
cap (`DOWNLOAD_MAXSIZE`, which Scrapy also applies while decompressing), timeouts,
bounded retries and redirects, per-domain concurrency; JavaScript is never executed. Two
downloader middlewares here add an SSRF guard and the farm's proxy routing.
"""

from __future__ import annotations

import hashlib
import ipaddress
import socket
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.exceptions import DownloadCancelledError, DownloadTimeoutError, IgnoreRequest
from scrapy.http import Response, TextResponse
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads
from twisted.internet.error import (
    ConnectionRefusedError,
    DNSLookupError,
    TCPTimedOutError,
    TimeoutError,
)
from twisted.python.failure import Failure

from tasks.scam.domains import BadHost, normalize_host, registered_domain
from tasks.scam.page_text import page_text

HTML_TYPES = ("text/html", "application/xhtml+xml")


@dataclass
class CrawlLog:
    """What the spider saw: one row per URL tried, the raw HTML by content hash."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    html: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)  # every URL handed to the downloader
    proxied: int = 0

    def outcomes(self) -> Counter:
        return Counter(row["outcome"] for row in self.rows)


def private_kind(address: str) -> str | None:
    ip = ipaddress.ip_address(address)
    for kind in ("loopback", "link_local", "private", "reserved", "multicast", "unspecified"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    return None


class SsrfGuard:
    """Refuses a request (redirects included) whose host resolves to a non-public address.

    `PAPERLINE_FARM_HOSTS` resolve to 127.0.0.1 (the farm's proxy serves them); other names
    go through the system resolver, off the reactor thread.
    """

    def __init__(self, allow_private: bool, farm_hosts: set[str]) -> None:
        self.allow_private, self.farm_hosts = allow_private, farm_hosts

    @classmethod
    def from_crawler(cls, crawler: Any) -> SsrfGuard:
        settings = crawler.settings
        return cls(
            settings.getbool("PAPERLINE_ALLOW_PRIVATE_NETWORKS"),
            set(settings.getlist("PAPERLINE_FARM_HOSTS")),
        )

    async def _addresses(self, host: str) -> list[str]:
        try:
            return [str(ipaddress.ip_address(host))]
        except ValueError:
            pass
        if host in self.farm_hosts:
            return ["127.0.0.1"]
        try:
            infos = await maybe_deferred_to_future(
                threads.deferToThread(socket.getaddrinfo, host, None)
            )
        except OSError:
            return []  # unresolvable: the download fails with its own DNS error
        return sorted({info[4][0] for info in infos})

    async def process_request(self, request: scrapy.Request) -> None:
        if self.allow_private:
            return
        host = urlsplit(request.url).hostname or ""
        for address in await self._addresses(host):
            if kind := private_kind(address):
                raise IgnoreRequest(
                    f"ssrf guard: {host} resolves to {address} ({kind}); "
                    "scam.crawl.allow_private_networks is for the local farm only"
                )


class ProxyEverything:
    """Routes every request through `PAPERLINE_PROXY` (the farm) and counts them."""

    def __init__(self, proxy: str) -> None:
        self.proxy = proxy

    @classmethod
    def from_crawler(cls, crawler: Any) -> ProxyEverything:
        return cls(crawler.settings.get("PAPERLINE_PROXY") or "")

    def process_request(self, request: scrapy.Request) -> None:
        if self.proxy:
            request.meta["proxy"] = self.proxy


def failure_reason(failure: Failure, timeout: float) -> str:
    error = failure.value
    message = str(error)
    if "max size" in message or "DOWNLOAD_MAXSIZE" in message:
        kind = "decompressed body" if "decompression" in message else "body"
        return f"too large: {kind} over the size cap ({message.split(' in request')[0]})"[:300]
    if isinstance(error, HttpError):
        response = error.response
        status = response.headers.get("Proxy-Status", b"").decode("latin-1")
        detail = status.split("error=", 1)[1].split(";")[0] if "error=" in status else ""
        return f"http {response.status}" + (f" ({detail})" if detail else "")
    if isinstance(error, IgnoreRequest):
        return message or "ignored"
    if isinstance(error, DownloadCancelledError):  # Scrapy cancels a body over the cap
        return "too large: body over the size cap while streaming"
    if isinstance(error, (TimeoutError, TCPTimedOutError, DownloadTimeoutError)):
        return f"timeout: no response within {timeout:g} s"
    if isinstance(error, DNSLookupError):
        return "dns: the name does not resolve"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    return f"{type(error).__name__}: {message}"[:300]


def is_binary(body: bytes) -> bool:
    """NUL bytes or mostly control bytes in the first 1 KiB: not a text page."""
    head = body[:1024]
    if b"\0" in head:
        return True
    control = sum(b < 9 or 13 < b < 32 for b in head)
    return bool(head) and control / len(head) > 0.1


class SiteSpider(scrapy.Spider):
    """Landing page of each seed, then same-site links up to `max_pages_per_site`."""

    name = "scam-sites"

    def __init__(
        self,
        seeds: list[str],
        log: CrawlLog,
        head_first: bool,
        max_page_bytes: int,
        max_pages_per_site: int,
        timeout: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.seeds, self.log, self.head_first = seeds, log, head_first
        self.max_page_bytes, self.max_pages_per_site = max_page_bytes, max_pages_per_site
        self.timeout = timeout
        self.pages_per_site: Counter = Counter()
        self.seen: set[str] = set(seeds)

    async def start(self):  # noqa: ANN201 - Scrapy's async generator of start requests
        for url in self.seeds:
            try:
                site = normalize_host(urlsplit(url).hostname or "")
            except BadHost as exc:
                self._record(url, url, "", 0, "refused", f"bad url: {exc}")
                continue
            self.pages_per_site[site] += 1
            yield self._request(url, site, depth=0)

    def _request(self, url: str, site: str, depth: int) -> scrapy.Request:
        # dont_filter: a redirect loop must reach REDIRECT_MAX_TIMES and be recorded, not
        # vanish in the dupefilter; the spider dedupes the links it follows itself.
        meta = {"site": site, "requested": url, "page_depth": depth}
        method, callback = ("HEAD", self.on_head) if self.head_first else ("GET", self.on_page)
        return scrapy.Request(
            url,
            method=method,
            callback=callback,
            errback=self.on_error,
            meta=meta,
            dont_filter=True,
        )

    def _record(
        self,
        url: str,
        final_url: str,
        site: str,
        depth: int,
        outcome: str,
        reason: str,
        response: Response | None = None,
        **fields: Any,
    ) -> None:
        self.log.rows.append(
            {
                "url": url,
                "final_url": final_url,
                "site": site,
                "depth": depth,
                "outcome": outcome,
                "reason": reason,
                "status": response.status if response is not None else None,
                "content_type": _content_type(response) if response is not None else "",
                "sha256": "",
                "bytes": 0,
                "title": "",
                "description": "",
                "text": "",
                **fields,
            }
        )

    def _skip(self, response: Response, reason: str) -> None:
        meta = response.meta
        self._record(
            meta["requested"],
            response.url,
            meta["site"],
            meta["page_depth"],
            "skipped",
            reason,
            response,
        )

    def on_head(self, response: Response):  # noqa: ANN201
        content_type = _content_type(response)
        if not content_type.startswith(HTML_TYPES):
            self._skip(response, f"content-type: {content_type or 'none'} (HEAD)")
            return
        declared = int(response.headers.get("Content-Length", b"0") or 0)
        if declared > self.max_page_bytes:
            self._skip(response, f"too large: declares {declared} B (HEAD)")
            return
        yield response.request.replace(url=response.url, method="GET", callback=self.on_page)

    def on_page(self, response: Response):  # noqa: ANN201
        meta = response.meta
        content_type = _content_type(response)
        if not content_type.startswith(HTML_TYPES):
            self._skip(response, f"content-type: {content_type or 'none'}")
            return
        if is_binary(response.body) or not isinstance(response, TextResponse):
            self._skip(response, "binary body")
            return
        page = page_text(response.text)
        digest = hashlib.sha256(response.body).hexdigest()
        self.log.html[digest] = response.body
        self._record(
            meta["requested"],
            response.url,
            meta["site"],
            meta["page_depth"],
            "ok",
            "",
            response,
            sha256=digest,
            bytes=len(response.body),
            title=page.title,
            description=page.description,
            text=page.text,
        )
        if meta["page_depth"] > 0:
            return
        site = meta["site"]
        for link in page.links:
            url = response.urljoin(link)
            host = urlsplit(url).hostname or ""
            if self.pages_per_site[site] >= self.max_pages_per_site:
                break
            url = url.split("#")[0]
            if url in self.seen or urlsplit(url).scheme not in ("http", "https"):
                continue
            if _same_site(host, site):
                self.seen.add(url)
                self.pages_per_site[site] += 1
                yield self._request(url, site, depth=1)

    def on_error(self, failure: Failure) -> None:
        request = failure.request
        meta = request.meta
        response = getattr(failure.value, "response", None)
        outcome = "refused" if "ssrf guard" in str(failure.value) else "failed"
        self._record(
            meta["requested"],
            request.url,
            meta["site"],
            meta["page_depth"],
            outcome,
            failure_reason(failure, self.timeout),
            response,
        )


def _content_type(response: Response) -> str:
    value = response.headers.get("Content-Type", b"").decode("latin-1")
    return value.split(";")[0].strip().lower()


def _same_site(host: str, site: str) -> bool:
    try:
        return registered_domain(normalize_host(host)) == registered_domain(site)
    except BadHost:
        return False
