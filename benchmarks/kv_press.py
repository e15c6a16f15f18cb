"""KV-cache presses: what scoring costs at prefill, and the KV memory each ratio keeps.

Run: `.venv/bin/python benchmarks/kv_press.py --lengths 512,2048 --repeats 5`
(`--model models/kvcache/lm` for the trained needle LM; default a randomly initialised
Llama-style GQA decoder of `--hidden`/`--layers`, which is what the cost depends on).

Same model, same process, same inputs: for each context length, the median wall time of a
prefill with no press and with each press at ratio 0.5 (scoring + pruning every layer), then
the time per decoded token on the full and on the pruned cache (median with `--decode-tokens`
tokens minus median with one, over the extra tokens), and the KV bytes
after prefill at each ratio against the full cache.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from _timing import timed  # benchmarks/_timing.py: the script's folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PRESSES = (
    "random",
    "streamingllm",
    "knorm",
    "snapkv",
    "keydiff",
    "manifoldkv",
    "windowed_manifoldkv",
)


def build_model(args: argparse.Namespace):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if args.model:
        from tasks.kvcache.lm import load_local

        return load_local(Path(args.model))[0]
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=2000,
        hidden_size=args.hidden,
        intermediate_size=2 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=max(args.lengths) + 64,
    )
    return LlamaForCausalLM(config).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="", help="a causal-LM folder; default random init")
    parser.add_argument(
        "--lengths", type=lambda s: [int(x) for x in s.split(",")], default=[512, 2048]
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--decode-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from tasks.kvcache.params import PressParams

    torch.set_num_threads(args.threads)
    model = build_model(args)
    config = model.config
    settings = PressParams(snapkv_window=64, centroid_window=256)
    print(
        f"model: {type(model).__name__}, {config.num_hidden_layers} layers, hidden "
        f"{config.hidden_size}, {config.num_attention_heads} query / "
        f"{config.num_key_value_heads} KV heads; torch {torch.__version__}, "
        f"{args.threads} threads; median of {args.repeats}"
    )
    for length in args.lengths:
        measure(model, length, settings, args)


def measure(model, length: int, settings, args: argparse.Namespace) -> None:
    """One context length: the prefill table, then memory and decode time per ratio."""
    import torch
    from transformers import DynamicCache

    from tasks.kvcache.generation import cache_argument, greedy_answer, kv_bytes
    from tasks.kvcache.presses import make_press

    config, argument = model.config, cache_argument(model)
    context = torch.randint(
        0, config.vocab_size, (1, length), generator=torch.Generator().manual_seed(0)
    )
    question = torch.randint(
        0, config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(1)
    )

    def prefill(press=None):
        cache = DynamicCache(config=config)
        with torch.no_grad(), press(model) if press else contextlib.nullcontext():
            model(input_ids=context, **{argument: cache}, use_cache=True, logits_to_keep=1)
        return cache

    base = timed(prefill, args.repeats)
    print(f"\n## context {length} tokens\n")
    print("| prefill | seconds | vs no press |\n|---|---|---|")
    print(f"| no press | {base:.4f} | 1.00× |")
    for name in PRESSES:
        press = make_press(name, 0.5, settings)
        seconds = timed(lambda p=press: prefill(p), args.repeats)
        print(f"| {name} @ 0.5 | {seconds:.4f} | {seconds / base:.2f}× |")
    full_bytes = kv_bytes(prefill())
    steps = args.decode_tokens
    print("\n| ratio | KV bytes (manifoldkv) | share of full | decode s/token |")
    print("|---|---|---|---|")
    for ratio in (0.0, 0.25, 0.5, 0.75):
        press = make_press("manifoldkv", ratio, settings)
        kept = kv_bytes(prefill(press))
        many = timed(
            lambda p=press: greedy_answer(model, context, question, steps, p), args.repeats
        )
        one = timed(lambda p=press: greedy_answer(model, context, question, 1, p), args.repeats)
        per_token = (many - one) / (steps - 1)  # same prefill and question in both
        print(f"| {ratio} | {kept:,} | {kept / full_bytes:.3f} | {per_token:.5f} |")


if __name__ == "__main__":
    main()
