"""The offline site farm: the crawl's whole internet, as a forward proxy on 127.0.0.1.

`data/seed/scam/farm/farm.yaml` maps each hostname to its pages or to a hostile behaviour.
The spider sends every request through this proxy with the URL's real domain, so the
crawl runs exactly as it would online while nothing leaves the machine. Hosts the farm
does not know get `502` with `Proxy-Status: …; error=dns_error` (RFC 9209), the way a
real proxy reports a name that does not resolve. Every request is logged.
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import Field, ValidationError

from tasks.core.errors import InputError
from tasks.core.strict_model import StrictModel
from tasks.scam.domains import normalize_host
from tasks.scam.params import FarmParams

MANIFEST = "farm.yaml"
PROXY_NAME = "paperline-farm"
Behaviour = Literal[
    "pages",
    "redirect_loop",
    "redirect_private",
    "large",
    "gzip_bomb",
    "wrong_content_type",
    "binary",
    "slow",
]


class FarmSite(StrictModel):
    kind: Literal["scam", "benign", "hostile"]
    behaviour: Behaviour = "pages"
    pages: dict[str, str] = Field(default_factory=dict, description="path → file")
    content_type: str = "text/html; charset=utf-8"


class FarmManifest(StrictModel):
    sites: dict[str, FarmSite] = Field(min_length=1)


@dataclass
class SiteFarm:
    folder: Path
    sites: dict[str, FarmSite]
    params: FarmParams = field(default_factory=FarmParams)

    @classmethod
    def load(cls, folder: Path, params: FarmParams) -> SiteFarm:
        path = folder / MANIFEST
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
            manifest = FarmManifest.model_validate(raw)
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"{path}: cannot read the farm manifest ({exc})") from None
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise InputError(f"{path}: {where}: {error['msg']}") from None
        sites = {normalize_host(host): site for host, site in manifest.sites.items()}
        for host, site in sites.items():
            for page, file in site.pages.items():
                if not (folder / file).is_file():
                    raise InputError(f"{path}: sites.{host}.pages.{page}: {file} is missing")
        return cls(folder, sites, params)

    def hosts(self, kind: str | None = None) -> list[str]:
        return sorted(h for h, s in self.sites.items() if kind is None or s.kind == kind)

    def seed_urls(self, kind: str) -> list[str]:
        return [f"http://{host}/" for host in self.hosts(kind)]


@lru_cache(maxsize=4)
def gzip_bomb(megabytes: int) -> bytes:
    """`megabytes` of zeros, gzipped (about 1000:1), built once per process."""
    return gzip.compress(b"\0" * (megabytes << 20), compresslevel=9, mtime=0)


PNG_BYTES = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(range(256)) * 8
PDF_BYTES = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


class _Handler(BaseHTTPRequestHandler):
    server: FarmProxy
    protocol_version = "HTTP/1.0"  # one request per connection; bodies end at close

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass  # the proxy keeps its own request log

    def do_CONNECT(self) -> None:  # noqa: N802
        self.server.record("CONNECT", self.path)
        self._status(501, error="http_request_denied", details="the farm serves http only")

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._serve(head=False)

    def _status(self, code: int, error: str = "", details: str = "") -> None:
        self.send_response(code)
        if error:
            self.send_header("Proxy-Status", f'{PROXY_NAME}; error={error}; details="{details}"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send(self, head: bool, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _serve(self, head: bool) -> None:
        url = urlsplit(self.path)
        self.server.record(self.command, self.path)
        if not url.scheme or not url.hostname:
            return self._status(400, "http_request_error", "not a proxy request")
        site = self.server.farm.sites.get(normalize_host(url.hostname))
        if site is None:
            return self._status(502, "dns_error", f"{url.hostname} is not in the farm")
        params = self.server.farm.params
        path = url.path or "/"
        try:
            if site.behaviour == "slow":
                time.sleep(params.slow_seconds)
                return self._page(site, path, head)
            if site.behaviour == "redirect_loop":
                target = "/b" if path != "/b" else "/a"
                return self._redirect(f"http://{url.hostname}{target}")
            if site.behaviour == "redirect_private":
                return self._redirect("http://169.254.169.254/latest/meta-data/")
            if site.behaviour == "large":
                return self._stream_large(head, params.large_page_mb)
            if site.behaviour == "gzip_bomb":
                body = gzip_bomb(params.bomb_mb)
                return self._send(head, body, "text/html", Content_Encoding="gzip")
            if site.behaviour == "wrong_content_type":
                return self._send(head, PDF_BYTES, "application/pdf")
            if site.behaviour == "binary":
                return self._send(head, PNG_BYTES, "text/html")
            return self._page(site, path, head)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout or a size cap): what the case is for

    def _page(self, site: FarmSite, path: str, head: bool) -> None:
        file = site.pages.get(path)
        if file is None:
            return self._status(404)
        body = (self.server.farm.folder / file).read_bytes()
        self._send(head, body, site.content_type)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _stream_large(self, head: bool, megabytes: int) -> None:
        self.send_response(200)  # no Content-Length: the cap must act while reading
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        if head:
            return
        chunk = b"<p>" + b"x" * 65_529 + b"</p>\n"
        for _ in range((megabytes << 20) // len(chunk)):
            self.wfile.write(chunk)


class FarmProxy(ThreadingHTTPServer):
    """`with FarmProxy(farm) as proxy:` serves on 127.0.0.1 (a free port) in a thread."""

    daemon_threads = True

    def __init__(self, farm: SiteFarm, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.farm = farm
        self.requests: list[tuple[str, str]] = []  # (method, absolute URL)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def record(self, method: str, url: str) -> None:
        with self._lock:
            self.requests.append((method, url))

    def __enter__(self) -> FarmProxy:
        # build the gzip bomb before serving: compressing it inside the first request can
        # take longer than a crawler's timeout, and the page would read as slow, not huge
        if any(site.behaviour == "gzip_bomb" for site in self.farm.sites.values()):
            gzip_bomb(self.farm.params.bomb_mb)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
        self.server_close()
