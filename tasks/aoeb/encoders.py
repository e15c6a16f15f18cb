"""The encoders AOEB compares, and `search`: one task split → a run {qid: {docid: score}}.

Kinds (params `aoeb` encoders: name, kind, options): core's text encoders
(tasks/core/text_encoders.py: `bm25` on text tasks only, `minilm`, `mmbert`: the project's
mmBERT or the fine-tuned embedder `models/embedder`) and `image-text`, such a text encoder
paired with an image tower (tasks/aoeb/image_tower.py), the only kind that runs
text-to-image tasks; the others are reported as unable to.

Dense vectors are cached under `.paperline/aoeb/embeddings/<encoder>-<fingerprint>/
<corpus-hash>.npy` (fingerprint: kind, options and the model folder's bytes; corpus hash:
the ordered ids and texts or image bytes), so a re-run reuses them without loading the
model. Queries are ranked over the corpus through a faiss inner-product index (flat by
default, IVF or HNSW by params); a query with a candidate pool (memory tasks) is scored by
dot products over its pool only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration, document_text
from tasks.core import text_encoders
from tasks.core.errors import InputError
from tasks.core.io import atomic_path
from tasks.core.paths import state_dir
from tasks.core.progress import get_logger
from tasks.core.scratch import fingerprint as content_fingerprint
from tasks.core.strict_model import StrictModel
from tasks.core.text_encoders import (
    DenseEncoder,
    Encoder,
    EncoderOptions,
    EncoderParams,
    ImageEncoder,
    ImageSource,
    LexicalEncoder,
    TransformersEncoder,
    model_folder,
    unit_rows,
)

log = get_logger("paperline.aoeb.encoders")
IndexKind = Literal["flat", "ivf", "hnsw"]
Run = dict[str, dict[str, float]]


class IndexParams(StrictModel):
    """The faiss index over a corpus (inner product over unit vectors, i.e. cosine)."""

    kind: IndexKind = "flat"
    nlist: int = Field(default=64, ge=1, description="ivf: cells (capped at corpus size / 39)")
    nprobe: int = Field(default=8, ge=1, description="ivf: cells visited per query")
    m: int = Field(default=32, ge=2, description="hnsw: neighbours per node (M)")
    ef_construction: int = Field(default=80, ge=1, description="hnsw: build beam width")
    ef_search: int = Field(default=64, ge=1, description="hnsw: search beam width (efSearch)")


class UnsupportedTask(Exception):
    """An encoder cannot run a task (e.g. text-to-image without an image tower)."""


# --- the interface -------------------------------------------------------------------------


def unsupported(encoder: Encoder, declaration: TaskDeclaration) -> str | None:
    """Why `encoder` cannot run the task, or None when it can."""
    if declaration.modality == "text-to-image" and not isinstance(encoder, ImageEncoder):
        return f"{encoder.name} has no image tower: it cannot run text-to-image tasks"
    return None


# --- implementations -----------------------------------------------------------------------


class ImageTextEncoder(TransformersEncoder):
    """A transformers text encoder and an image tower that embed into one space."""

    kind = "image-text"

    def __init__(self, name: str, folder: Path, tower_folder: Path, options: EncoderOptions):
        super().__init__(name, folder, options)
        self.tower_folder = Path(tower_folder)

    @cached_property
    def _fingerprint(self) -> str:
        config = {"kind": self.kind, "options": self.options.model_dump(exclude={"model"})}
        digest = content_fingerprint(config, [self.folder, self.tower_folder])
        return f"{self.name}-{digest[:20]}"

    @cached_property
    def tower(self) -> Any:
        from tasks.aoeb import image_tower

        tower = image_tower.load(self.tower_folder)
        if tower.config.embed_dim != self.dim:
            raise InputError(
                f"{self.tower_folder}: the image tower embeds into {tower.config.embed_dim} "
                f"dimensions, the text encoder {self.folder} into {self.dim}; retrain the tower"
            )
        return tower

    def encode_images(self, images: Sequence[ImageSource]) -> np.ndarray:
        from tasks.aoeb.image_tower import embed_images

        return unit_rows(embed_images(self.tower, images, self.options.batch_size))


def image_text_encoder(params: EncoderParams, folder_of: Callable[[str], Path]) -> Encoder:
    options = params.options
    return ImageTextEncoder(
        params.name, folder_of(options.model), folder_of(options.image_tower), options
    )


def make_encoder(params: EncoderParams, folder_of: Callable[[str], Path] = model_folder) -> Encoder:
    """Core's text encoders plus aoeb's image-text kind."""
    return text_encoders.make_encoder(params, folder_of, {"image-text": image_text_encoder})


# --- the embedding cache -------------------------------------------------------------------


def content_hash(ids: Sequence[str], contents: Sequence[str | bytes], *extra: str) -> str:
    """sha256 of the ordered (id, content) pairs (and `extra` strings, e.g. an instruction)."""
    digest = hashlib.sha256(json.dumps(extra).encode())
    for item_id, content in zip(ids, contents, strict=True):
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        digest.update(item_id.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()


def default_cache(root: Path | None = None) -> Path:
    return state_dir(root) / "aoeb" / "embeddings"


def cached_vectors(
    cache_dir: Path | None, encoder: DenseEncoder, key: str, compute: Callable[[], np.ndarray]
) -> np.ndarray:
    """`<cache>/<fingerprint>/<key>.npy` if present (and readable), else computed and saved."""
    if cache_dir is None:
        return compute()
    path = cache_dir / encoder.fingerprint() / f"{key}.npy"
    if path.exists():
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            log.warning("%s: unreadable cached embeddings (%s); recomputing", path, exc)
    vectors = compute()
    with atomic_path(path) as temp, open(temp, "wb") as handle:
        np.save(handle, vectors, allow_pickle=False)
    return vectors


# --- indexes and search --------------------------------------------------------------------


def build_index(
    embeddings: np.ndarray,
    kind: IndexKind = "flat",
    *,
    nlist: int = 64,
    nprobe: int = 8,
    m: int = 32,
    ef_construction: int = 80,
    ef_search: int = 64,
) -> Any:
    """A faiss inner-product index holding `embeddings` (unit rows: scores are cosines)."""
    import faiss

    vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
    count, dim = vectors.shape
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        index.hnsw.efSearch = ef_search
    elif kind == "ivf":
        cells = max(1, min(nlist, count // 39))  # faiss wants ≥ 39 training points per cell
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, cells, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        index.nprobe = min(nprobe, cells)
    else:
        raise ValueError(f"unknown index kind {kind!r}; use flat, ivf or hnsw")
    index.add(vectors)
    return index


def top_k(doc_ids: Sequence[str], scores: np.ndarray, k: int) -> dict[str, float]:
    """The `k` best-scored documents, best first."""
    keep = min(k, len(scores))
    best = np.argpartition(-scores, keep - 1)[:keep] if keep else np.array([], np.int64)
    best = best[np.argsort(-scores[best], kind="stable")]
    return {doc_ids[i]: float(scores[i]) for i in best}


def pool_positions(task: RetrievalTask, qid: str, position: Mapping[str, int]) -> list[int]:
    return [position[d] for d in task.candidates.get(qid, ()) if d in position]


def image_bytes(task: RetrievalTask, doc_id: str) -> bytes:
    """A corpus picture: from the task's assets, else from its folder."""
    relative = task.corpus[doc_id].get("image")
    if not relative:
        raise InputError(f"{task.declaration.name}: corpus row {doc_id} has no image")
    if relative in task.assets:
        return task.assets[relative]
    if task.folder is None or not (task.folder / relative).exists():
        raise InputError(f"{task.declaration.name}: {relative} is missing; rebuild the task")
    return (task.folder / relative).read_bytes()


