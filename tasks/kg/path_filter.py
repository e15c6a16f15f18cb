"""MultiHal's path filter: drop paths through identifier / URL / media properties; dedupe."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tasks.kg import codex
from tasks.kg.labels import is_property
from tasks.kg.miner import KgPath


@dataclass(frozen=True)
class PathFilter:
    removed: frozenset[str]

    @classmethod
    def from_resources(cls, multihal: Path, extra: Iterable[str]) -> PathFilter:
        """ids_to_remove.json, plus every property whose English label ends in ' ID' or
        'URL', plus `kg.mine.removed_properties` (MultiHal: P10, P18, P51, P989, P2717)."""
        labelled = codex.wikidata_property_labels(multihal)
        by_label = {p for p, label in labelled.items() if label.endswith((" ID", "URL"))}
        return cls(frozenset(codex.removed_property_ids(multihal) | by_label | set(extra)))

    def keeps(self, path: KgPath) -> bool:
        return not any(is_property(e) and e in self.removed for e in path[1:-1])

    def apply(self, paths: Iterable[KgPath]) -> list[KgPath]:
        return list(dict.fromkeys(p for p in paths if self.keeps(p)))
