"""The kg miner against a real Oxigraph server on loopback, loaded with the shipped slice.

Correctness: the miner's paths equal networkx's over the same triples. Resilience: a 429
is retried after its Retry-After, a dead endpoint gives one clear error and loses nothing,
and a warm cache answers a re-run with zero round trips.
"""

import http.server
import json
import random
import shutil
import threading
import time
import urllib.request
from pathlib import Path

import networkx as nx
import pyarrow.parquet as pq
import pyoxigraph as ox
import pytest
import requests_cache

from tasks.core import rdf, services
from tasks.core.params import load_params
from tasks.core.stage_runner import run_stage
from tasks.kg import codex, endpoint
from tasks.kg.judge import validate_multihal
from tasks.kg.mine import property_lists
from tasks.kg.miner import mine_paths
from tasks.kg.params import SparqlParams
from tasks.kg.sparql import SparqlClient
from tests.conftest import REPO, StandIn, copy_repo, dvc, edit_params, free_port, run_cli

pytestmark = pytest.mark.integration
MULTIHAL = REPO / "data" / "seed" / "multihal"


@pytest.fixture(scope="module")
def kg_root(tmp_path_factory):
    """A repo copy with the slice built and served by Oxigraph on a free port."""
    root = copy_repo(tmp_path_factory.mktemp("kg") / "repo")
    run_stage("kg.slice", root)
    runtime = load_params(root / "params.yaml").runtime  # the copy's own free port
    state = services.up("oxigraph", runtime, root)  # the CLI test finds it running
    endpoint.load_slice(state.url, root / endpoint.SLICE)
    yield root, state.url
    services.down("oxigraph", runtime, root)


def slice_graph(path):
    graph = nx.MultiDiGraph()
    for triple in ox.parse(path=str(path), format=ox.RdfFormat.N_TRIPLES):
        if triple.predicate.value.startswith(rdf.WDT):
            s, p, o = (rdf.local_id(t) for t in (triple.subject, triple.predicate, triple.object))
            graph.add_edge(s, o, key=p)
    return graph


def networkx_paths(graph, subject, obj, shortest_only):
    found = set()
    for edges in nx.all_simple_edge_paths(graph, subject, obj, cutoff=2):
        path = (edges[0][0],)
        for _, target, prop in edges:
            path += (prop, target)
        found.add(path)
    if shortest_only and found:
        fewest = min(len(p) for p in found)
        found = {p for p in found if len(p) == fewest}
    return sorted(found, key=lambda p: (len(p), p))  # shortest first, as the miner


def client_for(url, tmp_path, **overrides):
    params = SparqlParams(pairs_per_query=25, **overrides)
    return SparqlClient(f"{url}/query", params, tmp_path / "cache.sqlite", "test")


@pytest.mark.parametrize("stop_at_first_hit", [False, True])
def test_miner_paths_equal_networkx_paths_over_the_same_triples(
    kg_root, tmp_path, stop_at_first_hit
):
    root, url = kg_root
    graph = slice_graph(root / endpoint.SLICE)
    facts = sorted(codex.read_triples(root / "data/seed/codex-s/valid.txt"))
    rng = random.Random(7)
    pairs = [(s, o) for s, _, o in rng.sample(facts, 60)]
    nodes = sorted(graph.nodes)
    pairs += [(rng.choice(nodes), rng.choice(nodes)) for _ in range(40)]  # mostly unconnected
    pairs += [(o, s) for s, o in pairs[:20]]  # reversed, as the stage mines them
    keys = [("entity", s, o) for s, o in pairs if s != o]
    with client_for(url, tmp_path) as client:
        mined = mine_paths(client, keys, property_lists(MULTIHAL), 2, stop_at_first_hit)
    compared = 0
    for _, s, o in keys:
        expected = networkx_paths(graph, s, o, shortest_only=stop_at_first_hit)
        assert mined.get(("entity", s, o), []) == expected, (s, o)
        compared += bool(expected)
    assert compared >= 60  # the check covered real paths, 1- and 2-hop


def test_warm_cache_answers_a_rerun_with_zero_round_trips(kg_root, tmp_path):
    root, url = kg_root
    facts = sorted(codex.read_triples(root / "data/seed/codex-s/valid.txt"))[:120]
    keys = [("entity", s, o) for s, _, o in facts]
    with client_for(url, tmp_path) as cold:
        first = mine_paths(cold, keys, property_lists(MULTIHAL))
    assert cold.stats.round_trips == cold.stats.queries > 0 and cold.stats.cache_hits == 0
    with client_for(url, tmp_path) as warm:
        again = mine_paths(warm, keys, property_lists(MULTIHAL))
    assert again == first and warm.stats.round_trips == 0
    assert warm.stats.cache_hits == warm.stats.queries == cold.stats.queries


