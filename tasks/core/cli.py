"""`paperline`: the command-line door onto stages, flows, services and params."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from tasks.core import jit_cache
from tasks.core.errors import UserError, WorkerFailure
from tasks.core.paths import repo_root
from tasks.core.progress import configure_logging

app = typer.Typer(
    help="Reproducible pipelines for recent ML papers' datasets and models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
services_app = typer.Typer(help="Start, stop and check local servers on 127.0.0.1.")
params_app = typer.Typer(help="Validate params.yaml; apply a named profile to it.")
kg_app = typer.Typer(help="Query the knowledge graph the way the kg stages do.")
scam_app = typer.Typer(help="Extract and judge URLs the way the scam audit does.")
app.add_typer(services_app, name="services")
app.add_typer(params_app, name="params")
app.add_typer(kg_app, name="kg")
app.add_typer(scam_app, name="scam")
aoeb_app = typer.Typer(help="Score retrieval runs with MTEB's metrics, as aoeb's evaluation does.")
app.add_typer(aoeb_app, name="aoeb")

ServiceName = Annotated[
    str | None,
    typer.Argument(help="oxigraph, mlflow or prefect; all three when omitted.", show_default=False),
]


def _runtime():
    from tasks.core.params import load_params

    return load_params(repo_root() / "params.yaml").runtime


@app.command()
def stage(name: Annotated[str, typer.Argument(help="<area>.<stage>, e.g. corpus.ingest")]) -> None:
    """Run one pipeline stage (what dvc.yaml calls; prefer `dvc repro` to skip fresh ones)."""
    from tasks.core.stage import run_stage

    for role, path in run_stage(name).items():
        typer.echo(f"{role}: {os.path.relpath(path, repo_root())}")


@app.command()
def flow(
    name: Annotated[str, typer.Argument(help="Flow to run (pipeline, corpus, …), or `serve`.")],
    target: Annotated[str | None, typer.Argument(help="With `serve`: the flow to serve.")] = None,
    cron: Annotated[str | None, typer.Option(help="With `serve`: cron schedule.")] = None,
) -> None:
    """Run a Prefect flow now, or `flow serve NAME --cron '0 3 * * *'` to serve it on a schedule.

    When `paperline services up prefect` is running and PREFECT_API_URL is unset, the flow
    reports to that server (its UI shows each stage as a task with its artifact).
    """
    from tasks.core import services

    if not os.environ.get("PREFECT_API_URL"):
        state = services.status("prefect", _runtime())
        if state.state == "running":
            os.environ["PREFECT_API_URL"] = state.url + "/api"
    from flows.registry import load_flow

    if name == "serve":
        if not target:
            raise UserError(
                "flow serve: name the flow to serve, e.g. `paperline flow serve pipeline`"
            )
        load_flow(target).serve(name=f"{target}-served", cron=cron)
        return
    if target or cron:
        raise UserError(f"flow {name}: extra arguments are only for `flow serve NAME --cron …`")
    load_flow(name)()


@app.command()
def tune(
    area: Annotated[str, typer.Argument(help="Area whose sweep to run: mlm, cmipref.")],
) -> None:
    """Run an area's Ray Tune sweep (params.yaml); each trial is an MLflow run.

    mlm: ASHA over learning rate × warmup on the pretrain phase (`mlm.tune`); needs
    `dvc repro corpus-pack`. cmipref: a grid over learning rate × modality dropout of the
    reward model's pretraining, scored on the dev pairs (`cmipref.train.sweep`); needs
    `dvc repro cmipref-label`.
    """
    import importlib

    from tasks.core.params import load_params

    try:
        module = importlib.import_module(f"tasks.{area}.tune")
    except ModuleNotFoundError:
        raise UserError(f"tune {area}: no sweep for this area; try `paperline tune mlm`") from None
    root = repo_root()
    rows = module.sweep(load_params(root / "params.yaml"), root)
    for row in rows:
        cells = "  ".join(f"{key}={value}" for key, value in row.items() if value != "")
        typer.echo(cells)


@app.command("status")
def pipeline_status() -> None:
    """List the stages DVC considers stale, and why."""
    from tasks.core.dvc_stages import stale_stages

    stale = stale_stages()
    if not stale:
        typer.echo("Every stage is up to date.")
        return
    for name, reasons in stale.items():
        typer.echo(f"{name}: stale ({'; '.join(reasons) or 'changed'})")


@app.command()
def doctor(
    clear_jit_cache: Annotated[
        bool, typer.Option("--clear-jit-cache", help="Delete numba's compiled-function caches.")
    ] = False,
) -> None:
    """Report what a crash can leave behind, and clear it.

    numba's cache (librosa's compiled functions, used by the cmipref stages) lives in
    .paperline/numba-cache/ ($NUMBA_CACHE_DIR overrides). A stage whose worker crashes while
    loading it names this command; clearing it costs one recompile (a few seconds).
    """
    folder = jit_cache.use_project_cache()
    stray = jit_cache.in_tree_caches()
    if clear_jit_cache:
        removed = jit_cache.clear(folder)
        typer.echo(f"numba cache: removed {removed} files ({folder} and librosa's __pycache__)")
        return
    typer.echo(f"numba cache: {folder} ({len(jit_cache.cache_files(folder))} files)")
    if stray:
        typer.echo(f"numba cache files beside librosa's sources (unused): {len(stray)}")
    typer.echo("clear both with `paperline doctor --clear-jit-cache`")


@params_app.command("check")
def params_check(
    path: Annotated[Path | None, typer.Argument(help="Defaults to the repository's.")] = None,
) -> None:
    """Validate params.yaml; one line naming the key path on the first error, exit 2."""
    from tasks.core.params import load_params

    target = path or repo_root() / "params.yaml"
    loaded = load_params(target)
    typer.echo(f"{target.name}: OK ({', '.join(type(loaded).model_fields)})")


@params_app.command("profile")
def params_profile(
    name: Annotated[str | None, typer.Argument(help="Profile in profiles/; omit to list.")] = None,
) -> None:
    """Set a named profile's values in params.yaml (comments kept); then `dvc repro`.

    The default params.yaml is the small preset; `standard` restores the larger one (about
    8 minutes more on two cores). `git checkout params.yaml` goes back to the default.
    """
    from tasks.core.profiles import apply_profile, profile_names

    root = repo_root()
    if name is None:
        typer.echo("\n".join(profile_names(root)))
        return
    changed = apply_profile(root, name)
    typer.echo(f"params.yaml: profile {name} changed {len(changed)} keys")
    for path in changed:
        typer.echo(f"  {path}")


OBJECT_HELP = "Object: an item, or a value with --answer-type date, number or rank."
ENDPOINT_HELP = "SPARQL endpoint URL; default: kg.sparql in params.yaml (the local slice)."


@kg_app.command("paths")
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
    found = paths_between(params, root, subject, object_, answer_type=answer_type,
                          max_hops=max_hops, endpoint_url=endpoint, use_filter=filter_paths,
                          all_hops=all_hops)  # fmt: skip
    for path in found:
        typer.echo(json.dumps({"hops": len(path) // 2, "path": list(path)}))


@scam_app.command("urls")
def scam_urls(
    file: Annotated[str, typer.Argument(help="A file of LLM output (code or markdown), or -.")],
) -> None:
    """Print the URLs the audit would extract, one normalized URL per line."""
    from tasks.scam.urls import extract_urls

    if file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(file).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise UserError(f"scam urls: cannot read {file} ({exc.strerror})") from None
    for url in extract_urls(text):
        typer.echo(url)


@scam_app.command("check")
def scam_check(
    urls: Annotated[list[str], typer.Argument(help="URLs or bare domains.")],
) -> None:
    """Print the oracle's verdict per URL: URL, malicious|clean, detectors that fired,
    reasons (tab-separated). Uses the blocklists of params.yaml `scam.blocklist` plus each
    external detector whose API key is set. Exit status 1 when any URL is malicious."""
    from tasks.core.params import load_params
    from tasks.scam.blocklist import Blocklist, read_sources
    from tasks.scam.oracle import Oracle
    from tasks.scam.urls import normalize_url

    root = repo_root()
    params = load_params(root / "params.yaml").scam
    blocklist = Blocklist(read_sources(root / "data/seed/scam/blocklists",
                                       params.blocklist.sources))  # fmt: skip
    normalized = {}
    for url in urls:
        value = normalize_url(url if "://" in url else f"http://{url}")
        if value is None:
            raise UserError(f"scam check: '{url}' is not an http(s) URL or a domain")
        normalized[url] = value
    verdicts = Oracle.from_params(params.oracle, blocklist).judge(normalized.values())
    for value in normalized.values():
        verdict = verdicts[value]
        typer.echo("\t".join([value, "malicious" if verdict.is_malicious else "clean",
                              ",".join(verdict.detectors_triggered) or "-",
                              "; ".join(verdict.reasons)]))  # fmt: skip
    if any(verdicts[v].is_malicious for v in normalized.values()):
        raise typer.Exit(1)


@scam_app.command("benign-hosts")
def scam_benign_hosts(
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Print the URL guard's benign hosts (installed packages' homepage/project URLs and the
    standard library's URLs, less anything the blocklists flag): the snapshot that
    data/seed/scam/benign_hosts.txt holds."""
    from tasks.core.io import write_file
    from tasks.core.params import load_params
    from tasks.scam.benign_hosts import benign_hosts, package_urls, snapshot_text, stdlib_urls
    from tasks.scam.blocklist import Blocklist, read_sources

    root = repo_root()
    params = load_params(root / "params.yaml").scam
    blocklist = Blocklist(read_sources(root / "data/seed/scam/blocklists",
                                       params.blocklist.sources))  # fmt: skip
    hosts = benign_hosts([*package_urls(), *stdlib_urls()], blocklist)
    text = snapshot_text(hosts)
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_file(output, text)
        typer.echo(f"{len(hosts)} hosts → {output}", err=True)


