"""A fault on the whole product: a corrupt input fails its stage with one clear line, and
one `dvc checkout` restores every output. (Faults one area's copy is enough for:
tests/integration/test_stage_faults.py.)"""

import subprocess

import pytest

from tests.conftest import BIN, dvc, git_commit_all
from tests.integration.test_stage_faults import CORPUS, error_line, snapshot

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_corrupt_parquet_names_the_file_and_dvc_checkout_restores_everything(product):
    git_commit_all(product, "the reproduced pipeline")  # its cache-less metrics are in git
    before = snapshot(product, CORPUS)
    lock = (product / "dvc.lock").read_text()
    (product / CORPUS / "filtered.parquet").write_bytes(b"PAR1 this is not parquet")

    stage = subprocess.run(
        [str(BIN / "paperline"), "stage", "corpus.dedup"],
        cwd=product,
        capture_output=True,
        text=True,
    )
    assert stage.returncode == 2
    line = error_line(stage.stderr)
    assert f"{CORPUS}/filtered.parquet: not a readable Parquet file" in line
    after = snapshot(product, CORPUS)
    assert {name: after[name] for name in before if name != "filtered.parquet"} == {
        name: data for name, data in before.items() if name != "filtered.parquet"
    }  # the stage's own outputs were not touched, and no temp file was left

    repro = dvc("repro", "--single-item", "corpus-dedup", cwd=product)
    assert repro.returncode != 0
    assert f"{CORPUS}/filtered.parquet: " in repro.stderr and "Traceback" not in repro.stderr
    # DVC removes a stage's outputs before running it: dvc.lock still names them, the cache
    # holds them and git the cache-less metrics, so one checkout each brings them all back
    assert (product / "dvc.lock").read_text() == lock
    assert dvc("checkout", "--force", cwd=product).returncode == 0
    subprocess.run(["git", "checkout", "--", CORPUS], cwd=product, check=True)
    assert snapshot(product, CORPUS) == before
    assert dvc("status", cwd=product).stdout.strip() == "Data and pipelines are up to date."
