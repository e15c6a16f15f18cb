"""An AOEB task as MTEB declares one: metadata plus corpus, queries and qrels per split.

On disk a task is a folder in MTEB/BEIR's layout, so published tasks and the embedded ones
read the same way:

    <task>/task.json          the declaration (name, capability, modality, main metric, ...)
    <task>/corpus.jsonl       {"id", "title", "text"} (+ "image": a PNG path inside the folder)
    <task>/queries.jsonl      {"id", "text"}
    <task>/qrels/<split>.tsv  query-id, corpus-id, score (header line)
    <task>/candidates.jsonl   optional {"query_id", "candidates": [corpus ids]}: the query is
                              ranked only against its own pool (memory tasks)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from tasks.aoeb.trec import read_qrels
from tasks.core.errors import InputError
from tasks.core.io import Folder
from tasks.core.text_encoders import query_text

Capability = Literal["tool", "code", "reasoning", "memory", "multimodal"]
Modality = Literal["text", "text-to-image"]


@dataclass(frozen=True)
class TaskDeclaration:
    name: str
    capability: Capability
    modality: Modality = "text"
    description: str = ""
    source: str = ""  # where the material comes from (a path, a hub dataset, a paper)
    main_metric: str = "ndcg_at_10"
    # qrels splits: "train" feeds the contrastive fine-tune, "dev" its choices, "test" the report
    splits: tuple[str, ...] = ("test",)
    query_instruction: str = ""  # prefixed to queries by encoders that take instructions
    has_candidates: bool = False


@dataclass
class RetrievalTask:
    declaration: TaskDeclaration
    corpus: dict[str, dict[str, str]]  # id -> {"title", "text"} (+ "image")
    queries: dict[str, str]  # id -> text
    qrels: dict[str, dict[str, dict[str, int]]]  # split -> query id -> corpus id -> score
    candidates: dict[str, list[str]] = field(default_factory=dict)  # query id -> pool
    assets: dict[str, bytes] = field(default_factory=dict)  # extra files, e.g. images/<id>.png
    folder: Path | None = None  # where it was read from (corpus "image" paths are relative)

    def split_queries(self, split: str) -> dict[str, str]:
        """The queries judged in `split`."""
        judged = self.qrels.get(split, {})
        return {qid: text for qid, text in self.queries.items() if qid in judged}


def document_text(document: Mapping[str, str]) -> str:
    """A corpus row as text encoders see it: title, then text."""
    return "\n".join(part for part in (document.get("title"), document.get("text")) if part)


def training_pairs(tasks: Iterable[RetrievalTask]) -> list[tuple[str, str]]:
    """(query, relevant document) text pairs of every text task's `train` split."""
    pairs = []
    for task in tasks:
        if task.declaration.modality != "text" or "train" not in task.qrels:
            continue
        instruction = task.declaration.query_instruction
        for qid, judged in sorted(task.qrels["train"].items()):
            for doc_id, score in sorted(judged.items()):
                if score > 0 and doc_id in task.corpus and qid in task.queries:
                    pairs.append(
                        (
                            query_text(instruction, task.queries[qid]),
                            document_text(task.corpus[doc_id]),
                        )
                    )
    return pairs


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(dict(row), ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def task_files(task: RetrievalTask) -> Folder:
    """The task's folder as an output (committed atomically by the stage)."""
    files: dict[str, Any] = {
        "task.json": asdict(task.declaration),
        "corpus.jsonl": _jsonl({"id": doc_id, **doc} for doc_id, doc in task.corpus.items()),
        "queries.jsonl": _jsonl({"id": qid, "text": text} for qid, text in task.queries.items()),
    }
    for split, judged in task.qrels.items():
        lines = ["query-id\tcorpus-id\tscore"]
        lines += [
            f"{qid}\t{doc}\t{score}" for qid, docs in judged.items() for doc, score in docs.items()
        ]
        files[f"qrels/{split}.tsv"] = "\n".join(lines) + "\n"
    files |= task.assets
    if task.candidates:
        files["candidates.jsonl"] = _jsonl(
            {"query_id": qid, "candidates": pool} for qid, pool in task.candidates.items()
        )
    return Folder(files)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"{path}:{number}: not JSON ({exc.msg}); rebuild the task"
                ) from None
    return rows


def read_task(folder: Path) -> RetrievalTask:
    """A task folder back in memory; a missing file or key names the file and what to do."""
    declaration_file = folder / "task.json"
    if not declaration_file.exists():
        raise InputError(
            f"{folder}: no task.json; not an AOEB task folder (`dvc repro aoeb-assemble`)"
        )
    raw = json.loads(declaration_file.read_text(encoding="utf-8"))
    raw["splits"] = tuple(raw.get("splits", ("test",)))
    try:
        declaration = TaskDeclaration(**raw)
    except TypeError as exc:
        raise InputError(f"{declaration_file}: {exc}") from None
    corpus, queries = {}, {}
    for row in _read_jsonl(folder / "corpus.jsonl"):
        doc_id = str(row.pop("id"))
        corpus[doc_id] = row
    for row in _read_jsonl(folder / "queries.jsonl"):
        queries[str(row["id"])] = row["text"]
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    for split in declaration.splits:
        qrels[split] = read_qrels(folder / "qrels" / f"{split}.tsv")
    candidates = {}
    if declaration.has_candidates:
        for row in _read_jsonl(folder / "candidates.jsonl"):
            candidates[str(row["query_id"])] = [str(c) for c in row["candidates"]]
    return RetrievalTask(declaration, corpus, queries, qrels, candidates, folder=folder)


def read_tasks(root: Path) -> list[RetrievalTask]:
    """Every task folder under `root`, by name."""
    return [read_task(p.parent) for p in sorted(root.glob("*/task.json"))]
