"""One local Ray instance for a whole `paperline repro` / flow run, shared by every stage.

Each stage is its own process; without this each one started (and tore down) a private
Ray. `LocalRay` runs `ray start --head --block`; `tasks.core.repro.shared_ray` starts it the
first time a stage that uses Ray is about to run, and it hands its address to every later
stage through RAY_ADDRESS; at the end it stops exactly what it started: it signals its own
`ray start` process, which stops the processes it spawned (never `ray stop`, which would
stop every Ray on the machine). An explicit RAY_ADDRESS wins: then nothing is started or
stopped.

Token authentication is on, with a token of this run's own (RAY_AUTH_TOKEN_PATH): stages
join by explicit address, and Ray only uses a token on such a join when RAY_AUTH_MODE says
so, so the mode and the token path travel to the stages in the environment too.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tasks.core.params import RayParams, load_params
from tasks.core.paths import state_dir

# set for the stages of a run whose Ray this module started (init_ray reads it)
SESSION_ENV = "PAPERLINE_RAY_SESSION"
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30
HEAD_ENV = {
    "PYTHONUNBUFFERED": "1",
    # on SIGTERM a head first drains its node for Ray Serve, 30 s by default, which a
    # local batch run waits out for nothing at the end of every run
    "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
}
# Ray's socket paths (<temp>/session_<date>_<pid>/sockets/plasma_store) must fit in
# AF_UNIX's 107 bytes; a deeper temp folder goes to a short one under /tmp instead
MAX_TEMP_DIR_CHARS = 45

log = logging.getLogger("paperline.ray")


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the run that started Ray dies without stopping it
    (a SIGKILL). Linux ties this to the starting thread: `paperline repro` and the Prefect
    flows (tasks run in the flow's thread) start Ray from their main thread."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalRay:
    """A `ray start --head --block` process of this run; `start` is idempotent.

    `env` is what a process needs to join it (RAY_ADDRESS and the token settings); with
    `export` (the default) `start` also sets it in this process's environment, which the
    stages it starts inherit, and `stop` restores the environment."""

    def __init__(self, root: Path, params: RayParams | None = None, export: bool = True) -> None:
        self.root = Path(root).resolve()  # Ray wants an absolute temp dir
        self._params = params
        self._export = export
        self.env: dict[str, str] = {}
        self.process: subprocess.Popen | None = None
        self.temp_dir: Path | None = None
        self.log_path = state_dir(root) / "logs" / "ray.log"
        self._saved_env: dict[str, str | None] = {}

    @property
    def running(self) -> bool:
        return self.process is not None

    def start(self) -> None:
        if self.running:
            return
        started = time.perf_counter()
        params = self._params or load_params(self.root / "params.yaml").runtime.ray
        self.temp_dir = self._make_temp_dir()
        token = self.temp_dir / "auth_token"
        token.write_text(secrets.token_hex(32), encoding="utf-8")
        token.chmod(0o600)
        port = _free_port()
        env = {
            "RAY_ADDRESS": f"127.0.0.1:{port}",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token),
            SESSION_ENV: str(self.temp_dir),
        }
        command = [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}",
            # a task killed by the memory monitor otherwise retries without end
            f"--system-config={json.dumps({'task_oom_retries': params.max_retries})}",
        ]
        if params.num_cpus:
            command.append(f"--num-cpus={params.num_cpus}")
        if memory := params.object_store_memory_mb:
            command.append(f"--object-store-memory={memory * 1024 * 1024}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "w", encoding="utf-8") as out:
            child_env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**child_env, **env, **HEAD_ENV},
                cwd=self.root,
                preexec_fn=_die_with_parent,
            )
        self._wait_until_up()
        self.env = env
        for key, value in env.items() if self._export else ():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        log.info(
            "Ray started at %s in %.1f s (pid %d, temp %s)",
            env["RAY_ADDRESS"],
            time.perf_counter() - started,
            self.process.pid,
            self.temp_dir,
        )

    def _make_temp_dir(self) -> Path:
        folder = state_dir(self.root) / "ray-session"
        if len(str(folder)) > MAX_TEMP_DIR_CHARS:
            return Path(tempfile.mkdtemp(prefix="pl-ray-", dir="/tmp"))
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    def _wait_until_up(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            if "Ray runtime started." in self.log_path.read_text(errors="replace"):
                return
            time.sleep(0.2)
        code = self.process.poll()
        self.stop()
        how = f"exited with {code}" if code is not None else f"not up in {START_TIMEOUT_S} s"
        raise RuntimeError(f"ray start {how}; see {self.log_path}")

    def stop(self) -> None:
        """Stop the `ray start` process this run started (it stops what it spawned)."""
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        self.env = {}
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            log.info("Ray stopped (pid %d)", self.process.pid)
            self.process = None
        if self.temp_dir is not None and self.temp_dir.parent == Path("/tmp"):
            shutil.rmtree(self.temp_dir, ignore_errors=True)
