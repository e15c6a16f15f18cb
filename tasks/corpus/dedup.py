"""corpus.dedup: exact then near-duplicate removal, built from Ray tasks.

signatures and band buckets (Ray tasks over row blocks, each a whole batch at once) → group
by bucket (a hash shuffle over Ray tasks emits candidate pairs) → candidates verified by their
estimated Jaccard similarity → connected duplicate clusters (scipy, on the driver) → keep the
first document (by id) of each cluster.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import collect, gather, map_table, remote
from tasks.core.stage import Output, Stage, StageContext
from tasks.corpus import minhash
from tasks.corpus.documents import is_sorted
from tasks.corpus.params import DedupParams

log = get_logger("paperline.corpus.dedup")

DUPLICATES_SCHEMA = pa.schema(
    [("id", pa.string()), ("kept_id", pa.string()), ("kind", pa.string())]
)


def signature_batch(batch: pa.Table, params: DedupParams, bands: int, rows: int) -> pa.Table:
    """Per document: exact-text hash, MinHash signature and band hashes (LSH buckets)."""
    texts = batch.column("text").to_pylist()
    hashes, starts = minhash.shingle_hashes(
        texts, batch.column("script").to_pylist(), params.shingle_size
    )
    sigs = minhash.signatures(hashes, starts, params.num_perm, params.seed)
    buckets = minhash.band_hashes(sigs, bands, rows)
    return pa.table(
        {
            "doc": batch.column("doc").combine_chunks(),
            "text_hash": [xxhash.xxh3_128_hexdigest(t.encode("utf-8")) for t in texts],
            "signature": pa.FixedSizeListArray.from_arrays(pa.array(sigs.ravel()), params.num_perm),
            "bucket": pa.FixedSizeListArray.from_arrays(pa.array(buckets.ravel()), bands),
        }
    )


def _matrix(column: pa.ChunkedArray) -> np.ndarray:
    """A fixed-size list column as a (rows, list size) array."""
    lists = column.combine_chunks()
    return lists.flatten().to_numpy().reshape(len(lists), lists.type.list_size)


def partition_buckets(signatures: pa.Table, partitions: int) -> pa.Table | list[pa.Table]:
    """Map side of the bucket shuffle: one table of (doc, band, bucket) rows per partition
    (the table itself when there is one partition)."""
    buckets = _matrix(signatures.column("bucket"))
    docs, bands = signatures.column("doc").to_numpy(), buckets.shape[1]
    table = pa.table(
        {
            "doc": np.repeat(docs, bands),
            "band": np.tile(np.arange(bands, dtype=np.int64), docs.size),
            "bucket": buckets.ravel(),
        }
    )
    if partitions == 1:
        return table
    part = buckets.ravel() % partitions
    return [table.filter(pa.array(part == p)) for p in range(partitions)]


def pairs_in_partition(*parts: pa.Table) -> pa.Table:
    """Reduce side: candidate pairs of each bucket, as a star around its smallest document."""
    table = pa.concat_tables(parts)
    band, bucket, doc = (table.column(name).to_numpy() for name in ("band", "bucket", "doc"))
    order = np.lexsort((doc, bucket, band))
    band, bucket, doc = band[order], bucket[order], doc[order]
    same = np.zeros(doc.size, dtype=bool)  # in the bucket of the row before
    same[1:] = (band[1:] == band[:-1]) & (bucket[1:] == bucket[:-1])
    heads = np.flatnonzero(~same)
    smallest = np.repeat(doc[heads], np.diff(np.append(heads, doc.size)))
    return pa.table({"left": smallest[same], "right": doc[same]})


def candidate_pairs(signatures: list, partitions: int | None = None) -> np.ndarray:
    """All (left < right) document pairs that share a bucket in some band, one per row.

    A hash shuffle over Ray tasks (map: bucket rows per partition; reduce: group by bucket),
    reading the signature blocks where they live, so it runs the same on a cluster.
    `partitions`: reduce tasks, by default one per CPU of the cluster.
    """
    import ray

    started = time.time()
    partitions = partitions or max(1, int(ray.cluster_resources().get("CPU", 1)))
    mapper = remote(partition_buckets, num_returns=partitions)
    mapped = [mapper.remote(block, partitions) for block in signatures]
    if partitions == 1:
        mapped = [[ref] for ref in mapped]
    reducer = remote(pairs_in_partition)
    reduced = [reducer.remote(*[m[p] for m in mapped]) for p in range(partitions)]
    tables = gather(reduced, "corpus.dedup band shuffle", since=started)
    left, right = (
        np.concatenate([t.column(c).to_numpy() for t in tables]) for c in ("left", "right")
    )
    return np.unique(np.stack([left, right], axis=1), axis=0)


def similar(sigs: np.ndarray, pairs: np.ndarray, threshold: float) -> np.ndarray:
    """Per pair: whether its estimated Jaccard similarity reaches `threshold`."""
    keep = np.zeros(len(pairs), dtype=bool)
    step = 1 << 16
    for start in range(0, len(pairs), step):
        left, right = pairs[start : start + step].T
        keep[start : start + step] = (sigs[left] == sigs[right]).mean(axis=1) >= threshold
    return keep


def clusters(n: int, pairs: np.ndarray) -> np.ndarray:
    """For each document, the smallest document of its connected cluster."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    smallest = np.full(labels.max(initial=-1) + 1, n)
    np.minimum.at(smallest, labels, np.arange(n))
    return smallest[labels]


