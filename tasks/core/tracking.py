"""MLflow wired once: SQLite store + registry by default, lineage tags, model cards, aliases.

Write to the store from one process only (the driver or rank 0): SQLite under concurrent
writers answers "database is locked". For many writers start `paperline services up
mlflow` and set MLFLOW_TRACKING_URI to its URL.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.core.params import MlflowParams
from tasks.core.paths import repo_root
from tasks.core.progress import get_logger

log = get_logger("paperline.tracking")

MODEL_CARD_FILE = "model_card.md"


def tracking_uri(params: MlflowParams, root: Path | None = None) -> str:
    """$MLFLOW_TRACKING_URI, else params' URI with a relative SQLite path made absolute."""
    if env := os.environ.get("MLFLOW_TRACKING_URI"):
        return env
    uri = params.tracking_uri
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        db = (root or repo_root()) / uri[len(prefix) :]
        db.parent.mkdir(parents=True, exist_ok=True)
        return prefix + str(db)
    return uri


def artifact_location(params: MlflowParams, root: Path | None = None) -> str | None:
    """Where new experiments keep artifacts: a local folder for a local store, else the server's."""
    if os.environ.get("MLFLOW_TRACKING_URI", "").startswith(("http://", "https://")):
        return None
    folder = Path(params.artifact_root)
    if not folder.is_absolute():
        folder = (root or repo_root()) / folder
    folder.mkdir(parents=True, exist_ok=True)
    return folder.as_uri()


def configure(params: MlflowParams, root: Path | None = None) -> str:
    import mlflow

    uri = tracking_uri(params, root)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    return uri


def ensure_experiment(name: str, params: MlflowParams, root: Path | None = None) -> str:
    """The experiment's id, creating it with paperline's artifact location if new."""
    import mlflow

    configure(params, root)
    existing = mlflow.get_experiment_by_name(name)
    if existing is not None:
        return existing.experiment_id
    location = artifact_location(params, root)
    return mlflow.create_experiment(name, artifact_location=location)


def git_commit(root: Path | None = None) -> str:
    """HEAD's commit, suffixed `-dirty` when tracked files differ from it, except those a
    pipeline run itself rewrites (dvc.lock, DVC outputs such as cache-less metrics);
    `unknown` outside git."""
    cwd = root or repo_root()
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "-z"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    written = run_outputs(cwd)
    modified = [
        path
        for path in changed_paths(changed)
        if not any(path == out or path.startswith(out + "/") for out in written)
    ]
    return f"{head}-dirty" if modified else head


def changed_paths(porcelain_z: str) -> list[str]:
    """Paths from `git status --porcelain -z` ("XY path", a rename's source as its own
    entry after the new path)."""
    entries, paths = porcelain_z.split("\0"), []
    index = 0
    while index < len(entries):
        entry = entries[index]
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":  # the next entry is the old path, unprefixed
                paths.append(entries[index + 1])
                index += 1
        index += 1
    return paths


def run_outputs(root: Path) -> set[str]:
    """What `dvc repro` writes in the working tree: dvc.lock and every stage output."""
    import yaml

    written = {"dvc.lock"}
    try:
        stages = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return written
    for entry in stages.values():
        for kind in ("outs", "metrics", "plots"):
            for item in entry.get(kind) or []:
                written.add(next(iter(item)) if isinstance(item, dict) else str(item))
    return written


def dvc_hashes(paths: Iterable[str], root: Path | None = None) -> dict[str, str]:
    """Each existing input's content hash as DVC computes it: an md5 for a file, `<md5>.dir`
    for a folder. It is what dvc.lock records for the reading stage once it completes, and
    is read from disk because mid-`dvc repro` the lock may still hold the previous run's."""
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.db import HashFileDB
    from dvc_objects.fs.local import LocalFileSystem

    base, fs, hashes = root or repo_root(), LocalFileSystem(), {}
    with tempfile.TemporaryDirectory() as staging:
        odb = HashFileDB(fs, staging)
        for path in paths:
            if (base / path).exists():
                _, _, built = build(odb, str(base / path), fs, "md5", dry_run=True)
                hashes[path] = built.hash_info.value
    return hashes


