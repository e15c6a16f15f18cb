"""kg building blocks on tiny inputs: query safety, templates on Oxigraph's engine, QA
adapters, answer normalisation, linking, the path filter and the judging protocol."""

import random

import pyoxigraph as ox
import pytest

from tasks.core import rdf
from tasks.kg import qa_sources
from tasks.kg.judges import Candidate, HeuristicJudge, choose_paths, parse_picks, parse_score
from tasks.kg.linking import LabelIndexLinker, falcon_qids
from tasks.kg.miner import _path
from tasks.kg.path_filter import PathFilter
from tasks.kg.templates import path_query
from tests.conftest import REPO


def wd(qid):
    return rdf.entity(qid)


def store_with(*triples):
    store = ox.Store()
    for s, p, o in triples:
        store.add(ox.Quad(wd(s), rdf.prop(p), o if isinstance(o, ox.Literal) else wd(o)))
    return store


def rows(store, query):
    """Bindings as the SPARQL client returns them: {variable: value}."""
    solutions = store.query(query)
    names = [v.value for v in solutions.variables]
    return [{n: s[n].value for n in names if s[n] is not None} for s in solutions]


def test_ids_that_are_not_wikidata_ids_are_refused():
    for bad in ("Q1 } ", "Q01", "wd:Q1", "Q1>", "P", ""):
        with pytest.raises(ValueError):
            rdf.entity(bad)
    with pytest.raises(ValueError):
        rdf.prop("Q5")


@pytest.mark.parametrize("hostile", ['a"b', "x } . ?s ?p ?o {", "line\nbreak", "back\\slash'"])
def test_a_hostile_literal_never_changes_the_query(hostile):
    store = store_with(("Q1", "P569", ox.Literal("1952-03-11")), ("Q1", "P1", "Q2"))
    query = path_query([("Q1", hostile)], 1, "date", ["P569"])
    assert ox.Store().query(query) is not None  # it parses
    assert rows(store, query) == []  # and the value stays a value: nothing matches
    assert rows(store, path_query([("Q1", "1952-03-11")], 1, "date", ["P569"]))


def test_entity_templates_find_one_and_two_hop_paths_for_many_pairs_at_once():
    store = store_with(
        ("Q1", "P1", "Q2"),
        ("Q2", "P2", "Q3"),
        ("Q1", "P3", "Q3"),
        ("Q4", "P1", "Q5"),
        ("Q1", "P1", "Q1"),
    )
    one = rows(store, path_query([("Q1", "Q3"), ("Q4", "Q5"), ("Q1", "Q5")], 1, "entity"))
    assert [_path(r, 1, "entity") for r in one] == [("Q1", "P3", "Q3"), ("Q4", "P1", "Q5")]
    two = rows(store, path_query([("Q1", "Q3")], 2, "entity"))
    assert [_path(r, 2, "entity") for r in two] == [("Q1", "P1", "Q2", "P2", "Q3")]


