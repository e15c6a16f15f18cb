"""aoeb.finetune: the contrastive fine-tune of the mmBERT encoder → `paperline-embedder`.

Pairs are the `train` splits of every embedded text task (query with its task's
instruction, relevant document); the encoder starts from the decay-phase mmBERT checkpoint
(models/mmbert/decay) and trains with InfoNCE over in-batch negatives on Ray Train
(tasks/aoeb/contrastive_train.py), keeping a checkpoint every `checkpoint_every` steps.
The embedder is the checkpoint with the best mean nDCG@10 on the tasks' dev splits
(tasks/aoeb/selection.py): `steps` is a budget, the step is chosen on dev, and no test query
is read here. The result is a transformers folder (model, tokenizer, card) that
`aoeb.evaluate` scores next to its base, logged to MLflow and registered as
`paperline-embedder@candidate`; the image tower is trained against the chosen text side.
"""

from __future__ import annotations

import math
import shutil
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from statistics import fmean
from typing import Any

import pandas as pd

from tasks.aoeb import contrastive_train, image_train
from tasks.aoeb.benchmark import RetrievalTask, read_tasks, training_pairs
from tasks.aoeb.params import AoebParams
from tasks.aoeb.selection import DEV, best_candidate, split_ndcg, text_tasks_with
from tasks.aoeb.serving import EmbedderModel
from tasks.core import consumer, tracking, training
from tasks.core.errors import InputError
from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext

log = get_logger("paperline.aoeb.finetune")
TASKS, BASE, TOKENIZER = "data/processed/aoeb/tasks", "models/mmbert/decay", "models/tokenizer"
EMBEDDER_OPTIONS = {"instructions": True}  # as aoeb.evaluate's `embedder` encoder (params.yaml)


def embedder_card(params: AoebParams, metrics: dict[str, Any]) -> tracking.ModelCard:
    settings = params.finetune
    per_task = ", ".join(f"{name} {count}" for name, count in metrics["pairs_by_task"].items())
    return tracking.ModelCard(
        name=settings.registered_model,
        summary=(
            "A sentence embedder: this project's mmBERT encoder (ModernBERT, trained by the mlm "
            "area on the phased UDHR corpus) fine-tuned contrastively. Embeddings are the mean "
            "of the last hidden states under the attention mask, L2-normalised; queries take "
            "the task instruction as `Instruct: <instruction>\\nQuery: <query>`. Beside it, an "
            "image tower (a small CNN, models/embedder/image_tower, MLflow artifact "
            "`image_tower`) trained with the text side frozen (LiT) maps pictures into the "
            "same space for text-to-image retrieval."
        ),
        training_data=(
            f"{metrics['pairs']} (query, relevant document) pairs from the train splits of "
            f"the embedded AOEB tasks ({per_task}); InfoNCE with in-batch negatives, batch "
            f"{settings.batch_size}, temperature {settings.temperature:g}, "
            f"{metrics['steps']} steps; the checkpoint at step {metrics['chosen_step']} "
            f"chosen on the dev splits ({selection_note(metrics)})."
        ),
        intended_use=(
            "Retrieval over the embedded AOEB tasks (code, tools, multi-hop facts, memory) and "
            "a baseline for comparing encoders in `aoeb.evaluate`, next to its base."
        ),
        limitations=(
            "A tiny encoder pretrained on a few megabytes of UDHR text, fine-tuned on a few "
            "hundred synthetic pairs on CPU: expect it to trail the packaged MiniLM and BM25. "
            "The test splits share templates with the train splits (never the same items)."
        ),
        metrics={
            "final_loss": metrics["final_loss"],
            "pairs": float(metrics["pairs"]),
            **(
                {"dev_ndcg_at_10": metrics["dev_ndcg_at_10"]} if "dev_ndcg_at_10" in metrics else {}
            ),
        },
    )


def selection_note(metrics: dict[str, Any]) -> str:
    by_step = metrics["selection"]["mean_by_step"]
    if not by_step:
        return "no dev split: the last checkpoint"
    return "mean dev nDCG@10 by step: " + ", ".join(f"{s} {v:.4f}" for s, v in by_step.items())


def checkpoint_steps(storage: Path) -> dict[int, Path]:
    """The fit's kept checkpoints (`step-0000050`, …) by step."""
    return {
        int(folder.name.removeprefix("step-")): folder
        for folder in sorted(storage.glob("step-*"))
        if (folder / "model.safetensors").exists()
    }


