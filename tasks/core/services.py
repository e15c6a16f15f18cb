"""Real local servers on 127.0.0.1: Oxigraph (SPARQL), MLflow (UI + registry), Prefect (UI).

Each runs as a detached process group with a pid file and a log under `.paperline/`;
`status` trusts a health check, not the pid file alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tasks.core.errors import ServiceError
from tasks.core.params import RuntimeParams, ServiceParams
from tasks.core.paths import repo_root, state_dir
from tasks.core.tracking import tracking_uri

SERVICES = ("oxigraph", "mlflow", "prefect")


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    host: str
    port: int
    health_path: str
    command: list[str]
    start_timeout: float
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def params_key(self) -> str:
        return f"runtime.services.{self.name}"


@dataclass(frozen=True)
class ServiceState:
    name: str
    state: str  # running | unhealthy | stopped | port-taken
    url: str
    pid: int | None = None

    def describe(self) -> str:
        where = f" (pid {self.pid})" if self.pid else ""
        return {
            "running": f"{self.name}: running at {self.url}{where}",
            "unhealthy": f"{self.name}: process alive{where} but {self.url} does not answer",
            "stopped": f"{self.name}: stopped",
            "port-taken": f"{self.name}: stopped; {self.url} is used by another process",
        }[self.state]


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def service_spec(name: str, runtime: RuntimeParams, root: Path | None = None) -> ServiceSpec:
    root = root or repo_root()
    if name not in SERVICES:
        raise ServiceError(f"unknown service '{name}'; choose one of {', '.join(SERVICES)}")
    conf: ServiceParams = getattr(runtime.services, name)
    bind = ["--host", conf.host, "--port", str(conf.port)]
    if name == "oxigraph":
        location = root / runtime.services.oxigraph.location
        location.mkdir(parents=True, exist_ok=True)
        command = [_tool("oxigraph"), "serve", "--location", str(location)]
        command += ["--bind", f"{conf.host}:{conf.port}"]
        health, env = "/query?query=" + urllib.parse.quote("ASK {}"), {}
    elif name == "mlflow":
        store = tracking_uri(runtime.mlflow, root)
        if not store.startswith("sqlite:"):
            raise ServiceError(
                f"runtime.mlflow.tracking_uri: the local MLflow server needs a sqlite:/// store, "
                f"got {store!r} (unset MLFLOW_TRACKING_URI?)"
            )
        artifacts = Path(runtime.mlflow.artifact_root)
        artifacts = artifacts if artifacts.is_absolute() else root / artifacts
        command = [_tool("mlflow"), "server", "--backend-store-uri", store]
        command += ["--artifacts-destination", artifacts.as_uri(), "--workers", "1", *bind]
        health, env = "/health", {}
    else:
        command = [_tool("prefect"), "server", "start", "--analytics-off", *bind]
        health = "/api/health"
        env = {"PREFECT_HOME": str(state_dir(root) / "prefect")}
    return ServiceSpec(name, conf.host, conf.port, health, command, conf.start_timeout_seconds, env)


def _pid_file(name: str, root: Path) -> Path:
    return state_dir(root) / f"{name}.pid"


def _log_file(name: str, root: Path) -> Path:
    folder = state_dir(root) / "logs"
    folder.mkdir(exist_ok=True)
    return folder / f"{name}.log"


def _recorded_process(name: str, root: Path) -> psutil.Process | None:
    """The process the pid file names, if it is still that same process."""
    path = _pid_file(name, root)
    try:
        record = json.loads(path.read_text())
        process = psutil.Process(record["pid"])
        same = abs(process.create_time() - record["created"]) < 1
        if same and process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
            return process
    except (FileNotFoundError, json.JSONDecodeError, KeyError, psutil.Error):
        pass
    path.unlink(missing_ok=True)
    return None


def _healthy(spec: ServiceSpec, timeout: float = 2.0) -> bool:
    request = urllib.request.Request(
        spec.url + spec.health_path, headers={"Accept": "application/sparql-results+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def status(name: str, runtime: RuntimeParams, root: Path | None = None) -> ServiceState:
    root = root or repo_root()
    spec = service_spec(name, runtime, root)
    process = _recorded_process(name, root)
    if process is not None:
        state = "running" if _healthy(spec) else "unhealthy"
        return ServiceState(name, state, spec.url, process.pid)
    if _port_in_use(spec.host, spec.port):
        return ServiceState(name, "port-taken", spec.url)
    return ServiceState(name, "stopped", spec.url)


def up(name: str, runtime: RuntimeParams, root: Path | None = None) -> ServiceState:
    """Start the service and wait until its health check answers."""
    root = root or repo_root()
    spec = service_spec(name, runtime, root)
    current = status(name, runtime, root)
    if current.state == "running":
        return current
    if current.state == "unhealthy":
        down(name, runtime, root)
    elif current.state == "port-taken":
        raise ServiceError(
            f"{name}: port {spec.port} on {spec.host} is taken by another process; "
            f"stop it or set {spec.params_key}.port in params.yaml"
        )
    log_path = _log_file(name, root)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            spec.command,
            cwd=root,
            env={**os.environ, **spec.env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    created = psutil.Process(process.pid).create_time()
    record = {"pid": process.pid, "created": created, "url": spec.url, "command": spec.command}
    _pid_file(name, root).write_text(json.dumps(record))
    deadline = time.monotonic() + spec.start_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _pid_file(name, root).unlink(missing_ok=True)
            raise ServiceError(
                f"{name}: exited with code {process.returncode} while starting; "
                f"last log line: {_last_line(log_path)} (full log: {log_path})"
            )
        if _healthy(spec):
            return ServiceState(name, "running", spec.url, process.pid)
        time.sleep(0.3)
    down(name, runtime, root)
    raise ServiceError(
        f"{name}: no answer at {spec.url} after {spec.start_timeout:.0f} s; "
        f"see {log_path} or raise {spec.params_key}.start_timeout_seconds"
    )


def down(name: str, runtime: RuntimeParams, root: Path | None = None) -> bool:
    """Stop the service's whole process group; False when it was not running."""
    root = root or repo_root()
    service_spec(name, runtime, root)  # validates the name
    process = _recorded_process(name, root)
    if process is None:
        return False
    group = [process, *process.children(recursive=True)]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    for member in group:
        with contextlib.suppress(psutil.Error):
            member.terminate()
    _, alive = psutil.wait_procs(group, timeout=15)
    for member in alive:
        with contextlib.suppress(psutil.Error):
            member.kill()
    psutil.wait_procs(alive, timeout=5)
    _pid_file(name, root).unlink(missing_ok=True)
    return True


@contextlib.contextmanager
def running(name: str, runtime: RuntimeParams, root: Path | None = None) -> Iterator[ServiceState]:
    """Make sure the service runs inside the block; stop it after only if we started it."""
    root = root or repo_root()
    started = status(name, runtime, root).state != "running"
    state = up(name, runtime, root)
    try:
        yield state
    finally:
        if started:
            down(name, runtime, root)


def _last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").splitlines()
    meaningful = [line.strip(" │╭╮╰╯─") for line in lines if any(c.isalnum() for c in line)]
    return meaningful[-1].strip() if meaningful else "(empty)"