def document_vectors(
    encoder: DenseEncoder, task: RetrievalTask, doc_ids: list[str], cache_dir: Path | None
) -> np.ndarray:
    """The corpus's unit vectors: its pictures for a text-to-image task, else its texts."""
    if task.declaration.modality == "text-to-image":
        pictures = [image_bytes(task, d) for d in doc_ids]

        def compute() -> np.ndarray:
            return unit_rows(encoder.encode_images(pictures))  # type: ignore[attr-defined]

        return cached_vectors(
            cache_dir, encoder, content_hash(doc_ids, pictures, "images"), compute
        )
    texts = [document_text(task.corpus[d]) for d in doc_ids]
    key = content_hash(doc_ids, texts, "documents")
    return cached_vectors(
        cache_dir, encoder, key, lambda: unit_rows(encoder.encode_documents(texts))
    )


def lexical_run(
    encoder: LexicalEncoder, task: RetrievalTask, queries: Mapping[str, str], k: int
) -> Run:
    doc_ids = list(task.corpus)
    position = {d: i for i, d in enumerate(doc_ids)}
    encoder.index([document_text(task.corpus[d]) for d in doc_ids])
    run: Run = {}
    for qid, text in queries.items():
        if qid in task.candidates:
            pool = pool_positions(task, qid, position)
            scores = encoder.retrieve(text, pool)
            run[qid] = top_k([doc_ids[i] for i in pool], scores, k)
        else:
            run[qid] = top_k(doc_ids, encoder.retrieve(text), k)
    return run


