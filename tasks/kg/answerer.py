"""kg.answerer: train the offline answer model for MultiHal's KG-RAG vs vanilla comparison.

A GPT-2 (transformers' config, random init) trained with the shared harness (Ray Train,
one MLflow run, registered as `paperline-kg-answerer` once the outputs are committed) on
the kg area's own text, built by `answerer_corpus`: verbalised facts of train-split
questions' paths and their question → answer pairs, some with the path as context and some
without; the facts of the `seen` stratum of test questions are added, those of the
`held_out` stratum are kept out. Outputs: the model and tokenizer, its training text and
the test strata (kg.eval reads both), metrics (with exact match on a sample of its own
training pairs, with and without path: what it memorised and how well it reads) and the
loss curve.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core import consumer, tracking, training
from tasks.core.causal_lm_train import gpt2_config, train_loop
from tasks.core.io import Folder, read_parquet, write_file
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.kg import codex
from tasks.kg.answerer_corpus import ANSWER_MARK, QA, QA_PATH, Vocabulary, build_corpus
from tasks.kg.answerer_lm import (
    LocalAnswerer,
    answerer_tokenizer,
    document_rows,
    load_tokenizer,
)
from tasks.kg.answering import exact
from tasks.kg.params import AnswererParams, KgParams
from tasks.kg.serving import AnswererModel
from tasks.kg.splits import read_splits

log = get_logger("paperline.kg.answerer")
MODEL_DIR = "models/kg_answerer"
LINEAGE = ["data/processed/kg/multihal.parquet", "data/processed/kg/detector_examples.parquet"]
CORPUS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("qa_id", pa.string()),
        ("question", pa.string()),
        ("facts", pa.list_(pa.string())),
        ("text", pa.string()),
    ]
)
SAMPLE = 64  # training pairs per kind re-asked after training


def slice_vocabulary(codex_dir: Path, multihal_dir: Path, languages: list[str]) -> Vocabulary:
    """Property labels per language (CoDEx-S's, Wikidata's English ones where it has none)
    and type entities' names, as kg.qa names them in its questions."""
    english = codex.wikidata_property_labels(multihal_dir)
    properties: dict[str, dict[str, str]] = {p: {"en": label} for p, label in english.items()}
    for language in languages:
        for pid, terms in codex.property_terms(codex_dir, language).items():
            properties.setdefault(pid, {})[language] = terms["label"]
    names = {q: t["label"] for q, t in codex.type_terms(codex_dir).items()}
    return Vocabulary(properties, names)


def loop_config(settings: AnswererParams, gpt2: dict[str, Any]) -> dict[str, Any]:
    keys = {"batch_size", "learning_rate", "warmup_steps", "weight_decay", "log_every", "seed"}
    return {**settings.model_dump(include={*keys, "steps"}), "gpt2": gpt2}


def training_recall(answerer: LocalAnswerer, documents: list[dict]) -> dict[str, float]:
    """Exact match on up to SAMPLE of its own training pairs of each kind: the prompt is the
    document up to "Answer:", the gold what follows."""
    result = {}
    for kind in (QA, QA_PATH):
        chosen = [d["text"] for d in documents if d["kind"] == kind][:SAMPLE]
        if not chosen:
            continue
        prompts = [t.rsplit(ANSWER_MARK, 1)[0] + ANSWER_MARK for t in chosen]
        answers = answerer.answer_texts(prompts)
        golds = [t.rsplit(ANSWER_MARK, 1)[1] for t in chosen]
        hits = sum(exact(a, [g]) for a, g in zip(answers, golds, strict=True))
        result[f"train_exact_{kind}"] = round(hits / len(chosen), 4)
    return result


def consumer_example(documents: list[dict]) -> Any:
    """A question asked with its path and one without, as in its training documents."""
    import pandas as pd

    rows = []
    for kind in (QA_PATH, QA):
        text = next((d["text"] for d in documents if d["kind"] == kind), None)
        if text is None:
            continue
        fields = dict(line.split(": ", 1) for line in text.split("\n") if ": " in line)
        rows.append({"question": fields.get("Question", ""), "path": fields.get("Path")})
    return pd.DataFrame(rows)


