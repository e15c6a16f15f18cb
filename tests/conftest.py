"""Shared fixtures: a throwaway copy of the repository, one Ray and one Prefect per session."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.reproduced import Reproduced, ReproducedCopies, standalone_areas

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.pop("MLFLOW_TRACKING_URI", None)
os.environ.pop("RAY_ADDRESS", None)
# numba's compiled-function cache (librosa's): one folder per test process, so two xdist
# workers never compile into the same files (tasks/core/jit_cache.py: that can segfault);
# stages under test inherit it, unless a test unsets it (`run_cli(env={ENV: None})`)
NUMBA_CACHE = os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="pl-tests-numba-")


def pytest_unconfigure() -> None:
    shutil.rmtree(NUMBA_CACHE, ignore_errors=True)


os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
# `make test` runs two xdist workers on two cores: a process with two BLAS/OpenMP threads
# then has one waiting for the other worker's core, and OpenMP's waiting threads spin.
# One thread per process here and in everything the tests start (SMALL_PARAMS does the
# same for the training workers, whose thread count is a param).
for _threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")


# A small embedded default for pipeline tests: 24 translations over 10 scripts, small budgets.
SMALL_UDHR = (
    "arb",
    "ben",
    "bod",
    "cmn_hant",
    "deu_1996",
    "ell_polytonic",
    "eng",
    "fra",
    "heb",
    "hin",
    "jpn",
    "kor",
    "por_BR",
    "por_PT",
    "rus",
    "spa",
    "srp_cyrl",
    "srp_latn",
    "swe",
    "tha",
    "tur",
    "ukr",
    "vie",
    "zul",
)
SMALL_PARAMS = {
    "corpus": {
        "schedule": {
            "phases": [
                {
                    "name": "pretrain",
                    "languages": 5,
                    "temperature": 0.7,
                    "token_budget": 12000,
                    "mask_ratio": 0.3,
                    "sequence_length": 64,
                    "reference_column": "pretrain",
                },
                {
                    "name": "mid",
                    "languages": 12,
                    "temperature": 0.5,
                    "token_budget": 10000,
                    "mask_ratio": 0.15,
                    "sequence_length": 128,
                    "reference_column": "ext",
                },
                {
                    "name": "decay",
                    "languages": "all",
                    "temperature": 0.3,
                    "token_budget": 5000,
                    "mask_ratio": 0.05,
                    "sequence_length": 128,
                    "reference_column": "decay-all",
                },
            ]
        },
        "tokenizer": {"vocab_size": 1000, "training_chars": 200000},
        "pack": {"shard_sequences": 64},
    },
    "mlm": {
        "training": {
            "batch_size": 16,
            "checkpoint_every": 5,
            "log_every": 2,
            "scaling": {"torch_threads": 1},
        },
        "eval": {"batch_size": 16},
    },
    "kg": {
        "qa": {"one_hop_questions": 80, "two_hop_questions": 40, "simpleqa_rows": 30},
        "examples": {"languages_per_path": 1},
        "detector": {"epochs": 1, "batch_size": 32, "max_length": 64, "torch_threads": 1},
        "answerer": {"steps": 60, "log_every": 30, "scaling": {"torch_threads": 1}},
        "eval": {"max_items": 40},
    },
    "scam": {
        "poison": {
            "rates": [0.0, 0.2],
            "steps": 16,
            "log_every": 8,
            "model": {"vocab_size": 500},
            "scaling": {"torch_threads": 1},
            "preference_prompts": 48,
        },
        "audit": {"max_prompts": 64, "max_new_tokens": 32},
    },
    "deltastack": {
        "tasks": ["parity", "dyck"],
        "models": ["deltastack", "deltanet"],
        "lengths": {"test_buckets": [60, 80, 100]},
        "budgets": {"tiny": {"steps": 6, "eval_every": 3, "eval_examples": 8}},
    },
    "tabular": {
        "synthetic": {"rows": 1000},
        "uncertainty": {"iterations": 60, "threads": 1},
        "zoo": {
            "trials": 1,
            "epochs": 2,
            "train_rows": 500,
            "retrieval_bank": 256,
            "search": {"triplet_weight": [0.3]},  # the matched ablation: one weight, 3 seeds
        },
    },
    "aoeb": {
        "assemble": {
            "code": {
                "max_train_queries": 60,
                "max_dev_queries": 20,
                "max_test_queries": 40,
                "max_documents": 150,
            },
            "reasoning": {
                "max_train_queries": 40,
                "max_dev_queries": 20,
                "max_test_queries": 40,
                "max_documents": 200,
            },
            "memory": {"histories": 20},
            "multimodal": {"train_images": 64, "dev_images": 16, "test_images": 32},
        },
        "finetune": {
            "steps": 8,
            "checkpoint_every": 4,
            "batch_size": 16,
            "image_epochs": 1,
            "scaling": {"torch_threads": 1},
        },
    },
    "cmipref": {
        "generate": {
            "prompts": 16,
            "candidates": 4,
            "test_prompts": 4,
            "finetune_prompts": 6,
            "pairs_per_prompt": 4,
        },
        "train": {
            "pretrain_steps": 20,
            "finetune_steps": 10,
            "checkpoint_every": 10,
            "batch_size": 8,
            "sweep": {"learning_rate": [0.001, 0.003], "modality_dropout": [0.2], "steps": 6},
            "scaling": {"torch_threads": 1},
        },
    },
    "llm": {"sanity": {"lengths": [128], "passages": 4}},
    "kvcache": {
        "tasks": {"lengths": [256, 384], "test_items": 2},
        "study": {
            "presses": ["streamingllm", "keydiff", "adakv_snapkv", "manifoldkv"]
            + ["manifoldkv_l1", "manifoldkv_linf", "manifoldkv_cosine", "windowed_manifoldkv"],
            "press": {"centroid_window": 128, "snapkv_window": 32},
        },
    },
    "runtime": {"ray": {"num_cpus": 2}},
}


def merge(base: dict, overrides: dict) -> dict:
    merged = dict(base)
    for key, value in overrides.items():
        merged[key] = merge(base.get(key, {}), value) if isinstance(value, dict) else value
    return merged


def edit_params(root: Path, overrides: dict) -> dict:
    """Merge `overrides` into root's params.yaml, section by section; returns the result."""
    import yaml

    path = root / "params.yaml"
    params = merge(yaml.safe_load(path.read_text()), overrides)
    path.write_text(yaml.safe_dump(params))
    return params


