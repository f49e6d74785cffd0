"""A scan of a per-step checkpoint, `jax.lax.scan(jax.checkpoint(block))`, and its rewrites.

The workload is the origin block (`ut_scan.block`) applied N times, its gradient under
`jax.jit`. Three programs, side by side in one run:

- `lax.scan(checkpoint(f))`: what the user wrote;
- `wrapper kept`: the rewrite as it was before the runtime took the wrapper over: chunks of k
  steps in `jax.checkpoint`, each step in its own `jax.checkpoint` inside them (written here as
  `jax.checkpoint(jax.checkpoint(block))`, whose outer checkpoint the runtime takes over);
- `wrapper absorbed`: the rewrite now: the runtime takes the per-step checkpoint off, so each
  chunk is checkpointed once;
- `checkpoint=False`: the rewrite with `checkpoint=False`, which keeps the wrapper and does not
  checkpoint the chunks (on the CPU layout that is `jax.lax.scan` itself).

Columns are ratios to `lax.scan(checkpoint(f))`: step time (median of interleaved calls),
compiled temp memory (exact), compile time (lower + compile, median over the rounds), and the
largest relative difference of the loss and gradients. Exits 1 if a rewrite's results differ from
the user's program's by more than `_common.agreement_rtol()`.

    python benchmarks/per_step_checkpoint.py                 # N=32, k 2 4 8
    python benchmarks/per_step_checkpoint.py --n 64 --ks 4 --repeats 30
    python benchmarks/per_step_checkpoint.py --layout straight   # the accelerator layout
"""

from __future__ import annotations

import argparse
import statistics
import sys

import jax
import jax.numpy as jnp
import ut_scan
from _common import LAYOUTS, Progress, agreement_rtol, compile_with_costs, interleaved_times, max_rel_diff, pin_layout

import scanrewrite.runtime


def variants(ks: list[int]) -> dict[str, tuple]:
    """name -> (how the block is wrapped, the loop that applies it n times, k or None)."""
    once = lambda block: jax.checkpoint(block)
    twice = lambda block: jax.checkpoint(jax.checkpoint(block))
    lax_scan = lambda step, h, n, k: jax.lax.scan(step, h, length=n)[0]
    runtime = lambda step, h, n, k: scanrewrite.runtime.scan(step, h, length=n, unroll=k)[0]
    unchecked = lambda step, h, n, k: scanrewrite.runtime.scan(step, h, length=n, unroll=k, checkpoint=False)[0]
    table = {"lax.scan(checkpoint(f))": (once, lax_scan, None)}
    for k in ks:
        table[f"k={k} wrapper kept"] = (twice, runtime, k)
        table[f"k={k} wrapper absorbed"] = (once, runtime, k)
        table[f"k={k} checkpoint=False"] = (once, unchecked, k)
    return table


def program(wrap, loop, n: int, k: int | None):
    def loss(params, h0):
        step = wrap(lambda h, _: (ut_scan.block(params, h), None))
        return jnp.mean(loop(step, h0, n, k) ** 2)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=32, help="steps")
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="compilations per program (median)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per program (median)")
    parser.add_argument("--layout", choices=LAYOUTS, default="backend")
    args = parser.parse_args(argv)
    layout = pin_layout(args.layout)
    key = jax.random.PRNGKey(0)
    inputs = (ut_scan.init_params(key, args.width), jax.random.normal(key, (args.batch, args.seq, args.width)))
    table = variants(args.ks)
    progress = Progress(len(table) * args.rounds + 1)
    compiled, seconds, temp = {}, {name: [] for name in table}, {}
    for _ in range(args.rounds):
        for name, (wrap, loop, k) in table.items():
            compiled[name], elapsed, temp[name] = compile_with_costs(program(wrap, loop, args.n, k), *inputs)
            seconds[name].append(elapsed)
            progress.step(f"compile {name}")
    times = interleaved_times(compiled, inputs, args.repeats)
    progress.step("step times")
    base = "lax.scan(checkpoint(f))"
    expected = compiled[base](*inputs)
    step = {name: statistics.median(values) for name, values in times.items()}
    compile_s = {name: statistics.median(values) for name, values in seconds.items()}
    device = jax.devices()[0]
    print(
        f"origin block, batch {args.batch}, seq {args.seq}, width {args.width}, N={args.n}, value_and_grad "
        f"under jit; jax {jax.__version__} on {device.platform}; "
        f"{'rolled' if layout.rolled_chunk else 'straight-line'} chunks; {args.rounds} compilations, "
        f"{args.repeats} interleaved calls each\n"
    )
    print("| program | step time | temp memory | compile time | max rel diff |")
    print("| --- | ---: | ---: | ---: | ---: |")
    worst = 0.0
    for name in table:
        diff = max_rel_diff(compiled[name](*inputs), expected)
        worst = max(worst, diff)
        print(
            f"| {name} | {step[name] / step[base]:.2f}x | {temp[name] / temp[base]:.2f}x | "
            f"{compile_s[name] / compile_s[base]:.2f}x | {diff:.1e} |"
        )
    print(
        f"\n`lax.scan(checkpoint(f))`: step {step[base] * 1e3:.2f} ms, temp {temp[base] / 2**20:.2f} MiB, "
        f"compile {compile_s[base]:.2f} s"
    )
    return 0 if worst <= agreement_rtol() else 1


if __name__ == "__main__":
    sys.exit(main())
