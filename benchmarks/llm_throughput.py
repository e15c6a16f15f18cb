"""The core LLM's local backend: prefill and decode tokens/s, batched vs one at a time.

Run: `.venv/bin/python benchmarks/llm_throughput.py --batch 8 --repeats 3`
(`--model` a checkpoint folder; default llm-import's models/llm/checkpoint).

Same model, same process, same prompts (the seed's English sentences, chat template
applied): prefill = one forward over the prompts (no generation); decode = `complete` with
`--new-tokens` greedy tokens minus the same with one new token, over the extra tokens.
Each figure is the median [min–max] over `--repeats` runs after a warm-up; the ratio is
batched throughput over one-at-a-time throughput.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from _timing import spread, timings  # benchmarks/_timing.py: the script's folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def prompts(count: int) -> list[str]:
    from tasks.core.seed_text import UDHR_ENGLISH, sentences, udhr_paragraphs

    found = sentences(udhr_paragraphs(ROOT / UDHR_ENGLISH))
    return [f"Summarise in one line: {found[i]}" for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models/llm/checkpoint"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from tasks.core.causal_lm import load_local
    from tasks.core.llm_local import LocalLLM

    torch.set_num_threads(args.threads)
    model, tokenizer = load_local(Path(args.model))
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False
        )
        for p in prompts(args.batch)
    ]
    tokens = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    print(
        f"model {args.model}: {model.config.num_hidden_layers} layers; torch "
        f"{torch.__version__}, {args.threads} threads; {args.batch} prompts of "
        f"{min(tokens)}–{max(tokens)} tokens; median [min–max] of {args.repeats}"
    )
    print("\n| mode | prefill tokens/s | decode tokens/s |\n|---|---|---|")
    rates = {}
    for label, size in (("one at a time", 1), (f"batched ({args.batch})", args.batch)):
        llm = LocalLLM(model, tokenizer, batch_size=size)

        def forward(llm=llm) -> None:
            for start in range(0, len(texts), llm.batch_size):
                batch = tokenizer(
                    texts[start : start + llm.batch_size],
                    return_tensors="pt",
                    padding=True,
                    add_special_tokens=False,
                )
                with torch.no_grad():
                    model(**batch, logits_to_keep=1)

        tokenizer.padding_side = "left"
        prefill = timings(forward, args.repeats)
        many = timings(
            lambda llm=llm: llm.complete(texts, args.new_tokens, special=False), args.repeats
        )
        one = timings(lambda llm=llm: llm.complete(texts, 1, special=False), args.repeats)
        new = len(texts) * (args.new_tokens - 1)
        prefill_rates = [sum(tokens) / t for t in prefill]
        decode_rates = [new / max(m - o, 1e-9) for m, o in zip(many, one, strict=True)]
        rates[size] = statistics.median(decode_rates)
        print(f"| {label} | {spread(prefill_rates, 0)} | {spread(decode_rates, 1)} |")
    print(f"\ndecode throughput, batched / one at a time: {rates[args.batch] / rates[1]:.2f}×")


if __name__ == "__main__":
    main()
