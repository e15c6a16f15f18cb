"""`paperline aoeb …`: retrieval runs scored with MTEB's metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Score retrieval runs with MTEB's metrics, as aoeb's evaluation does.")


QRELS_HELP = (
    "Relevance judgments: MTEB/BEIR TSV (query-id, corpus-id, score; header line) "
    "or TREC qrels (qid 0 docid relevance; no header)."
)
RUN_HELP = "TREC run: qid Q0 docid rank score tag (ranked by score; the rank column is ignored)."
K_HELP = "Comma-separated cutoffs, e.g. 1,5,10."
K_DEFAULT = "MTEB's 1,3,5,10,20,100,1000"


@app.command("score")
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
