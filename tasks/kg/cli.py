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
