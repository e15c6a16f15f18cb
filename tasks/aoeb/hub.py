"""A published AOEB/MTEB retrieval task read from the Hugging Face hub (or a local copy).

MTEB's hub layout: config `corpus` (`_id`, `title`, `text`), config `queries` (`_id`,
`text`), each in one split, and the qrels (`query-id`, `corpus-id`, `score`) in the
`default` config, one split per qrels split (`test`, `dev`, ...). Newer uploads name the
ids `id`, and a multi-subset task prefixes the configs (`<subset>-corpus`, `<subset>-queries`,
`<subset>-qrels`). A task that ranks each query against its own pool may add a config of
`{query_id, candidates}` rows. `dataset` is a hub id (`vec-ai/…`) or a local folder whose
README declares the same configs; `revision` pins a hub commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration
from tasks.core.errors import InputError
from tasks.core.progress import get_logger

log = get_logger("paperline.aoeb.hub")
ID_COLUMNS = ("_id", "id")


def _load(dataset: str, config: str, revision: str | None, cache_dir: str | None) -> Any:
    """One config as a DatasetDict; a missing dataset or config is one line."""
    from datasets import load_dataset
    from datasets.exceptions import DatasetsError

    try:
        return load_dataset(dataset, config, revision=revision, cache_dir=cache_dir)
    except (FileNotFoundError, ValueError, ConnectionError, DatasetsError) as exc:
        where = f"{dataset}@{revision}" if revision else dataset
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"{where}: cannot load config '{config}' ({first}); check the dataset id, "
            "revision and config names, or set HF_HUB_OFFLINE=0 to download"
        ) from None


def _only_split(splits: Any, preferred: str) -> Any:
    return splits[preferred] if preferred in splits else next(iter(splits.values()))


def _id_column(columns: Iterable[str], where: str) -> str:
    columns = list(columns)
    for name in ID_COLUMNS:
        if name in columns:
            return name
    raise InputError(f"{where}: no id column (one of {ID_COLUMNS}); columns are {columns}")


def _require(columns: Iterable[str], needed: Iterable[str], where: str) -> None:
    missing = sorted(set(needed) - set(columns))
    if missing:
        raise InputError(f"{where}: missing column(s) {missing}; columns are {sorted(columns)}")


def load_hub_task(
    declaration: TaskDeclaration,
    dataset: str,
    revision: str | None,
    *,
    subset: str | None = None,
    candidates_config: str | None = None,
    cache_dir: str | None = None,
) -> RetrievalTask:
    """The task `declaration` describes, read from `dataset` in MTEB's hub layout.

    Every split in `declaration.splits` must be a qrels split; queries judged in none of
    them are dropped, as MTEB's loader does.
    """
    prefix = f"{subset}-" if subset else ""
    qrels_config = f"{subset}-qrels" if subset else "default"
    where = f"{dataset}@{revision}" if revision else dataset

    rows = _only_split(_load(dataset, f"{prefix}corpus", revision, cache_dir), "corpus")
    id_name = _id_column(rows.column_names, f"{where} corpus")
    _require(rows.column_names, ["text"], f"{where} corpus")
    corpus = {
        str(row[id_name]): {"title": row.get("title") or "", "text": row["text"] or ""}
        for row in rows
    }
    rows = _only_split(_load(dataset, f"{prefix}queries", revision, cache_dir), "queries")
    id_name = _id_column(rows.column_names, f"{where} queries")
    _require(rows.column_names, ["text"], f"{where} queries")
    all_queries = {str(row[id_name]): row["text"] for row in rows}

    qrel_splits = _load(dataset, qrels_config, revision, cache_dir)
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    for split in declaration.splits:
        if split not in qrel_splits:
            raise InputError(
                f"{where} {qrels_config}: no qrels split '{split}' (has {sorted(qrel_splits)}); "
                "fix the declaration's splits"
            )
        rows = qrel_splits[split]
        _require(rows.column_names, ["query-id", "corpus-id", "score"], f"{where} {split}")
        judged: dict[str, dict[str, int]] = {}
        for row in rows:
            judged.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = int(
                float(row["score"])
            )
        qrels[split] = judged
    judged_ids = {qid for judged in qrels.values() for qid in judged}
    unknown = judged_ids - all_queries.keys()
    if unknown:
        raise InputError(
            f"{where}: {len(unknown)} judged query id(s) not in the queries config, "
            f"e.g. {sorted(unknown)[0]!r}; the dataset is inconsistent"
        )
    missing_docs = {d for judged in qrels.values() for docs in judged.values() for d in docs}
    missing_docs -= corpus.keys()
    if missing_docs:
        log.warning("%s: %d judged document id(s) not in the corpus", where, len(missing_docs))
    queries = {qid: text for qid, text in all_queries.items() if qid in judged_ids}

    candidates: dict[str, list[str]] = {}
    if declaration.has_candidates and not candidates_config:
        raise InputError(
            f"{declaration.name}: declared with candidate pools; name the dataset's "
            "candidates config (candidates_config)"
        )
    if candidates_config:
        rows = _only_split(_load(dataset, candidates_config, revision, cache_dir), "candidates")
        _require(rows.column_names, ["query_id", "candidates"], f"{where} {candidates_config}")
        candidates = {
            str(row["query_id"]): [str(c) for c in row["candidates"]]
            for row in rows
            if str(row["query_id"]) in queries
        }
    source = declaration.source or f"hf:{dataset}" + (f"@{revision}" if revision else "")
    declaration = replace(declaration, source=source, has_candidates=bool(candidates_config))
    return RetrievalTask(declaration, corpus, queries, qrels, candidates)
