"""End-to-end fixtures: writable copies of the session's small `dvc repro` copies."""

import pytest

from tests.conftest import edit_params, free_port
from tests.reproduced import copy_built


def writable(reproduced, target):
    """A copy of `reproduced` with its own Prefect and MLflow ports, every stage fresh."""
    root = copy_built(reproduced.root, target)
    ports = {service: {"port": free_port()} for service in ("prefect", "mlflow")}
    edit_params(root, {"runtime": {"services": ports}})
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
