"""Training throughput of the mlm phase loop: plain PyTorch vs Ray Train with 1 and 2 workers.

Run: `.venv/bin/python benchmarks/mlm_throughput.py --steps 60` (after `dvc repro corpus-pack`).

Same model (the `tiny` preset, built from the same seed), same data (the pretrain shards,
in file order), same masking (`Masker`, 30%), same AdamW + warmup-stable schedule, batch 32
sequences per step in total:
- (a) plain: one process, a loop written directly against torch, no Ray; 2 intra-op threads.
- (b) Ray Train, 1 worker (1 CPU reserved, 2 torch threads): the pipeline's `train_loop`
  fed by Ray Data's `get_dataset_shard`, reporting to Ray every `log_every` steps.
- (c) Ray Train, 2 workers (1 CPU and 1 thread each) under DDP, 16 sequences per worker.

Tokens/s is counted over real (non-padding) tokens, from the end of the warm-up steps to the
last step, so process start, model build and Ray start-up are outside it for all three; Ray's
per-step reporting and data iteration are inside it, as the loop pays for them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARDS = ROOT / "data/processed/corpus/shards/pretrain"
TOKENIZER = ROOT / "models/tokenizer"
WARMUP_STEPS = 10
LOG_EVERY = 5


def mlm_params(steps: int, workers: int, batch: int, threads: int):
    from tasks.mlm.params import MlmParams

    return MlmParams.model_validate(
        {
            "training": {
                "batch_size": batch,
                "log_every": LOG_EVERY,
                "checkpoint_every": 10 * steps,
                "scaling": {"num_workers": workers, "cpus_per_worker": 1, "torch_threads": threads},
            },
            "phases": {
                "pretrain": {
                    "learning_rate": 2e-3,
                    "warmup_steps": 10,
                    "max_steps": steps,
                    "epochs": 100,
                },
                "mid": {"learning_rate": 1e-3},
                "decay": {"learning_rate": 1e-3},
            },
        }
    )


def plain_loop(steps: int, threads: int) -> float:
    """(a): tokens/s of a single-process loop with the same parts and no Ray."""
    import numpy as np
    import pyarrow.parquet as pq
    import torch

    from tasks.mlm.masking import Masker
    from tasks.mlm.model import build_model, load_tokenizer
    from tasks.mlm.train_loop import phase_schedule

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tokenizer = load_tokenizer(TOKENIZER)
    model = build_model("tiny", tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=8e-5)
    schedule = phase_schedule(
        optimizer, steps, {"schedule": "stable", "warmup_steps": 10, "min_lr_ratio": 0.0}
    )
    files = sorted(SHARDS.glob("*.parquet"))
    rows = np.concatenate(
        [np.stack(pq.read_table(f).column("input_ids").to_numpy(False)) for f in files]
    )
    masker = Masker(tokenizer, 0.3, 0)
    batch_size = 32
    per_epoch = len(rows) // batch_size
    tokens, started = 0, None
    model.train()
    for step in range(steps):
        if step == WARMUP_STEPS:
            tokens, started = 0, time.perf_counter()
        start = (step % per_epoch) * batch_size
        ids = torch.from_numpy(rows[start : start + batch_size].astype(np.int64))
        batch = masker(ids, step)
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        tokens += int(batch["attention_mask"].sum())
    return tokens / (time.perf_counter() - started)


def ray_train(steps: int, workers: int, threads: int, storage: Path) -> float:
    """(b)/(c): tokens/s of the pipeline's Ray Train loop, from its own per-window rates."""
    from tasks.core.scratch import prepare_scratch
    from tasks.mlm import trainer

    params = mlm_params(steps, workers, 32 // workers, threads)
    plan = trainer.plan_phase("pretrain", params, SHARDS)
    config = trainer.loop_config(
        plan,
        params,
        tokenizer=TOKENIZER,
        init_from=None,
        step_offset=0,
        tracking_uri="",
        run_id=None,
    )
    folder = storage / f"workers-{workers}"
    prepare_scratch(folder, f"bench-{time.time()}")
    checkpoint = trainer.fit(config, plan, params, folder)
    curve = json.loads((checkpoint / "state.json").read_text())["curve"]
    points = [row for row in curve if row["phase_step"] >= WARMUP_STEPS]
    pairs = list(zip(points, points[1:], strict=False))
    tokens = sum(b["tokens_seen"] - a["tokens_seen"] for a, b in pairs)
    seconds = sum((b["tokens_seen"] - a["tokens_seen"]) / b["tokens_per_second"] for a, b in pairs)
    return tokens / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    if not (SHARDS / "manifest.json").exists():
        sys.exit(f"{SHARDS}: missing; run `dvc repro corpus-pack` first")

    import tempfile

    from tasks.core.params import RayParams
    from tasks.core.ray_runtime import init_ray

    init_ray(RayParams(num_cpus=2))
    results: dict[str, list[float]] = {"plain": [], "ray-1": [], "ray-2": []}
    with tempfile.TemporaryDirectory() as storage:
        for _ in range(args.repeats):
            results["plain"].append(plain_loop(args.steps, threads=2))
            results["ray-1"].append(ray_train(args.steps, 1, 2, Path(storage)))
            results["ray-2"].append(ray_train(args.steps, 2, 1, Path(storage)))
    median = {name: statistics.median(values) for name, values in results.items()}
    print(
        f"steps={args.steps} (first {WARMUP_STEPS} not timed), batch 32, tiny preset, "
        f"repeats={args.repeats}"
    )
    for name, rate in median.items():
        print(f"{name:>6}: {rate:9.0f} tokens/s")
    print(f"(b)/(a) ray-1 / plain = {median['ray-1'] / median['plain']:.2f}")
    print(f"(c)/(a) ray-2 / plain = {median['ray-2'] / median['plain']:.2f}")
    print(f"(c)/(b) ray-2 / ray-1 = {median['ray-2'] / median['ray-1']:.2f}")


if __name__ == "__main__":
    main()
