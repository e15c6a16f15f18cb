"""The delta rule's chunkwise form vs the step-by-step recurrence (forward + backward).

Run: `.venv/bin/python benchmarks/delta_rule.py --lengths 128,512`.

Same inputs (batch 8, 4 heads, d_k = d_v = 32, β ∈ (0, 2)), same float32 outputs (checked
to agree), one torch thread each; the recurrence is the plain loop over time a reader would
write first, the peer the chunkwise form has to beat. Also times DeltaStack's stack memory,
the same rule over 2T interleaved steps with `stack_size`-wide keys.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _timing import timed  # benchmarks/_timing.py: the script's folder is on sys.path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import torch

    from tasks.deltastack.delta_rule import delta_rule_chunkwise, delta_rule_recurrent

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="128,512", help="sequence lengths, comma-separated")
    parser.add_argument("--chunk", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for length in map(int, args.lengths.split(",")):
        shape = (8, 4, length)
        q = torch.randn(*shape, 32)
        k = torch.nn.functional.normalize(torch.randn(*shape, 32), dim=-1).requires_grad_()
        v = torch.randn(*shape, 32, requires_grad=True)
        beta = (2 * torch.rand(*shape)).requires_grad_()

        def run(rule, q=q, k=k, v=v, beta=beta):
            def step():
                out, _ = rule(q, k, v, beta, scale=32**-0.5)
                out.sum().backward()
                return out

            return step

        chunk = lambda *a, **kw: delta_rule_chunkwise(*a, **kw, chunk_size=args.chunk)  # noqa: E731
        gap = (run(chunk)() - run(delta_rule_recurrent)()).abs().max().item()
        recurrent = timed(run(delta_rule_recurrent), args.repeats)
        chunked = timed(run(chunk), args.repeats)
        print(
            f"T={length}: recurrent {recurrent * 1e3:.1f} ms, chunkwise {chunked * 1e3:.1f} ms "
            f"(chunk {args.chunk}) -> {recurrent / chunked:.1f}x faster; max |diff| {gap:.1e}"
        )


if __name__ == "__main__":
    main()
