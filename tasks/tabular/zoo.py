"""tabular.zoo: the model zoo on Ray Tune, hyperparameters chosen on dev, the best of each
family registered.

Trials: for each family (models.py: mlp, plr, tabm, retrieval, triplet) `zoo.trials`
configurations drawn without replacement from the search space (a seeded shuffle of the
grid of the values the family uses). Each trial is one Ray Tune trial with its own MLflow
run, a child of the `zoo-sweep` run (tasks/core/sweep.py), fitting both data sets; trial.py
trains with early stopping on the dev MSE. Per family and data set the trial with the
lowest dev MSE is chosen; only the chosen models predict the test split
(`predictions.parquet`, read by tabular.evaluate). The chosen trials are published through
the training harness (`training.publish`: card, registration once the outputs are
committed).

Seeds and the matched ablation (a second sweep, after the choice): each chosen
configuration is trained again under every seed of `zoo.replicates`, on the data sets it
was chosen for, so the claims span `[seed, *replicates]` training runs; and, per data set,
the periodic (`plr`) family's chosen configuration is trained with the triplet objective
added at each searched `triplet_weight` (margin: the first searched), under every seed: the
weight with the lowest mean dev MSE is the `triplet_matched` arm, the same configuration
with weight 0 (`plr`) its control. Test predictions: `pred_<arm>@<seed>`, one column per
arm and seed.

Registered (California, the data set the served model predicts): the best of each family
as `paperline-tabular-<family>`, and the family with the lowest dev MSE as
`paperline-tabular` with alias `candidate`; each is a pyfunc bundle (serving.py) with the
fitted preprocessing and the CatBoost uncertainty model, a model card beside it and as the
registry description.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tasks.core import sweep, tracking, training
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.tabular import serving
from tasks.tabular.features import PREPROCESSOR, Prepared
from tasks.tabular.params import FAMILIES, TabularParams, ZooParams
from tasks.tabular.trial import fit_trial

log = get_logger("paperline.tabular.zoo")
DATASETS = ("california", "synthetic")
COMMON = ("learning_rate", "weight_decay", "d_block", "dropout")
EMBEDDING = ("d_embedding", "n_frequencies", "frequency_init_scale")
SEARCHED = {
    "mlp": (*COMMON, "n_blocks"),
    "plr": (*COMMON, "n_blocks", *EMBEDDING),
    "tabm": (*COMMON, "n_blocks", "k"),
    "retrieval": (*COMMON, *EMBEDDING, "temperature", "candidates"),
    "triplet": (*COMMON, "n_blocks", *EMBEDDING, "triplet_weight", "triplet_margin"),
}
LINEAGE = ("data/processed/tabular/california", "data/processed/tabular/synthetic")


def sample_trials(zoo: ZooParams) -> list[dict[str, Any]]:
    """Per family, `zoo.trials` distinct configurations (fewer if its grid is smaller)."""
    space = zoo.search.model_dump()
    # what else decides a trial's result (its fingerprint and MLflow params)
    keys = ("seed", "epochs", "patience", "batch_size", "train_rows", "retrieval_bank")
    settings = {key: getattr(zoo, key) for key in keys}
    trials = []
    for family in zoo.families:
        keys = SEARCHED[family]
        grid = list(itertools.product(*(space[k] for k in keys)))
        rng = np.random.default_rng([zoo.seed, FAMILIES.index(family)])
        for number, index in enumerate(rng.permutation(len(grid))[: zoo.trials]):
            trials.append(
                {
                    "family": family,
                    "number": number,
                    **dict(zip(keys, grid[index], strict=True)),
                    **settings,
                }
            )
    return trials


SETTINGS = (
    "number",
    "seed",
    "epochs",
    "patience",
    "batch_size",
    "train_rows",
    "retrieval_bank",
    "datasets",
)
MATCHED = "triplet_matched"  # the triplet objective on plr's chosen configuration


def model_spec(trial: Mapping[str, Any], prepared: Prepared, zoo: ZooParams, rows: int) -> dict:
    spec = {k: v for k, v in trial.items() if k not in SETTINGS}
    spec.setdefault("n_blocks", 1)
    spec |= {"n_features": len(prepared.features), "n_numerical": prepared.n_numerical}
    if trial["family"] == "retrieval":
        spec |= {
            "bank_rows": min(zoo.retrieval_bank, rows),
            "candidates": min(spec["candidates"], rows),
        }
    return spec


def training_arrays(prepared: Prepared, zoo: ZooParams) -> dict[str, np.ndarray]:
    train, dev = prepared.splits["train"], prepared.splits["dev"]
    keep = np.arange(len(train.y))
    if zoo.train_rows is not None and zoo.train_rows < len(keep):
        keep = np.sort(np.random.default_rng(zoo.seed).choice(keep, zoo.train_rows, replace=False))
    return {
        "x_train": train.x[keep],
        "y_train": train.y[keep],
        "x_dev": dev.x,
        "y_dev": dev.y,
    }


def trial_name(trial: Mapping[str, Any]) -> str:
    return f"{trial['family']}-{trial['number']}"


def chosen_trials(results: list[sweep.TrialResult]) -> dict[str, dict[str, sweep.TrialResult]]:
    """Data set → family → the trial with the lowest dev MSE there."""
    chosen: dict[str, dict[str, sweep.TrialResult]] = {d: {} for d in DATASETS}
    for result in results:
        family = result.trial["family"]
        for dataset in DATASETS:
            mse = result.trained.state["datasets"][dataset]["dev_mse"]
            best = chosen[dataset].get(family)
            if best is None or mse < best.trained.state["datasets"][dataset]["dev_mse"]:
                chosen[dataset][family] = result
    return chosen


def replicate_trials(
    chosen: dict[str, dict[str, sweep.TrialResult]], zoo: ZooParams
) -> list[dict[str, Any]]:
    """The second sweep: each chosen configuration under each replicate seed, and the
    matched triplet ablation under every seed, each on the data sets that need it (a
    configuration chosen on both is trained once per seed)."""
    wanted: dict[str, dict[str, Any]] = {}

    def add(trial: dict[str, Any], dataset: str) -> None:
        entry = wanted.setdefault(trial_name(trial), {**trial, "datasets": []})
        entry["datasets"].append(dataset)

    for dataset, families in chosen.items():
        for result in families.values():
            for seed in zoo.replicates:
                number = f"{result.trial['number']}-seed{seed}"
                add({**result.trial, "number": number, "seed": seed}, dataset)
        if "plr" in families and "triplet" in zoo.families:
            plr = families["plr"].trial
            for weight in zoo.search.triplet_weight:
                for seed in zoo.seeds:
                    matched = {
                        **plr,
                        "family": "triplet",
                        "triplet_weight": weight,
                        "triplet_margin": zoo.search.triplet_margin[0],
                        "number": f"matched-plr{plr['number']}-w{weight}-seed{seed}",
                        "seed": seed,
                    }
                    add(matched, dataset)
    return list(wanted.values())


def seed_runs(
    chosen: dict[str, dict[str, sweep.TrialResult]],
    replicated: list[sweep.TrialResult],
    zoo: ZooParams,
) -> dict[str, dict[str, dict[int, sweep.TrialResult]]]:
    """Data set → arm → seed → its trained trial: each chosen family under every seed, and
    `triplet_matched`, the matched ablation at the weight with the lowest mean dev MSE."""
    found: dict[str, dict[str, dict[int, sweep.TrialResult]]] = {}
    for dataset, families in chosen.items():
        found[dataset] = {family: {zoo.seed: result} for family, result in families.items()}
        own = [r for r in replicated if dataset in r.trial["datasets"]]
        for result in own:
            if not str(result.trial["number"]).startswith("matched-"):
                found[dataset][result.trial["family"]][result.trial["seed"]] = result
        matched = [r for r in own if str(r.trial["number"]).startswith("matched-")]
        if matched:

            def mean_dev(weight: float, runs: list = matched, dataset: str = dataset) -> float:
                scores = [dev_mse(r, dataset) for r in runs if r.trial["triplet_weight"] == weight]
                return float(np.mean(scores))

            best = min(zoo.search.triplet_weight, key=mean_dev)
            found[dataset][MATCHED] = {
                r.trial["seed"]: r for r in matched if r.trial["triplet_weight"] == best
            }
    return found


def dev_mse(result: sweep.TrialResult, dataset: str) -> float:
    return result.trained.state["datasets"][dataset]["dev_mse"]


def load_model(result: sweep.TrialResult, dataset: str) -> Any:
    import torch

    from tasks.tabular.models import build_model

    model = build_model(result.trained.state["specs"][dataset])
    weights = result.trained.checkpoint / f"{dataset}.pt"
    model.load_state_dict(torch.load(weights, weights_only=True))
    return model


def model_card(
    family: str, dataset_manifest: dict, entry: dict, params: TabularParams, name: str
) -> tracking.ModelCard:
    split = dataset_manifest["split"]
    return tracking.ModelCard(
        name=name,
        summary=(
            f"A `{family}` regressor of California Housing's median house value (tabular area, "
            "after Kartashev et al., 'data uncertainty in tabular DL'), chosen on dev among "
            f"{params.zoo.trials} configuration(s) of its family, with CatBoost "
            "RMSEWithUncertainty's per-row standard deviation as the uncertainty estimate. "
            f"Hyperparameters: {entry['hyperparameters']}."
        ),
        training_data=(
            f"data/seed/tabular/california_housing.csv (Pace & Barry 1997, StatLib): "
            f"{split['train']} train rows ({params.zoo.train_rows or 'all'} used per trial), "
            f"{split['dev']} dev, {split['test']} test, a fixed seeded split. Median imputation "
            "(total_bedrooms), quantile transform and one-hot ocean_proximity fitted on train."
        ),
        intended_use=(
            "`paperline tabular predict --model models:/paperline-tabular@candidate --csv FILE`: "
            "a prediction and its estimated noise level per row, for the reproduction's "
            "uncertainty study; not for valuing real property."
        ),
        limitations=(
            "1990 census block groups; targets are capped at 500,001 (the source's cap). The "
            "default sweep is tiny (few trials and epochs on a subsample); "
            "profiles/standard.yaml widens it. A category of ocean_proximity not seen in "
            "train is refused."
        ),
        metrics={
            "dev_mse": entry["dev_mse"],
            "test_mse": entry["test_mse"],
            "test_rmse_target_units": entry["test_rmse_target_units"],
        },
    )


def run(params: TabularParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict:
    import mlflow

    zoo = params.zoo
    prepared = {d: Prepared.read(inputs[d]) for d in DATASETS}
    trials = sample_trials(zoo)
    arrays = {d: training_arrays(prepared[d], zoo) for d in DATASETS}
    specs: dict[str, dict[str, dict]] = {d: {} for d in DATASETS}
    log.info(
        "tabular.zoo: %d trials (%s × %d), %d epochs max, %s training rows per data set",
        len(trials),
        "/".join(zoo.families),
        zoo.trials,
        zoo.epochs,
        "/".join(str(len(arrays[d]["y_train"])) for d in DATASETS),
    )
    with tracking.start_run(
        params.experiment, ctx.runtime.mlflow, run_name="zoo-sweep", inputs=LINEAGE, root=ctx.root
    ) as parent:

        def sweep_trials(batch: list[dict[str, Any]], name: str) -> list[sweep.TrialResult]:
            """One Tune sweep of `batch` (its specs added for every data set), each trial a
            child run of `zoo-sweep`."""
            for dataset in DATASETS:
                rows = len(arrays[dataset]["y_train"])
                specs[dataset] |= {
                    trial_name(t): model_spec(t, prepared[dataset], zoo, rows) for t in batch
                }
            return sweep.run_trials(
                functools.partial(fit_trial, specs=specs, arrays=arrays),
                batch,
                ctx,
                name=name,
                names=[trial_name(t) for t in batch],
                storage=ctx.scratch("ray", "tabular", name.removeprefix("tabular-")),
                experiment=params.experiment,
                parent_run=parent.info.run_id,
                lineage=LINEAGE,
                sources=[inputs[d] for d in DATASETS],
                threads=zoo.torch_threads,
                resources={"cpu": zoo.cpus_per_trial},
                max_concurrent=zoo.max_concurrent_trials,
            )

        results = sweep_trials(trials, "tabular-zoo")
        chosen = chosen_trials(results)
        again = replicate_trials(chosen, zoo)
        log.info(
            "tabular.zoo: %d more trials: the chosen configurations under seeds %s, and the "
            "matched triplet ablation under seeds %s",
            len(again),
            zoo.replicates,
            zoo.seeds,
        )
        replicated = sweep_trials(again, "tabular-zoo-seeds")
        summary, predictions = evaluate_chosen(seed_runs(chosen, replicated, zoo), prepared)
        summary["trials"] = [
            {
                "name": trial_name(r.trial),
                **r.trial,
                **{
                    f"{d}_dev_mse": round(r.trained.state["datasets"][d]["dev_mse"], 5)
                    for d in DATASETS
                },
            }
            for r in results
        ]
        summary["seeds"] = zoo.seeds
        mlflow.log_dict(summary, "zoo.json")
        best_family = min(chosen["california"], key=lambda f: summary["california"][f]["dev_mse"])
        summary["best_family"] = best_family
        card = register(chosen["california"], summary, prepared["california"], inputs, params, ctx)
    ctx.after_commit(lambda: sweep.mark_finished([*results, *replicated]))
    log.info(
        "tabular.zoo: best on California dev: %s (test MSE %.4f)",
        best_family,
        summary["california"][best_family]["test_mse"],
    )
    return {"results": summary, "predictions": predictions, "card": card}


def evaluate_chosen(
    runs: dict[str, dict[str, dict[int, sweep.TrialResult]]], prepared: dict[str, Prepared]
) -> tuple[dict[str, Any], pa.Table]:
    """Dev and test MSE of each arm (its first seed's run, and the mean over seeds); the test
    predictions of every arm and seed (`pred_<arm>@<seed>`)."""
    from tasks.tabular.models import predict

    summary: dict[str, Any] = {}
    tables = []
    for dataset, arms in runs.items():
        test = prepared[dataset].splits["test"]
        columns: dict[str, Any] = {
            "dataset": [dataset] * len(test.y),
            "row_id": test.row_id.astype(np.int64),
            "y": test.y,
        }
        summary[dataset] = {}
        std = prepared[dataset].manifest["target_std"]
        for arm, seeds in arms.items():
            mses = {}
            for seed, result in sorted(seeds.items()):
                prediction = predict(load_model(result, dataset), test.x)
                columns[f"pred_{arm}@{seed}"] = prediction
                mses[seed] = float(np.mean((prediction - test.y) ** 2))
            first = seeds[min(seeds)]
            mse = mses[min(seeds)]
            summary[dataset][arm] = {
                "trial": trial_name(first.trial),
                "hyperparameters": {
                    k: v for k, v in first.trial.items() if k not in ("family", *SETTINGS)
                },
                "dev_mse": round(dev_mse(first, dataset), 5),
                "best_epoch": first.trained.state["datasets"][dataset]["best_epoch"],
                "test_mse": round(mse, 5),
                "test_rmse_target_units": round(float(np.sqrt(mse) * std), 1),
                "seeds": sorted(seeds),
                "mean_dev_mse": round(
                    float(np.mean([dev_mse(r, dataset) for r in seeds.values()])), 5
                ),
                "mean_test_mse": round(float(np.mean(list(mses.values()))), 5),
            }
        tables.append(pa.table(columns))
    return summary, pa.concat_tables(tables, promote_options="default")


def register(
    chosen: dict[str, sweep.TrialResult],
    summary: dict[str, Any],
    prepared: Prepared,
    inputs: Mapping[str, Path],
    params: TabularParams,
    ctx: StageContext,
) -> str:
    """Publish each family's California model; the overall best also as `paperline-tabular`.
    Returns the overall best's model card (markdown)."""
    uris: dict[str, str] = {}
    cards: dict[str, tracking.ModelCard] = {}
    for family, result in chosen.items():
        bundle = serving.write_bundle(
            ctx.scratch("tabular", "bundles", family),
            spec=result.trained.state["specs"]["california"],
            weights=result.trained.checkpoint / "california.pt",
            preprocessor=inputs["california"] / PREPROCESSOR,
            uncertainty=inputs["uncertainty_models"] / "california.cbm",
            manifest=prepared.manifest,
        )
        name = f"{params.registered_model}-{family}"
        entry = summary["california"][family]

        def log_model(card: tracking.ModelCard, bundle: Path = bundle, family: str = family) -> str:
            uris[family] = serving.log_bundle(bundle, card)
            return uris[family]

        cards[family] = training.publish(
            result.trained,
            ctx,
            card=model_card(family, prepared.manifest, entry, params, name),
            log_model=log_model,
            registered_model=name,
            alias="candidate",
            tags={"family": family, "dataset": "california"},
        )
    best = summary["best_family"]
    card = cards[best]
    overall = tracking.ModelCard(
        **{
            **card.__dict__,
            "name": params.registered_model,
            "summary": f"The zoo's best family on California dev ({best}). " + card.summary,
        }
    )
    tracking.register_after_commit(ctx, uris[best], params.registered_model, overall, "candidate")
    return overall.to_markdown()


STAGE = Stage(
    name="tabular.zoo",
    run=run,
    params_key="tabular",
    params=("tabular.experiment", "tabular.registered_model", "tabular.zoo"),
    inputs={
        "california": "data/processed/tabular/california",
        "synthetic": "data/processed/tabular/synthetic",
        "uncertainty_models": "models/tabular/uncertainty",
    },
    outputs={
        "results": Output.metrics("models/tabular/zoo.json"),
        "predictions": "data/processed/tabular/predictions.parquet",
        "card": Output.in_git("models/tabular/model_card.md"),
    },
    uses_ray=True,
    headline="models/tabular/zoo.json:best_family",
)