class FlakyProxy(http.server.BaseHTTPRequestHandler):
    """Answers the first `failures` POSTs with 429 + Retry-After, then forwards to Oxigraph."""

    upstream, failures, seen = "", 0, 0

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen += 1
        if type(self).seen <= type(self).failures:
            self.send_response(429)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        request = urllib.request.Request(self.upstream, data=body, headers=dict(self.headers))
        with urllib.request.urlopen(request, timeout=30) as answer:
            payload = answer.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/sparql-results+json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def test_a_429_is_retried_after_its_retry_after_and_counted(kg_root, tmp_path):
    _, url = kg_root
    FlakyProxy.upstream, FlakyProxy.failures, FlakyProxy.seen = f"{url}/query", 1, 0
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FlakyProxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        client = SparqlClient(
            f"http://127.0.0.1:{proxy.server_port}/",
            SparqlParams(),
            tmp_path / "cache.sqlite",
            "test",
        )
        started = time.monotonic()
        rows = client.select(
            f"SELECT ?p WHERE {{ {rdf.term_text(rdf.entity('Q1009'))} ?p ?o }} LIMIT 1"
        )
        assert len(rows) == 1 and time.monotonic() - started >= 1.0  # waited as told
        assert client.stats.as_dict() == {
            "queries": 1,
            "round_trips": 2,
            "retries": 1,
            "cache_hits": 0,
        }
    finally:
        proxy.shutdown()


def test_a_dead_endpoint_fails_clearly_and_loses_nothing(kg_root, tmp_path):
    root, _ = kg_root
    work = tmp_path / "repo"
    shutil.copytree(root, work, ignore=shutil.ignore_patterns(".paperline"))
    edit_params(work, {"runtime": {"services": {"oxigraph": {"port": free_port()}}}})
    assert run_cli("stage", "kg.qa", cwd=work).returncode == 0  # starts its own Oxigraph…
    runtime = load_params(work / "params.yaml").runtime
    assert services.status("oxigraph", runtime, work).state == "stopped"  # …and stops it
    before = (work / "data/interim/kg/qa.parquet").read_bytes()
    cache = work / ".paperline/kg/sparql-cache.sqlite"
    cached = len(requests_cache.CachedSession(str(cache)).cache.responses)

    dead = f"http://127.0.0.1:{free_port()}/sparql"
    wikidata = {"backend": "wikidata", "wikidata_url": dead, "retries": 2}
    edit_params(work, {"kg": {"sparql": wikidata}})
    result = run_cli("stage", "kg.qa", cwd=work)
    assert result.returncode == 2
    line = result.stderr.splitlines()[0]
    log = (work / ".paperline/logs/kg-qa.log").read_text()
    retries = [each for each in log.splitlines() if "Retrying (" in each]  # urllib3's
    assert len(retries) == 2 and f"SPARQL endpoint {dead}: no answer after 3 attempts" in line
    assert (work / "data/interim/kg/qa.parquet").read_bytes() == before  # output intact
    assert len(requests_cache.CachedSession(str(cache)).cache.responses) == cached > 0


def test_kg_serve_serves_the_slice(kg_root):
    root, _ = kg_root
    result = run_cli("kg", "serve", cwd=root)
    assert result.returncode == 0, result.stderr
    assert "oxigraph: running at" in result.stdout
    assert f"oxigraph: serving {endpoint.SLICE}" in result.stdout


