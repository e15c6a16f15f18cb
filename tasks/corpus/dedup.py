"""corpus.dedup: exact then near-duplicate removal, built from Ray tasks.

signatures (Ray tasks over row blocks) → band buckets (one row per document and band) → group by
bucket (a hash shuffle over Ray tasks emits candidate pairs) → connected duplicate clusters
(union-find over the candidate pairs, on the driver) → keep the first document (by id) of
each cluster.
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

from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import collect, gather, map_table, remote
from tasks.core.stage import Stage, StageContext
from tasks.corpus import minhash
from tasks.corpus.params import DedupParams

log = get_logger("paperline.corpus.dedup")

DUPLICATES_SCHEMA = pa.schema(
    [("id", pa.string()), ("kept_id", pa.string()), ("kind", pa.string())]
)


def signature_batch(batch: pa.Table, params: DedupParams) -> pa.Table:
    """Per document: exact-text hash and the MinHash signature."""
    texts = batch.column("text").to_pylist()
    scripts = batch.column("script").to_pylist()
    sigs = [
        minhash.signature(
            minhash.hash_shingles(minhash.shingles(text, script, params.shingle_size)),
            params.num_perm,
            params.seed,
        )
        for text, script in zip(texts, scripts, strict=True)
    ]
    return pa.table(
        {
            "doc": batch.column("doc"),
            "text_hash": [xxhash.xxh3_128_hexdigest(t.encode("utf-8")) for t in texts],
            "signature": pa.array([s.tolist() for s in sigs], type=pa.list_(pa.uint32())),
        }
    )


def bucket_batch(batch: pa.Table, bands: int, rows: int) -> pa.Table:
    """One row per (document, band): the band's hash is the bucket."""
    docs, band_ids, buckets = [], [], []
    for doc, sig in zip(
        batch.column("doc").to_pylist(), batch.column("signature").to_pylist(), strict=True
    ):
        hashes = minhash.band_hashes(np.asarray(sig, dtype=np.uint32), bands, rows)
        docs += [doc] * bands
        band_ids += range(bands)
        buckets += hashes
    return pa.table(
        {"doc": docs, "band": band_ids, "bucket": buckets},
        schema=pa.schema([("doc", pa.int64()), ("band", pa.int64()), ("bucket", pa.int64())]),
    )


def partition_buckets(signatures: pa.Table, bands: int, rows: int, partitions: int) -> list:
    """Map side of the bucket shuffle: one table of (doc, band, bucket) rows per partition."""
    table = bucket_batch(signatures, bands, rows)
    part = np.asarray(table.column("bucket")) % partitions
    return [table.filter(pa.array(part == p)) for p in range(partitions)]


def pairs_in_partition(*parts: pa.Table) -> pa.Table:
    """Reduce side: candidate pairs of each bucket, as a star around its smallest document."""
    grouped = pa.concat_tables(parts).group_by(["band", "bucket"]).aggregate([("doc", "list")])
    left: list[int] = []
    right: list[int] = []
    for docs in grouped.column("doc_list").to_pylist():
        if len(docs) > 1:
            docs = sorted(set(docs))
            left += docs[:1] * (len(docs) - 1)
            right += docs[1:]
    return pa.table({"left": pa.array(left, pa.int64()), "right": pa.array(right, pa.int64())})


def candidate_pairs(signatures: list, bands: int, rows: int) -> set[tuple[int, int]]:
    """All (left < right) document pairs that share a bucket in some band.

    A hash shuffle over Ray tasks (map: bucket rows per partition; reduce: group by bucket),
    reading the signature blocks where they live, so it runs the same on a cluster. Ray
    Data's groupby did the same work but spent ~25 s per call starting its shuffle.
    """
    import ray

    started = time.time()
    partitions = max(2, int(ray.cluster_resources().get("CPU", 2)))
    mapper = remote(partition_buckets, num_returns=partitions)
    mapped = [mapper.remote(block, bands, rows, partitions) for block in signatures]
    reducer = remote(pairs_in_partition)
    reduced = [reducer.remote(*[m[p] for m in mapped]) for p in range(partitions)]
    found: set[tuple[int, int]] = set()
    for table in gather(reduced, "corpus.dedup band shuffle", since=started):
        found.update(
            zip(table.column("left").to_pylist(), table.column("right").to_pylist(), strict=True)
        )
    return found


def clusters(n: int, pairs: set[tuple[int, int]]) -> np.ndarray:
    """Union-find: for each document, the smallest document of its connected cluster."""
    parent = np.arange(n)

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for left, right in pairs:
        a, b = root(left), root(right)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return np.array([root(i) for i in range(n)])


def compute_signatures(docs: pa.Table, params: DedupParams) -> tuple[list, pa.Table]:
    """(signature blocks as Ray object refs, the same as one table ordered by `doc`)."""
    indexed = docs.select(["text", "script"]).append_column(
        "doc", pa.array(range(docs.num_rows), pa.int64())
    )
    signatures = map_table(
        indexed,
        signature_batch,
        batch_size=params.batch_size,
        num_workers=params.num_workers,
        params=params,
    )
    return signatures, collect(signatures).sort_by("doc")


def deduplicate(docs: pa.Table, params: DedupParams) -> tuple[pa.Table, pa.Table, dict[str, Any]]:
    """(kept documents, duplicates with the id each one duplicates, metrics)."""
    docs = docs.sort_by("id")
    n = docs.num_rows
    bands, rows = params.banding()
    signatures, table = compute_signatures(docs, params)

    # exact duplicates: same normalized text → same hash; keep the first by id
    first_of_hash: dict[str, int] = {}
    exact_of = np.arange(n)
    for doc, digest in enumerate(table.column("text_hash").to_pylist()):
        exact_of[doc] = first_of_hash.setdefault(digest, doc)
    unique = exact_of == np.arange(n)

    pairs = {(a, b) for a, b in candidate_pairs(signatures, bands, rows) if unique[a] and unique[b]}
    if params.verify:
        sigs = table.column("signature").to_numpy(zero_copy_only=False)
        pairs = {
            (a, b)
            for a, b in pairs
            if minhash.estimated_jaccard(sigs[a], sigs[b]) >= params.threshold
        }
    near_of = clusters(n, pairs)

    ids = docs.column("id").to_pylist()
    duplicates = [
        {"id": ids[i], "kept_id": ids[exact_of[i]], "kind": "exact"}
        for i in np.flatnonzero(~unique)
    ] + [
        {"id": ids[i], "kept_id": ids[near_of[i]], "kind": "near"}
        for i in np.flatnonzero(unique & (near_of != np.arange(n)))
    ]
    dup_table = pa.Table.from_pylist(duplicates, schema=DUPLICATES_SCHEMA).sort_by("id")
    keep = pc.invert(pc.is_in(docs.column("id"), value_set=dup_table.column("id")))
    kept = docs.filter(keep)
    metrics = {
        "documents_in": n,
        "exact_duplicates": int((~unique).sum()),
        "near_duplicates": len(duplicates) - int((~unique).sum()),
        "near_duplicate_clusters": len({near_of[i] for i in range(n) if near_of[i] != i}),
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
        "metrics": "data/interim/corpus/dedup_metrics.json",
    },
    uses_ray=True,
    headline="data/interim/corpus/dedup_metrics.json:kept",
)
