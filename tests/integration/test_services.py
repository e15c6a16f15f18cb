"""Real servers on loopback, started and stopped through `tasks.core.services`."""

import json
import socket
import urllib.parse
import urllib.request

import pytest

from tasks.core import services
from tasks.core.errors import ServiceError
from tasks.core.params import parse_params
from tests.conftest import free_port, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture
def root(tmp_path):
    return tmp_path


@pytest.fixture
def runtime():
    ports = {name: {"port": free_port()} for name in services.SERVICES}
    return parse_params({"corpus": {}, "runtime": {"services": ports}}).runtime


def _get(url, accept="application/json"):
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


def test_oxigraph_answers_ask_then_stops(root, runtime):
    assert services.status("oxigraph", runtime, root).state == "stopped"
    state = services.up("oxigraph", runtime, root)
    try:
        assert state.state == "running" and state.url.startswith("http://127.0.0.1:")
        query = urllib.parse.quote("ASK { }")
        answer = json.loads(
            _get(f"{state.url}/query?query={query}", "application/sparql-results+json")
        )
        assert answer["boolean"] is True
        assert services.up("oxigraph", runtime, root).pid == state.pid  # already running
    finally:
        assert services.down("oxigraph", runtime, root) is True
    assert services.status("oxigraph", runtime, root).state == "stopped"
    assert services.down("oxigraph", runtime, root) is False
    assert not (root / ".paperline" / "oxigraph.pid").exists()


def test_running_stops_only_what_it_started(root, runtime):
    with services.running("oxigraph", runtime, root) as state:
        assert state.state == "running"
    assert services.status("oxigraph", runtime, root).state == "stopped"

    services.up("oxigraph", runtime, root)
    try:
        with services.running("oxigraph", runtime, root):
            pass
        assert services.status("oxigraph", runtime, root).state == "running"
    finally:
        services.down("oxigraph", runtime, root)


def test_mlflow_server_serves_the_same_sqlite_store(root, runtime):
    import mlflow

    from tasks.core import tracking

    tracking.ensure_experiment("written-before-server", runtime.mlflow, root)
    state = services.up("mlflow", runtime, root)
    try:
        assert services.status("mlflow", runtime, root).state == "running"
        assert _get(f"{state.url}/health") == "OK"
        assert "<html" in _get(state.url + "/", "text/html").lower()
        found = json.loads(_get(f"{state.url}/api/2.0/mlflow/experiments/search?max_results=10"))
        assert "written-before-server" in {e["name"] for e in found["experiments"]}
    finally:
        services.down("mlflow", runtime, root)
        mlflow.set_tracking_uri(None)
    assert services.status("mlflow", runtime, root).state == "stopped"


def test_port_taken_by_someone_else_is_reported(root, runtime):
    port = runtime.services.oxigraph.port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        assert services.status("oxigraph", runtime, root).state == "port-taken"
        with pytest.raises(
            ServiceError,
            match=rf"port {port} on 127.0.0.1 is taken .* "
            r"runtime.services.oxigraph.port",
        ):
            services.up("oxigraph", runtime, root)


def test_unknown_service_is_named(root, runtime):
    with pytest.raises(ServiceError, match="unknown service 'redis'"):
        services.status("redis", runtime, root)


def test_cli_services_up_status_down(repo_copy):
    import yaml

    port = yaml.safe_load((repo_copy / "params.yaml").read_text())["runtime"]["services"][
        "oxigraph"
    ]["port"]  # a free port: copies never take the default one
    assert "oxigraph: running" in run_cli("services", "up", "oxigraph", cwd=repo_copy).stdout
    try:
        status = run_cli("services", "status", cwd=repo_copy).stdout
        assert f"oxigraph: running at http://127.0.0.1:{port}" in status
        assert "mlflow: stopped" in status
    finally:
        assert (
            run_cli("services", "down", "oxigraph", cwd=repo_copy).stdout == "oxigraph: stopped\n"
        )
    assert run_cli("services", "status", "oxigraph", cwd=repo_copy).stdout == "oxigraph: stopped\n"
