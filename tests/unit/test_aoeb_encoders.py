"""The aoeb encoders (BM25, MiniLM, a transformers folder, image-text), the embedding cache,
the faiss indexes, candidate pools, the image tower and the rendered text-to-image task."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration, read_task, task_files
from tasks.aoeb.embedded.multimodal import MultimodalTaskParams, all_scenes, multimodal_task
from tasks.aoeb.encoders import (
    IndexParams,
    UnsupportedTask,
    build_index,
    make_encoder,
    search,
    unsupported,
)
from tasks.aoeb.metrics import retrieval_scores
from tasks.core.errors import InputError
from tasks.core.io import commit_outputs
from tasks.core.text_encoders import BM25Encoder, EncoderParams, ImageEncoder, TransformersEncoder
from tests.conftest import word_level_tokenizer

VOCABULARY = (
    "the cat sat on mat dog ran in park bake bread at home stock prices fell sharply how to "
    "reset my password a bar chart spectrogram of rising chirp tone red blue green"
)


def text_task(corpus: dict[str, str], queries: dict[str, str], qrels, candidates=None):
    declaration = TaskDeclaration(
        name="Tiny", capability="memory", splits=("test",), has_candidates=bool(candidates)
    )
    docs = {doc_id: {"title": "", "text": text} for doc_id, text in corpus.items()}
    return RetrievalTask(declaration, docs, queries, {"test": qrels}, candidates or {})


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer BERT and a word-level tokenizer, saved as a folder."""
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("tiny-bert")
    fast = word_level_tokenizer(VOCABULARY, folder)
    config = BertConfig(
        vocab_size=len(fast),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=fast.pad_token_id,
    )
    import torch

    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    return folder


def mmbert(folder: Path, **options) -> TransformersEncoder:
    params = EncoderParams(name="tiny", kind="mmbert", options={"model": str(folder), **options})
    encoder = make_encoder(params)
    assert isinstance(encoder, TransformersEncoder)
    return encoder


