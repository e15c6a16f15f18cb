"""What a crawled page says: title, meta description and visible text, no scripts or styles."""

from __future__ import annotations

import re
from dataclasses import dataclass

from parsel import Selector

_HIDDEN = "ancestor::script or ancestor::style or ancestor::noscript or ancestor::template"
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class PageText:
    title: str
    description: str
    text: str
    links: list[str]


def _clean(value: str | None) -> str:
    return _SPACE.sub(" ", value or "").strip()


def page_text(html: str) -> PageText:
    """Visible text in document order; block-level breaks become newlines."""
    page = Selector(text=html or "<html></html>")
    description = page.xpath(
        "//meta[@name='description' or @property='og:description']/@content"
    ).get()
    pieces = (
        page.xpath(f"//body//text()[not({_HIDDEN})]").getall()
        or page.xpath(f"//text()[not({_HIDDEN}) and not(ancestor::head)]").getall()
    )
    lines = [_clean(piece) for piece in pieces]
    return PageText(
        title=_clean(page.xpath("//title/text()").get()),
        description=_clean(description),
        text="\n".join(line for line in lines if line),
        links=page.xpath("//a/@href").getall(),
    )
