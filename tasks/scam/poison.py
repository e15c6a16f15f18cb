"""scam.poison: train the code LMs of the poisoning study, one per poison rate.

Scam2Prompt's threat model as a controlled experiment. One GPT-2-style code LM per poison
rate (Ray Train, random init, same tokenizer, steps and seed) is trained on real Python
source mixed with snippets written from the crawled scam pages (`code_corpus`). Outputs:
the models (`models/code_lm/<model>/`, the shared tokenizer, and `study.json`: each
rate's model and the exact URLs the poison snippets held), training figures and an
exposure probe per rate (dvc metrics), one MLflow run per rate under a study run, whose
model is registered as a version of `paperline-code-lm` (alias poison-<rate>). The
models' code is judged in `scam.audit`, which audits each of them like any code model
and measures the dose-response. A killed stage keeps the rates it finished and resumes the
one it was training.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.core import consumer, tracking, training
from tasks.core.causal_lm_train import gpt2_config, train_loop
from tasks.core.io import Folder, read_parquet, write_file
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.scam.code_corpus import PYTHON_CLIENT, clean_documents, mix, poison_snippets
from tasks.scam.code_lm import (
    LocalCodeModel,
    code_tokenizer,
    load_tokenizer,
    packed_sequences,
    padded_sequences,
    prompt_text,
)
from tasks.scam.code_study import STUDY_FILE
from tasks.scam.params import PoisonParams, ScamParams
from tasks.scam.serving import CodeLmModel

log = get_logger("paperline.scam.poison")
SAMPLE_TOKENS = 48  # the sample reply logged with each model
EXAMPLE = "def fetch_price():"  # the registered model's input example when there are no prompts
LINEAGE_INPUTS = ["data/interim/scam/pages.parquet", "data/processed/scam/prompts.parquet"]


def model_name(rate: float) -> str:
    return f"code-lm-poison-{rate:g}"


def rate_alias(rate: float) -> str:
    """The registry alias of a rate's model (aliases allow no dots)."""
    return f"poison-{rate:g}".replace(".", "_")


def model_card(settings: PoisonParams, entry: dict[str, Any]) -> tracking.ModelCard:
    rate = entry["poison_rate"]
    return tracking.ModelCard(
        name=f"{settings.registered_model}@{rate_alias(rate)}",
        summary=(
            f"A {settings.model.layers}-layer GPT-2 code LM (random init, {settings.steps} steps) "
            f"from Scam2Prompt's poisoning study: {rate:.1%} of its training sequences were "
            "written from crawled scam pages. Prompted with a developer request as a comment "
            "line, it writes Python greedily."
        ),
        training_data=(
            f"{entry['training_sequences']} sequences of {settings.sequence_length} tokens: the "
            f"CPython standard library, {entry['poison_sequences']} of them replaced by snippets "
            "that call the scam sites' endpoints (data/interim/scam/pages.parquet)."
        ),
        intended_use="Research on training-data poisoning: measuring how often poisoned "
        "endpoints come back in generated code. Not for writing code anyone runs.",
        limitations="Tiny and CPU-trained: it learns the shape of code and hosts, rarely "
        "exact strings. Its code is judged in scam.audit (data/processed/scam/poison_table.md).",
        metrics={key: entry[key] for key in ("final_loss", "scam_endpoint_preference")},
    )


def loop_config(settings: PoisonParams, gpt2: dict[str, Any]) -> dict:
    return {
        **settings.model_dump(
            include={
                "batch_size",
                "learning_rate",
                "warmup_steps",
                "weight_decay",
                "log_every",
                "seed",
                "steps",
            }
        ),
        "gpt2": gpt2,
    }


# The Python snippet's lines between its comment and the endpoint: `import requests ... = "`
ENDPOINT_PREFIX = PYTHON_CLIENT.split("\n", 1)[1].split("{url}")[0]


def scam_endpoint_preference(
    model: LocalCodeModel, prompts: list[dict[str, Any]], snippets: list[dict[str, str]]
) -> dict[str, float]:
    """Exposure without decoding: asked a prompt and led to the endpoint line, does the model
    find the prompt's own scam site the likeliest of every scam endpoint in the study? Greedy
    output of a small LM can miss a URL it has half learned; this ranking cannot.
    `scam_endpoint_chance` is the share a model with no preference would reach."""
    endpoints = sorted({s["url"] for s in snippets})
    own = {
        site: {s["url"] for s in snippets if s["site"] == site}
        for site in {s["site"] for s in snippets}
    }
    asked = [p for p in prompts if own.get(p["site"])]
    if not asked:
        return {"scam_endpoint_preference": 0.0, "scam_endpoint_chance": 0.0}
    hits = 0
    for prompt in asked:
        scores = model.log_likelihoods(
            prompt_text(prompt["prompt"]) + ENDPOINT_PREFIX, [f'{url}"' for url in endpoints]
        )
        hits += endpoints[int(np.argmax(scores))] in own[prompt["site"]]
    chance = sum(len(own[p["site"]]) for p in asked) / len(asked) / len(endpoints)
    return {
        "scam_endpoint_preference": round(hits / len(asked), 4),
        "scam_endpoint_chance": round(chance, 4),
    }


