"""aoeb.assemble: the embedded AOEB tasks (and any published ones) as MTEB task folders.

Five embedded tasks from real local material, one per capability: code (the CPython
standard-library sample: docstring → function), tool (the CLI commands of dvc, mlflow and
ray: task request → command), reasoning (two-hop questions over fact sheets of the KG
slice), memory (multi-session histories from the same facts; each query ranked against its
own history) and multimodal (captions → locally rendered charts and spectrograms). Each has
a `train` split (the fine-tune's pairs), a `dev` split (where aoeb.finetune picks its
checkpoint) and a `test` split (what aoeb.evaluate scores), fixed by a seed and cut by a
group key (module, command family, bridge entity, history, picture) so no source item is in
two splits. Tasks listed in `aoeb.assemble.hub` are read from the Hugging Face hub
(`vec-ai/*`, MTEB layout) and evaluated alongside.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration, task_files
from tasks.aoeb.embedded.code import code_task
from tasks.aoeb.embedded.memory import memory_task
from tasks.aoeb.embedded.multimodal import multimodal_task
from tasks.aoeb.embedded.reasoning import reasoning_task
from tasks.aoeb.embedded.tool import tool_task
from tasks.aoeb.hub import load_hub_task
from tasks.aoeb.params import AoebParams
from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext

log = get_logger("paperline.aoeb.assemble")


def task_summary(task: RetrievalTask) -> dict[str, Any]:
    declaration = task.declaration
    return {
        "capability": declaration.capability,
        "modality": declaration.modality,
        "documents": len(task.corpus),
        "queries": {split: len(judged) for split, judged in task.qrels.items()},
        "candidate_pools": len({tuple(p) for p in task.candidates.values()}),
    }


def run(params: AoebParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    settings = params.assemble
    tasks = [
        code_task(inputs["code"], settings.code),
        tool_task(settings.tool),
        reasoning_task(inputs["kg_slice"], settings.reasoning),
        memory_task(inputs["kg_slice"], settings.memory),
        multimodal_task(settings.multimodal),
    ]
    for hub in settings.hub:
        declaration = TaskDeclaration(
            name=hub.name,
            capability=hub.capability,
            source=f"hf:{hub.dataset}",
            splits=("test",),
            query_instruction=hub.query_instruction,
        )
        tasks.append(load_hub_task(declaration, hub.dataset, hub.revision, subset=hub.subset))
    folder: dict[str, Any] = {}
    summary = {}
    for task in tasks:
        name = task.declaration.name
        folder |= {f"{name}/{path}": data for path, data in task_files(task).items()}
        summary[name] = task_summary(task)
        log.info(
            "aoeb.assemble: %s: %d documents, queries %s",
            name,
            len(task.corpus),
            summary[name]["queries"],
        )
    return {"tasks": Folder(folder), "summary": {"tasks": summary}}


STAGE = Stage(
    name="aoeb.assemble",
    run=run,
    params_key="aoeb",
    params=("aoeb.assemble",),
    inputs={
        "code": "data/seed/code/cpython-3.11.7-stdlib.parquet",
        "kg_slice": "data/interim/kg/wikidata_slice.nt",
    },
    outputs={
        "tasks": "data/processed/aoeb/tasks",
        "summary": Output.metrics("data/processed/aoeb/tasks_summary.json"),
    },
    headline="data/processed/aoeb/tasks_summary.json:tasks",
)
