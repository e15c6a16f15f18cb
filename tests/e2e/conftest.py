"""End-to-end fixtures: a writable copy of the session's whole-DAG `dvc repro` copy."""

import pytest

from tests.conftest import writable


@pytest.fixture
def product(reproduced, tmp_path):
    """The whole DAG: for the tests that run or check every stage."""
    return writable(reproduced, tmp_path / "repo")
