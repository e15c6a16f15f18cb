"""Benign hosts for the URL guard, found offline: the homepage and project URLs in the
installed distributions' metadata and the http(s) URLs in the standard library's source.

`paperline scam benign-hosts -o data/seed/scam/benign_hosts.txt` writes the committed
snapshot the `scam.guard` stage reads; the stage never looks at the environment itself.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit

from tasks.scam.blocklist import Blocklist
from tasks.scam.domains import (
    BadHost,
    has_registered_domain,
    is_ip,
    normalize_host,
    registered_domain,
)

_URL = re.compile(r"https?://[^\s\"'<>()\[\]{}\\,]+")
EXAMPLE_DOMAINS = {"example.com", "example.net", "example.org"}  # RFC 2606
# the stdlib's own tests and the base interpreter's packages are not "the standard library"
SKIPPED_FOLDERS = {"site-packages", "dist-packages", "test", "tests", "idle_test"}
REGENERATE = "paperline scam benign-hosts -o data/seed/scam/benign_hosts.txt"


def _host(url: str) -> str | None:
    try:
        return urlsplit(url.strip()).hostname
    except ValueError:  # a bracketed host that is no IPv6 address
        return None


def package_urls() -> Iterator[str]:
    """Home-page and every Project-URL ('Label, https://…') of the installed distributions."""
    for distribution in metadata.distributions():
        fields = distribution.metadata
        yield from filter(None, [fields.get("Home-page")])
        for value in fields.get_all("Project-URL") or []:
            yield value.split(",", 1)[-1]


def stdlib_urls(folder: Path | None = None) -> Iterator[str]:
    """http(s) URLs written anywhere in the standard library's *.py files."""
    folder = folder or Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(folder.rglob("*.py")):
        if SKIPPED_FOLDERS & set(path.relative_to(folder).parts[:-1]):
            continue
        yield from _URL.findall(path.read_text(encoding="utf-8", errors="replace"))


def benign_hosts(urls: Iterable[str], blocklist: Blocklist) -> list[str]:
    """Normalized, sorted, unique hosts; no IPs, no reserved or example names, none listed."""
    hosts = set()
    for url in urls:
        try:
            host = normalize_host(_host(url) or "")
        except BadHost:
            continue
        if is_ip(host) or not has_registered_domain(host):
            continue
        if registered_domain(host) in EXAMPLE_DOMAINS or blocklist.check(host).is_malicious:
            continue
        hosts.add(host)
    return sorted(hosts)


def snapshot_text(hosts: list[str]) -> str:
    python = f"Python {sys.version_info.major}.{sys.version_info.minor}"
    header = [
        "# Benign hosts for the URL guard (scam.guard), one per line: the Home-page and",
        "# Project-URL hosts of the installed distributions' metadata and the http(s) hosts in",
        f"# the *.py files of {python}'s standard library (its tests left out); normalized,",
        "# with IPs, reserved and example names and anything the blocklists flag dropped.",
        f"# Regenerate: {REGENERATE}",
    ]
    return "\n".join(header + hosts) + "\n"
