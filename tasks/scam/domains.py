"""Hostnames the way every scam stage compares them: lower-case, IDNA (punycode), no dot.

`registered_domain` uses the Public Suffix List snapshot bundled with tldextract, so it
works offline and gives the same answer on every machine.
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from urllib.parse import urlsplit

import idna
import tldextract

_ASCII_HOST = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
_EXTRACT = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


class BadHost(ValueError):
    """Not a hostname (empty, a label too long, a character IDNA rejects)."""


@lru_cache(maxsize=65536)
def normalize_host(host: str) -> str:
    """'WWW.Bücher.de.' → 'www.xn--bcher-kva.de'; IP literals pass through unchanged."""
    text = host.strip().strip(".").lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text:
        raise BadHost("empty hostname")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    if text.isascii():
        labels = text.split(".")
        too_long = any(not label or len(label) > 63 for label in labels) or len(text) > 253
        if too_long or not _ASCII_HOST.fullmatch(text):
            raise BadHost(f"'{host}' is not a hostname")
        return text
    try:
        return idna.encode(text, uts46=True).decode("ascii")
    except idna.IDNAError as exc:
        raise BadHost(f"'{host}' is not a valid internationalized hostname ({exc})") from None


def host_of(url: str) -> str:
    """The normalized host of a URL or of a bare domain ('evil.com/path')."""
    parts = urlsplit(url if "//" in url else f"//{url}")
    if not parts.hostname:
        raise BadHost(f"'{url}' has no hostname")
    return normalize_host(parts.hostname)


def registered_domain(host: str) -> str:
    """'a.b.quantstamp.com.co' → 'quantstamp.com.co' (the host itself when no suffix)."""
    result = _EXTRACT(host)
    return result.top_domain_under_public_suffix or result.domain or host


def has_registered_domain(host: str) -> bool:
    """'docs.python.org' yes; 'localhost', 'farm.example', 'another.pypi' no."""
    return bool(_EXTRACT(host).top_domain_under_public_suffix)


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
