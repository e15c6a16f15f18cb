"""The tabular area's parts on small inputs: the split, preprocessing fitted on train only,
the embeddings and models (shapes, gradients), the uncertainty estimate against the
synthetic truth, the uncertainty bins and claims' statistics, and bad CSV rows."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from tasks.core import evidence
from tasks.core.errors import InputError
from tasks.tabular.features import SPLITS, split_indices
from tasks.tabular.params import SyntheticParams, TabularParams, UncertaintyParams, ZooParams
from tasks.tabular.schema import CATEGORICAL, NUMERIC, TARGET, read_housing_csv, typed_frame
from tests.conftest import REPO

SEED_CSV = REPO / "data/seed/tabular/california_housing.csv"


def housing(rows: int = 1200) -> pd.DataFrame:
    return read_housing_csv(SEED_CSV, require_target=True).iloc[:rows].reset_index(drop=True)


def test_the_split_is_fixed_disjoint_and_covers_every_row():
    first = split_indices(1000, 0.16, 0.2, seed=0)
    again = split_indices(1000, 0.16, 0.2, seed=0)
    other = split_indices(1000, 0.16, 0.2, seed=1)
    assert all(np.array_equal(first[s], again[s]) for s in SPLITS)
    assert not np.array_equal(first["test"], other["test"])
    sets = [set(first[s].tolist()) for s in SPLITS]
    assert all(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1 :])
    assert set().union(*sets) == set(range(1000))
    assert (len(first["dev"]), len(first["test"])) == (160, 200)


def test_the_seed_csv_has_the_documented_missing_values_and_categories():
    frame = read_housing_csv(SEED_CSV, require_target=True)
    assert len(frame) == 20640 and int(frame["total_bedrooms"].isna().sum()) == 207
    assert frame[list(NUMERIC)].dtypes.map(lambda d: d == np.float64).all()
    assert sorted(frame["ocean_proximity"].unique()) == [
        "<1H OCEAN",
        "INLAND",
        "ISLAND",
        "NEAR BAY",
        "NEAR OCEAN",
    ]


def test_imputation_scaling_and_encoding_are_fitted_on_train_only():
    from tasks.tabular.prepare import prepare

    frame = housing()
    indices = split_indices(len(frame), 0.16, 0.2, seed=0)
    # make held-out rows extreme and missing: a fit that saw them would move the median
    frame.loc[indices["test"], "total_bedrooms"] = np.nan
    frame.loc[indices["dev"], "total_bedrooms"] = 1e6
    frame.loc[indices["test"][:3], "ocean_proximity"] = "ISLAND"
    frame.loc[indices["train"], "ocean_proximity"] = frame.loc[
        indices["train"], "ocean_proximity"
    ].replace("ISLAND", "INLAND")
    tables, preprocessor, manifest = prepare(frame, TabularParams())
    train = frame.iloc[indices["train"]]
    assert manifest["imputer_medians_fitted_on_train"]["total_bedrooms"] == pytest.approx(
        float(np.nanmedian(train["total_bedrooms"]))
    )
    assert "ISLAND" not in manifest["categories_fitted_on_train"]
    assert manifest["missing_total_bedrooms"]["test"] == len(indices["test"])
    # the same preprocessing refitted on the training rows alone gives the same features
    from tasks.tabular.features import build_preprocessor, transform

    alone = build_preprocessor(len(train), 0).fit(train[list(NUMERIC) + list(CATEGORICAL)])
    test = frame.iloc[indices["test"]]
    names = manifest["features"]
    stored = np.column_stack([tables["test"][n].to_numpy() for n in names])
    assert np.allclose(stored, transform(alone, test), atol=1e-6)
    # a missing value becomes the train median, flagged by the indicator column
    assert (tables["test"]["missingindicator_total_bedrooms"].to_numpy() == 1).all()
    onehot = [n for n in names if n.startswith("ocean_proximity_")]
    island_rows = stored[:3][:, [names.index(n) for n in onehot]]
    assert (island_rows == 0).all()  # unseen in train: no category column is set
    mean, std = manifest["target_mean"], manifest["target_std"]
    assert mean == pytest.approx(train[TARGET].mean()) and std == pytest.approx(
        train[TARGET].std(ddof=0)
    )


def spec(family: str, n_features: int = 7, n_numerical: int = 5, **extra) -> dict:
    base = {
        "family": family,
        "n_features": n_features,
        "n_numerical": n_numerical,
        "learning_rate": 1e-3,
        "weight_decay": 0.0,
        "d_block": 16,
        "n_blocks": 2,
        "dropout": 0.0,
        "d_embedding": 4,
        "n_frequencies": 6,
        "frequency_init_scale": 0.1,
        "k": 4,
        "temperature": 1.0,
        "candidates": 12,
        "bank_rows": 12,
        "triplet_weight": 0.5,
        "triplet_margin": 0.2,
    }
    return {**base, **extra}


def test_the_numerical_embedding_has_the_documented_shapes_and_gradients():
    from tasks.tabular.models import NumericalEmbedding

    embedding = NumericalEmbedding(spec("plr"))
    x = torch.randn(9, 7, requires_grad=True)
    assert embedding.embed(x).shape == (9, 5, 4)
    out = embedding(x)
    assert out.shape == (9, 5 * 4 + 2) == (9, embedding.d_out)
    assert torch.equal(out[:, -2:], x[:, 5:])  # indicator / one-hot columns pass through
    out.square().sum().backward()
    grads = [p.grad for p in embedding.parameters()]
    assert all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)
    assert x.grad[:, :5].abs().sum() > 0


@pytest.mark.parametrize("family", ["mlp", "plr", "tabm", "retrieval", "triplet"])
def test_each_family_predicts_one_value_per_row_and_its_loss_reaches_every_weight(family):
    from tasks.tabular.models import build_model, predict, training_loss

    torch.manual_seed(0)
    model = build_model(spec(family))
    x, y = torch.randn(32, 7), torch.randn(32)
    sampled = None
    if family == "retrieval":
        model.bank_x.copy_(x[:12])
        model.bank_y.copy_(y[:12])
        pick = torch.arange(12)
        sampled = (x[pick], y[pick], torch.arange(32)[:, None] == pick[None, :])
    assert model(x).shape == (32,)
    assert predict(model, x.numpy()).shape == (32,)
    loss = training_loss(model, spec(family), x, y, sampled)
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name


def test_the_triplet_objective_pulls_similar_targets_together():
    from tasks.tabular.models import triplet_loss

    torch.manual_seed(0)
    y = torch.linspace(-2, 2, 40)
    aligned = torch.stack([y, torch.ones_like(y)], dim=1)[:, None, :]  # embedding ∝ target
    shuffled = aligned[torch.randperm(40)]
    assert triplet_loss(aligned, y, 0.2) < triplet_loss(shuffled, y, 0.2)
    embeddings = torch.randn(40, 3, 4, requires_grad=True)
    optimizer = torch.optim.SGD([embeddings], lr=0.5)
    before = triplet_loss(embeddings, y, 0.2).item()
    for _ in range(30):
        optimizer.zero_grad()
        triplet_loss(embeddings, y, 0.2).backward()
        optimizer.step()
    assert triplet_loss(embeddings, y, 0.2).item() < before


def test_the_uncertainty_estimate_recovers_g_on_synthetic_data():
    """Tolerance: Spearman(estimated σ, true exp(g)) ≥ 0.6 on held-out rows (params'
    spearman_tolerance), and the median |log σ̂ − g| below 0.35 (σ within ~40%)."""
    from tasks.tabular.synthetic import generate
    from tasks.tabular.uncertainty import fit_arrays, mean_and_sigma, synthetic_check

    data = generate(SyntheticParams(rows=4000, seed=3))
    x, y, g = data["x"].astype(np.float32), data["y"], data["g"]
    model = fit_arrays(
        x[:2400], y[:2400], x[2400:3000], y[2400:3000], UncertaintyParams(iterations=200)
    )
    _, sigma = mean_and_sigma(model, x[3000:])
    check = synthetic_check(sigma, np.exp(g[3000:]), UncertaintyParams().spearman_tolerance)
    assert check["within_tolerance"] and check["spearman_vs_true_sigma"] >= 0.6
    assert check["ci_low"] <= check["spearman_vs_true_sigma"] <= check["ci_high"]
    assert check["median_abs_log_ratio"] < 0.35


def test_the_same_fit_saves_the_same_model_bytes(tmp_path):
    """CatBoost stamps a file with its training time and a random GUID; without them two fits
    on the same rows save identical bytes, so a re-run leaves dvc.lock unchanged."""
    import time

    from tasks.tabular.synthetic import generate
    from tasks.tabular.uncertainty import fit_arrays, without_run_stamps

    data = generate(SyntheticParams(rows=300, seed=3))
    x, y = data["x"].astype(np.float32), data["y"]
    saved = []
    for attempt in range(2):
        model = fit_arrays(x[:200], y[:200], x[200:], y[200:], UncertaintyParams(iterations=20))
        path = tmp_path / f"{attempt}.cbm"
        without_run_stamps(model).save_model(str(path))
        saved.append(path.read_bytes())
        time.sleep(1.1)  # the stamp has one-second resolution
    assert saved[0] == saved[1]


def test_trials_are_distinct_per_family_and_fixed_by_the_seed():
    from tasks.tabular.zoo import SEARCHED, sample_trials

    zoo = ZooParams(trials=3)
    trials = sample_trials(zoo)
    assert trials == sample_trials(zoo)
    for family in zoo.families:
        own = [t for t in trials if t["family"] == family]
        assert len(own) == 3 and [t["number"] for t in own] == [0, 1, 2]
        keys = [tuple(t[k] for k in SEARCHED[family]) for t in own]
        assert len(set(keys)) == 3
    with pytest.raises(ValueError, match="must include mlp"):
        ZooParams(families=["plr"])


def test_uncertainty_bins_are_quantiles_lowest_first():
    from tasks.tabular.evaluate import uncertainty_bins

    sigma = np.random.default_rng(0).permutation(np.arange(100.0))
    index = uncertainty_bins(sigma, 5)
    assert np.bincount(index).tolist() == [20] * 5
    assert sigma[index == 0].max() < sigma[index == 4].min()


def test_two_sample_difference_resamples_each_sample_on_its_own():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 1.0, 300), rng.normal(0.0, 1.0, 200)
    found = evidence.difference(a, b, "rows")
    assert found.value == pytest.approx(a.mean() - b.mean())
    assert found.low < found.value < found.high and found.n == 500
    assert found.low > 0.6 and found.high < 1.4
    assert evidence.verdict(found, "greater") == "supported"
    flat = evidence.difference([1.0, 1.0], [0.5, 0.5], "rows")
    assert (flat.low, flat.value, flat.high) == (0.5, 0.5, 0.5)


def three_seeds(y, noise, scale, rng, spread=0.02):
    """Seeds 0–2 of an arm: its noise `scale`, each seed off by a little of its own."""
    return {seed: y + (scale + rng.normal(0, spread)) * noise for seed in range(3)}


def test_the_evidence_of_one_data_set_compares_methods_with_the_mlp_per_bin_over_seeds():
    from tasks.tabular.evaluate import build_claims, dataset_evidence

    rng = np.random.default_rng(1)
    sigma = rng.uniform(0.1, 2.0, 400)
    y = rng.normal(0, 1, 400)
    noise = rng.normal(0, 1, 400) * sigma
    data = {
        "row_id": np.arange(400),
        "y": y,
        "sigma": sigma,
        "predictions": {
            "mlp": three_seeds(y, noise, 1.0, rng),
            "plr": three_seeds(y, noise, 0.5, rng),  # gains grow with σ
            "tabm": {0: y + noise, 1: y + noise},  # a seed short: the shared seeds are used
            "triplet_matched": three_seeds(y, noise, 0.4, rng),
        },
        "catboost": y + 0.3 * noise,  # the strongest simple baseline, better than all
    }
    found = dataset_evidence(data, 5, best="plr")
    assert found["seeds"] == [0, 1] and [b["rows"] for b in found["bins"]] == [80] * 5
    del data["predictions"]["tabm"]
    found = dataset_evidence(data, 5, best="plr")
    assert found["seeds"] == [0, 1, 2] and set(found["methods"]) == {"plr"}
    per_bin = found["methods"]["plr"]["per_bin"]
    assert per_bin[4].value < per_bin[0].value < 0 and "3 seeds" in per_bin[0].method
    claims = build_claims({"synthetic": found}, TabularParams())
    ids = {c.id: c for c in claims}
    concentrates = ids["tabular.synthetic.plr_gain_concentrates_at_high_uncertainty"]
    assert concentrates.seeds == [0, 1, 2] and concentrates.verdict == "supported"
    assert concentrates.p_value < 0.05 and "two-sample hierarchical" in concentrates.method
    matched = ids["tabular.synthetic.triplet_beats_periodic"]
    assert matched.arms == ["triplet_matched", "plr"] and matched.verdict == "supported"
    versus = ids["tabular.synthetic.best_neural_beats_catboost"]
    assert versus.arms == ["plr", "catboost"] and versus.verdict == "contradicted"
    one = {arm: {0: own[0]} for arm, own in data["predictions"].items()}
    single = build_claims(
        {"synthetic": dataset_evidence({**data, "predictions": one}, 5)}, TabularParams()
    )
    decided_by_interval = [c for c in single if c.ci_low > 0]
    assert decided_by_interval and all("1 seed(s)" in c.reason for c in decided_by_interval)


def test_the_second_sweep_replicates_each_choice_and_matches_the_triplet_ablation():
    from types import SimpleNamespace

    from tasks.tabular.zoo import replicate_trials, sample_trials, seed_runs

    zoo = ZooParams(trials=1, replicates=[1, 2])
    trials = {t["family"]: t for t in sample_trials(zoo)}
    chosen = {
        "california": {f: SimpleNamespace(trial=trials[f]) for f in ("mlp", "plr")},
        "synthetic": {f: SimpleNamespace(trial=trials[f]) for f in ("mlp", "plr")},
    }
    again = replicate_trials(chosen, zoo)
    replicas = [t for t in again if not str(t["number"]).startswith("matched-")]
    # one configuration chosen on both data sets: trained once per seed, on both
    assert len(replicas) == 4 and all(
        t["datasets"] == ["california", "synthetic"] for t in replicas
    )
    assert {(t["family"], t["seed"]) for t in replicas} == {
        (f, s) for f in ("mlp", "plr") for s in (1, 2)
    }
    matched = [t for t in again if str(t["number"]).startswith("matched-")]
    weights = zoo.search.triplet_weight
    assert len(matched) == len(weights) * 3
    for trial in matched:  # plr's configuration, only the triplet term added
        assert trial["family"] == "triplet" and trial["triplet_weight"] in weights
        assert {k: trial[k] for k in trials["plr"] if k not in ("family", "number", "seed")} == {
            k: v for k, v in trials["plr"].items() if k not in ("family", "number", "seed")
        }
    dev = {w: 0.5 - w for w in weights}  # the largest weight is best on dev

    def trained(trial):
        state = {
            "datasets": {
                d: {"dev_mse": dev.get(trial.get("triplet_weight"), 1.0)} for d in trial["datasets"]
            }
        }
        return SimpleNamespace(trial=trial, trained=SimpleNamespace(state=state))

    runs = seed_runs(
        {
            d: {f: trained({**r.trial, "datasets": [d]}) for f, r in own.items()}
            for d, own in chosen.items()
        },
        [trained(t) for t in again],
        zoo,
    )
    assert sorted(runs["california"]["plr"]) == [0, 1, 2]
    assert sorted(runs["california"]["triplet_matched"]) == [0, 1, 2]
    assert {r.trial["triplet_weight"] for r in runs["california"]["triplet_matched"].values()} == {
        max(weights)
    }
    with pytest.raises(ValueError, match="distinct seeds other than seed 0"):
        ZooParams(replicates=[0, 1])


def write_rows(path, rows, header=None):
    header = header or [*NUMERIC, TARGET, *CATEGORICAL]
    lines = [",".join(header)] + [",".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


GOOD = [-122.23, 37.88, 41.0, 880.0, 129.0, 322.0, 126.0, 8.3252, 452600.0, "NEAR BAY"]


def test_a_missing_target_column_is_named_where_the_target_is_needed(tmp_path):
    header = [*NUMERIC, *CATEGORICAL]
    write_rows(tmp_path / "rows.csv", [GOOD[:8] + GOOD[9:]], header)
    with pytest.raises(InputError, match=r"target column 'median_house_value' is missing"):
        read_housing_csv(tmp_path / "rows.csv", require_target=True)
    frame = read_housing_csv(tmp_path / "rows.csv", require_target=False)
    assert TARGET not in frame.columns and len(frame) == 1


def test_a_non_numeric_value_and_a_new_category_name_column_and_row(tmp_path):
    bad_number = [GOOD, [*GOOD[:3], "lots", *GOOD[4:]]]
    write_rows(tmp_path / "a.csv", bad_number)
    with pytest.raises(InputError, match=r"column 'total_rooms', row 2: 'lots' is not a number"):
        read_housing_csv(tmp_path / "a.csv", require_target=False)
    new_category = [GOOD, GOOD, [*GOOD[:9], "MARS"]]
    write_rows(tmp_path / "b.csv", new_category)
    with pytest.raises(
        InputError, match=r"column 'ocean_proximity', row 3: unknown category 'MARS'"
    ):
        read_housing_csv(tmp_path / "b.csv", require_target=False, categories=["NEAR BAY"])
    empty_bedrooms = [[*GOOD[:4], "", *GOOD[5:]]]
    write_rows(tmp_path / "c.csv", empty_bedrooms)
    frame = read_housing_csv(tmp_path / "c.csv", require_target=True)
    assert math.isnan(frame["total_bedrooms"][0])  # imputed later, by the fitted preprocessing
    raw = pd.DataFrame({c: ["1"] for c in NUMERIC} | {"ocean_proximity": ["INLAND"]})
    assert typed_frame(raw, "x", require_target=False)["longitude"].tolist() == [1.0]
