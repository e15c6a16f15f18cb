import pytest

from tasks.core.errors import ParamsError
from tasks.core.params import load_params, parse_params
from tests.conftest import REPO


def test_repository_params_are_valid():
    params = load_params(REPO / "params.yaml")
    assert params.corpus.ingest.source == "udhr"
    assert params.runtime.services.mlflow.host == "127.0.0.1"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"corpus": {"ingest": {"min_chars": "ten"}}},
            'params.yaml: corpus.ingest.min_chars: expected an integer ≥ 0, got "ten"',
        ),
        (
            {"corpus": {"ingest": {"min_chars": -3}}},
            "params.yaml: corpus.ingest.min_chars: expected an integer ≥ 0, got -3",
        ),
        (
            {"corpus": {"ingset": {}}},
            "params.yaml: corpus.ingset: unknown key; did you mean 'ingest'?",
        ),
        (
            {"corpus": {"ingest": {"source": "ftp"}}},
            'params.yaml: corpus.ingest.source: expected one of "udhr", "huggingface", got "ftp"',
        ),
        (
            {"corpus": {}, "runtime": {"ray": {"num_cpus": "many"}}},
            'params.yaml: runtime.ray.num_cpus: expected an integer ≥ 1 or null, got "many"',
        ),
        ({}, "params.yaml: corpus: required key is missing"),
    ],
)
def test_errors_name_the_key_path(raw, message):
    with pytest.raises(ParamsError) as caught:
        parse_params(raw)
    assert str(caught.value) == message


def test_unknown_key_without_close_match_lists_allowed_keys():
    with pytest.raises(ParamsError, match=r"corpus.ingest.zzz: unknown key; allowed keys: "):
        parse_params({"corpus": {"ingest": {"zzz": 1}}})


def test_invalid_yaml_names_line(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("corpus:\n  ingest: [unclosed\n")
    with pytest.raises(ParamsError, match=r"^params.yaml: line \d+, column \d+: invalid YAML"):
        load_params(path)


def test_params_are_frozen():
    params = parse_params({"corpus": {}})
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises its own ValidationError
        params.corpus.ingest.min_chars = 5
