"""kg.translate: with no model configured every row says `translated: false` and holds no
text (never a copy of the English); `paperline kg translate --backend transformers --model`
runs a tiny random M2M100 (NLLB architecture and language codes) end to end, built from a
config here: shape and plumbing, not translation quality."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.core.errors import UserError
from tasks.kg.params import TranslateParams
from tasks.kg.translate import FIELDS, translate_table
from tests.conftest import REPO, run_cli

LANGUAGES = ["en", "de", "es"]


def multihal_rows(count: int = 3) -> list[dict]:
    return [
        {
            "id": f"qa{n}-000",
            "qa_id": f"qa{n}",
            "input": f"What is the capital of Q{n}?",
            "output": f"Q{n + 10}",
            "trip_labels": {
                "en": f"Q{n} capital Q{n + 10}",
                "de": f"Q{n} Hauptstadt Q{n + 10}",
                "es": f"Q{n} capital Q{n + 10}",
            },
        }
        for n in range(count)
    ]


def test_without_a_model_nothing_is_translated_and_the_rows_say_so():
    table, metrics = translate_table(multihal_rows(), TranslateParams(), LANGUAGES)
    rows = table.to_pylist()
    assert len(rows) == 3 * 2 and {r["language"] for r in rows} == {"de", "es"}
    assert all(r["translated"] is False and r["translated_by"] is None for r in rows)
    assert all(r[field] is None for r in rows for field in FIELDS)  # no English copy
    assert metrics["translated"] is False and "no translation model configured" in metrics["note"]
    assert metrics["targets"] == {"de": "deu_Latn", "es": "spa_Latn"}


def test_a_language_without_a_code_is_a_user_error():
    with pytest.raises(UserError, match="no NLLB-200 code for xx"):
        translate_table(multihal_rows(), TranslateParams(), ["en", "xx"])


def tiny_nllb(folder):
    """A random M2M100 with an NLLB tokenizer (its 200-odd language codes as tokens)."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer

    words = ["What", "is", "the", "capital", "of", "Q0", "Q1", "Q2", "Q10", "Q11", "Q12", "?", "▁"]
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece in [*words, *(f"▁{w}" for w in words), *"abcdefghijklmnopqrstuvwxyzQ0123456789?"]:
        vocab.setdefault(piece, len(vocab))
    tokenizer = NllbTokenizer(vocab=vocab, merges=[], src_lang="eng_Latn")
    tokenizer.save_pretrained(folder)
    config = M2M100Config(
        vocab_size=len(tokenizer),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.eos_token_id,
    )
    M2M100ForConditionalGeneration(config).save_pretrained(folder)
    return folder


def test_cli_translates_through_a_tiny_random_nllb_checkpoint(tmp_path):
    model = tiny_nllb(tmp_path / "nllb")
    source = tmp_path / "multihal.parquet"
    pq.write_table(pa.Table.from_pylist(multihal_rows()), source)
    output = tmp_path / "translations.parquet"
    result = run_cli(
        "kg",
        "translate",
        "--backend",
        "transformers",
        "--model",
        str(model),
        "--input",
        str(source),
        "--output",
        str(output),
        "--languages",
        ",".join(LANGUAGES),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    assert metrics["translated"] is True and metrics["translated_by"] == "transformers:nllb"
    rows = pq.read_table(output).to_pylist()
    assert len(rows) == 6 and {r["target_code"] for r in rows} == {"deu_Latn", "spa_Latn"}
    assert all(r["translated"] and all(isinstance(r[f], str) for f in FIELDS) for r in rows)


def test_a_folder_that_is_not_a_checkpoint_is_named(tmp_path):
    from tasks.kg.translators import make_translator

    settings = TranslateParams(model=str(tmp_path / "missing"))
    with pytest.raises(UserError, match="is not a transformers checkpoint folder"):
        make_translator(settings)
