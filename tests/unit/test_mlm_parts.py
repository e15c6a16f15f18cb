"""mlm building blocks: masking, the LR schedule, phase plans, resumable scratch, eval tiers."""

import json

import pytest
import torch

from tasks.core.errors import InputError
from tasks.core.scratch import FINISHED_FILE, fingerprint, prepare_scratch
from tasks.mlm import trainer
from tasks.mlm.evaluate import language_tiers, tier_losses, tier_table
from tasks.mlm.masking import Masker
from tasks.mlm.model import PRESETS, build_config, load_tokenizer
from tasks.mlm.params import MlmParams
from tasks.mlm.train_loop import phase_schedule

PHASES = {
    "pretrain": {"learning_rate": 1e-3, "warmup_steps": 4},
    "mid": {"learning_rate": 5e-4},
    "decay": {"learning_rate": 5e-4, "schedule": "one_minus_sqrt", "epochs": 2},
}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from tasks.core.io import commit_outputs
    from tasks.core.tokenizer import fast_tokenizer_files, train_tokenizer

    texts = ["All human beings are born free and equal in dignity and rights."] * 50
    folder = tmp_path_factory.mktemp("tok") / "tokenizer"
    commit_outputs({folder: fast_tokenizer_files(train_tokenizer(texts, vocab_size=200))})
    return load_tokenizer(folder)


def random_ids(tok, shape):
    """Token ids drawn from the non-special vocabulary, [CLS] first, [PAD] at the end."""
    ids = torch.randint(len(tok.all_special_ids), len(tok), shape)
    assert not torch.isin(ids, torch.tensor(tok.all_special_ids)).any()
    ids[:, 0], ids[:, -8:] = tok.cls_token_id, tok.pad_token_id
    return ids


def test_masking_follows_the_ratio_and_80_10_10(tok):
    masker = Masker(tok, mask_ratio=0.3, seed=0)
    ids = random_ids(tok, (64, 256))
    batch = masker(ids, step=3)
    chosen = batch["labels"] != -100
    real = ~torch.isin(ids, torch.tensor(tok.all_special_ids))
    assert not chosen[~real].any()  # specials and padding are never masked
    assert abs(chosen.sum() / real.sum() - 0.3) < 0.01
    assert (batch["labels"][chosen] == ids[chosen]).all()
    as_mask = (batch["input_ids"] == tok.mask_token_id) & chosen
    kept = (batch["input_ids"] == ids) & chosen
    assert abs(as_mask.sum() / chosen.sum() - 0.8) < 0.02
    assert abs(kept.sum() / chosen.sum() - 0.1) < 0.02  # random ids may hit the original
    assert (batch["attention_mask"] == (ids != tok.pad_token_id)).all()


def test_masking_is_a_function_of_seed_rank_and_step(tok):
    masker = Masker(tok, mask_ratio=0.15, seed=7)
    ids = random_ids(tok, (8, 64))
    first = masker(ids, step=10)["input_ids"]
    assert torch.equal(first, Masker(tok, 0.15, 7)(ids, step=10)["input_ids"])
    assert not torch.equal(first, masker(ids, step=11)["input_ids"])
    assert not torch.equal(first, masker(ids, step=10, rank=1)["input_ids"])


def lrs(schedule, steps):
    values = []
    for _ in range(steps):
        values.append(schedule.get_last_lr()[0])
        schedule.optimizer.step()
        schedule.step()
    return values


def optimizer(lr):
    return torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def test_warmup_then_stable_and_one_minus_sqrt_decay():
    stable = {"schedule": "stable", "warmup_steps": 4, "min_lr_ratio": 0.0}
    values = lrs(phase_schedule(optimizer(1.0), 10, stable), 10)
    assert values[:5] == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    assert values[5:] == [1.0] * 5
    decay = {"schedule": "one_minus_sqrt", "warmup_steps": 0, "min_lr_ratio": 0.0}
    values = lrs(phase_schedule(optimizer(2.0), 16, decay), 16)
    assert values[0] == 2.0
    assert values[4] == pytest.approx(2.0 * (1 - 0.5))  # 1 − sqrt(4/16)
    assert values == sorted(values, reverse=True)


def test_presets_are_mmberts_shapes():
    small, base = PRESETS["small"], PRESETS["base"]
    shape = (
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "intermediate_size",
        "local_attention",
    )
    assert [small[key] for key in shape] == [22, 384, 6, 1152, 128]
    assert (base["hidden_size"], base["num_attention_heads"]) == (768, 12)


def test_config_alternates_global_attention_every_third_layer(tok):
    config = build_config("small", tok)
    assert config.layer_types[:4] == [
        "full_attention",
        "sliding_attention",
        "sliding_attention",
        "full_attention",
    ]
    assert config.vocab_size == len(tok) and config.pad_token_id == tok.pad_token_id


def manifest(folder, sequences, mask_ratio=0.3):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(
        json.dumps({"sequences": sequences, "mask_ratio": mask_ratio})
    )
    return folder