def lineage_tags(inputs: Iterable[str], root: Path | None = None) -> dict[str, str]:
    tags = {"git_commit": git_commit(root)}
    for path, digest in dvc_hashes(inputs, root).items():
        tags[f"dvc.lock:{path}"] = digest
    return tags


def create_run(
    experiment: str,
    params: MlflowParams,
    *,
    run_name: str,
    tags: Mapping[str, str] | None = None,
    parent: str | None = None,
    logged: Mapping[str, Any] | None = None,
    root: Path | None = None,
) -> str:
    """A new MLflow run in `experiment` (created if new), the one way paperline opens a run:
    its tags (lineage among them), a parent run's id, and its params; the run's id. The
    caller ends it (`end_run`), or `start_run` does."""
    import mlflow

    experiment_id = ensure_experiment(experiment, params, root)
    all_tags = {**(tags or {}), **({"mlflow.parentRunId": parent} if parent else {})}
    client = mlflow.MlflowClient()
    run_id = client.create_run(experiment_id, run_name=run_name, tags=all_tags).info.run_id
    if logged:
        from mlflow.entities import Param

        items = [Param(k, str(v)) for k, v in logged.items()]
        for start in range(0, len(items), 100):  # MLflow takes 100 params per batch
            client.log_batch(run_id, params=items[start : start + 100])
    return run_id


def end_run(run_id: str, failed: bool = False) -> None:
    import mlflow

    mlflow.MlflowClient().set_terminated(run_id, "FAILED" if failed else "FINISHED")


@contextlib.contextmanager
def start_run(
    experiment: str,
    params: MlflowParams,
    *,
    run_name: str | None = None,
    inputs: Iterable[str] = (),
    tags: Mapping[str, str] | None = None,
    parent: str | None = None,
    root: Path | None = None,
) -> Iterator[Any]:
    """A stage's active MLflow run (`create_run`), tagged with the git commit and the
    dvc.lock hashes of its inputs; a child of `parent` when given."""
    import mlflow

    all_tags = {**lineage_tags(list(inputs), root), **(tags or {})}
    run_id = create_run(
        experiment, params, run_name=run_name or experiment, tags=all_tags, parent=parent, root=root
    )
    with mlflow.start_run(run_id=run_id, nested=mlflow.active_run() is not None) as run:
        yield run


@dataclass(frozen=True)
class ModelCard:
    """What a registry user needs to trust a model: what, trained on what, how good, limits."""

    name: str
    summary: str
    training_data: str
    intended_use: str
    limitations: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    lineage: Mapping[str, str] = field(default_factory=dict)

    def to_markdown(self) -> str:
        lines = [f"# {self.name}", "", self.summary, "", "## Training data", "", self.training_data]
        lines += ["", "## Intended use", "", self.intended_use, "", "## Limitations", ""]
        lines += [self.limitations]
        if self.metrics:
            lines += ["", "## Metrics", "", "| metric | value |", "|---|---|"]
            lines += [f"| {key} | {value:.4g} |" for key, value in sorted(self.metrics.items())]
        if self.lineage:
            lines += ["", "## Lineage", "", "| what | value |", "|---|---|"]
            lines += [f"| {key} | `{value}` |" for key, value in sorted(self.lineage.items())]
        return "\n".join(lines) + "\n"