def text_model_folder(checkpoint: Path, tokenizer: Path, target: Path) -> Path:
    """A transformers folder encoders load: the checkpoint's weights with the tokenizer."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(checkpoint / name, target / name)
    for path in Path(tokenizer).iterdir():
        if path.is_file() and path.name != "README.md":
            shutil.copyfile(path, target / path.name)
    return target


def choose_on_dev(
    tasks: list[RetrievalTask], checkpoints: dict[int, Path], tokenizer: Path, scratch: Path
) -> tuple[int, dict[str, Any]]:
    """The step whose checkpoint ranks the dev queries best (mean nDCG@10 over the text
    tasks); the last step when no task has a dev split."""
    from tasks.core.text_encoders import EncoderOptions, TransformersEncoder

    if not text_tasks_with(tasks, DEV):
        return max(checkpoints), {"split": None, "mean_by_step": {}, "by_task": {}}
    scores = {}
    for step, checkpoint in checkpoints.items():
        folder = text_model_folder(checkpoint, tokenizer, scratch / "dev-candidate")
        encoder = TransformersEncoder(
            f"embedder@{step}", folder, EncoderOptions(model=str(folder), instructions=True)
        )
        scores[step] = split_ndcg(encoder, tasks, DEV)
        log.info("aoeb.finetune: step %d: dev nDCG@10 %s", step, scores[step])
    chosen = best_candidate(scores)
    mean_by_step = {step: round(fmean(by_task.values()), 4) for step, by_task in scores.items()}
    by_task = {name: round(value, 4) for name, value in sorted(scores[chosen].items())}
    return chosen, {"split": DEV, "mean_by_step": mean_by_step, "by_task": by_task}


def train_image_tower(
    tasks: list[RetrievalTask], text_folder: Path, settings: Any, scratch: Path, ctx: StageContext
) -> tuple[Path | None, dict[str, Any]]:
    """The image tower for the text-to-image tasks' train pairs, or None without any."""
    from tasks.aoeb.encoders import image_bytes
    from tasks.core.text_encoders import EncoderOptions, TransformersEncoder

    images, captions = [], []
    encoder = TransformersEncoder(
        "embedder", text_folder, EncoderOptions(model=str(text_folder), instructions=True)
    )
    for task in tasks:
        if task.declaration.modality != "text-to-image" or "train" not in task.qrels:
            continue
        pairs = [
            (qid, doc)
            for qid, judged in sorted(task.qrels["train"].items())
            for doc, score in sorted(judged.items())
            if score > 0
        ]
        images += [image_bytes(task, doc) for _, doc in pairs]
        captions.append(
            encoder.encode_queries(
                [task.queries[qid] for qid, _ in pairs], task.declaration.query_instruction
            )
        )
    if not images:
        return None, {}
    import numpy as np

    vectors = np.concatenate(captions)
    log.info(
        "aoeb.finetune: image tower on %d pictures, %d epochs", len(images), settings.image_epochs
    )
    trained = training.train(
        training.TrainingJob(
            name="aoeb.finetune (images)",
            train_loop=image_train.train_loop,
            config={
                "epochs": settings.image_epochs,
                "batch_size": settings.image_batch_size,
                "learning_rate": settings.image_learning_rate,
                "temperature": settings.temperature,
                "checkpoint_every": settings.image_checkpoint_every,
                "seed": settings.seed,
                "embed_dim": int(vectors.shape[1]),
                "image_size": 64,
                "torch_threads": settings.scaling.torch_threads or 1,
            },
            data={"images": images, "captions": vectors},
            sources=[text_folder],
            scaling=settings.scaling,
            max_failures=settings.max_failures,
            storage=scratch / "image_tower",
        ),
        ctx,
    )
    trained.finished_marker.touch()  # a part of this stage's model: no run of its own
    checkpoint, state = trained.checkpoint, trained.state
    return checkpoint, {
        "image_pairs": len(images),
        "image_epochs": state["epoch"],
        "image_final_loss": round(state["curve"][-1]["loss"], 4),
    }