def shrink_repo(root: Path) -> Path:
    """Keep SMALL_UDHR translations only and scale params down (same code path, less data)."""
    keep = {f"udhr_{key}.xml" for key in SMALL_UDHR}
    for path in (root / "data" / "seed" / "udhr").glob("udhr_*.xml"):
        if path.name not in keep:
            path.unlink()
    oxigraph = {"runtime": {"services": {"oxigraph": {"port": free_port()}}}}
    edit_params(root, merge(SMALL_PARAMS, oxigraph))
    return root


def copy_repo(target: Path, small: bool = True, commit: bool = False) -> Path:
    """The repo's files as git sees them (tracked + untracked, not ignored), in a new git repo.

    `small` (the default) shrinks the embedded default so a full `dvc repro` takes seconds;
    `commit` commits the copy (lineage tags then name a real commit; `dvc exp` needs one).
    """
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    if small:
        shrink_repo(target)
    if commit:
        git_commit_all(target, "the copy under test")
    return target


def git_commit_all(root: Path, message: str) -> str:
    """Commit every file of `root` (a copy's throwaway identity); the new commit's sha."""
    identity = ["-c", "user.name=paperline tests", "-c", "user.email=tests@paperline.invalid"]
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(
        ["git", *identity, "commit", "-q", "--no-verify", "-m", message], cwd=root, check=True
    )
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    return head.stdout.strip()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that need no `dvc repro` copy first, then those of the standalone areas, then
    the rest: under xdist (`make test`: -n 2, see pytest_xdist_make_scheduler) one worker runs
    them in that order while the other builds the whole DAG, standalone areas first
    (`reproduced`), so their tests find their stages built when that worker reaches them."""
    standalone = set(standalone_areas(REPO))

    def order(item: pytest.Item) -> int:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "reproduced_copies" not in fixtures:
            return 0
        areas = {
            name.removesuffix("_reproduced") for name in fixtures if name.endswith("_reproduced")
        }
        return 1 if areas and areas <= standalone and "reproduced" not in fixtures else 2

    items.sort(key=order)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's scope scheduling with the two whole-pipeline tests as one unit, the largest, so
    one worker takes them first and builds the whole-DAG copy while the other runs the tests
    that need no copy; every other test, e2e included, is a unit of its own, handed out in
    collection order to whichever worker is free, so both workers share the tests that read
    the copies once they exist. (xdist's own `xdist_group` marker names groups through a
    node attribute pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class WholeDagFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return WHOLE_DAG_FIRST if nodeid.startswith(WHOLE_DAG_FIRST) else nodeid

    return WholeDagFirst(config, log)


WHOLE_DAG_FIRST = "tests/e2e/test_pipeline_repro.py"


@pytest.fixture(autouse=True)
def restore_mlflow_uri():
    """`mlflow.set_tracking_uri` also exports MLFLOW_TRACKING_URI, which would send the
    stages a later test starts as subprocesses to this test's store."""
    before = os.environ.get("MLFLOW_TRACKING_URI")
    yield
    if before is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = before


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    return copy_repo(tmp_path / "repo")


