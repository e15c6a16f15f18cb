"""dvc.lock updates through the C loader write what DVC's round-trip path writes."""

import shutil

import dvc.dvcfile

from tasks.core.dvc_lockfile import fast_lock_updates
from tests.conftest import REPO


def test_the_committed_lock_comes_back_byte_identical_and_dvc_yaml_keeps_its_comments(tmp_path):
    lock, spec = tmp_path / "dvc.lock", tmp_path / "dvc.yaml"
    shutil.copy(REPO / "dvc.lock", lock)
    spec.write_text("# a comment DVC keeps\nstages:\n  a:\n    cmd: echo a  # and this\n")
    original = dvc.dvcfile.modify_yaml
    with fast_lock_updates():
        assert dvc.dvcfile.modify_yaml is not original
        with dvc.dvcfile.modify_yaml(lock) as data:
            assert "corpus-ingest" in data["stages"] and type(data["stages"]) is dict
        with dvc.dvcfile.modify_yaml(spec) as data:  # DVC's round-trip path
            data["stages"]["b"] = {"cmd": "echo b"}
    assert dvc.dvcfile.modify_yaml is original
    assert lock.read_bytes() == (REPO / "dvc.lock").read_bytes()
    text = spec.read_text()
    assert "# a comment DVC keeps" in text and "# and this" in text and "echo b" in text


def test_an_update_lands_where_dvc_puts_it(tmp_path):
    lock = tmp_path / "dvc.lock"
    with fast_lock_updates(), dvc.dvcfile.modify_yaml(lock) as data:  # no lock yet: DVC starts one
        data.update({"schema": "2.0", "stages": {"s": {"cmd": "x", "params": {"a": None}}}})
    assert lock.read_text() == "schema: '2.0'\nstages:\n  s:\n    cmd: x\n    params:\n      a:\n"