def log_torch_model(
    model: Any, name: str, card: ModelCard, input_example: Any, **kwargs: Any
) -> Any:
    """Log a torch model in the active run with its card beside it; returns MLflow's ModelInfo.

    MLflow 3 saves torch models as `pt2` (torch.export, no pickle on load) by default, which
    traces `input_example`: give it a batch of ≥ 2 rows or the batch size is frozen. Pass
    `serialization_format="pickle"` (and `input_example=None` when the forward takes several
    tensors) for models that do not export.
    """
    import mlflow
    import torch
    from mlflow.models import infer_signature

    if input_example is not None:
        example = torch.as_tensor(input_example).detach().cpu()
        if "signature" not in kwargs:  # pt2 needs a TensorSpec signature
            with torch.no_grad():
                output = model(example)
            kwargs["signature"] = infer_signature(example.numpy(), output.detach().cpu().numpy())
        kwargs["input_example"] = example.numpy()
    info = mlflow.pytorch.log_model(model, name=name, **kwargs)
    mlflow.log_text(card.to_markdown(), f"{name}/{MODEL_CARD_FILE}")
    return info


def log_transformers_model(
    model: Any,
    tokenizer: Any,
    name: str,
    card: ModelCard,
    task: str,
    input_example: Any,
    model_config: dict[str, Any] | None = None,
) -> Any:
    """Log a transformers model + tokenizer as a `task` pipeline, card beside it; ModelInfo.

    Its pyfunc is the consumer's interface: MLflow infers the signature from what the
    pipeline answers for `input_example` (stored with the model) under `model_config`
    (the pipeline's inference settings, e.g. max_new_tokens). Requirements are pinned from
    the running versions: MLflow's inference would start a subprocess and ask for
    torchvision, which this project does not use.
    """
    from importlib.metadata import version

    import mlflow
    from huggingface_hub import ModelCard as HubModelCard

    packages = ("torch", "transformers", "tokenizers")
    requirements = [f"{pkg}=={version(pkg).split('+')[0]}" for pkg in packages]
    info = mlflow.transformers.log_model(
        transformers_model={"model": model, "tokenizer": tokenizer},
        name=name,
        task=task,
        pip_requirements=requirements,
        input_example=input_example,  # MLflow infers the signature from the pipeline's answer
        model_config=model_config,
        # the metadata block the Hub's card format expects (without it, it warns)
        model_card=HubModelCard(
            f"---\nlibrary_name: transformers\npipeline_tag: {task}\n---\n{card.to_markdown()}"
        ),
    )
    mlflow.log_text(card.to_markdown(), f"{name}/{MODEL_CARD_FILE}")
    return info


def register_model(model_uri: str, name: str, card: ModelCard, alias: str | Iterable[str]) -> str:
    """Register `model_uri` as a new version of `name`, card as descriptions, aliases on it."""
    import mlflow
    from mlflow import MlflowClient

    version = mlflow.register_model(model_uri, name)
    client = MlflowClient()
    markdown = card.to_markdown()
    client.update_registered_model(name, description=markdown)
    client.update_model_version(name, version.version, description=markdown)
    for each in [alias] if isinstance(alias, str) else alias:
        client.set_registered_model_alias(name, each, version.version)
    for key, value in card.lineage.items():
        client.set_model_version_tag(name, version.version, key, value)
    return str(version.version)


def load_torch_model(name: str, alias: str) -> Any:
    import mlflow

    return mlflow.pytorch.load_model(f"models:/{name}@{alias}")


def register_after_commit(
    ctx: Any,
    model_uri: str,
    name: str,
    card: ModelCard,
    alias: str | Iterable[str],
    finished: Path | None = None,
) -> None:
    """Register `model_uri` as a version of `name` once the stage's outputs are committed
    (`ctx.after_commit`), then write the version into `finished`, the training scratch's
    completion marker: until then a re-run resumes from the last checkpoint."""
    aliases = [alias] if isinstance(alias, str) else list(alias)

    def register() -> None:
        version = register_model(model_uri, name, card, aliases)
        if finished is not None:
            finished.write_text(version, encoding="utf-8")
        log.info("registered %s v%s (%s)", name, version, ", ".join(aliases))

    ctx.after_commit(register)
