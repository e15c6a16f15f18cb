"""Tokenizer training and packing: the folder loads in transformers, shares follow p(l)."""

import pyarrow as pa
import pytest

from tasks.core.io import commit_outputs
from tasks.core.stage import StageContext
from tasks.core.tokenizer import SPECIAL_TOKENS, fast_tokenizer_files, train_tokenizer
from tasks.corpus.pack import pack_phase, pack_sequences, tokenize_documents
from tasks.corpus.params import PackParams

TEXTS = [
    "All human beings are born free and equal in dignity and rights.",
    "Tous les êtres humains naissent libres et égaux en dignité et en droits.",
    "Alle Menschen sind frei und gleich an Würde und Rechten geboren.",
    "人人生而自由，在尊严和权利上一律平等。",
] * 20


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXTS, vocab_size=300)


def test_tokenizer_folder_loads_as_transformers_fast_tokenizer(tokenizer, tmp_path):
    from transformers import AutoTokenizer

    commit_outputs({tmp_path / "tok": fast_tokenizer_files(tokenizer)})
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert loaded.all_special_tokens and set(SPECIAL_TOKENS) <= set(loaded.all_special_tokens)
    ids = loaded("All human beings")["input_ids"]
    assert ids[0] == loaded.cls_token_id and ids[-1] == loaded.sep_token_id
    assert loaded.decode(ids, skip_special_tokens=True) == "All human beings"


def test_pack_sequences_cuts_fixed_lengths_with_separators():
    packed = list(pack_sequences(iter([[5, 6, 7], [8, 9]]), length=4, cls=1, sep=2, pad=0))
    assert packed == [([1, 5, 6, 7], 4), ([1, 2, 8, 9], 4), ([1, 2, 0, 0], 2)]


def test_pack_phase_follows_the_schedule(tokenizer, ray_session):
    langs = ["eng", "fra", "deu", "cmn"] * 20
    special = {t: tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]")}
    params = PackParams(shard_sequences=5, batch_size=16)
    ids = tokenize_documents(pa.array(TEXTS), tokenizer.to_str(), params)
    assert (
        len(ids) == len(TEXTS)
        and ids[0] == tokenizer.encode(TEXTS[0], add_special_tokens=False).ids
    )
    probabilities = {"eng": 0.5, "fra": 0.3, "cmn": 0.2}
    phase = {
        "name": "p",
        "probabilities": probabilities,
        "token_budget": 3000,
        "sequence_length": 32,
        "mask_ratio": 0.3,
        "temperature": 0.5,
    }
    folder = pack_phase(phase, ids, langs, special, params)
    manifest = folder["manifest.json"]
    assert manifest["tokens"] == 3000 and manifest["languages"] == ["cmn", "eng", "fra"]
    for lang, share in manifest["token_share_per_language"].items():
        assert abs(share - probabilities[lang]) <= 1 / 3000
    shards = [v for k, v in folder.items() if k.endswith(".parquet")]
    assert (
        sum(s.num_rows for s in shards)
        == manifest["sequences"]
        == sum(s["sequences"] for s in manifest["shards"])
    )
    rows = pa.concat_tables(shards).column("input_ids").to_pylist()
    assert all(len(r) == 32 and r[0] == special["[CLS]"] for r in rows)
    real = sum(pa.concat_tables(shards).column("length").to_pylist())
    assert real == manifest["tokens"] + manifest["sequences"]  # + one [CLS] per sequence
    assert manifest["epochs_per_language"]["eng"] > 1  # eng reused: budget > its tokens


def test_a_phase_with_its_own_source_is_packed_from_it(tokenizer, ray_session, tmp_path):
    import pyarrow.parquet as pq

    from tasks.core.io import write_file
    from tasks.corpus import pack

    corpus = pa.table({"text": TEXTS[:4], "lang": ["eng", "fra", "deu", "cmn"]})
    write_file(tmp_path / "dedup.parquet", corpus)
    commit_outputs({tmp_path / "tok": fast_tokenizer_files(tokenizer)})
    pq.write_table(
        pa.table(
            {
                "text": ["Sawubona mhlaba " * 10, "Ngiyabonga kakhulu " * 10],
                "language": ["zul", "zul"],
                "language_script": ["Latn", "Latn"],
            }
        ),
        tmp_path / "zul.parquet",
    )
    source = {"path": "parquet", "configs": [None], "data_files": str(tmp_path / "zul.parquet")}
    phase = {
        "name": "decay",
        "probabilities": {"zul": 1.0},
        "token_budget": 200,
        "sequence_length": 16,
        "mask_ratio": 0.05,
        "temperature": 0.3,
    }
    write_file(
        tmp_path / "schedule.json",
        {
            "phases": [
                {**phase, "name": "pretrain", "probabilities": {"eng": 1.0}, "source": None},
                {**phase, "source": source},
            ]
        },
    )
    inputs = {
        "docs": tmp_path / "dedup.parquet",
        "schedule": tmp_path / "schedule.json",
        "tokenizer": tmp_path / "tok",
    }
    out = pack.run(PackParams(), inputs, StageContext.at(tmp_path))
    assert out["shards"]["decay/manifest.json"]["languages"] == ["zul"]
    assert out["shards"]["pretrain/manifest.json"]["languages"] == ["eng"]
    assert out["metrics"]["decay"]["tokens"] == 200


def test_hold_out_cuts_the_tail_of_each_languages_last_document():
    from tasks.corpus.pack import hold_out
    from tasks.corpus.params import PackParams

    special = {"[CLS]": 1, "[SEP]": 2, "[PAD]": 0, "[MASK]": 3}
    ids = [list(range(10, 110)), list(range(200, 300)), list(range(400, 420))]
    params = PackParams(
        heldout_tokens_per_language=8, heldout_max_fraction=0.1, heldout_min_tokens=4
    )
    train, heldout = hold_out(ids, ["eng", "eng", "fra"], special, params)
    assert train[0] == ids[0]  # only the last eng document gives its tail
    assert train[1] == list(range(200, 292))
    assert train[2] == ids[2]  # 10% of 20 tokens = 2 < heldout_min_tokens
    assert heldout.column("lang").to_pylist() == ["eng"]
    assert heldout.column("input_ids").to_pylist() == [[1, *range(292, 300), 2]]