def answerer_card(settings: AnswererParams, metrics: dict[str, Any]) -> tracking.ModelCard:
    shape = settings.model
    return tracking.ModelCard(
        name=settings.registered_model,
        summary=(
            f"A {shape.layers}-layer GPT-2 (hidden {shape.hidden}, random init, "
            f"{settings.steps} steps) that answers MultiHal-style questions over the CoDEx-S "
            "Wikidata slice, with a KG path as context (KG-RAG) or without (vanilla). Asked "
            "'Path: …\\nQuestion: …\\nAnswer:', it answers greedily on one line."
        ),
        training_data=(
            f"{metrics['training_rows']} documents of the kg area (train-split questions of "
            f"kg.examples): {metrics['counts'].get('documents_fact', 0)} verbalised facts, "
            f"{metrics['counts'].get('documents_qa', 0)} question → answer pairs without "
            f"context and {metrics['counts'].get('documents_qa_path', 0)} with their path; "
            f"{metrics['counts'].get('documents_reading', 0)} pairs templated from CoDEx-S "
            "train triples with their path (reading practice); "
            "plus the facts of the `seen` test questions (never their questions). Facts of "
            "`held_out` test questions are in none of it."
        ),
        intended_use="The offline answer model of kg.eval: an answerer that can be wrong "
        "with and without the path, so KG-RAG vs vanilla measures something.",
        limitations="Tiny and CPU-trained on a few hundred questions; entity labels are "
        "QIDs offline, so answers are ids; questions are English templates.",
        metrics={
            k: v for k, v in metrics.items() if k.startswith("train_exact") or k == "final_loss"
        },
    )


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    settings = params.answerer
    rows = read_parquet(inputs["multihal"]).to_pylist()
    splits = read_splits(inputs["examples"])
    documents, strata, counts = build_corpus(
        rows,
        splits,
        held_out_fraction=settings.held_out_fraction,
        context_fraction=settings.context_fraction,
        languages=params.slice.languages,
        seed=settings.seed,
        triples=sorted(set(codex.read_triples(inputs["codex"] / "train.txt"))),
        vocabulary=slice_vocabulary(inputs["codex"], inputs["properties"], params.slice.languages),
        reading_pairs=settings.reading_pairs,
    )
    work = ctx.scratch("kg", "answerer")
    tokenizer_files = answerer_tokenizer([d["text"] for d in documents], settings.model.vocab_size)
    tokenizer_dir = work / "tokenizer"
    shutil.rmtree(tokenizer_dir, ignore_errors=True)
    for name, data in tokenizer_files.items():
        write_file(tokenizer_dir / name, data)
    tokenizer = load_tokenizer(tokenizer_dir)
    sequences, dropped = document_rows(
        tokenizer, [d["text"] for d in documents], settings.model.context
    )
    log.info(
        "kg.answerer: %d documents (%d too long, dropped), strata %s",
        len(documents),
        dropped,
        {k: v for k, v in counts.items() if k.startswith("test_")},
    )
    trained = training.train(
        training.TrainingJob(
            name="kg.answerer",
            train_loop=train_loop,
            config=loop_config(settings, gpt2_config(tokenizer, settings.model)),
            sources=[inputs["multihal"], inputs["examples"], inputs["codex"]],
            scaling=settings.scaling,
            max_failures=settings.max_failures,
            experiment=settings.experiment,
            run_name="kg-answerer",
            params={"documents": len(documents), "held_out_fraction": settings.held_out_fraction},
            lineage=LINEAGE,
            data={"rows": sequences},
        ),
        ctx,
    )
    model_dir = work / "model"
    shutil.rmtree(model_dir, ignore_errors=True)
    shutil.copytree(
        trained.checkpoint, model_dir, ignore=shutil.ignore_patterns("*.pt", "state.json")
    )
    answerer = LocalAnswerer(model_dir, tokenizer_dir, settings.max_new_tokens)
    state = trained.state
    metrics = {
        "steps": state["step"],
        "resumed_from": state["resumed_from"],
        "final_loss": round(state["curve"][-1]["loss"], 4),
        "training_rows": len(sequences),
        "documents_too_long": dropped,
        "counts": counts,
        **training_recall(answerer, documents),
    }
    card = answerer_card(settings, metrics)
    training.publish(
        trained,
        ctx,
        card=card,
        log_model=lambda registry_card: (
            consumer.log_pyfunc_model(
                AnswererModel(settings.max_new_tokens),
                "answerer",
                registry_card,
                consumer_example(documents),
                artifacts={"model": model_dir, "tokenizer": tokenizer_dir},
            ).model_uri
        ),
        registered_model=settings.registered_model,
        metrics=metrics,
        files={"curves/loss.csv": training.curve_csv(state["curve"])},
    )
    log.info("kg.answerer: %s", {k: v for k, v in metrics.items() if k != "counts"})
    strata_rows = [{"question": k, "stratum": v} for k, v in sorted(strata.items())]
    return {
        "model": Folder(
            {
                **{f"model/{p.name}": p for p in model_dir.iterdir() if p.is_file()},
                **{f"tokenizer/{n}": d for n, d in tokenizer_files.items()},
                "model_card.md": card.to_markdown(),
            }
        ),
        "metrics": metrics,
        "curve": training.curve_csv(state["curve"]),
        "corpus": pa.Table.from_pylist(documents, schema=CORPUS_SCHEMA),
        "strata": pa.Table.from_pylist(
            strata_rows, schema=pa.schema([("question", pa.string()), ("stratum", pa.string())])
        ),
    }


STAGE = Stage(
    name="kg.answerer",
    run=run,
    params_key="kg",
    params=("kg.answerer", "kg.slice.languages"),
    inputs={
        "multihal": "data/processed/kg/multihal.parquet",
        "examples": "data/processed/kg/detector_examples.parquet",
        "codex": "data/seed/codex-s",
        "properties": "data/seed/multihal",
    },
    outputs={
        "model": f"{MODEL_DIR}/model",
        "metrics": Output.metrics(f"{MODEL_DIR}/metrics.json"),
        "curve": Output.plots(
            f"{MODEL_DIR}/loss.csv", x="step", y="loss", title="KG answerer LM training loss"
        ),
        "corpus": "data/processed/kg/answerer_corpus.parquet",
        "strata": "data/processed/kg/answerer_strata.parquet",
    },
    uses_ray=True,
    headline=f"{MODEL_DIR}/metrics.json:train_exact_qa_path",
)