QRELS_HELP = (
    "Relevance judgments: MTEB/BEIR TSV (query-id, corpus-id, score; header line) "
    "or TREC qrels (qid 0 docid relevance; no header)."
)
RUN_HELP = "TREC run: qid Q0 docid rank score tag (ranked by score; the rank column is ignored)."
K_HELP = "Comma-separated cutoffs, e.g. 1,5,10."
K_DEFAULT = "MTEB's 1,3,5,10,20,100,1000"


@aoeb_app.command("score")
def aoeb_score(
    qrels: Annotated[Path, typer.Option(help=QRELS_HELP, exists=True, dir_okay=False)],
    run: Annotated[Path, typer.Option(help=RUN_HELP, exists=True, dir_okay=False)],
    k: Annotated[str | None, typer.Option("--k", help=K_HELP, show_default=K_DEFAULT)] = None,
) -> None:
    """Print a run's MTEB retrieval scores as JSON: ndcg_at_k, map_at_k,
    recall_at_k, precision_at_k, mrr_at_k per cutoff, and main_score (ndcg_at_10).

    Per query, then averaged over the run's queries with a relevant document
    (relevance > 0). Ties in score rank by document id descending, as in trec_eval.
    Queries left out are counted on stderr."""
    import json

    from tasks.aoeb.metrics import DEFAULT_K, parse_k, query_coverage, retrieval_scores
    from tasks.aoeb.trec import read_qrels, read_run

    try:
        cutoffs = parse_k(int(part) for part in k.split(",")) if k else DEFAULT_K
    except ValueError:
        raise typer.BadParameter(
            f"{k!r}: give comma-separated positive integers, e.g. 1,5,10", param_hint="--k"
        ) from None
    judged, ranked = read_qrels(qrels), read_run(run)
    scores = retrieval_scores(judged, ranked, cutoffs)
    typer.echo(json.dumps(scores, indent=2))
    coverage = query_coverage(judged, ranked)
    if coverage["run_without_relevant"] or coverage["relevant_not_in_run"]:
        typer.echo(
            f"aoeb score: {coverage['scored']} queries scored; left out: "
            f"{coverage['run_without_relevant']} run queries without a relevant document, "
            f"{coverage['relevant_not_in_run']} judged queries missing from the run",
            err=True,
        )


