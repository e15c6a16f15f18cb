"""corpus.pack: per phase, sample by the schedule, tokenize, pack into fixed-length shards.

Documents are tokenized once in Ray tasks. For each phase, language l receives p(l)·budget
tokens (documents reused across epochs when it runs out, see `sampling`); the picked
documents, each followed by [SEP], are concatenated and cut into sequences of
`sequence_length` tokens that start with [CLS] (the last one padded with [PAD]). Shards go
to `data/processed/corpus/shards/<phase>/` beside a `manifest.json`.

Before any phase is packed, the tail of each language's last document is held out
(`heldout.parquet`: one [CLS] … [SEP] sequence per language), so the encoder's eval loss per
language is measured on text no phase trained on.

A phase with a `source` (production: e.g. FineWeb2's language configs, as mmBERT drew each
phase from its own mix) is packed from documents streamed through the ingest adapter and
normalized, instead of from the deduplicated corpus; its sources are taken as already
filtered and deduplicated upstream.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core.errors import InputError
from tasks.core.io import Folder, read_json, read_parquet
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import collect, map_table
from tasks.core.stage import Output, Stage, StageContext
from tasks.corpus.hf_source import stream_documents
from tasks.corpus.params import HuggingFaceSourceParams, PackParams
from tasks.corpus.sampling import sample_by_language
from tasks.corpus.text_stats import normalize

log = get_logger("paperline.corpus.pack")
SHARD_SCHEMA = pa.schema([("input_ids", pa.list_(pa.int32())), ("length", pa.int32())])
HELDOUT_SCHEMA = pa.schema([("lang", pa.string()), ("input_ids", pa.list_(pa.int32()))])


def tokenize_batch(batch: pa.Table, tokenizer_json: str) -> pa.Table:
    """One Ray task (map_table): token ids of each text, no special tokens."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    encodings = tokenizer.encode_batch(batch.column("text").to_pylist(), add_special_tokens=False)
    return pa.table(
        {
            "doc": batch.column("doc"),
            "ids": pa.array([e.ids for e in encodings], type=pa.list_(pa.int32())),
        }
    )


def tokenize_documents(texts: pa.Array, tokenizer_json: str, params: PackParams) -> list[list[int]]:
    table = pa.table({"text": texts, "doc": pa.array(range(len(texts)), pa.int64())})
    tokenized = map_table(
        table,
        tokenize_batch,
        batch_size=params.batch_size,
        num_workers=params.num_workers,
        tokenizer_json=tokenizer_json,
    )
    return collect(tokenized).sort_by("doc").column("ids").to_pylist()


def pack_sequences(
    pieces: Iterator[Sequence[int]], length: int, cls: int, sep: int, pad: int
) -> Iterator[tuple[list[int], int]]:
    """([CLS] + length−1 tokens, real length) from documents each followed by [SEP]."""
    body = length - 1
    buffer: list[int] = []
    for piece in pieces:
        buffer.extend(piece)
        buffer.append(sep)
        while len(buffer) >= body:
            yield [cls, *buffer[:body]], length
            del buffer[:body]
    if buffer:
        yield [cls, *buffer] + [pad] * (body - len(buffer)), len(buffer) + 1


def hold_out(
    ids: list[list[int]], langs: list[str], special: Mapping[str, int], params: PackParams
) -> tuple[list[list[int]], pa.Table]:
    """Cut each language's held-out tail off its last document; returns (train ids, held out)."""
    last = {lang: i for i, lang in enumerate(langs)}
    train = list(ids)
    rows: list[tuple[str, list[int]]] = []
    for lang, i in sorted(last.items()):
        n = min(params.heldout_tokens_per_language, int(len(ids[i]) * params.heldout_max_fraction))
        if n < params.heldout_min_tokens:
            continue
        train[i] = ids[i][:-n]
        rows.append((lang, [special["[CLS]"], *ids[i][-n:], special["[SEP]"]]))
    heldout = pa.table(
        {"lang": [lang for lang, _ in rows], "input_ids": [seq for _, seq in rows]},
        schema=HELDOUT_SCHEMA,
    )
    return train, heldout


