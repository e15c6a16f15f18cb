"""End-to-end fixtures: a writable copy of the shared small `dvc repro`, every stage fresh."""

import shutil

import pytest
import yaml

from tests.conftest import free_port


def copy_reproduced(reproduced, target):
    """The reproduced repo without its local service state (ports and pids stay with it)."""
    ignore = shutil.ignore_patterns(".paperline")
    shutil.copytree(reproduced[0], target, symlinks=True, ignore=ignore)
    return target


@pytest.fixture
def product(reproduced, tmp_path):
    root = copy_reproduced(reproduced, tmp_path / "repo")
    params = yaml.safe_load((root / "params.yaml").read_text())
    for service in ("prefect", "mlflow"):
        params["runtime"]["services"][service]["port"] = free_port()
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root