def dense_run(
    queries: np.ndarray,
    query_ids: list[str],
    documents: np.ndarray,
    doc_ids: list[str],
    pools: Mapping[str, list[int]],
    k: int,
    index: IndexParams,
) -> Run:
    """Rank each query: over its pool by dot products when it has one, else via the index."""
    run: Run = {}
    free = [i for i, qid in enumerate(query_ids) if qid not in pools]
    if free and len(doc_ids):
        searcher = build_index(documents, **index.model_dump())
        scores, found = searcher.search(queries[free], min(k, len(doc_ids)))
        for row, i in enumerate(free):
            hits = found[row] >= 0  # IVF may find fewer than k
            pairs = zip(found[row][hits], scores[row][hits], strict=True)
            run[query_ids[i]] = {doc_ids[d]: float(s) for d, s in pairs}
    for i, qid in enumerate(query_ids):
        if qid in pools:
            pool = pools[qid]
            run[qid] = top_k([doc_ids[d] for d in pool], documents[pool] @ queries[i], k)
    return {qid: run.get(qid, {}) for qid in query_ids}


def search(
    encoder: Encoder,
    task: RetrievalTask,
    split: str,
    k: int = 100,
    *,
    index: IndexParams | None = None,
    cache_dir: Path | None = None,
    use_cache: bool = True,
) -> Run:
    """The run of `encoder` on the queries of `split`: {qid: {docid: score}}, top `k` each
    (the format tasks.aoeb.metrics.retrieval_scores reads). Raises UnsupportedTask when the
    encoder cannot run the task; embeddings are cached under `cache_dir` (default
    `.paperline/aoeb/embeddings`) unless `use_cache` is False."""
    if reason := unsupported(encoder, task.declaration):
        raise UnsupportedTask(reason)
    if split not in task.qrels:
        raise InputError(
            f"{task.declaration.name}: no qrels split {split!r} (it has {sorted(task.qrels)})"
        )
    queries = task.split_queries(split)
    if isinstance(encoder, LexicalEncoder):
        return lexical_run(encoder, task, queries, k)
    if not isinstance(encoder, DenseEncoder):
        raise TypeError(f"{type(encoder).__name__} is neither a lexical nor a dense encoder")
    cache = (cache_dir or default_cache()) if use_cache else None
    doc_ids, query_ids = list(task.corpus), list(queries)
    documents = document_vectors(encoder, task, doc_ids, cache)
    texts = [queries[q] for q in query_ids]
    instruction = task.declaration.query_instruction
    key = content_hash(query_ids, texts, "queries", instruction)
    vectors = cached_vectors(
        cache, encoder, key, lambda: unit_rows(encoder.encode_queries(texts, instruction))
    )
    position = {d: i for i, d in enumerate(doc_ids)}
    pools = {q: pool_positions(task, q, position) for q in query_ids if q in task.candidates}
    log.info(
        "%s on %s/%s: %d queries over %d documents",
        encoder.name,
        task.declaration.name,
        split,
        len(query_ids),
        len(doc_ids),
    )
    return dense_run(vectors, query_ids, documents, doc_ids, pools, k, index or IndexParams())