def compute_signatures(docs: pa.Table, params: DedupParams) -> tuple[list, pa.Table]:
    """(signature blocks as Ray object refs, the same as one table ordered by `doc`)."""
    indexed = docs.select(["text", "script"]).append_column(
        "doc", pa.array(range(docs.num_rows), pa.int64())
    )
    bands, rows = params.banding()
    signatures = map_table(
        indexed,
        signature_batch,
        batch_size=params.batch_size,
        num_workers=params.num_workers,
        jit_warmup=True,  # the signatures' compiled code
        params=params,
        bands=bands,
        rows=rows,
    )
    return signatures, collect(signatures)  # blocks in order, each in `doc` order


def first_of_each_text(text_hash: pa.ChunkedArray) -> np.ndarray:
    """For each document, the first document with the same text hash."""
    codes = text_hash.combine_chunks().dictionary_encode().indices.to_numpy()
    _, first = np.unique(codes, return_index=True)  # codes number texts by first appearance
    return first[codes]


def deduplicate(docs: pa.Table, params: DedupParams) -> tuple[pa.Table, pa.Table, dict[str, Any]]:
    """(kept documents, duplicates with the id each one duplicates, metrics)."""
    docs = docs if is_sorted(docs.column("id")) else docs.sort_by("id")  # filter's are sorted
    n = docs.num_rows
    bands, rows = params.banding()
    signatures, table = compute_signatures(docs, params)

    # exact duplicates: same normalized text → same hash; keep the first by id
    exact_of = first_of_each_text(table.column("text_hash"))
    unique = exact_of == np.arange(n)

    pairs = candidate_pairs(signatures, params.num_workers)
    pairs = pairs[unique[pairs[:, 0]] & unique[pairs[:, 1]]]
    if params.verify:
        pairs = pairs[similar(_matrix(table.column("signature")), pairs, params.threshold)]
    near_of = clusters(n, pairs)

    ids = docs.column("id").combine_chunks()
    exact = np.flatnonzero(~unique)
    near = np.flatnonzero(unique & (near_of != np.arange(n)))
    dup_table = pa.table(
        {
            "id": ids.take(np.concatenate([exact, near])),
            "kept_id": ids.take(np.concatenate([exact_of[exact], near_of[near]])),
            "kind": ["exact"] * exact.size + ["near"] * near.size,
        },
        schema=DUPLICATES_SCHEMA,
    ).sort_by("id")
    keep = pc.invert(pc.is_in(docs.column("id"), value_set=dup_table.column("id")))
    kept = docs.filter(keep)
    metrics = {
        "documents_in": n,
        "exact_duplicates": int(exact.size),
        "near_duplicates": int(near.size),
        "near_duplicate_clusters": int(np.unique(near_of[near]).size),
        "candidate_pairs": len(pairs),
        "kept": kept.num_rows,
        "bands": bands,
        "rows": rows,
    }
    return kept, dup_table, metrics


def run(params: DedupParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    kept, duplicates, metrics = deduplicate(read_parquet(inputs["docs"]), params)
    summary = (
        "kept %(kept)d of %(documents_in)d (%(exact_duplicates)d exact, %(near_duplicates)d near)"
    )
    log.info(summary, metrics)
    return {"deduplicated": kept, "duplicates": duplicates, "metrics": metrics}


STAGE = Stage(
    name="corpus.dedup",
    run=run,
    params_key="corpus.dedup",
    inputs={"docs": "data/interim/corpus/filtered.parquet"},
    outputs={
        "deduplicated": "data/interim/corpus/dedup.parquet",
        "duplicates": "data/interim/corpus/duplicates.parquet",
        "metrics": Output.metrics("data/interim/corpus/dedup_metrics.json"),
    },
    uses_ray=True,
    headline="data/interim/corpus/dedup_metrics.json:kept",
)