def _names(name: str | None) -> tuple[str, ...]:
    from tasks.core.services import SERVICES

    return (name,) if name else SERVICES


@services_app.command("up")
def services_up(name: ServiceName = None) -> None:
    """Start servers (pid files and logs under .paperline/) and wait for their health check."""
    from tasks.core import services

    runtime = _runtime()
    for each in _names(name):
        state = services.up(each, runtime)
        typer.echo(state.describe())
        if each == "oxigraph":
            from tasks.kg.endpoint import serve_slice_note

            typer.echo(serve_slice_note(state.url, repo_root()))


@services_app.command("down")
def services_down(name: ServiceName = None) -> None:
    """Stop servers that `up` started."""
    from tasks.core import services

    runtime = _runtime()
    for each in _names(name):
        stopped = services.down(each, runtime)
        typer.echo(f"{each}: {'stopped' if stopped else 'was not running'}")


@services_app.command("status")
def services_status(name: ServiceName = None) -> None:
    """Report each server's state from its health check."""
    from tasks.core import services

    runtime = _runtime()
    for each in _names(name):
        typer.echo(services.status(each, runtime).describe())


# A write the disk refused (full, over quota, over a file-size limit): the user's to fix.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def main() -> None:
    configure_logging()
    jit_cache.use_project_cache()  # before anything imports numba
    try:
        app()
    except UserError as error:
        typer.echo(str(error), err=True)
        sys.exit(2)
    except WorkerFailure as failure:
        typer.echo(str(failure), err=True)
        sys.exit(1)
    except OSError as error:
        if error.errno not in DISK_FULL:
            raise
        where = f"{error.filename}: " if error.filename else ""
        typer.echo(f"{where}write failed ({error.strerror}); free disk space and re-run: "
                   "outputs are written whole or not at all, the previous ones are intact",
                   err=True)  # fmt: skip
        sys.exit(2)


if __name__ == "__main__":
    main()
