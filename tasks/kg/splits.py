"""Train / dev / test by question: the key that makes two questions the same, the split a
question falls in, and the check that no question is in two splits."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tasks.core.errors import InputError
from tasks.core.io import read_parquet

SPLITS = ("train", "dev", "test")


def question_key(question: str) -> str:
    """What makes two questions the same: the text, case and spacing aside."""
    return " ".join(question.casefold().split())


def split_of(question: str, dev_fraction: float, test_fraction: float) -> str:
    """The question's split from a hash of its key: test, dev, then train by bucket."""
    digest = hashlib.sha1(question_key(question).encode()).hexdigest()
    bucket = int(digest[:8], 16) / 0xFFFFFFFF
    if bucket < test_fraction:
        return "test"
    return "dev" if bucket < test_fraction + dev_fraction else "train"


def questions_by_split(rows: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Each split's question keys (rows with `question` and `split`)."""
    found: dict[str, set[str]] = {name: set() for name in SPLITS}
    for row in rows:
        found[row["split"]].add(question_key(row["question"]))
    return found


def shared_questions(rows: list[dict[str, Any]]) -> set[str]:
    """Question keys found in more than one split (none, when the split is by question)."""
    found = questions_by_split(rows)
    return {q for a in SPLITS for b in SPLITS if a < b for q in found[a] & found[b]}


def read_splits(examples: Path) -> dict[str, set[str]]:
    """Each split's question keys from kg.examples' output; a question in two splits is an
    input error (the split is by question)."""
    rows = read_parquet(examples, columns=["question", "split"]).to_pylist()
    if shared := shared_questions(rows):
        raise InputError(
            f"{examples}: {len(shared)} question(s) in two splits (e.g. {sorted(shared)[0]!r}); "
            "rerun kg.examples, which splits by question"
        )
    return questions_by_split(rows)