class LookupEncoder:
    """A dense encoder whose vectors are given: text -> vector (counts its calls)."""

    def __init__(self, vectors: dict[str, np.ndarray]):
        self.name, self.vectors, self.calls = "lookup", vectors, 0

    def fingerprint(self) -> str:
        return "lookup-0"

    def encode_queries(self, texts, instruction=""):
        return self.encode_documents(texts)

    def encode_documents(self, texts):
        self.calls += 1
        rows = np.stack([self.vectors[t] for t in texts]).astype(np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_bm25_ranks_the_lexical_match_first():
    corpus = {
        "d1": "the cat sat on the mat",
        "d2": "stock prices fell sharply today",
        "d3": "how to bake bread at home",
        "d4": "a dog ran in the park",
    }
    queries = {"q1": "bake bread", "q2": "why did stock prices fall"}
    task = text_task(corpus, queries, {"q1": {"d3": 1}, "q2": {"d2": 1}})
    run = search(BM25Encoder("bm25"), task, "test", k=3)
    assert [next(iter(run[q])) for q in ("q1", "q2")] == ["d3", "d2"]
    assert len(run["q1"]) == 3 and list(run["q1"].values()) == sorted(run["q1"].values())[::-1]
    assert retrieval_scores(task.qrels["test"], run)["mrr_at_1"] == 1.0
    encoder = BM25Encoder("bm25")
    encoder.index(list(corpus.values()))
    assert encoder.retrieve("zebra unicorn").tolist() == [0.0] * 4  # no known word: all zero
    assert encoder.retrieve("bake bread", pool=[3, 2]).argmax() == 1


def test_minilm_vectors_are_unit_and_rank_a_paraphrase_first():
    encoder = make_encoder(EncoderParams(name="minilm", kind="minilm"))
    documents = encoder.encode_documents(
        ["Steps to change a login password you forgot", "Bake the bread for forty minutes"]
    )
    query = encoder.encode_queries(["How do I reset my password?"])
    assert documents.shape == (2, 384) and documents.dtype == np.float32
    assert np.allclose(np.linalg.norm(documents, axis=1), 1, atol=1e-5)
    scores = documents @ query[0]
    assert scores[0] > scores[1] + 0.2


def test_transformers_folder_mean_pools_under_the_mask(tiny_bert):
    encoder = mmbert(tiny_bert)
    alone = encoder.encode_documents(["the cat sat"])
    batched = encoder.encode_documents(["the cat sat", "a dog ran in the park at home today"])
    assert batched.shape == (2, 32)
    assert np.allclose(np.linalg.norm(batched, axis=1), 1, atol=1e-5)
    assert np.allclose(alone[0], batched[0], atol=1e-5)  # padding does not move the vector
    plain = encoder.encode_queries(["bake bread"], "retrieve a recipe")
    instructed = mmbert(tiny_bert, instructions=True).encode_queries(
        ["bake bread"], "retrieve a recipe"
    )
    assert np.allclose(plain, encoder.encode_documents(["bake bread"]), atol=1e-6)
    assert not np.allclose(plain, instructed, atol=1e-3)
    assert unsupported(encoder, TaskDeclaration("t", "multimodal", "text-to-image"))


def test_embeddings_are_cached_and_reused(tiny_bert, tmp_path):
    corpus = {
        "d1": "the cat sat on the mat",
        "d2": "stock prices fell sharply",
        "d3": "bake bread at home",
    }
    task = text_task(corpus, {"q1": "cat on mat"}, {"q1": {"d1": 1}})
    first = mmbert(tiny_bert)
    run = search(first, task, "test", k=3, cache_dir=tmp_path)
    cached = sorted(p.name for p in (tmp_path / first.fingerprint()).iterdir())
    assert len(cached) == 2 and all(name.endswith(".npy") for name in cached)  # docs + queries
    second = mmbert(tiny_bert)
    assert second.fingerprint() == first.fingerprint()
    assert search(second, task, "test", k=3, cache_dir=tmp_path) == run
    assert "model" not in second.__dict__  # the model was never loaded
    other = mmbert(tiny_bert, document_prefix="passage: ")
    assert other.fingerprint() != first.fingerprint()


def test_flat_hnsw_and_ivf_agree_on_the_nearest_document():
    rng = np.random.default_rng(0)
    docs = rng.normal(size=(2000, 16)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries = docs[:50] + rng.normal(scale=0.05, size=(50, 16)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    tops = {}
    for kind in ("flat", "hnsw", "ivf"):
        index = build_index(docs, kind, nlist=16, nprobe=8, m=16, ef_search=64)
        tops[kind] = index.search(queries, 1)[1][:, 0].tolist()
    assert tops["flat"] == list(range(50))
    assert tops["hnsw"] == tops["flat"] and tops["ivf"] == tops["flat"]


def test_candidate_pools_restrict_the_ranking(tmp_path):
    vectors = {
        "best": np.array([1, 0, 0]),
        "near": np.array([0.8, 0.6, 0]),
        "far": np.array([0, 0, 1]),
        "query": np.array([1, 0.05, 0]),
    }
    corpus = {"d-best": "best", "d-near": "near", "d-far": "far"}
    qrels = {"q1": {"d-near": 1}, "q2": {"d-best": 1}}
    task = text_task(corpus, {"q1": "query", "q2": "query"}, qrels, {"q1": ["d-near", "d-far"]})
    encoder = LookupEncoder({k: v.astype(float) for k, v in vectors.items()})
    for kind in ("flat", "hnsw"):
        run = search(encoder, task, "test", k=10, cache_dir=tmp_path, index=IndexParams(kind=kind))
        assert list(run["q1"]) == ["d-near", "d-far"]  # the pool only, best first
        assert list(run["q2"]) == ["d-best", "d-near", "d-far"]
    words = text_task(
        {"d1": "bread", "d2": "bread bread", "d3": "cat"},
        {"q1": "bread"},
        {"q1": {"d1": 1}},
        {"q1": ["d1", "d3"]},
    )
    assert list(search(BM25Encoder("bm25"), words, "test")["q1"]) == ["d1", "d3"]


def test_multimodal_task_is_deterministic_and_split_by_picture():
    from PIL import Image

    settings = MultimodalTaskParams(train_images=14, dev_images=4, test_images=6, seed=3)
    task, again = multimodal_task(settings), multimodal_task(settings)
    assert task.assets == again.assets and task.queries == again.queries
    other = multimodal_task(settings.model_copy(update={"seed": 4}))
    assert other.assets != task.assets
    assert task.declaration.modality == "text-to-image"
    assert task.declaration.capability == "multimodal"
    train, dev, test = task.qrels["train"], task.qrels["dev"], task.qrels["test"]
    assert (len(train), len(dev), len(test)) == (14, 4, 6)
    train_images = {d for docs in train.values() for d in docs}
    dev_images = {d for docs in dev.values() for d in docs}
    test_images = {d for docs in test.values() for d in docs}
    assert train_images.isdisjoint(test_images) and len(train_images | test_images) == 20
    assert dev_images.isdisjoint(train_images | test_images) and len(dev_images) == 4
    assert set(task.corpus) == train_images | dev_images | test_images
    assert len(set(task.queries.values())) == len(task.queries)  # one caption per picture
    for doc in task.corpus.values():
        assert doc["title"] == doc["text"] == ""
        with Image.open(io.BytesIO(task.assets[doc["image"]])) as picture:
            assert picture.size == (64, 64) and picture.mode == "RGB"
    assert len({s.caption for s in all_scenes()}) == len(all_scenes()) >= 400
    with pytest.raises(InputError, match="distinct captions"):
        multimodal_task(MultimodalTaskParams(train_images=1000, test_images=1000))


def test_image_tower_round_trip_and_text_to_image_search(tiny_bert, tmp_path):
    from tasks.aoeb import image_tower

    tower = image_tower.ImageTower(image_tower.TowerConfig(embed_dim=32))
    image_tower.save(tower, tmp_path / "tower")
    loaded = image_tower.load(tmp_path / "tower")
    settings = MultimodalTaskParams(train_images=6, dev_images=2, test_images=4, seed=1)
    task = multimodal_task(settings)
    pictures = list(task.assets.values())
    before = image_tower.embed_images(tower, pictures)
    assert before.shape == (12, 32)
    assert np.allclose(before, image_tower.embed_images(loaded, pictures), atol=1e-6)
    assert np.allclose(np.linalg.norm(before, axis=1), 1, atol=1e-5)
    (tmp_path / "broken").mkdir()
    with pytest.raises(InputError, match="not an image tower"):
        image_tower.load(tmp_path / "broken")

    commit_outputs({tmp_path / "task": task_files(task)})
    on_disk = read_task(tmp_path / "task")  # pictures come from the folder now
    params = EncoderParams(
        name="clip",
        kind="image-text",
        options={"model": str(tiny_bert), "image_tower": str(tmp_path / "tower")},
    )
    encoder = make_encoder(params)
    assert isinstance(encoder, ImageEncoder)
    run = search(encoder, on_disk, "test", k=5, cache_dir=tmp_path / "cache")
    assert set(run) == set(task.qrels["test"]) and all(len(docs) == 5 for docs in run.values())
    assert run == search(encoder, task, "test", k=5, cache_dir=tmp_path / "cache")
    with pytest.raises(UnsupportedTask, match="no image tower"):
        search(BM25Encoder("bm25"), task, "test")
