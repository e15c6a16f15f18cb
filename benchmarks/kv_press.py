"""KV-cache presses on the core LLM: scoring overhead, KV memory and decode cost per ratio.

Run: `.venv/bin/python benchmarks/kv_press.py --lengths 512,2048 --repeats 3`
(`--model` a checkpoint folder; default llm-import's models/llm/checkpoint).

Same model, same process, same context (the seed's English sentences): per context length,
the prefill with no press, then each press's scoring of every layer after it (the study's
one-prefill-per-item path) as a share of that prefill; then at each ratio the KV bytes
ManifoldKV keeps against the full cache and the time per decoded token of a batch of
`--arms` compressed caches, with the in-place cache layer the study uses and with
transformers' DynamicLayer (which concatenates the whole cache every step). Every figure is
the median [min–max] over `--repeats` runs after a warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from _timing import spread, timings  # benchmarks/_timing.py: the script's folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PRESSES = ("streamingllm", "knorm", "snapkv", "keydiff", "adakv_snapkv", "manifoldkv")


def context_ids(tokenizer, length: int) -> list[int]:
    from tasks.core.seed_text import CODE_ARCHIVE, UDHR_ENGLISH, seed_paragraphs

    text = " ".join(seed_paragraphs(ROOT / UDHR_ENGLISH, ROOT / CODE_ARCHIVE))
    return tokenizer(text, add_special_tokens=False)["input_ids"][:length]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models/llm/checkpoint"))
    parser.add_argument(
        "--lengths", type=lambda s: [int(x) for x in s.split(",")], default=[512, 2048]
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--arms", type=int, default=8, help="compressed caches decoded at once")
    parser.add_argument("--decode-tokens", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from tasks.core.causal_lm import load_local
    from tasks.kvcache.compressed import use_masked_attention
    from tasks.kvcache.params import PressParams

    torch.set_num_threads(args.threads)
    model, tokenizer = load_local(Path(args.model))
    use_masked_attention(model)
    config = model.config
    print(
        f"model {args.model}: {config.num_hidden_layers} layers, {config.num_attention_heads} "
        f"query / {config.num_key_value_heads} KV heads; torch {torch.__version__}, "
        f"{args.threads} threads; median [min–max] of {args.repeats}"
    )
    for length in args.lengths:
        measure(model, context_ids(tokenizer, length), PressParams(), args)


def measure(model, ids: list[int], settings, args: argparse.Namespace) -> None:
    """One context length: scoring overhead per press, then memory and decode per ratio."""
    import torch

    from tasks.kvcache.compressed import (
        batched_cache,
        bytes_per_entry,
        decode,
        keep_masks,
        prefill,
    )
    from tasks.kvcache.presses import make_press

    context = torch.tensor([ids])
    question = torch.tensor([ids[:8]])
    prefill_times = timings(lambda: prefill(model, context, settings.snapkv_window), args.repeats)
    base = statistics.median(prefill_times)
    recorded = prefill(model, context, settings.snapkv_window)
    print(f"\n## context {len(ids)} tokens\n")
    print("| step | seconds | share of the prefill |\n|---|---|---|")
    print(f"| prefill (full cache, recorded) | {spread(prefill_times)} | 1.00 |")
    for name in PRESSES:
        press = make_press(name, 0.5, settings)
        found = timings(lambda p=press: keep_masks(recorded, p), args.repeats)
        share = statistics.median(found) / base
        print(f"| {name} @ 0.5: score + choose | {spread(found, 4)} | {share:.3f} |")
    per_entry = bytes_per_entry(recorded)
    full = sum(layer.keys.shape[1] for layer in recorded.layers) * len(ids) * per_entry
    steps = args.decode_tokens

    def per_token(masks, in_place: bool) -> list[float]:
        def run(count: int) -> None:
            batched = batched_cache(recorded, masks, model.config, (8 + count) if in_place else 0)
            decode(model, batched, question, len(ids), count, set())

        many, one = timings(lambda: run(steps), args.repeats), timings(lambda: run(1), args.repeats)
        return [(m - o) / (steps - 1) for m, o in zip(many, one, strict=True)]

    print(
        f"\n| ratio | KV MiB kept (manifoldkv) | share | decode s/token ({args.arms} arms), "
        "in place | same, DynamicLayer | DynamicLayer / in place |"
    )
    print("|---|---|---|---|---|---|")
    for ratio in (0.0, 0.25, 0.5, 0.75):
        press = None if ratio == 0 else make_press("manifoldkv", ratio, settings)
        masks = [keep_masks(recorded, press)] * args.arms
        kept = sum(int(m.sum()) for m in masks[0]) * per_entry
        reserved, concatenated = per_token(masks, True), per_token(masks, False)
        gain = statistics.median(concatenated) / statistics.median(reserved)
        print(
            f"| {ratio} | {kept / 2**20:.1f} | {kept / full:.3f} | {spread(reserved, 4)} | "
            f"{spread(concatenated, 4)} | {gain:.2f}× |"
        )


if __name__ == "__main__":
    main()
