"""Readers for the CoDEx-S seed (data/seed/codex-s) and MultiHal's property resources."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from tasks.core import rdf
from tasks.core.errors import InputError
from tasks.core.io import read_json

Triple = tuple[str, str, str]  # (Q subject, P property, Q object)


def read_triples(path: Path) -> Iterator[Triple]:
    """`Qhead<TAB>Pprop<TAB>Qtail` lines; a malformed line names its file and row."""
    with open(path, encoding="utf-8") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if not row:
                continue
            try:
                subject, prop, obj = row
                yield rdf.check_qid(subject), rdf.check_pid(prop), rdf.check_qid(obj)
            except ValueError as exc:
                raise InputError(
                    f"{path}:{number}: expected 'Q…<TAB>P…<TAB>Q…' ({exc}); fix or remove the row"
                ) from None


def property_terms(codex: Path, language: str) -> dict[str, dict[str, str]]:
    """PID → {label, description} in one language (relations/<language>.json)."""
    path = codex / "relations" / f"{language}.json"
    return read_json(path) if path.exists() else {}


def type_terms(codex: Path) -> dict[str, dict[str, str]]:
    """QID of an entity *type* → {label, description} (English only)."""
    return read_json(codex / "types" / "en.json")


def entity_types(codex: Path) -> dict[str, list[str]]:
    return read_json(codex / "types" / "entity2types.json")


def wikidata_property_labels(multihal: Path) -> dict[str, str]:
    """PID → English label for every Wikidata property (MultiHal's wd_properties.json)."""
    table = read_json(multihal / "wd_properties.json")
    return {pid: label for pid, label in table["rows"]}


def removed_property_ids(multihal: Path) -> set[str]:
    """ids_to_remove.json: properties whose label or alias ends in ' ID' or 'URL'."""
    return {entry["id"] for entry in read_json(multihal / "ids_to_remove.json")}


def _property_list(path: Path) -> set[str]:
    return {rdf.local_id(row["property"]) for row in read_json(path)["data"]}


def time_properties(multihal: Path) -> set[str]:
    return _property_list(multihal / "time_based_props.json")


def numerical_properties(multihal: Path) -> set[str]:
    return _property_list(multihal / "numerical_props.json")
