"""`paperline scam …`: URLs extracted and judged the way the scam audit does."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tasks.core.errors import UserError
from tasks.core.paths import repo_root

app = typer.Typer(help="Extract and judge URLs the way the scam audit does.")


@app.command("urls")
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


@app.command("check")
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
    blocklist = Blocklist(
        read_sources(root / "data/seed/scam/blocklists", params.blocklist.sources)
    )
    normalized = {}
    for url in urls:
        value = normalize_url(url if "://" in url else f"http://{url}")
        if value is None:
            raise UserError(f"scam check: '{url}' is not an http(s) URL or a domain")
        normalized[url] = value
    verdicts = Oracle.from_params(params.oracle, blocklist).judge(normalized.values())
    for value in normalized.values():
        verdict = verdicts[value]
        typer.echo(
            "\t".join(
                [
                    value,
                    "malicious" if verdict.is_malicious else "clean",
                    ",".join(verdict.detectors_triggered) or "-",
                    "; ".join(verdict.reasons),
                ]
            )
        )
    if any(verdicts[v].is_malicious for v in normalized.values()):
        raise typer.Exit(1)


@app.command("benign-hosts")
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
    blocklist = Blocklist(
        read_sources(root / "data/seed/scam/blocklists", params.blocklist.sources)
    )
    hosts = benign_hosts([*package_urls(), *stdlib_urls()], blocklist)
    text = snapshot_text(hosts)
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_file(output, text)
        typer.echo(f"{len(hosts)} hosts → {output}", err=True)