def test_date_and_number_templates_match_values_the_way_multihal_does():
    date = ox.Literal(
        "1952-03-11T00:00:00Z", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
    )
    count = ox.Literal("1234", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#decimal"))
    store = store_with(
        ("Q1", "P569", date),
        ("Q1", "P1", "Q2"),
        ("Q2", "P1082", count),
        ("Q2", "P9", ox.Literal("1234")),
    )
    found = rows(store, path_query([("Q1", "1952-03-11"), ("Q1", "1952")], 1, "date", ["P569"]))
    assert {r["o"] for r in found} == {"1952-03-11", "1952"}
    number = rows(store, path_query([("Q1", "1234")], 2, "number", ["P1082", "P9"]))
    assert [_path(r, 2, "number") for r in number] == [("Q1", "P1", "Q2", "P1082", "1234")]
    assert rows(store, path_query([("Q1", "3")], 1, "rank", ["P1352"])) == []


def test_answers_are_typed_and_normalised():
    assert qa_sources.normalise_date("March 11, 1952") == "1952-03-11"
    assert qa_sources.normalise_date("June 2010") == "2010-06"
    assert qa_sources.normalise_date("1952") == "1952"
    assert qa_sources.normalise_date("not a date") is None
    assert qa_sources.normalise_number("1,234 km") == "1234"
    assert qa_sources.normalise_number("3.50") == "3.5"
    assert qa_sources.normalise_number("5th") == "5"
    assert qa_sources.answer_type_of("Date", "1952") == "date"
    assert qa_sources.answer_type_of("Person", "3rd") == "rank"
    assert qa_sources.answer_type_of("Place", "Paris") == "entity"


SOURCE_ROWS = {
    "simpleqa": {
        "metadata": "{'topic': 'Art', 'answer_type': 'Date'}",
        "problem": "When?",
        "answer": "1999",
    },
    "truthfulqa": {
        "question": "Q?",
        "best_answer": "A",
        "correct_answers": ["A", "B"],
        "incorrect_answers": ["C"],
        "category": "Misc",
    },
    "halueval": {
        "question": "Q?",
        "right_answer": "A",
        "hallucinated_answer": "C",
        "knowledge": "K",
    },
    "halubench": {"id": "7", "passage": "P", "question": "Q?", "answer": "C", "label": "FAIL"},
    "felm": {"prompt": "Q?", "response": "A", "labels": [True], "domain": "wk"},
    "defan": {"questions": "Q?", "answer": "1999", "type": "date"},
    "shroom": {"src": "Q?", "hyp": "C", "tgt": "A", "label": "Hallucination", "task": "DM"},
}


@pytest.mark.parametrize("name", sorted(SOURCE_ROWS))
def test_every_multihal_source_maps_to_multihal_columns(name):
    (row,) = qa_sources.adapt(name, [SOURCE_ROWS[name]], "memory")
    assert set(qa_sources.QA_COLUMNS) <= set(row) and row["source_dataset"] == name
    assert row["input"] == "Q?" or name == "simpleqa"
    if name in ("halubench", "shroom", "halueval"):
        assert row["incorrect_answers"] == ["C"]
    if name == "truthfulqa":
        assert row["optional_output"] == ["B"] and row["task"] == "generation"


def test_a_source_row_without_a_field_names_source_row_and_field():
    with pytest.raises(
        qa_sources.InputError, match=r"memory: row 0: no field 'question' for the halueval"
    ):
        list(qa_sources.adapt("halueval", [{"right_answer": "A"}], "memory"))


def test_codex_questions_carry_their_qids_and_verified_false_answers(tmp_path):
    from tasks.kg.params import QaParams

    seed = REPO / "data" / "seed"
    made = qa_sources.codex_questions(
        QaParams(one_hop_questions=50, two_hop_questions=20), seed / "codex-s", seed / "multihal"
    )
    assert len(made) == 70 and all(r["subjects"] and r["objects"] for r in made)
    assert all(r["subjects"][0] in r["input"] or not r["subjects"][0].startswith("Q") for r in made)
    assert sum(bool(r["incorrect_answers"]) for r in made) > 0
    again = qa_sources.codex_questions(
        QaParams(one_hop_questions=50, two_hop_questions=20), seed / "codex-s", seed / "multihal"
    )
    assert again == made


def test_label_index_links_the_longest_spans():
    linker = LabelIndexLinker({"new york": ["Q60"], "york": ["Q42"], "city": ["Q515"]})
    assert linker.link("Which city is New York's twin?") == ["Q515"]
    assert linker.link("Is New York a city?") == ["Q60", "Q515"]
    assert linker.link("York, the CITY") == ["Q42", "Q515"]


def test_falcon_payload_parsing():
    payload = {
        "entities_wikidata": [
            ["<http://www.wikidata.org/entity/Q42>", "Douglas Adams"],
            {"URI": "http://www.wikidata.org/entity/Q5"},
        ]
    }
    assert falcon_qids(payload) == ["Q42", "Q5"]


def test_path_filter_drops_identifier_and_media_properties():
    multihal = REPO / "data" / "seed" / "multihal"
    keep = PathFilter.from_resources(multihal, ["P18"])
    assert "P6452" in keep.removed and "P18" in keep.removed  # ids_to_remove, params
    assert "P214" in keep.removed  # "VIAF ID": its label ends in " ID"
    paths = [
        ("Q1", "P18", "Q2"),
        ("Q1", "P27", "Q2"),
        ("Q1", "P27", "Q2"),
        ("Q1", "P31", "Q3", "P214", "Q2"),
    ]
    assert keep.apply(paths) == [("Q1", "P27", "Q2")]


def test_heuristic_judge_prefers_direct_paths_the_question_names():
    judge = HeuristicJudge(
        {"P27": "country of citizenship", "P31": "instance of", "P19": "place of birth"}
    )
    question = "What is the country of citizenship of Q1?"
    assert judge.score_ids(question, ("Q1", "P27", "Q2")) == 5
    assert judge.score_ids(question, ("Q1", "P19", "Q3", "P27", "Q2")) == 4
    assert judge.score_ids(question, ("Q1", "P31", "Q5", "P31", "Q2")) == 1


class CountingJudge:
    """Prefers lower path numbers; records what it was shown."""

    name = "counting"

    def __init__(self):
        self.shown = []

    def pick(self, question, answer, paths, k):
        self.shown.append([p.ids for p in paths])
        return sorted(range(len(paths)), key=lambda i: int(paths[i].ids[0]))[:k]

    def score(self, question, answer, path):
        return 5


def test_protocol_picks_twice_from_shuffled_lists_intersects_and_fills():
    candidates = [Candidate((str(n),), f"path {n}") for n in range(25)]
    judge = CountingJudge()
    chosen = choose_paths(judge, "q", "a", candidates, 10, random.Random(0))
    assert len(judge.shown) == 2 and judge.shown[0] != judge.shown[1]  # two shuffled orders
    assert chosen == list(range(10))  # a consistent judge: the intersection is full
    few = choose_paths(judge, "q", "a", candidates[:4], 10, random.Random(0))
    assert few == [0, 1, 2, 3] and len(judge.shown) == 2  # ≤ k paths: no picking


def test_protocol_fills_a_partial_intersection_at_random():
    class Fickle(CountingJudge):
        def pick(self, question, answer, paths, k):
            self.shown.append(paths)
            return list(range(k))  # the first k of whatever order it sees

    chosen = choose_paths(
        Fickle(), "q", "a", [Candidate((str(n),), "") for n in range(30)], 10, random.Random(1)
    )
    assert len(chosen) == 10 and len(set(chosen)) == 10


def test_llm_replies_are_parsed_defensively():
    assert parse_picks("Paths 3, 1 and 3; also 99", count=5, k=2) == [2, 0]
    assert parse_score("Score: 4/5") == 4
    assert parse_score("I cannot tell") == 1


def test_examples_split_by_question_and_negatives_share_the_answers_type():
    from tasks.kg.examples import TypeSwapper, build_examples
    from tasks.kg.params import KgParams
    from tasks.kg.splits import shared_questions, split_of

    seed = REPO / "data" / "seed" / "codex-s"
    swapper = TypeSwapper(seed)
    row = {
        "id": "q-000",
        "qa_id": "q",
        "answer_type": "entity",
        "objects": ["Q30"],
        "hops": 1,
        "input": "What is the country of citizenship of Q76?",
        "output": "Q30",
        "incorrect_answers": [],
        "trip_labels": {lang: f"Q76 {lang} Q30" for lang in "ab"},
    }
    params = KgParams.model_validate({"slice": {"languages": ["a", "b"]}})
    # the split is by question (text), so each row asks its own; q{n}b asks q{n}'s again
    rows = [
        {**row, "id": f"q{n}{copy}-000", "qa_id": f"q{n}{copy}", "input": f"Who is Q{n}?"}
        for n in range(200)
        for copy in ("", "b")
    ]
    examples = build_examples(rows, params, swapper)
    splits = {}
    for example in examples:
        splits.setdefault(example["question"], set()).add(example["split"])
    assert all(len(s) == 1 for s in splits.values())  # no question on two sides
    assert not shared_questions(examples) and len(splits) == 200
    test_share = sum(s == {"test"} for s in splits.values()) / len(splits)
    dev_share = sum(s == {"dev"} for s in splits.values()) / len(splits)
    assert 0.1 < test_share < 0.3 and 0.07 < dev_share < 0.25
    assert split_of("Who is Q7?", 0.15, 0.2) == split_of("  who is  q7? ", 0.15, 0.2)
    negatives = {e["answer"] for e in examples if e["label"] == 0}
    assert "Q30" not in negatives and negatives
    assert all(set(swapper.types[q]) & set(swapper.types["Q30"]) for q in negatives)


def test_extractive_reader_answers_with_the_paths_last_unasked_entity():
    from tasks.kg.answering import ExtractiveReader

    reader = ExtractiveReader()
    question = "What is the official language of the country of Q76?"
    assert (
        reader.answer(question, ["Q76", "country", "Q30", "official language", "Q1860"]) == "Q1860"
    )
    assert (
        reader.answer("Is Q1860 spoken in Q30?", ["Q30", "official language", "Q1860"]) == "Q1860"
    )
    assert reader.answer(question, None) == ""


def test_detector_scores_per_group():
    from tasks.kg.detector import scores_by

    rows = [
        {"label": label, "language": lang}
        for label, lang in [(1, "en"), (0, "en"), (1, "de"), (0, "de")]
    ]
    scores = scores_by(rows, [0.9, 0.1, 0.4, 0.6], "language", threshold=0.5)
    assert scores["en"] == {"examples": 2, "f1": 1.0, "auroc": 1.0}
    assert scores["de"]["auroc"] == 0.0 and scores["de"]["f1"] == 0.0