@pytest.fixture
def two_trial_copy(repo_copy: Path) -> Path:
    """The small copy with a two-trial deltastack study (one task, both models): for tests of
    how a stage is run (flows, the console), not of what the study finds."""
    edit_params(repo_copy, {"deltastack": {"tasks": ["parity"]}})
    return repo_copy


class SessionRay:
    """One local Ray for the session's `dvc repro` / `dvc exp run` runs: their Ray stages
    join it through RAY_ADDRESS, as under `paperline repro`, instead of each starting its
    own. Started on first use, stopped (by pid) when the session ends."""

    def __init__(self) -> None:
        self.local = None

    def env(self) -> dict[str, str]:
        from tasks.core.params import RayParams
        from tasks.core.ray_cluster import LocalRay

        if self.local is None:
            folder = Path(tempfile.mkdtemp(prefix="pl-tests-ray-"))
            self.local = LocalRay(folder, RayParams(num_cpus=2), export=False)
        self.local.start()
        return self.local.env

    def stop(self) -> None:
        if self.local is not None:
            self.local.stop()
            shutil.rmtree(self.local.root, ignore_errors=True)


SESSION_RAY = SessionRay()


@pytest.fixture(scope="session", autouse=True)
def stop_session_ray():
    yield
    SESSION_RAY.stop()


# DVC's own CLI with dvc.lock updated as paperline repro updates it (tasks/core/dvc_lockfile:
# the same bytes, ~2.5 s less per stage): what builds the session's shared copies
FAST_LOCK_DVC = (
    "import sys\n"
    "from dvc.cli import main\n"
    "from tasks.core.dvc_lockfile import fast_lock_updates\n"
    "with fast_lock_updates():\n"
    "    sys.exit(main(sys.argv[1:]))\n"
)


