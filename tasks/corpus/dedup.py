"""corpus.dedup: exact then near-duplicate removal, built from Ray Data steps.

signatures (map_batches) → band buckets (one row per document and band) → group by bucket
(groupby + map_groups emits candidate pairs) → connected duplicate clusters (union-find over
the candidate pairs, on the driver) → keep the first document (by id) of each cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Stage
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
    for doc, sig in zip(batch.column("doc").to_pylist(), batch.column("signature").to_pylist(),
                        strict=True):  # fmt: skip
        hashes = minhash.band_hashes(np.asarray(sig, dtype=np.uint32), bands, rows)
        docs += [doc] * bands
        band_ids += range(bands)
        buckets += hashes
    return pa.table({"doc": docs, "band": band_ids, "bucket": buckets},
                    schema=pa.schema([("doc", pa.int64()), ("band", pa.int64()),
                                      ("bucket", pa.int64())]))  # fmt: skip


def bucket_pairs(group: pa.Table) -> pa.Table:
    """Candidate pairs of one bucket, as a star around its smallest document."""
    docs = sorted(set(group.column("doc").to_pylist()))
    first = docs[:1] * (len(docs) - 1)
    return pa.table({"left": pa.array(first, pa.int64()), "right": pa.array(docs[1:], pa.int64())})


def candidate_pairs(signatures: Any, bands: int, rows: int) -> set[tuple[int, int]]:
    """All (left < right) document pairs that share a bucket in some band."""
    import ray

    pairs = (
        signatures.map_batches(
            bucket_batch, fn_kwargs={"bands": bands, "rows": rows}, batch_format="pyarrow"
        )  # fmt: skip
        .groupby(["band", "bucket"])
        .map_groups(bucket_pairs, batch_format="pyarrow")
    )
    found: set[tuple[int, int]] = set()
    for table in ray.get(pairs.to_arrow_refs()):
        found.update(zip(table.column("left").to_pylist(), table.column("right").to_pylist(),
                         strict=True))  # fmt: skip
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


def deduplicate(docs: pa.Table, params: DedupParams) -> tuple[pa.Table, pa.Table, dict[str, Any]]:
    """(kept documents, duplicates with the id each one duplicates, metrics)."""
    import ray

    docs = docs.sort_by("id")
    n = docs.num_rows
    bands, rows = params.banding()
    indexed = docs.select(["text", "script"]).append_column("doc", pa.array(range(n), pa.int64()))
    blocks = [indexed.slice(i, params.batch_size) for i in range(0, n, params.batch_size)] or [
        indexed
    ]
    signatures = (
        ray.data.from_arrow(blocks)
        .map_batches(
            signature_batch,
            fn_kwargs={"params": params},
            batch_format="pyarrow",
            concurrency=params.num_workers,
        )  # fmt: skip
        .materialize()
    )
    table = pa.concat_tables(ray.get(signatures.to_arrow_refs())).sort_by("doc")

    # exact duplicates: same normalized text → same hash; keep the first by id
    first_of_hash: dict[str, int] = {}
    exact_of = np.arange(n)
    for doc, digest in enumerate(table.column("text_hash").to_pylist()):
        exact_of[doc] = first_of_hash.setdefault(digest, doc)
    unique = exact_of == np.arange(n)

    pairs = {(a, b) for a, b in candidate_pairs(signatures, bands, rows) if unique[a] and unique[b]}
    if params.verify:
        sigs = table.column("signature").to_numpy(zero_copy_only=False)
        pairs = {(a, b) for a, b in pairs
                 if minhash.estimated_jaccard(sigs[a], sigs[b]) >= params.threshold}  # fmt: skip
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


def run(params: DedupParams, inputs: Mapping[str, Path]) -> dict[str, Any]:
    kept, duplicates, metrics = deduplicate(read_parquet(inputs["docs"]), params)
    log.info("kept %d of %d documents (%d exact, %d near duplicates)", metrics["kept"],
             metrics["documents_in"], metrics["exact_duplicates"], metrics["near_duplicates"])  # fmt: skip
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
)
