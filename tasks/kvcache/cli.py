"""`paperline kv …`: one press on one needle task, on any causal LM."""

from __future__ import annotations

from typing import Annotated

import typer

from tasks.core.errors import UserError
from tasks.core.paths import repo_root

COMMAND = "kv"  # `paperline kv eval`
app = typer.Typer(help="KV-cache presses (kvpress semantics) on RULER-style needle tasks.")

MODEL_HELP = (
    "A causal-LM checkpoint folder or a registry URI such as models:/paperline-llm@candidate; "
    "default llm.local.model (the core LLM)."
)


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise UserError(f"--{what} {value!r} is not one of: {', '.join(allowed)}")


@app.command("eval")
def kv_eval(
    model: Annotated[str | None, typer.Option(help=MODEL_HELP)] = None,
    press: Annotated[str, typer.Option(help="A press name (see kvcache.study.presses).")] = (
        "manifoldkv"
    ),
    ratio: Annotated[float, typer.Option(help="Share of the KV cache evicted, in [0, 1).")] = 0.5,
    task: Annotated[str, typer.Option(help="single, multikey, multivalue or multiquery.")] = (
        "multikey"
    ),
    length: Annotated[int, typer.Option(help="Context length in the model's tokens.")] = 1024,
    items: Annotated[int | None, typer.Option(help="Items; default kvcache.tasks.test_items.")] = (
        None
    ),
    device: Annotated[str | None, typer.Option(help="Default llm.local.device.")] = None,
    dtype: Annotated[str | None, typer.Option(help="float32, bfloat16 or float16.")] = None,
) -> None:
    """Answer fresh items of one task and length with the full cache and with the press
    (one prefill each); print both accuracies (RULER string_match_all) and the KV memory
    saved."""
    from tasks.kvcache.params import KINDS, PRESSES

    if not 0 <= ratio < 1:
        raise UserError(f"--ratio {ratio} is outside [0, 1): it is the share of the cache evicted")
    check_choice(task, KINDS, "task")
    check_choice(press, PRESSES, "press")
    if length < 128:
        raise UserError(f"--length {length}: contexts need at least 128 tokens for the needles")
    if items is not None and items < 1:
        raise UserError(f"--items {items}: give at least one item")
    if dtype is not None:
        check_choice(dtype, ("float32", "bfloat16", "float16"), "dtype")

    from tasks.core import tracking
    from tasks.core.causal_lm import max_positions
    from tasks.core.params import load_params
    from tasks.core.seed_text import CODE_ARCHIVE, UDHR_ENGLISH
    from tasks.kvcache.scoring import answer_item, arm_groups, check_positions, encode
    from tasks.kvcache.study import load_model
    from tasks.kvcache.tasks import Haystack, cell_items

    root = repo_root()
    params = load_params(root / "params.yaml")
    settings = params.kvcache
    local = params.llm.local.model_copy(
        update={
            k: v
            for k, v in {"model": model, "device": device, "dtype": dtype}.items()
            if v is not None
        }
    )
    uri = None
    if local.model.startswith("models:/"):
        uri = tracking.tracking_uri(params.runtime.mlflow, root)
    lm, tokenizer = load_model(local, str(root), uri)
    haystack = Haystack(root / UDHR_ENGLISH, root / CODE_ARCHIVE, tokenizer)
    count = items or settings.tasks.test_items
    study = settings.study
    slack = study.answer_slack
    groups = arm_groups([press], [ratio], study.arms_per_batch)
    results = []
    for item in cell_items(settings.tasks, haystack, task, length, count):
        encoded = encode(tokenizer, item.row())
        check_positions(encoded, max_positions(lm), slack)
        results += answer_item(lm, tokenizer, encoded, groups, study.press, slack)
    full = [r for r in results if r["ratio"] == 0.0 and r["press"] == "full"]
    pressed = [r for r in results if r["press"] == press and r not in full]
    full_bytes = sum(r["full_kv_bytes"] for r in pressed)
    kept = sum(r["kv_bytes"] for r in pressed)

    def accuracy(found: list[dict]) -> float:
        return sum(r["score"] for r in found) / len(found)

    typer.echo(f"{task} @ {length} tokens, {count} items, model {local.model}")
    typer.echo(f"full cache: accuracy {accuracy(full):.3f}")
    typer.echo(f"{press} @ ratio {ratio}: accuracy {accuracy(pressed):.3f}")
    typer.echo(
        f"KV cache: {kept / count / 2**20:.1f} MiB of {full_bytes / count / 2**20:.1f} MiB per "
        f"item ({1 - kept / full_bytes:.1%} saved)"
    )
