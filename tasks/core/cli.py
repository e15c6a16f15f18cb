"""`paperline`: the command-line door onto stages, flows, services and params."""

from __future__ import annotations

import errno
import os
import sys
import traceback
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
dvc_app = typer.Typer(help="Keep dvc.yaml in step with the stage declarations.")
app.add_typer(services_app, name="services")
app.add_typer(params_app, name="params")
app.add_typer(dvc_app, name="dvc")


def add_area_commands() -> None:
    """`paperline <area> …`: each area that has a `tasks/<area>/cli.py` with a typer `app`
    (named by the module's `COMMAND` where it sets one, e.g. `kv` for kvcache)."""
    from tasks.core.areas import area_modules

    for area, module in area_modules("cli").items():
        app.add_typer(module.app, name=getattr(module, "COMMAND", area))


ServiceName = Annotated[
    str | None,
    typer.Argument(help="oxigraph, mlflow or prefect; all three when omitted.", show_default=False),
]


def _runtime():
    from tasks.core.params import load_params

    return load_params(repo_root() / "params.yaml").runtime


@app.command()
def stage(name: Annotated[str, typer.Argument(help="<area>.<stage>, e.g. corpus.ingest")]) -> None:
    """Run one pipeline stage (what dvc.yaml calls; prefer `paperline repro` to skip fresh ones).

    The terminal gets one line when the stage starts and one when it ends; everything else
    the process prints goes to .paperline/logs/<stage>.log.
    """
    import time

    from tasks.core.console import open_stage_console
    from tasks.core.progress import get_logger
    from tasks.core.stage_index import find_stage
    from tasks.core.stage_runner import headline_metric, run_stage

    root = repo_root()
    shown = open_stage_console(root, name)  # before the stage's imports, which may warn
    declared = find_stage(name)
    shown.started()
    started = time.perf_counter()
    outputs = run_stage(declared.name, root)
    for role, path in outputs.items():
        get_logger("paperline.stage").info("%s: %s", role, os.path.relpath(path, root))
    shown.finished(time.perf_counter() - started, headline_metric(declared, root))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def repro(ctx: typer.Context) -> None:
    """`dvc repro [ARGS]` (same targets and options) with one line per stage at its start
    and end, and one local Ray instance for every stage that uses Ray (started when the
    first one runs, stopped at the end; an explicit RAY_ADDRESS is used instead)."""
    from tasks.core.repro import reproduce

    raise typer.Exit(reproduce(repo_root(), ctx.args))


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
    if clear_jit_cache:
        removed = jit_cache.clear(folder)
        typer.echo(f"numba cache: removed {removed} files ({folder} and librosa's __pycache__)")
        return
    typer.echo(f"numba cache: {folder} ({len(jit_cache.cache_files(folder))} files)")
    if stray := jit_cache.in_tree_caches():
        typer.echo(f"numba cache files beside librosa's sources (unused): {len(stray)}")
    typer.echo("clear both with `paperline doctor --clear-jit-cache`")


@dvc_app.command("sync")
def dvc_sync(
    check: Annotated[
        bool, typer.Option("--check", help="Only report; exit 1 when a file is out of date.")
    ] = False,
) -> None:
    """Write dvc.yaml whole from the STAGE declarations (cmd, deps: the data inputs, every
    project module the stage imports and the runner; params: exactly the keys it declares;
    outs, metrics and plots as declared) and give prefect.yaml a deployment for every area.
    Run it after adding a stage, an import, an output or a params key."""
    from tasks.core.dvc_yaml import sync

    differences = sync(repo_root(), write=not check)
    if not differences:
        typer.echo("dvc.yaml and prefect.yaml match the declarations")
        return
    for line in differences:
        typer.echo(line)
    if check:
        typer.echo("run `paperline dvc sync` to rewrite them")
        raise typer.Exit(1)
    typer.echo(f"rewrote dvc.yaml / prefect.yaml ({len(differences)} differences)")


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


add_area_commands()

# A write the disk refused (full, over quota, over a file-size limit): the user's to fix.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def report(message: str) -> None:
    """An error line on the terminal; under a stage console, with the log's path and tail."""
    from tasks.core.console import active

    if shown := active():
        shown.failed(message)
    else:
        typer.echo(message, err=True)


def main() -> None:
    configure_logging()
    jit_cache.use_project_cache()  # before anything imports numba
    try:
        app()
    except UserError as error:
        report(str(error))
        sys.exit(2)
    except WorkerFailure as failure:
        report(str(failure))
        sys.exit(1)
    except OSError as error:
        if error.errno not in DISK_FULL:
            _unexpected(error)
        where = f"{error.filename}: " if error.filename else ""
        report(
            f"{where}write failed ({error.strerror}); free disk space and re-run: "
            "outputs are written whole or not at all, the previous ones are intact"
        )
        sys.exit(2)
    except Exception as error:
        _unexpected(error)


def _unexpected(error: Exception) -> None:
    """A bug, not a user's error: the traceback as usual, except under a stage console,
    where it goes to the stage's log and the terminal gets one line and the log's tail."""
    from tasks.core.console import active

    if not (shown := active()):
        raise error
    traceback.print_exc()
    shown.failed(f"{shown.stage}: {type(error).__name__}: {error}".splitlines()[0])
    sys.exit(1)


if __name__ == "__main__":
    main()
