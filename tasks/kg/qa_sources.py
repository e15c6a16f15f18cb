"""QA input in MultiHal's columns, from MultiHal's sources and from the embedded default.

Every adapter maps one source's rows to `QA_COLUMNS` (list fields are Python lists here;
MultiHal joins them with `<SEP>` only when exporting CSV). Hub sources load through
`datasets` (nothing downloads in tests: they feed rows in memory); local files load
through the same `datasets` builders (csv, json, parquet).
"""

from __future__ import annotations

import ast
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dateutil import parser as date_parser

from tasks.core.errors import InputError
from tasks.kg import codex
from tasks.kg.params import QaParams, QaSourceParams

QA_COLUMNS = (
    "id",
    "source_dataset",
    "task",
    "domain",
    "input",
    "output",
    "optional_output",
    "incorrect_answers",
    "context",
    "context_type",
    "answer_type",
)
Row = dict[str, Any]


def qa_row(**values: Any) -> Row:
    row: Row = {
        "task": "qa",
        "domain": "",
        "optional_output": [],
        "incorrect_answers": [],
        "context": "",
        "context_type": "none",
        "answer_type": "entity",
        "subjects": [],
        "objects": [],
    }
    row.update(values)
    missing = [c for c in QA_COLUMNS if c not in row]
    if missing:
        raise ValueError(f"QA row {values.get('id')}: missing {missing}")
    return row


# -- answer normalisation (what the date / number templates match) ------------------------

_ORDINAL = re.compile(r"^(\d+)(st|nd|rd|th)$", re.IGNORECASE)
_NUMBER = re.compile(r"^[-+]?\d[\d,]*(\.\d+)?")


def answer_type_of(declared: str, answer: str) -> str:
    """SimpleQA's metadata answer_type (Date, Number, Person, Place, Other…) → MultiHal's."""
    if _ORDINAL.match(answer.strip()):
        return "rank"
    return {"date": "date", "number": "number"}.get(declared.strip().lower(), "entity")


def normalise_date(text: str) -> str | None:
    """'March 11, 1952' → '1952-03-11'; 'June 2010' → '2010-06'; '1952' → '1952'."""
    text = text.strip()
    if re.fullmatch(r"\d{4}", text):
        return text
    try:
        first = date_parser.parse(text, default=date_parser.parse("0001-01-01"))
        second = date_parser.parse(text, default=date_parser.parse("0002-02-02"))
    except (ValueError, OverflowError):
        return None
    if first.year != second.year:
        return None
    if first.month != second.month:
        return f"{first.year:04d}"
    if first.day != second.day:
        return f"{first.year:04d}-{first.month:02d}"
    return first.date().isoformat()


def normalise_number(text: str) -> str | None:
    """'1,234 km' → '1234'; '3.50' → '3.5'; '5th' → '5'."""
    text = text.strip()
    if match := _ORDINAL.match(text):
        return match.group(1)
    if not (match := _NUMBER.match(text)):
        return None
    value = match.group(0).replace(",", "").lstrip("+")
    return value.rstrip("0").rstrip(".") if "." in value else value


def literal_object(answer_type: str, answer: str) -> str | None:
    if answer_type == "date":
        return normalise_date(answer)
    if answer_type in ("number", "rank"):
        return normalise_number(answer)
    return None


# -- the embedded default: questions over CoDEx-S with their QIDs attached ----------------


def _name(qid: str, labels: Mapping[str, str]) -> str:
    return labels.get(qid, qid)


def codex_questions(params: QaParams, codex_dir: Path, multihal_dir: Path) -> list[Row]:
    """1-hop questions from valid.txt triples and 2-hop compositions, each with the subject
    and answer QIDs attached (as annotated QA datasets provide them); CoDEx's
    verified-false triples with the same subject and property become incorrect answers."""
    rng = random.Random(params.seed)
    prop_labels = {p: t["label"] for p, t in codex.property_terms(codex_dir, "en").items()}
    prop_labels = {**codex.wikidata_property_labels(multihal_dir), **prop_labels}
    labels = {q: t["label"] for q, t in codex.type_terms(codex_dir).items()}
    types = codex.entity_types(codex_dir)
    valid = sorted(set(codex.read_triples(codex_dir / "valid.txt")))
    train = sorted(set(codex.read_triples(codex_dir / "train.txt")))
    wrong: dict[tuple[str, str], list[str]] = defaultdict(list)
    for s, p, o in codex.read_triples(codex_dir / "valid_negatives.txt"):
        wrong[(s, p)].append(o)

    def domain(qid: str) -> str:
        return labels.get(types.get(qid, [""])[0], "")

    rows = []
    for n, (s, p, o) in enumerate(rng.sample(valid, min(params.one_hop_questions, len(valid)))):
        rows.append(
            qa_row(
                id=f"codex-1hop-{n:05d}",
                source_dataset="codex-s",
                domain=domain(s),
                input=f"What is the {prop_labels[p]} of {_name(s, labels)}?",
                output=_name(o, labels),
                incorrect_answers=[_name(x, labels) for x in wrong[(s, p)]],
                subjects=[s],
                objects=[o],
            )
        )
    outgoing: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for s, p, o in train + valid:
        outgoing[s].append((p, o))
    chains = [(s, p1, m, p2, o) for s, p1, m in valid for p2, o in outgoing[m] if o != s]
    picked = rng.sample(chains, min(params.two_hop_questions, len(chains)))
    for n, (s, p1, _, p2, o) in enumerate(picked):
        rows.append(
            qa_row(
                id=f"codex-2hop-{n:05d}",
                source_dataset="codex-s",
                domain=domain(s),
                input=(
                    f"What is the {prop_labels[p2]} of the {prop_labels[p1]} of {_name(s, labels)}?"
                ),
                output=_name(o, labels),
                subjects=[s],
                objects=[o],
            )
        )
    return rows