def run(params: AoebParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:

    settings = params.finetune
    tasks = read_tasks(inputs["tasks"])
    pairs_by_task = Counter()
    pairs: list[tuple[str, str]] = []
    for task in tasks:
        own = training_pairs([task])
        pairs_by_task[task.declaration.name] = len(own)
        pairs += own
    if len(pairs) < settings.batch_size:
        raise InputError(
            f"aoeb.finetune: {len(pairs)} training pairs in {inputs['tasks']}, fewer than "
            f"aoeb.finetune.batch_size {settings.batch_size}; lower it or assemble more tasks"
        )
    config = {
        **settings.model_dump(
            include={
                "steps",
                "batch_size",
                "temperature",
                "learning_rate",
                "warmup_steps",
                "weight_decay",
                "query_length",
                "document_length",
                "checkpoint_every",
                "seed",
            }
        ),
        "init_from": str(inputs["base"]),
        "tokenizer": str(inputs["tokenizer"]),
    }
    log.info(
        "aoeb.finetune: %d pairs from %d tasks, %d steps", len(pairs), len(tasks), settings.steps
    )
    trained = training.train(
        training.TrainingJob(
            name="aoeb.finetune",
            train_loop=contrastive_train.train_loop,
            config=config,
            data={"pairs": pairs},
            scaling=settings.scaling,
            max_failures=settings.max_failures,
            experiment=settings.experiment,
            run_name="embedder-finetune",
            params={"pairs": len(pairs)},
            keep_checkpoints=math.ceil(settings.steps / settings.checkpoint_every),
        ),
        ctx,
    )
    state, scratch = trained.state, trained.storage
    checkpoints = checkpoint_steps(scratch)
    if not checkpoints:
        raise RuntimeError(f"aoeb.finetune: no step-* checkpoint under {scratch} after the fit")
    chosen, selection = choose_on_dev(tasks, checkpoints, inputs["tokenizer"], scratch)
    log.info("aoeb.finetune: the embedder is the checkpoint at step %d (%s)", chosen, selection)
    # model + tokenizer: what the encoders load
    text_folder = text_model_folder(checkpoints[chosen], inputs["tokenizer"], scratch / "embedder")
    tower, image_metrics = train_image_tower(tasks, text_folder, settings, scratch, ctx)
    metrics = {
        "pairs": len(pairs),
        "pairs_by_task": dict(sorted(pairs_by_task.items())),
        "steps": state["step"],
        "final_loss": round(state["curve"][-1]["loss"], 4),
        "chosen_step": chosen,
        **(
            {"dev_ndcg_at_10": selection["mean_by_step"][chosen]}
            if selection["mean_by_step"]
            else {}
        ),
        "selection": selection,
        "resumed_from": state["resumed_from"],
        **image_metrics,
    }
    card = embedder_card(params, metrics)
    training.publish(
        trained,
        ctx,
        card=card,
        log_model=lambda registry_card: (
            consumer.log_pyfunc_model(
                EmbedderModel(EMBEDDER_OPTIONS),
                "model",
                registry_card,
                pd.DataFrame({"text": [document for _, document in pairs[:2]]}),
                artifacts={"model": text_folder},
                params={"instruction": ""},
            ).model_uri
        ),
        registered_model=settings.registered_model,
        metrics=metrics,
        files={"curves/loss.csv": training.curve_csv(state["curve"])},
        artifacts={"image_tower": tower} if tower else None,
    )
    log.info(
        "aoeb.finetune: final loss %s after %d steps; step %d chosen on dev",
        metrics["final_loss"],
        state["step"],
        chosen,
    )
    folder = Folder({p.name: p for p in text_folder.iterdir()} | {"README.md": card.to_markdown()})
    weights = ("config.json", "model.safetensors")
    tower_files = Folder(
        {name: tower / name for name in weights}
        if tower
        else {"README.md": "No text-to-image task was assembled.\n"}
    )
    return {
        "model": folder,
        "image_tower": tower_files,
        "metrics": metrics,
        "curve": training.curve_csv(state["curve"]),
    }


STAGE = Stage(
    name="aoeb.finetune",
    run=run,
    params_key="aoeb",
    params=("aoeb.finetune",),
    inputs={"tasks": TASKS, "base": BASE, "tokenizer": TOKENIZER},
    outputs={
        "model": "models/embedder/model",
        "image_tower": "models/embedder/image_tower",
        "metrics": Output.metrics("models/embedder/metrics.json"),
        "curve": Output.plots(
            "models/embedder/loss.csv",
            x="step",
            y="loss",
            title="Contrastive fine-tune (InfoNCE) loss",
        ),
    },
    uses_ray=True,
    headline="models/embedder/metrics.json:final_loss",
)
