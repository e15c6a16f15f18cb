"""A stage reads only the params it declares (DVC tracks exactly those keys)."""

import pytest

from tasks.core.declared_params import UndeclaredParam, declared_view
from tasks.core.params import load_params
from tests.conftest import REPO

PARAMS = load_params(REPO / "params.yaml")


def test_declared_sections_and_keys_are_readable():
    view = declared_view(PARAMS.kg, "kg", ("kg.eval", "kg.slice.languages"), "kg.eval")
    assert view.eval is PARAMS.kg.eval
    assert view.eval.max_items == PARAMS.kg.eval.max_items
    assert view.slice.languages == PARAMS.kg.slice.languages


def test_an_undeclared_key_names_itself_and_the_fix():
    view = declared_view(PARAMS.kg, "kg", ("kg.eval", "kg.slice.languages"), "kg.eval")
    with pytest.raises(UndeclaredParam, match=r"kg.eval reads params 'kg.detector' but"):
        _ = view.detector
    with pytest.raises(UndeclaredParam, match=r"'kg.slice.include_valid'.*paperline dvc sync"):
        _ = view.slice.include_valid


def test_a_prefix_of_a_name_is_not_a_declaration():
    view = declared_view(PARAMS.kg, "kg", ("kg.examples",), "kg.examples")
    with pytest.raises(UndeclaredParam):
        _ = view.eval


def test_a_stage_declaring_its_whole_section_gets_the_model_itself():
    assert declared_view(PARAMS.kg, "kg", ("kg",), "kg.x") is PARAMS.kg
    assert declared_view(PARAMS.corpus.dedup, "corpus.dedup", ("corpus.dedup",), "x") is (
        PARAMS.corpus.dedup
    )


def test_the_view_is_read_only():
    view = declared_view(PARAMS.kg, "kg", ("kg.eval",), "kg.eval")
    with pytest.raises(AttributeError, match="read-only"):
        view.eval = None


def test_a_dict_section_shows_only_its_declared_entries():
    declared = ("mlm.training", "mlm.phases.mid")
    view = declared_view(PARAMS.mlm, "mlm", declared, "mlm.mid")
    assert view.phases["mid"] is PARAMS.mlm.phases["mid"]
    assert list(view.phases) == ["mid"]
    with pytest.raises(UndeclaredParam, match="'mlm.phases.pretrain'"):
        _ = view.phases["pretrain"]
