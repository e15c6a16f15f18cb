"""`paperline kv …`: one press on one needle task, on any causal LM."""

from __future__ import annotations

from typing import Annotated

import typer

from tasks.core.errors import UserError
from tasks.core.paths import repo_root

COMMAND = "kv"  # `paperline kv eval`
app = typer.Typer(help="KV-cache presses (kvpress semantics) on RULER-style needle tasks.")

MODEL_HELP = (
    "A causal-LM checkpoint folder, or a registry URI such as models:/paperline-kv-lm@candidate."
)


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise UserError(f"--{what} {value!r} is not one of: {', '.join(allowed)}")


@app.command("eval")
def kv_eval(
    model: Annotated[str, typer.Option(help=MODEL_HELP)],
    press: Annotated[str, typer.Option(help="A press name (see kvcache.study.presses).")] = (
        "manifoldkv"
    ),
    ratio: Annotated[float, typer.Option(help="Share of the KV cache evicted, in [0, 1).")] = 0.5,
    task: Annotated[str, typer.Option(help="single, multikey, multivalue or multiquery.")] = (
        "multikey"
    ),
    length: Annotated[int, typer.Option(help="Context length in word tokens.")] = 1024,
    items: Annotated[int | None, typer.Option(help="Items; default kvcache.tasks.test_items.")] = (
        None
    ),
    device: Annotated[str | None, typer.Option(help="Default kvcache.eval.device.")] = None,
    dtype: Annotated[str | None, typer.Option(help="float32, bfloat16 or float16.")] = None,
) -> None:
    """Answer fresh test items of one task and length with the full cache and with the
    press; print both accuracies (RULER string_match_all) and the KV memory saved."""
    from tasks.kvcache.params import KINDS, PRESSES

    if not 0 <= ratio < 1:
        raise UserError(f"--ratio {ratio} is outside [0, 1): it is the share of the cache evicted")
    check_choice(task, KINDS, "task")
    check_choice(press, PRESSES, "press")
    if length < 32:
        raise UserError(f"--length {length}: contexts need at least 32 tokens for the needles")
    if items is not None and items < 1:
        raise UserError(f"--items {items}: give at least one item")
    if dtype is not None:
        check_choice(dtype, ("float32", "bfloat16", "float16"), "dtype")

    from tasks.core import tracking
    from tasks.core.params import load_params
    from tasks.kvcache.haystack import haystack_words
    from tasks.kvcache.lm import load_causal_lm, max_positions
    from tasks.kvcache.scoring import FULL, check_positions, encode, score_items
    from tasks.kvcache.tasks import STAGE as TASKS_STAGE
    from tasks.kvcache.tasks import cell_items

    root = repo_root()
    params = load_params(root / "params.yaml")
    settings = params.kvcache
    tracking.configure(params.runtime.mlflow, root)
    lm, tokenizer = load_causal_lm(
        model, device or settings.eval.device, dtype or settings.eval.dtype
    )
    stream = haystack_words(*(root / TASKS_STAGE.inputs[k] for k in ("udhr", "code")))
    count = items or settings.tasks.test_items
    rows = [i.row() for i in cell_items(settings.tasks, stream, "test", task, length, count)]
    encoded = encode(tokenizer, rows)
    check_positions(encoded, max_positions(lm))
    batch = settings.study.batch_size
    full = score_items(lm, tokenizer, encoded, FULL, 0.0, settings.study.press, batch)
    pressed = score_items(lm, tokenizer, encoded, press, ratio, settings.study.press, batch)
    full_bytes = sum(r["full_kv_bytes"] for r in pressed)
    kept = sum(r["kv_bytes"] for r in pressed)

    def accuracy(results: list[dict]) -> float:
        return sum(r["score"] for r in results) / len(results)

    typer.echo(f"{task} @ {length} tokens, {count} items, model {model}")
    typer.echo(f"full cache: accuracy {accuracy(full):.3f}")
    typer.echo(f"{press} @ ratio {ratio}: accuracy {accuracy(pressed):.3f}")
    typer.echo(
        f"KV cache: {kept / count / 1024:.1f} KiB of {full_bytes / count / 1024:.1f} KiB per item "
        f"({1 - kept / full_bytes:.1%} saved)"
    )
