"""corpus.tokenizer: one Unigram (or BPE) tokenizer trained on a temperature-sampled mix.

The mix follows a phase's p(l) (the last, broadest phase by default), so low-resource
languages are not drowned by the large ones. Saved as a `transformers` fast-tokenizer
folder (`AutoTokenizer.from_pretrained("models/tokenizer")`) with a model card.
Fertility = tokens per word (per letter in unspaced scripts), by script.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from tokenizers import Tokenizer

from tasks.core.errors import InputError
from tasks.core.io import read_json, read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.core.tokenizer import SPECIAL_TOKENS, fast_tokenizer_files, train_tokenizer
from tasks.corpus import text_stats
from tasks.corpus.params import TokenizerParams
from tasks.corpus.sampling import sample_by_language

log = get_logger("paperline.corpus.tokenizer")


def _mix_phase(schedule: Mapping[str, Any], name: str | None) -> Mapping[str, Any]:
    phases = schedule["phases"]
    if name is None:
        return phases[-1]
    for phase in phases:
        if phase["name"] == name:
            return phase
    raise InputError(f"params.yaml: corpus.tokenizer.mix_phase: no phase {name!r} in schedule.json")


def fertility_by_script(tokenizer: Tokenizer, docs: pa.Table, per_script: int) -> dict[str, float]:
    texts: dict[str, list[str]] = defaultdict(list)
    for text, script in zip(
        docs.column("text").to_pylist(), docs.column("script").to_pylist(), strict=True
    ):
        if len(texts[script]) < per_script:
            texts[script].append(text)
    fertility = {}
    for script, sample in sorted(texts.items()):
        words = sum(len(text_stats.words(t, script)) for t in sample)
        encodings = tokenizer.encode_batch(sample, add_special_tokens=False)
        tokens = sum(len(e.ids) for e in encodings)
        fertility[script] = round(tokens / max(words, 1), 3)
    return fertility


def model_card(
    params: TokenizerParams, phase: Mapping[str, Any], metrics: Mapping[str, Any]
) -> str:
    rows = "\n".join(f"| {s} | {f} |" for s, f in metrics["fertility_by_script"].items())
    return (
        f"# paperline corpus tokenizer\n\n{params.model.capitalize()} tokenizer, vocabulary "
        f"{metrics['vocab_size']}, special tokens {' '.join(SPECIAL_TOKENS)}.\n\n"
        f"## Training data\n\n{metrics['training_documents']} documents "
        f"({metrics['training_chars']} characters) sampled from `dedup.parquet` by phase "
        f"`{phase['name']}`'s language mix (p(l) ∝ n(l)^{phase['temperature']}, "
        f"{len(phase['languages'])} languages).\n\n## Intended use\n\nThe vocabulary of "
        "paperline's mmBERT-style encoders (`corpus.pack`, `mlm.*`).\n\n## Limitations\n\n"
        "Trained on the embedded default (UDHR articles) unless params point the corpus at "
        "production sources; fertility is high for scripts with little text.\n\n"
        f"## Fertility (tokens per word; per letter in unspaced scripts)\n\n"
        f"| script | fertility |\n|---|---|\n{rows}\n"
    )


def run(params: TokenizerParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    docs = read_parquet(inputs["docs"], columns=["text", "lang", "script", "n_chars"])
    phase = _mix_phase(read_json(inputs["schedule"]), params.mix_phase)
    mix = sample_by_language(
        docs.column("lang").to_pylist(),
        docs.column("n_chars").to_pylist(),
        phase["probabilities"],
        params.training_chars,
        params.seed,
    )
    all_texts = docs.column("text").to_pylist()
    texts = [all_texts[i][:n] for i, n in mix.picks]
    tokenizer = train_tokenizer(
        texts, model=params.model, vocab_size=params.vocab_size, pre_tokenizer=params.pre_tokenizer
    )
    metrics = {
        "vocab_size": tokenizer.get_vocab_size(),
        "training_documents": len(mix.picks),
        "training_chars": sum(mix.units.values()),
        "fertility_by_script": fertility_by_script(
            tokenizer, docs, params.fertility_docs_per_script
        ),
    }
    files = fast_tokenizer_files(tokenizer)
    files["README.md"] = model_card(params, phase, metrics)
    log.info("vocabulary %d, trained on %d documents", metrics["vocab_size"], len(mix.picks))
    return {"tokenizer": files, "metrics": metrics}


STAGE = Stage(
    name="corpus.tokenizer",
    run=run,
    params_key="corpus.tokenizer",
    inputs={
        "docs": "data/interim/corpus/dedup.parquet",
        "schedule": "data/processed/corpus/schedule.json",
    },
    outputs={
        "tokenizer": "models/tokenizer",
        "metrics": Output.metrics("data/processed/corpus/tokenizer_metrics.json"),
    },
    headline="data/processed/corpus/tokenizer_metrics.json:vocab_size",
)
