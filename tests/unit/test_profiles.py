"""Named params profiles rewrite only the lines they change, and refuse what they cannot set."""

import shutil

import pytest
import yaml

from tasks.core.errors import UserError
from tasks.core.profiles import apply_profile, profile_names
from tests.conftest import REPO


@pytest.fixture
def root(tmp_path):
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    return tmp_path


def test_standard_changes_its_keys_and_nothing_else(root):
    before = (root / "params.yaml").read_text().splitlines()
    overlay = yaml.safe_load((root / "profiles/standard.yaml").read_text())
    changed = apply_profile(root, "standard")
    after = (root / "params.yaml").read_text().splitlines()

    assert "standard" in profile_names(root)
    assert changed and len(after) == len(before)
    differing = [i for i, (old, new) in enumerate(zip(before, after, strict=True)) if old != new]
    assert len(differing) == len(changed)
    for i in differing:  # the comment stays, in its column unless the value grew past it
        if "#" not in before[i]:
            assert "#" not in after[i]
            continue
        comment = before[i].index("#")
        assert after[i][after[i].index("#") :] == before[i][comment:]
        fits = len(after[i][: after[i].index("#")].rstrip()) < comment
        assert after[i].index("#") == comment if fits else after[i].index("#") > comment
    params = yaml.safe_load("\n".join(after))
    for path in changed:
        value, expected = params, overlay
        for key in path.split("."):
            value, expected = value[key], expected[key]
        assert value == expected
    assert apply_profile(root, "standard") == []  # applied already: nothing left to change


def test_flow_lists_keep_their_style(root):
    (root / "profiles/rates.yaml").write_text("scam: {poison: {rates: [0.0, 0.01, 0.2]}}\n")
    assert apply_profile(root, "rates") == ["scam.poison.rates"]
    text = (root / "params.yaml").read_text()
    assert "    rates: [0.0, 0.01, 0.2]         # share of training sequences" in text


@pytest.mark.parametrize(
    ("overlay", "message"),
    [
        ("kg: {detector: {epoch: 3}}", "profiles/bad.yaml: kg.detector.epoch is not a key"),
        ("kg: {detector: {epochs: many}}", "params.yaml with profile bad: kg.detector.epochs"),
        ("aoeb: {evaluate: {encoders: []}}", "aoeb.evaluate.encoders spans several lines"),
    ],
)
def test_bad_profiles_are_refused_and_params_kept(root, overlay, message):
    (root / "profiles/bad.yaml").write_text(overlay + "\n")
    before = (root / "params.yaml").read_text()
    with pytest.raises(UserError, match=message):
        apply_profile(root, "bad")
    assert (root / "params.yaml").read_text() == before


def test_unknown_profile_lists_the_known_ones(root):
    with pytest.raises(UserError, match=r"profile 'paper'.*profiles here: standard"):
        apply_profile(root, "paper")
