"""End-to-end fixtures: writable copies of the session's small `dvc repro` copies."""

import pytest
import yaml

from tests.conftest import free_port
from tests.reproduced import copy_built


def writable(reproduced, target):
    """A copy of `reproduced` with its own Prefect and MLflow ports, every stage fresh."""
    root = copy_built(reproduced.root, target)
    params = yaml.safe_load((root / "params.yaml").read_text())
    for service in ("prefect", "mlflow"):
        params["runtime"]["services"][service]["port"] = free_port()
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root


@pytest.fixture
def product(reproduced, tmp_path):
    """The whole DAG: for the tests that run or check every stage."""
    return writable(reproduced, tmp_path / "repo")


@pytest.fixture
def corpus_product(corpus_reproduced, tmp_path):
    return writable(corpus_reproduced, tmp_path / "repo")


@pytest.fixture
def cmipref_product(cmipref_reproduced, tmp_path):
    return writable(cmipref_reproduced, tmp_path / "repo")