# -- MultiHal's sources --------------------------------------------------------------------


def _simpleqa(row: Mapping[str, Any], n: int) -> Row:
    meta = row["metadata"]
    meta = ast.literal_eval(meta) if isinstance(meta, str) else meta
    answer = str(row["answer"])
    return qa_row(
        id=f"simpleqa-{row.get('row', n):05d}",
        source_dataset="simpleqa",
        domain=meta.get("topic", ""),
        input=row["problem"],
        output=answer,
        answer_type=answer_type_of(meta.get("answer_type", ""), answer),
    )


def _truthfulqa(row: Mapping[str, Any], n: int) -> Row:
    correct = [a for a in row.get("correct_answers", []) if a != row["best_answer"]]
    return qa_row(
        id=f"truthfulqa-{n:05d}",
        source_dataset="truthfulqa",
        task="generation",
        domain=row.get("category", ""),
        input=row["question"],
        output=row["best_answer"],
        optional_output=correct,
        incorrect_answers=list(row.get("incorrect_answers", [])),
    )


def _halueval(row: Mapping[str, Any], n: int) -> Row:
    return qa_row(
        id=f"halueval-{n:05d}",
        source_dataset="halueval",
        input=row["question"],
        output=row["right_answer"],
        incorrect_answers=[row["hallucinated_answer"]],
        context=row.get("knowledge", ""),
        context_type="knowledge" if row.get("knowledge") else "none",
    )


def _halubench(row: Mapping[str, Any], n: int) -> Row:
    passed = str(row.get("label", "PASS")).upper() == "PASS"
    return qa_row(
        id=f"halubench-{row.get('id', n)}",
        source_dataset="halubench",
        domain=row.get("source_ds", ""),
        input=row["question"],
        output=row["answer"] if passed else "",
        incorrect_answers=[] if passed else [row["answer"]],
        context=row.get("passage", ""),
        context_type="passage",
    )


def _felm(row: Mapping[str, Any], n: int) -> Row:
    correct = all(row.get("labels", [True]))
    return qa_row(
        id=f"felm-{n:05d}",
        source_dataset="felm",
        task="generation",
        domain=row.get("domain", ""),
        input=row["prompt"],
        output=row["response"] if correct else "",
        incorrect_answers=[] if correct else [row["response"]],
    )


def _defan(row: Mapping[str, Any], n: int) -> Row:
    answer = str(row.get("answer", row.get("answers", "")))
    declared = str(row.get("type", row.get("answer_type", "")))
    return qa_row(
        id=f"defan-{n:05d}",
        source_dataset="defan",
        domain=row.get("domain", ""),
        input=row["questions"] if "questions" in row else row["question"],
        output=answer,
        answer_type=answer_type_of(declared, answer),
    )


def _shroom(row: Mapping[str, Any], n: int) -> Row:
    hallucinated = str(row.get("label", "")).lower().startswith("hallucination")
    return qa_row(
        id=f"shroom-{n:05d}",
        source_dataset="shroom",
        task=row.get("task", "qa"),
        input=row["src"],
        output="" if hallucinated else row["hyp"],
        optional_output=[row["tgt"]] if row.get("tgt") else [],
        incorrect_answers=[row["hyp"]] if hallucinated else [],
    )


ADAPTERS: dict[str, Callable[[Mapping[str, Any], int], Row]] = {
    "simpleqa": _simpleqa,
    "truthfulqa": _truthfulqa,
    "halueval": _halueval,
    "halubench": _halubench,
    "felm": _felm,
    "defan": _defan,
    "shroom": _shroom,
}


def adapt(name: str, rows: Iterable[Mapping[str, Any]], origin: str) -> Iterator[Row]:
    """Map one source's rows; a row missing a field names the source, row and field."""
    adapter = ADAPTERS[name]
    for n, row in enumerate(rows):
        try:
            yield adapter(row, n)
        except KeyError as exc:
            raise InputError(
                f"{origin}: row {n}: no field {exc.args[0]!r} for the {name} adapter; "
                f"check kg.qa.sources (path, config, split)"
            ) from None


def load_source(source: QaSourceParams) -> Iterator[Row]:
    """Rows of one configured source through `datasets` (hub id or local file)."""
    import datasets

    local = Path(source.path)
    if local.suffix in (".csv", ".json", ".jsonl", ".parquet"):
        if not local.exists():
            raise InputError(f"kg.qa.sources: {source.path}: no such file")
        builder = {".jsonl": "json"}.get(local.suffix, local.suffix[1:])
        table = datasets.load_dataset(builder, data_files=str(local), split="train")
    else:
        table = datasets.load_dataset(source.path, source.config, split=source.split)
    if source.max_rows:
        table = table.select(range(min(source.max_rows, len(table))))
    return adapt(source.name, table, source.path)


def simpleqa_sample(path: Path, rows: int, seed: int) -> list[Row]:
    import pandas as pd

    table = pd.read_csv(path)
    sample = table.sample(n=min(rows, len(table)), random_state=seed).sort_index()
    sample = sample.assign(row=sample.index)  # ids name the row of the file
    return list(adapt("simpleqa", sample.to_dict("records"), str(path)))