def test_phase_plan_counts_steps_and_names_an_impossible_batch(tmp_path):
    params = MlmParams.model_validate({"phases": PHASES, "training": {"batch_size": 10}})
    plan = trainer.plan_phase("decay", params, manifest(tmp_path / "decay", 95))
    assert (plan.steps_per_epoch, plan.total_steps, plan.mask_ratio) == (9, 18, 0.3)
    with pytest.raises(InputError, match=r"decay: 5 sequences .* lower mlm.training.batch_size"):
        trainer.plan_phase("decay", params, manifest(tmp_path / "decay", 5))


def test_phases_section_must_name_all_three():
    from tasks.core.errors import ParamsError
    from tasks.core.params import parse_params

    with pytest.raises(ParamsError, match=r"mlm: phases: add a section for decay"):
        parse_params({"corpus": {}, "mlm": {"phases": {k: PHASES[k] for k in ("pretrain", "mid")}}})


def test_scratch_resumes_only_an_unfinished_run_with_the_same_fingerprint(tmp_path):
    folder = tmp_path / "pretrain"
    assert prepare_scratch(folder, "a") is False
    (folder / "step-0000005").mkdir()
    assert prepare_scratch(folder, "a") is True
    assert (folder / "step-0000005").exists()
    assert prepare_scratch(folder, "b") is False  # inputs or params changed
    assert not (folder / "step-0000005").exists()
    (folder / FINISHED_FILE).write_text("1")
    assert prepare_scratch(folder, "b") is False  # a finished run is not resumed


def test_fingerprint_follows_config_and_input_bytes(tmp_path):
    data = tmp_path / "shards"
    data.mkdir()
    (data / "a.parquet").write_bytes(b"1")
    base = fingerprint({"lr": 1, "run_id": "x"}, [data])
    assert base == fingerprint({"lr": 1, "run_id": "y"}, [data])
    assert base != fingerprint({"lr": 2, "run_id": "x"}, [data])
    (data / "a.parquet").write_bytes(b"2")
    assert base != fingerprint({"lr": 1, "run_id": "x"}, [data])


def test_tiers_are_the_phase_a_language_first_appears_in():
    manifests = {
        "pretrain": {"languages": ["eng", "fra"]},
        "mid": {"languages": ["eng", "fra", "deu"]},
        "decay": {"languages": ["eng", "fra", "deu", "zul", "xho"]},
    }
    tiers = language_tiers(manifests)
    assert tiers == {
        "eng": "pretrain",
        "fra": "pretrain",
        "deu": "mid",
        "zul": "decay",
        "xho": "decay",
    }
    losses = {"eng": {"loss": 2.0}, "fra": {"loss": 4.0}, "zul": {"loss": 6.0}}
    by_tier = tier_losses(losses, tiers)
    assert by_tier == {
        "pretrain": {"loss": 3.0, "languages": 2},
        "decay": {"loss": 6.0, "languages": 1},
    }
    table = tier_table({"pretrain": by_tier, "mid": by_tier, "decay": by_tier})
    assert "| decay (1 languages) | 6.000 | 6.000 | 6.000 |" in table
    assert "| mid" not in table


def test_decay_claims_pair_the_arms_over_languages_and_can_fail():
    import numpy as np

    from tasks.mlm.evaluate import NO_HARM_MARGIN, decay_claims

    rng = np.random.default_rng(0)
    late = [f"l{i}" for i in range(30)]
    early = [f"e{i}" for i in range(10)]
    tiers = {**dict.fromkeys(late, "decay"), **dict.fromkeys(early, "pretrain")}
    cont = {lang: 7 + rng.normal(0, 0.3) for lang in late + early}

    def losses(shift_late, shift_early):
        noise = {lang: rng.normal(0, 0.02) for lang in cont}
        return {
            "decay": {
                lang: {"loss": cont[lang] + noise[lang] + (shift_late if lang in late else 0)}
                for lang in late
            }
            | {lang: {"loss": cont[lang] + noise[lang] + shift_early} for lang in early},
            "decay_cont": {lang: {"loss": value} for lang, value in cont.items()},
        }

    helps, keeps = decay_claims(losses(-0.2, 0.0), tiers, [0, 1, 2])
    assert helps.verdict == "supported" and helps.n == 30 and helps.ci_high < 0
    assert helps.primary and helps.kind == "claim" and helps.seeds == [0, 1, 2]
    assert keeps.verdict == "supported" and keeps.null == NO_HARM_MARGIN and keeps.n == 10
    hurts, harms = decay_claims(losses(0.2, 0.3), tiers, [0, 1, 2])
    assert hurts.verdict == "contradicted" and harms.verdict == "contradicted"
    neither, _ = decay_claims(losses(0.0, 0.0), tiers, [0, 1, 2])
    assert neither.verdict == "inconclusive"
    one_run, _ = decay_claims(losses(-0.2, 0.0), tiers, [0])
    assert one_run.verdict == "inconclusive" and "1 seed(s)" in one_run.reason
