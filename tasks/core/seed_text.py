"""Real English text from the seed, for areas that need prose: haystacks, held-out text.

The UDHR's English translation (every `<para>`, in document order) and the docstrings of
the CPython standard-library sample (modules, classes and functions, in file order), each
whitespace-normalised, in natural case.
"""

from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from tasks.core.errors import InputError
from tasks.core.source_archive import read_source_archive

UDHR_ENGLISH = "data/seed/udhr/udhr_eng.xml"
CODE_ARCHIVE = "data/seed/code/cpython-3.11.7-stdlib.parquet"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def udhr_paragraphs(path: Path) -> list[str]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as error:
        raise InputError(f"{path}: unreadable UDHR translation ({error})") from None
    paragraphs = [
        " ".join("".join(e.itertext()).split())
        for e in root.iter()
        if e.tag.rsplit("}", 1)[-1] == "para"
    ]
    found = [p for p in paragraphs if p]
    if not found:
        raise InputError(f"{path}: no <para> text; restore the UDHR English translation")
    return found


def docstrings(archive: Path) -> list[str]:
    """Module, class and function docstrings of every file of the source archive."""
    found = []
    for source in read_source_archive(archive):
        try:
            tree = ast.parse(source.source)
        except SyntaxError as error:
            raise InputError(f"{archive}: {source.path} does not parse ({error.msg})") from None
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        for node in ast.walk(tree):
            if isinstance(node, kinds) and (doc := ast.get_docstring(node)):
                found.append(" ".join(doc.split()))
    return found


def seed_paragraphs(udhr: Path, archive: Path) -> list[str]:
    """The UDHR's paragraphs, then the docstrings."""
    return udhr_paragraphs(udhr) + docstrings(archive)


def sentences(paragraphs: list[str]) -> list[str]:
    """Each paragraph split after `.`, `!` or `?` where a capital, digit or quote follows."""
    return [s for p in paragraphs for s in SENTENCE_END.split(p) if s.strip()]
