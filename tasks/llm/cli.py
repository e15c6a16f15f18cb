"""`paperline llm …`: talk to the core LLM the way every area gets it (params.yaml `llm`)."""

from __future__ import annotations

from typing import Annotated

import typer

from tasks.core.errors import UserError
from tasks.core.paths import repo_root

COMMAND = "llm"  # `paperline llm chat "…"`
app = typer.Typer(help="The core LLM (SmolLM2-135M-Instruct by default, llm-import's checkpoint).")


@app.command("chat")
def chat(
    prompt: Annotated[str, typer.Argument(help="One user turn.")],
    system: Annotated[str, typer.Option(help="A system message ('' = the template's).")] = "",
    model: Annotated[
        str | None,
        typer.Option(
            help="A checkpoint folder or models:/paperline-llm@candidate; default llm.local.model."
        ),
    ] = None,
    max_new_tokens: Annotated[int | None, typer.Option(help="Default llm.generation's.")] = None,
    temperature: Annotated[float | None, typer.Option(help="0 = greedy.")] = None,
    seed: Annotated[int | None, typer.Option(help="The sampling seed.")] = None,
) -> None:
    """Answer one prompt with the configured backend and print the reply."""
    if max_new_tokens is not None and max_new_tokens < 1:
        raise UserError(f"--max-new-tokens {max_new_tokens}: give at least 1")
    if temperature is not None and temperature < 0:
        raise UserError(f"--temperature {temperature}: give 0 (greedy) or more")

    from tasks.core import tracking
    from tasks.core.llm import open_llm
    from tasks.core.params import load_params

    root = repo_root()
    params = load_params(root / "params.yaml")
    settings = params.llm
    if model is not None:
        settings = settings.model_copy(
            update={"backend": "local", "local": settings.local.model_copy(update={"model": model})}
        )
    uri = None
    if settings.backend == "local" and settings.local.model.startswith("models:/"):
        uri = tracking.tracking_uri(params.runtime.mlflow, root)
    llm = open_llm(settings, root, uri)
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    typer.echo(llm.chat([messages], max_new_tokens, temperature, seed)[0])