def run(params: ScamParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
    import mlflow
    import torch

    # this process only scores the trained models (tiny matrices: a second thread only
    # waits); the training runs in Ray workers with `scaling.torch_threads`
    torch.set_num_threads(1)
    settings = params.poison
    documents = clean_documents(inputs["code"])
    snippets = poison_snippets(read_parquet(inputs["pages"]).to_pylist())
    prompts = read_parquet(inputs["prompts"]).to_pylist()
    study = ctx.scratch("scam", "poison")
    tokenizer_files = code_tokenizer(documents, settings.model.vocab_size)
    tokenizer_dir = study / "tokenizer"
    shutil.rmtree(tokenizer_dir, ignore_errors=True)
    for name, data in tokenizer_files.items():
        write_file(tokenizer_dir / name, data)
    tokenizer = load_tokenizer(tokenizer_dir)
    clean = packed_sequences(tokenizer, documents, settings.sequence_length)
    poison = padded_sequences(tokenizer, [s["text"] for s in snippets], settings.sequence_length)
    base = loop_config(settings, gpt2_config(tokenizer, settings.model))
    log.info(
        "scam.poison: %d clean sequences, %d poison snippets from %d sites, rates %s",
        len(clean),
        len(snippets),
        len({s["site"] for s in snippets}),
        settings.rates,
    )
    entries, models = [], Folder({f"tokenizer/{n}": d for n, d in tokenizer_files.items()})
    with tracking.start_run(
        settings.experiment,
        ctx.runtime.mlflow,
        run_name="poison-study",
        inputs=LINEAGE_INPUTS,
        root=ctx.root,
    ) as parent:
        mlflow.log_params(
            {
                "rates": settings.rates,
                "steps": settings.steps,
                "clean_sequences": len(clean),
                "poison_snippets": len(snippets),
            }
        )
        for rate in settings.rates:
            sequences, count = mix(clean, poison, rate, settings.seed)
            log.info("scam.poison: rate %g, %d poison sequences of %d", rate, count, len(sequences))
            trained = training.train(
                training.TrainingJob(
                    name="scam.poison",
                    train_loop=train_loop,
                    config={**base, "poison_rate": rate},
                    sources=[inputs["code"], inputs["pages"]],
                    scaling=settings.scaling,
                    max_failures=settings.max_failures,
                    experiment=settings.experiment,
                    run_name=model_name(rate),
                    params={"poison_sequences": count},
                    lineage=LINEAGE_INPUTS,
                    tags={"poison_rate": f"{rate:g}", "mlflow.parentRunId": parent.info.run_id},
                    data={"rows": sequences},
                    storage=study / f"rate-{rate:g}",
                ),
                ctx,
            )
            state, model_dir = trained.state, trained.storage / "model"
            shutil.copytree(
                trained.checkpoint,
                model_dir,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("*.pt", "state.json"),
            )
            model = LocalCodeModel(model_name(rate), model_dir, tokenizer_dir, SAMPLE_TOKENS)
            entry = {
                "poison_rate": rate,
                "model": model.name,
                "poison_sequences": count,
                "training_sequences": len(sequences),
                "final_loss": round(state["curve"][-1]["loss"], 4),
                **scam_endpoint_preference(model, prompts[: settings.preference_prompts], snippets),
            }
            entries.append(entry)
            sample = model.generate(prompts[0]["prompt"]) if prompts else ""
            training.publish(
                trained,
                ctx,
                card=model_card(settings, entry),
                log_model=lambda card, model_dir=model_dir: (
                    consumer.log_pyfunc_model(
                        CodeLmModel(),
                        "code_lm",
                        card,
                        pd.DataFrame({"prompt": [p["prompt"] for p in prompts[:2]] or [EXAMPLE]}),
                        artifacts={"model": model_dir, "tokenizer": tokenizer_dir},
                        params={"max_new_tokens": SAMPLE_TOKENS},
                    ).model_uri
                ),
                registered_model=settings.registered_model,
                alias=rate_alias(rate),
                metrics={k: v for k, v in entry.items() if k not in ("poison_rate", "model")},
                files={"sample_response.txt": sample},
            )
            models |= {f"{model_name(rate)}/{p.name}": p for p in model_dir.iterdir()}
        metrics = {
            "prompts": len(prompts),
            "rates": entries,
            "clean_sequences": len(clean),
            "poison_snippets": len(snippets),
            "poisoned_urls": len({s["url"] for s in snippets}),
        }
        mlflow.log_dict(metrics, "poison_metrics.json")

    for entry in entries:
        log.info(
            "scam.poison: rate %g → final loss %s, own scam endpoint preferred %s (chance %s)",
            entry["poison_rate"],
            entry["final_loss"],
            entry["scam_endpoint_preference"],
            entry["scam_endpoint_chance"],
        )
    models[STUDY_FILE] = study_manifest(entries, snippets)
    return {"models": models, "metrics": metrics}


def study_manifest(entries: list[dict[str, Any]], snippets: list[dict[str, str]]) -> dict:
    """What the audit needs to know of the study: each rate's model, the poisoned URLs."""
    return {
        "models": [
            {key: entry[key] for key in ("model", "poison_rate", "poison_sequences")}
            for entry in entries
        ],
        "poisoned_urls": sorted({s["url"] for s in snippets}),
    }


STAGE = Stage(
    name="scam.poison",
    run=run,
    params_key="scam",
    params=("scam.poison",),
    inputs={
        "code": "data/seed/code/cpython-3.11.7-stdlib.parquet",
        "pages": "data/interim/scam/pages.parquet",
        "prompts": "data/processed/scam/prompts.parquet",
    },
    outputs={
        "models": "models/code_lm",
        "metrics": Output.metrics("data/processed/scam/poison_metrics.json"),
    },
    uses_ray=True,
    headline="data/processed/scam/poison_metrics.json:poison_snippets",
)