def dvc(
    *args: str, cwd: Path, fast_lock: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`dvc ARGS` in `cwd`; `env` replaces the environment (Ray's session address is added
    for commands that run stages)."""
    runs_stages = args[:1] == ("repro",) or args[:2] == ("exp", "run")
    base = env if env is not None else os.environ
    command = [sys.executable, "-c", FAST_LOCK_DVC] if fast_lock else [str(BIN / "dvc")]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1800,  # a hang guard: CI's slower cores build the whole DAG in ~2 calls of this
        env={**base, **SESSION_RAY.env()} if runs_stages else env,
    )


@pytest.fixture(scope="session")
def reproduced_copies(tmp_path_factory) -> ReproducedCopies:
    """Small `dvc repro` copies for the session: `reproduced_copies.reproduce("mlm")` is a copy
    with mlm's stages and their upstream reproduced (tests/reproduced.py). Tests share them and
    only read them: copy one (`copy_built`) before changing anything."""
    session = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker's folder: its parent is the session's
        session = session.parent
    return ReproducedCopies(
        REPO,
        tmp_path_factory.mktemp,
        lambda root: copy_repo(root, commit=True),
        functools.partial(dvc, fast_lock=True),
        registry=session / "reproduced.json",
    )


@pytest.fixture(scope="session")
def reproduced(reproduced_copies) -> Reproduced:
    """The whole DAG reproduced (every area, models included) and the runs' output: for the
    tests that need every stage; a test of one area asks `reproduced_copies` for its area.
    Built in two steps: the standalone areas first, in a copy the whole DAG then grows from,
    which the other worker's tests of those areas read while the rest is built."""
    reproduced_copies.reproduce(*reproduced_copies.standalone_areas())
    return reproduced_copies.reproduce(*reproduced_copies.areas())


def area_fixture(area: str):
    """A session fixture `<area>_reproduced`: the area's stages and their upstream reproduced."""

    @pytest.fixture(scope="session", name=f"{area}_reproduced")
    def area_reproduced(reproduced_copies) -> Reproduced:
        return reproduced_copies.reproduce(area)

    return area_reproduced


corpus_reproduced = area_fixture("corpus")
mlm_reproduced = area_fixture("mlm")
kg_reproduced = area_fixture("kg")
scam_reproduced = area_fixture("scam")
deltastack_reproduced = area_fixture("deltastack")
aoeb_reproduced = area_fixture("aoeb")
cmipref_reproduced = area_fixture("cmipref")
tabular_reproduced = area_fixture("tabular")
kvcache_reproduced = area_fixture("kvcache")
llm_reproduced = area_fixture("llm")


def run_cli(
    *args: str, cwd: Path, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess:
    """`paperline *args` in `cwd`; `env` adds variables to this process's (None: unset)."""
    return subprocess.run(
        [str(BIN / "paperline"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None},
        timeout=900,
    )


def run_demo_stage(root: Path, monkeypatch, body, metrics: dict) -> None:
    """Run a one-output stage `demo.train` against `root` (params.yaml copied in): `body(ctx)`,
    then `metrics` committed as m.json; unwritable metrics (e.g. `{"bad": object()}`) make
    the commit fail."""
    from tasks.core import stage_runner
    from tasks.core.stage import Stage
    from tasks.core.stage_runner import run_stage

    if not (root / "params.yaml").exists():
        (root / "params.yaml").write_bytes((REPO / "params.yaml").read_bytes())

    def run(params, inputs, ctx):
        body(ctx)
        return {"metrics": metrics}

    demo = Stage(
        name="demo.train", run=run, params_key="runtime", inputs={}, outputs={"metrics": "m.json"}
    )
    monkeypatch.setattr(stage_runner, "find_stage", lambda name: demo)
    run_stage("demo.train", root=root)


def word_level_tokenizer(words: str, folder: Path, pair: bool = False) -> Any:
    """A word-level [CLS] … [SEP] tokenizer over `words`, saved in `folder` as transformers'
    PreTrainedTokenizerFast (for tiny models built from a config)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    from tasks.core.tokenizer import fast_tokenizer

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator([words], trainers.WordLevelTrainer(special_tokens=special))
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]" if pair else None,
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    fast = fast_tokenizer(tokenizer)
    fast.save_pretrained(folder)
    return fast


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def ray_session():
    import ray

    from tasks.core.params import RayParams
    from tasks.core.ray_runtime import init_ray

    init_ray(RayParams(num_cpus=2))
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


class StandIn(http.server.BaseHTTPRequestHandler):
    """Base of the tests' local HTTP stand-ins: `reply` sends a body, no access log."""

    def reply(self, payload, content_type: str = "application/json") -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def reply_chat(self, model: str, content: str) -> None:
        """An OpenAI-compatible chat.completion answer."""
        self.reply(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
            }
        )

    def log_message(self, *args) -> None:
        pass