def test_cli_prints_paths_as_json_lines(kg_root):
    root, _ = kg_root
    result = run_cli(
        "kg", "paths", "--subject", "Q1009", "--object", "Q1860", "--all-hops", cwd=root
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert {"hops": 1, "path": ["Q1009", "P37", "Q1860"]} in lines
    assert all(len(r["path"]) == 2 * r["hops"] + 1 for r in lines) and len(lines) > 1
    bad = run_cli("kg", "paths", "--subject", "Q1 } .", "--object", "Q2", cwd=root)
    assert bad.returncode == 2 and "not a Wikidata item id" in bad.stderr


def test_dvc_repro_builds_a_multihal_table_that_validates(kg_reproduced):
    root, _ = kg_reproduced
    table = pq.read_table(root / "data/processed/kg/multihal.parquet")
    paths = pq.read_schema(root / "data/interim/kg/paths.parquet")
    validate_multihal(table, paths, 4, "multihal.parquet")
    assert table.num_rows > 50 and set(table.column("hops").to_pylist()) == {1, 2}
    labels = table.column("trip_labels").to_pylist()[0]
    assert set(labels) == {"ar", "de", "en", "es", "ru", "zh"}
    status = dvc("status", "kg-judge", cwd=root)
    assert "up to date" in status.stdout.lower() or not status.stdout.strip()


class ChatServer(StandIn):
    """An OpenAI-compatible /v1/chat/completions stand-in: picks the first k paths it is
    shown and scores a path 5 when its text names "P37", else 2. Records the prompts."""

    prompts: list = []

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = request["messages"][0]["content"]
        type(self).prompts.append((request["model"], request["temperature"], prompt))
        if "Reply with their numbers" in prompt:
            k = int(prompt.split("Which ")[1].split(" ")[0])
            content = ", ".join(str(n) for n in range(1, k + 1))
        else:
            content = "5" if "path: Q1009 official language" in prompt else "Score: 2"
        self.reply_chat(request["model"], content)


def test_openai_judge_runs_multihals_protocol_over_http(monkeypatch):
    from tasks.core.errors import UserError
    from tasks.kg.judge import judge_rows
    from tasks.kg.judges import make_judge
    from tasks.kg.params import KgParams

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ChatServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ChatServer.prompts = []
    try:
        params = KgParams.model_validate(
            {
                "judge": {
                    "backend": "openai",
                    "base_url": f"http://127.0.0.1:{server.server_port}/v1",
                    "model": "judge-model",
                    "api_key_env": "PAPERLINE_TEST_KEY",
                    "top_paths": 3,
                }
            }
        )
        monkeypatch.delenv("PAPERLINE_TEST_KEY", raising=False)
        with pytest.raises(UserError, match=r"\$PAPERLINE_TEST_KEY is unset"):
            make_judge(params.judge, {})
        monkeypatch.setenv("PAPERLINE_TEST_KEY", "local")
        names = {37: "official language", 530: "diplomatic relation", 17: "country"}
        rows = [
            {
                "qa_id": "q1",
                "input": "What is the official language of Q1009?",
                "output": "Q1860",
                "path": ["Q1009", f"P{n}", "Q1860"],
                "trip_labels": {"en": f"Q1009 {names.get(n, 'other')} Q1860"},
            }
            for n in (37, 530, 17, 150, 31)
        ]
        judged = judge_rows(rows, make_judge(params.judge, {}), params)
    finally:
        server.shutdown()
    assert len(judged) == 3 and {r["judged_by"] for r in judged} == {"openai:judge-model"}
    picks = [p for p in ChatServer.prompts if "Reply with their numbers" in p[2]]
    assert len(picks) == 2 and all(m == "judge-model" and t == 0.3 for m, t, _ in picks)
    scores = {r["path"][1]: r["judged_score"] for r in judged}
    assert all(s == (5 if p == "P37" else 2) for p, s in scores.items())


def test_openai_answerer_puts_the_path_in_the_prompt(monkeypatch):
    from tasks.kg.answering import AnswerRequest, make_answer_model
    from tasks.kg.params import EvalParams

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ChatServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ChatServer.prompts = []
    monkeypatch.setenv("PAPERLINE_TEST_KEY", "local")
    try:
        answerer = make_answer_model(
            EvalParams(
                answer_backend="openai",
                base_url=f"http://127.0.0.1:{server.server_port}/v1",
                model="answer-model",
                api_key_env="PAPERLINE_TEST_KEY",
            ),
            Path("unused"),
            12,
        )
        question = "What is the official language of Q1009?"
        with_path, without = answerer.answer_batch(
            [
                AnswerRequest(question, "Q1009 official language Q1860"),
                AnswerRequest(question, None),
            ]
        )
    finally:
        server.shutdown()
    assert (with_path, without) == ("5", "Score: 2")  # the server's replies, as sent
    (model, temperature, prompt), (_, _, bare) = ChatServer.prompts
    assert model == "answer-model" and temperature == 1.0
    assert "Knowledge-graph path: Q1009 official language Q1860" in prompt and "path" not in bare
