"""Dedup against datasketch's MinHashLSH on the same documents and shingles."""

import random

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from datasketch import MinHash, MinHashLSH

from tasks.corpus import minhash
from tasks.corpus.dedup import candidate_pairs, clusters, compute_signatures, deduplicate
from tasks.corpus.documents import documents_table
from tasks.corpus.params import DedupParams
from tasks.corpus.udhr import read_udhr
from tests.conftest import REPO


@pytest.fixture(scope="module")
def docs_with_near_duplicates():
    """~600 UDHR articles plus 100 copies with one or two words appended (Jaccard ≥ 0.95).

    Pairs near the threshold are found by each scheme with some probability, so agreement
    is measured on clear duplicates and clear non-duplicates.
    """
    rng = random.Random(7)
    rows = [
        r
        for r in read_udhr(REPO / "data" / "seed" / "udhr")
        if r["id"].split("/")[1]
        in {
            "eng",
            "fra",
            "deu_1996",
            "spa",
            "rus",
            "zul",
            "swe",
            "tur",
            "vie",
            "hin",
            "ukr",
            "ell_polytonic",
            "heb",
            "arb",
            "kor",
            "por_BR",
            "por_PT",
            "srp_latn",
            "srp_cyrl",
            "jpn",
        }
    ]
    long_rows = [r for r in rows if len(r["text"].split()) >= 60]
    for k, row in enumerate(rng.sample(long_rows, 100)):
        suffix = " ".join(f"edit{k}-{j}" for j in range(rng.choice([1, 2])))
        rows.append({**row, "id": row["id"] + "#edit", "text": f"{row['text']} {suffix}"})
    return documents_table(rows).sort_by("id")


def _datasketch_pairs(docs: pa.Table, params: DedupParams) -> set[tuple[int, int]]:
    bands, rows = params.banding()
    lsh = MinHashLSH(num_perm=params.num_perm, params=(bands, rows))
    signatures = []
    for i, (text, script) in enumerate(
        zip(docs.column("text").to_pylist(), docs.column("script").to_pylist(), strict=True)
    ):
        sketch = MinHash(num_perm=params.num_perm, seed=params.seed)
        for shingle in minhash.shingles(text, script, params.shingle_size):
            sketch.update(shingle.encode("utf-8"))
        lsh.insert(i, sketch)
        signatures.append(sketch)
    return {
        (min(i, j), max(i, j)) for i, s in enumerate(signatures) for j in lsh.query(s) if i != j
    }


def test_candidate_pairs_agree_with_datasketch(ray_session, docs_with_near_duplicates):
    params = DedupParams()
    ours_ds, _ = compute_signatures(docs_with_near_duplicates, params)
    ours = set(map(tuple, candidate_pairs(ours_ds).tolist()))
    theirs = _datasketch_pairs(docs_with_near_duplicates, params)
    assert len(theirs) >= 90  # the edited copies are found
    agreement = len(ours & theirs) / len(ours | theirs)
    assert agreement >= 0.95, (len(ours), len(theirs), agreement)


def test_dedup_keeps_one_per_cluster(ray_session, docs_with_near_duplicates):
    exact = docs_with_near_duplicates.slice(0, 3).to_pylist()
    extra = pa.Table.from_pylist(
        [{**r, "id": r["id"] + "#copy"} for r in exact], schema=docs_with_near_duplicates.schema
    )
    docs = pa.concat_tables([docs_with_near_duplicates, extra])
    kept, duplicates, metrics = deduplicate(docs, DedupParams())
    kinds = dict(
        zip(duplicates.column("id").to_pylist(), duplicates.column("kind").to_pylist(), strict=True)
    )
    assert all(kinds[r["id"] + "#copy"] == "exact" for r in exact)
    edited = [i for i in docs.column("id").to_pylist() if i.endswith("#edit")]
    found = sum(1 for i in edited if kinds.get(i) == "near")
    assert found >= 0.9 * len(edited)
    assert metrics["kept"] == kept.num_rows == docs.num_rows - duplicates.num_rows
    kept_ids = set(kept.column("id").to_pylist())
    assert all(k in kept_ids for k in duplicates.column("kept_id").to_pylist())


def test_clusters_join_chains():
    assert clusters(6, np.array([[0, 2], [2, 4], [3, 5]])).tolist() == [0, 1, 0, 3, 0, 3]
    assert clusters(3, np.empty((0, 2), np.int64)).tolist() == [0, 1, 2]


def test_compiled_signatures_follow_the_permutation_formula():
    """Batch MinHash (numba) against the formula in numpy, one text at a time."""
    rng = np.random.default_rng(0)
    sizes = [5, 0, 1, 300]
    hashes = rng.integers(0, 1 << 32, size=sum(sizes), dtype=np.uint64)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    ours = minhash.signatures(hashes, starts, 64, 3)
    a, b = minhash.permutations(64, 3)
    for text, (start, end) in enumerate(zip(starts[:-1], starts[1:], strict=True)):
        if start == end:
            assert (ours[text] == np.uint32(0xFFFFFFFF)).all()
            continue
        with np.errstate(over="ignore"):
            permuted = (np.outer(a, hashes[start:end]) + b[:, None]) % minhash.MERSENNE_PRIME
        assert (ours[text] == (permuted & minhash.MAX_HASH).min(axis=1)).all()
    bands = minhash.band_hashes(ours, 4, 8)
    expected = [
        [xxhash.xxh64_intdigest(sig[i * 8 : (i + 1) * 8].tobytes()) >> 1 for i in range(4)]
        for sig in ours
    ]
    assert bands.tolist() == expected


def test_optimal_banding_matches_datasketch():
    from datasketch.lsh import _optimal_param

    for threshold, num_perm in [(0.8, 128), (0.5, 64), (0.9, 256)]:
        assert minhash.optimal_bands(threshold, num_perm) == _optimal_param(
            threshold, num_perm, 0.5, 0.5
        )


def test_bands_and_rows_must_come_together():
    with pytest.raises(ValueError, match="set both bands and rows"):
        DedupParams(bands=8)
    with pytest.raises(ValueError, match="exceeds num_perm"):
        DedupParams(bands=20, rows=10, num_perm=128)
