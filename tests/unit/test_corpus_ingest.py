import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.core.errors import InputError
from tasks.core.params import parse_params
from tasks.core.stage import StageContext
from tasks.corpus import ingest
from tasks.corpus.documents import DOC_SCHEMA
from tests.conftest import REPO

UDHR = REPO / "data" / "seed" / "udhr"


@pytest.fixture
def tiny_udhr(tmp_path):
    folder = tmp_path / "udhr"
    folder.mkdir()
    for name in ("index.xml", "udhr_arb.xml", "udhr_zul.xml"):
        shutil.copy(UDHR / name, folder / name)
    return folder


def _ingest_params(**overrides):
    return parse_params({"corpus": {"ingest": overrides}}).corpus.ingest


def test_udhr_one_document_per_article_and_preamble(tiny_udhr):
    out = ingest.run(_ingest_params(), {"udhr": tiny_udhr}, StageContext.at(tiny_udhr))
    table = out["docs"]
    assert table.schema.equals(DOC_SCHEMA)
    ids = table.column("id").to_pylist()
    assert ids.count("udhr/arb/preamble") == 1
    assert {f"udhr/zul/article-{n}" for n in range(1, 31)} <= set(ids)
    arabic = table.filter(pa.compute.equal(table.column("lang"), "arb")).to_pylist()
    assert {row["script"] for row in arabic} == {"Arab"}
    assert {row["bcp47"] for row in arabic} == {"ar"}
    assert all(row["n_chars"] == len(row["text"]) > 0 for row in arabic)
    assert out["metrics"]["languages"] == 2
    assert out["metrics"]["documents"] == table.num_rows == len(set(ids))
    assert set(out["metrics"]["characters_per_script"]) == {"Arab", "Latn"}


def test_min_chars_drops_short_documents(tiny_udhr):
    everything = ingest.run(_ingest_params(), {"udhr": tiny_udhr}, StageContext.at(tiny_udhr))[
        "docs"
    ]
    long_only = ingest.run(
        _ingest_params(min_chars=300), {"udhr": tiny_udhr}, StageContext.at(tiny_udhr)
    )["docs"]
    assert 0 < long_only.num_rows < everything.num_rows
    assert min(long_only.column("n_chars").to_pylist()) >= 300


def test_broken_translation_file_is_named(tiny_udhr):
    (tiny_udhr / "udhr_zul.xml").write_text("<udhr><article>")
    with pytest.raises(InputError, match=r"udhr_zul.xml: invalid XML"):
        ingest.run(_ingest_params(), {"udhr": tiny_udhr}, StageContext.at(tiny_udhr))


def _from_local_parquet(folder, columns, **huggingface):
    """Ingest params streaming a Parquet file through `datasets` (the hub is never asked)."""
    pq.write_table(pa.table(columns), folder / "part-0.parquet")
    source = {"path": "parquet", "configs": [None], "data_files": str(folder / "part-0.parquet")}
    return _ingest_params(source="huggingface", huggingface={**source, **huggingface})


def test_huggingface_adapter_streams_local_parquet_through_datasets(tmp_path):
    rows = {
        "text": ["Bonjour le monde", "Salut", "Dritte Zeile", "beyond the limit"],
        "id": ["a", "b", "c", "d"],
        "language": ["fra", "fra", None, "eng"],
        "language_script": ["Latn", "Latn", None, "Latn"],
    }
    params = _from_local_parquet(tmp_path, rows, max_docs_per_config=3)
    out = ingest.run(params, {"udhr": tmp_path}, StageContext.at(tmp_path))
    docs = out["docs"].to_pylist()
    assert [d["text"] for d in docs] == rows["text"][:3]
    assert docs[0]["lang"] == "fra" and docs[0]["bcp47"] == "fra-Latn"
    assert docs[2]["lang"] == "und"  # missing field falls back to the config name
    assert docs[0]["id"] == "parquet/default/a"
    assert out["metrics"]["documents"] == 3


def test_huggingface_adapter_names_a_missing_text_field(tmp_path):
    params = _from_local_parquet(tmp_path, {"body": ["x"]})
    with pytest.raises(
        InputError, match=r"no field 'text'; set corpus.ingest.huggingface.text_field"
    ):
        ingest.run(params, {"udhr": tmp_path}, StageContext.at(tmp_path))
