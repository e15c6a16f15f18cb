"""The haystack: real English text as one stream of word tokens.

The UDHR's English translation (every `<para>`, in document order) followed by the
docstrings of the CPython standard-library sample (modules, classes and functions, in file
order), lowercased and split into words and punctuation runs, the split the area's
word-level tokenizer makes (`\\w+|[^\\w\\s]+`, the `tokenizers` Whitespace pre-tokenizer).
"""

from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from tasks.core.errors import InputError
from tasks.core.source_archive import read_source_archive

WORD = re.compile(r"\w+|[^\w\s]+")


def words(text: str) -> list[str]:
    """`text` as the tokenizer's words (lowercased)."""
    return WORD.findall(text.lower())


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


def haystack_words(udhr: Path, archive: Path) -> list[str]:
    """The whole haystack as one word stream (UDHR first, then the docstrings)."""
    stream: list[str] = []
    for text in udhr_paragraphs(udhr) + docstrings(archive):
        stream += words(text)
    return stream
