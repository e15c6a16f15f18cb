"""The UDHR-in-Unicode collection: one document per article (and the preamble).

`index.xml` gives each translation's ISO 639-3 code, ISO 15924 script and BCP-47 tag;
`udhr_<f>.xml` holds the text, paragraphs in `<para>` (list items nest them).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.core.errors import InputError
from tasks.core.progress import get_logger, track
from tasks.corpus.documents import document

SOURCE = "udhr"
log = get_logger("paperline.corpus.udhr")


@dataclass(frozen=True)
class Translation:
    key: str  # the `f` attribute: file udhr_<key>.xml
    lang: str
    script: str
    bcp47: str
    name: str


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _parse(path: Path) -> ET.Element:
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise InputError(
            f"{path}: invalid XML ({exc}); restore it from the UDHR collection"
        ) from None


def read_index(folder: Path) -> dict[str, Translation]:
    """Translations listed in index.xml, keyed by file key."""
    index = folder / "index.xml"
    if not index.exists():
        raise InputError(f"{index}: missing; the UDHR folder needs its index.xml")
    entries = {}
    for number, entry in enumerate(_parse(index).iter("udhr"), start=1):
        attrs = entry.attrib
        try:
            key = attrs["f"]
            entries[key] = Translation(
                key=key,
                lang=attrs["iso639-3"],
                script=attrs["iso15924"],
                bcp47=attrs.get("bcp47") or attrs["iso639-3"],
                name=attrs.get("n", ""),
            )
        except KeyError as missing:
            raise InputError(f"{index}: entry {number}: attribute {missing} is missing") from None
    return entries


def _paragraphs(section: ET.Element) -> str:
    paras = (
        " ".join("".join(p.itertext()).split()) for p in section.iter() if _local(p.tag) == "para"
    )
    return "\n".join(p for p in paras if p)


def _sections(root: ET.Element) -> Iterator[tuple[str, str]]:
    for element in root.iter():
        tag = _local(element.tag)
        if tag == "preamble":
            yield "preamble", _paragraphs(element)
        elif tag == "article":
            yield f"article-{element.get('number', '?')}", _paragraphs(element)


def read_translation(path: Path, entry: Translation | None) -> Iterator[dict[str, Any]]:
    """The documents of one translation; the file's own attributes fill gaps in the index."""
    root = _parse(path)
    key = path.stem.removeprefix("udhr_")
    lang = (entry.lang if entry else None) or root.get("iso639-3") or "und"
    script = (entry.script if entry else None) or root.get("iso15924") or "Zyyy"
    bcp47 = (entry.bcp47 if entry else None) or lang
    for section, text in _sections(root):
        if text:
            yield document(f"udhr/{key}/{section}", text, lang, script, bcp47, SOURCE)


def read_udhr(folder: Path) -> Iterator[dict[str, Any]]:
    """Every document of every translation file present in `folder`."""
    index = read_index(folder)
    files = sorted(folder.glob("udhr_*.xml"))
    if not files:
        raise InputError(f"{folder}: no udhr_*.xml files; copy the UDHR collection there")
    unindexed = [f.name for f in files if f.stem.removeprefix("udhr_") not in index]
    if unindexed:
        log.warning(
            "%d files not in index.xml, using their own attributes: %s",
            len(unindexed),
            ", ".join(unindexed[:5]),
        )
    for path in track(files, "udhr: translations", unit="files", logger=log):
        yield from read_translation(path, index.get(path.stem.removeprefix("udhr_")))
