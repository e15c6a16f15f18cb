"""`paperline kg paths`: the paths between one subject and one object, as kg.mine finds them."""

from __future__ import annotations

from pathlib import Path

from tasks.core import rdf
from tasks.core.errors import UserError
from tasks.core.params import Params
from tasks.kg import endpoint
from tasks.kg.mine import property_lists
from tasks.kg.miner import KgPath, mine_paths
from tasks.kg.path_filter import PathFilter
from tasks.kg.templates import ANSWER_TYPES

MULTIHAL = "data/seed/multihal"


def paths_between(
    params: Params,
    root: Path,
    subject: str,
    obj: str,
    answer_type: str = "entity",
    max_hops: int = 2,
    endpoint_url: str | None = None,
    use_filter: bool = True,
    all_hops: bool = False,
) -> list[KgPath]:
    if answer_type not in ANSWER_TYPES:
        raise UserError(f"--answer-type: choose one of {', '.join(ANSWER_TYPES)}")
    try:
        rdf.check_qid(subject)
        if answer_type == "entity":
            rdf.check_qid(obj)
    except ValueError as exc:
        raise UserError(f"kg paths: {exc}") from None
    kg = params.kg
    with endpoint.open_client(kg.sparql, params.runtime, root, endpoint_url) as client:
        mined = mine_paths(
            client,
            [(answer_type, subject, obj)],
            property_lists(root / MULTIHAL),
            max_hops,
            stop_at_first_hit=not all_hops,
        )
    paths = mined.get((answer_type, subject, obj), [])
    if use_filter:
        paths = PathFilter.from_resources(root / MULTIHAL, kg.mine.removed_properties).apply(paths)
    return sorted(paths, key=lambda p: (len(p), p))
