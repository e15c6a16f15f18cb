"""`paperline kg …`: the knowledge graph as the kg stages see it."""

from __future__ import annotations

from typing import Annotated

import typer

from tasks.core.paths import repo_root

app = typer.Typer(help="Serve and query the knowledge graph the way the kg stages do.")


@app.command("serve")
def kg_serve() -> None:
    """Start Oxigraph on 127.0.0.1 (as `paperline services up oxigraph`) and load the
    Wikidata slice into it when the slice has been built (reloaded only if it changed)."""
    from tasks.core import services
    from tasks.core.params import load_params
    from tasks.kg.endpoint import serve_slice_note

    root = repo_root()
    state = services.up("oxigraph", load_params(root / "params.yaml").runtime)
    typer.echo(state.describe())
    typer.echo(serve_slice_note(state.url, root))


OBJECT_HELP = "Object: an item, or a value with --answer-type date, number or rank."
ENDPOINT_HELP = "SPARQL endpoint URL; default: kg.sparql in params.yaml (the local slice)."


@app.command("paths")
def kg_paths(
    subject: Annotated[str, typer.Option(help="Subject item, e.g. Q42.")],
    object_: Annotated[str, typer.Option("--object", help=OBJECT_HELP)],
    max_hops: Annotated[int, typer.Option(min=1, max=2, help="1 or 2.")] = 2,
    endpoint: Annotated[str | None, typer.Option(help=ENDPOINT_HELP)] = None,
    answer_type: Annotated[str, typer.Option(help="entity, date, number or rank.")] = "entity",
    filter_paths: Annotated[
        bool, typer.Option("--filter/--no-filter", help="MultiHal's path filter.")
    ] = True,
    all_hops: Annotated[
        bool, typer.Option("--all-hops", help="Also 2-hop paths when a 1-hop one exists.")
    ] = False,
) -> None:
    """Print the paths between two entities as JSON lines, through the kg.mine miner,
    cache and filters: {"hops": n, "path": ["Q…", "P…", "Q…", …]}."""
    import json

    from tasks.core.params import load_params
    from tasks.kg.paths_query import paths_between

    root = repo_root()
    params = load_params(root / "params.yaml")
    found = paths_between(
        params,
        root,
        subject,
        object_,
        answer_type=answer_type,
        max_hops=max_hops,
        endpoint_url=endpoint,
        use_filter=filter_paths,
        all_hops=all_hops,
    )
    for path in found:
        typer.echo(json.dumps({"hops": len(path) // 2, "path": list(path)}))


@app.command("translate")
def kg_translate(
    backend: Annotated[str, typer.Option(help="transformers (NLLB-200 on disk) or openai.")] = (
        "transformers"
    ),
    model: Annotated[
        str | None, typer.Option(help="transformers: a local NLLB-200 checkpoint folder.")
    ] = None,
    input_path: Annotated[
        str, typer.Option("--input", help="MultiHal rows (kg.judge's output).")
    ] = "data/processed/kg/multihal.parquet",
    output: Annotated[
        str, typer.Option(help="Where the translated rows go (Parquet).")
    ] = ".paperline/kg/translations.parquet",
    languages: Annotated[
        str | None, typer.Option(help="Comma-separated targets; default kg.slice.languages.")
    ] = None,
    max_rows: Annotated[int | None, typer.Option(min=1, help="Translate the first N rows.")] = None,
) -> None:
    """Translate input, output and trip_labels as kg.translate does, with the backend and
    model given here instead of params.yaml's; prints the metrics as JSON."""
    import json
    from pathlib import Path

    from tasks.core.errors import UserError
    from tasks.core.io import read_parquet, write_file
    from tasks.core.params import load_params
    from tasks.kg.translate import translate_table

    root = repo_root()
    params = load_params(root / "params.yaml").kg
    if backend not in ("transformers", "openai"):
        raise UserError(f"--backend {backend}: expected transformers or openai")
    settings = params.translate.model_copy(
        update={"backend": backend, "model": model, "max_rows": max_rows}
    )
    source = Path(input_path) if Path(input_path).is_absolute() else root / input_path
    if not source.is_file():
        raise UserError(f"--input {source}: no such file; run `paperline repro kg-judge` first")
    chosen = languages.split(",") if languages else params.slice.languages
    table, metrics = translate_table(read_parquet(source).to_pylist(), settings, chosen)
    target = Path(output) if Path(output).is_absolute() else root / output
    write_file(target, table)
    typer.echo(json.dumps({**metrics, "output": str(target)}))