def pack_phase(
    phase: Mapping[str, Any],
    ids: list[list[int]],
    langs: list[str],
    special: Mapping[str, int],
    params: PackParams,
) -> Folder:
    # each document costs its tokens plus one [SEP]
    sample = sample_by_language(
        langs,
        [len(x) + 1 for x in ids],
        phase["probabilities"],
        phase["token_budget"],
        params.seed,
    )
    pieces = (ids[i][: max(take - 1, 0)] for i, take in sample.picks)
    sequences = list(
        pack_sequences(
            pieces, phase["sequence_length"], special["[CLS]"], special["[SEP]"], special["[PAD]"]
        )
    )
    files = Folder()
    shards = []
    for start in range(0, len(sequences), params.shard_sequences):
        chunk = sequences[start : start + params.shard_sequences]
        name = f"shard-{start // params.shard_sequences:05d}.parquet"
        files[name] = pa.table(
            {"input_ids": [s for s, _ in chunk], "length": [n for _, n in chunk]},
            schema=SHARD_SCHEMA,
        )
        shards.append({"file": name, "sequences": len(chunk)})
    total = sum(sample.units.values())
    files["manifest.json"] = {
        "phase": phase["name"],
        "sequence_length": phase["sequence_length"],
        "mask_ratio": phase["mask_ratio"],
        "temperature": phase["temperature"],
        "token_budget": phase["token_budget"],
        "sequences": len(sequences),
        "tokens": total,
        "shards": shards,
        "languages": sorted(sample.units),
        "tokens_per_language": dict(sorted(sample.units.items())),
        "epochs_per_language": dict(sorted(sample.epochs.items())),
        "token_share_per_language": {
            lang: round(n / total, 8) for lang, n in sorted(sample.units.items())
        },
        "special_tokens": dict(special),
    }
    return files


def source_documents(
    source: HuggingFaceSourceParams, tokenizer_json: str, params: PackParams
) -> tuple[list[list[int]], list[str]]:
    """Token ids and languages of a phase's own documents, streamed through the ingest adapter."""
    rows = [(normalize(d["text"]), d["lang"]) for d in stream_documents(source)]
    rows = [(text, lang) for text, lang in rows if text]
    texts = pa.array([text for text, _ in rows], pa.string())
    return tokenize_documents(texts, tokenizer_json, params), [lang for _, lang in rows]


def run(params: PackParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    from tokenizers import Tokenizer

    docs = read_parquet(inputs["docs"], columns=["text", "lang"])
    schedule = read_json(inputs["schedule"])
    tokenizer_json = (inputs["tokenizer"] / "tokenizer.json").read_text(encoding="utf-8")
    tokenizer = Tokenizer.from_str(tokenizer_json)
    special = {t: tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]")}
    langs = docs.column("lang").to_pylist()
    train_ids, heldout = hold_out(
        tokenize_documents(docs.column("text"), tokenizer_json, params), langs, special, params
    )
    corpus = (train_ids, langs)
    shards = Folder()
    metrics: dict[str, Any] = {}
    for phase in schedule["phases"] + schedule.get("controls", []):
        ids, langs = (
            corpus
            if phase.get("source") is None
            else source_documents(
                HuggingFaceSourceParams.model_validate(phase["source"]), tokenizer_json, params
            )
        )
        try:
            packed = pack_phase(phase, ids, langs, special, params)
        except ValueError as exc:  # a scheduled language the phase's documents lack
            raise InputError(f"corpus.pack: phase {phase['name']}: {exc}") from None
        for name, value in packed.items():
            shards[f"{phase['name']}/{name}"] = value
        manifest = packed["manifest.json"]
        metrics[phase["name"]] = {k: manifest[k] for k in ("sequences", "tokens")} | {
            "languages": len(manifest["languages"]),
            "max_epochs": max(manifest["epochs_per_language"].values()),
        }
        log.info(
            "%s: %d sequences, %d tokens, %d languages",
            phase["name"],
            manifest["sequences"],
            manifest["tokens"],
            len(manifest["languages"]),
        )
    heldout_tokens = sum(len(s) - 2 for s in heldout.column("input_ids").to_pylist())
    metrics["heldout"] = {"languages": heldout.num_rows, "tokens": heldout_tokens}
    return {"shards": shards, "heldout": heldout, "metrics": metrics}


STAGE = Stage(
    name="corpus.pack",
    run=run,
    params_key="corpus.pack",
    inputs={
        "docs": "data/interim/corpus/dedup.parquet",
        "schedule": "data/processed/corpus/schedule.json",
        "tokenizer": "models/tokenizer",
    },
    outputs={
        "shards": "data/processed/corpus/shards",
        "heldout": "data/processed/corpus/heldout.parquet",
        "metrics": Output.metrics("data/processed/corpus/pack_metrics.json"),
    },
    uses_ray=True,
    headline="data/processed/corpus/pack_metrics.json:pretrain.tokens",
)
