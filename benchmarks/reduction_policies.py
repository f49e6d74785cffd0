"""The runtime's checkpoint policies that keep the outputs of reductions, on the accelerator
shapes, and the hazard they guard against.

A reduction reads its whole input and writes a fraction of it: its output costs few bytes to
keep and a pass over the input to recompute. Kept, the elementwise work around it (a softmax's
`exp(x - max) / sum`) can recompute inside the backward pass's kernels. This script measures,
as `memory_curve.py` does (same shapes, same `value_and_grad`), the checkpointed scan and the
runtime with `scanrewrite.runtime.reductions_saveable` and its two companions (with
`dots_with_no_batch_dims_saveable`, with `dots_saveable`), each rolled (`k=1`) and with every
step checkpointed alone (`unroll=True`); for these steps they keep maxima and sums. Beside them,
a policy that keeps sums alone (`sum`), with the dots policy and without.

Then the hazard: `reduce_max`'s derivative compares the kept maximum with its operand, which the
backward pass recomputes; where the recomputation rounds otherwise (XLA compiles it apart) the
comparison finds no maximum and the gradient is wrong by far more than rounding. `hazard` runs a
layer `h @ w`, normalised, its maximum an output, in chunks of two, float64 on the host, with a
policy that keeps maxima and sums whatever the step (`max+sum, always`) and with
`reductions_saveable` (which keeps sums alone for this step), and prints the largest difference
of each gradient from `jax.lax.scan`'s. Whether the recomputation rounds otherwise is up to the
compiler and the machine: on one x86 host the first was off by 1.1, on the TPU v5e's host not.

Exits 1 if a program's numbers differ from the checkpointed scan's beyond the shape's
tolerance, or `reductions_saveable` changes the hazard's gradient.

    python benchmarks/reduction_policies.py                  # GPT-style stack and origin block
    python benchmarks/reduction_policies.py --smoke          # tiny, on the CPU
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from _common import Progress, agreement_rtol
from jax import lax

import memory_curve as mc
import scanrewrite.runtime
from scanrewrite.runtime._compat import enable_x64


def saving(*prims) -> Callable:
    """A policy keeping the outputs of `prims` (and nothing else), whatever the step."""
    chosen = frozenset(prims)

    def policy(prim, *_, **__) -> bool:
        return prim in chosen

    return policy


SUMS = saving(lax.reduce_sum_p)
POLICIES = {
    **mc.REDUCTIONS,
    "sum": SUMS,
    "dots+sum": jax.checkpoint_policies.save_from_both_policies(jax.checkpoint_policies.dots_with_no_batch_dims_saveable, SUMS),
}  # fmt: skip


def programs(shape: mc.Shape) -> dict[str, Callable]:
    """name -> loop(step, h, xs): the checkpointed scan, then the runtime with each policy,
    rolled (k=1) and with every step checkpointed alone (`unroll=True`)."""
    n = shape.n
    found = {mc.CHECKPOINTED: lambda step, h, xs: lax.scan(jax.checkpoint(step), h, xs, length=n)}
    for name, policy in POLICIES.items():
        for unroll in (1, True):
            label = f"runtime {'unroll=True' if unroll is True else 'k=1'}, {name}"
            found[label] = functools.partial(scanrewrite.runtime.scan, length=n, unroll=unroll, checkpoint=policy)
    return found


def hazard() -> dict[str, float]:
    """policy -> the largest difference of its gradient from `jax.lax.scan`'s, float64."""
    with enable_x64(True), jax.default_device(jax.devices("cpu")[0]):
        rng = np.random.default_rng(0)
        h0, ws = jnp.asarray(rng.normal(size=(2, 4, 3)) / 2), jnp.asarray(rng.normal(size=(5, 3, 3)) / 2)

        def step(h, w):
            h = h @ w
            return h / jnp.sqrt(jnp.mean(h**2, axis=-1, keepdims=True) + 1.0), jnp.max(h, axis=-1)

        def grad(loop):
            return jax.jit(jax.grad(lambda h, ws: jnp.sum(loop(step, h, ws)[1]), argnums=(0, 1)))(h0, ws)

        expected = grad(lax.scan)
        found = {}
        for name, policy in {"max+sum, always": saving(lax.reduce_max_p, lax.reduce_sum_p),
                             "reductions_saveable": scanrewrite.runtime.reductions_saveable}.items():  # fmt: skip
            actual = grad(functools.partial(scanrewrite.runtime.scan, unroll=2, checkpoint=policy))
            found[name] = max(float(jnp.max(jnp.abs(a - e))) for a, e in zip(actual, expected))
        return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=["gpt", "origin"], default=["gpt", "origin"])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (for the CPU, in seconds)")
    parser.add_argument("--compile-threads", type=int, default=4, help="compile this many programs at a time")
    args = parser.parse_args(argv)
    device = jax.devices()[0]
    print(f"benchmarks/reduction_policies.py on {device.platform} ({device.device_kind}), jax {jax.__version__}\n")
    shapes = [(mc.SMOKE if args.smoke else mc.SHAPES)[name]() for name in args.shapes]
    progress = Progress(sum(len(programs(shape)) + shape.repeats for shape in shapes))
    agree = True
    for shape in shapes:
        start = time.perf_counter()
        rows = mc.measure(shape, args.compile_threads, progress, found=programs(shape))
        base = rows[mc.CHECKPOINTED]
        print(f"\n## {shape.title}\n")
        print("| program | step (ms) | vs ckpt | temp memory (MiB) | vs ckpt | compile (s) | max rel diff |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, row in rows.items():
            if "time" not in row:
                print(f"| {name} | {row.get('error', 'did not run')} | | | | | |")
                continue
            print(f"| {name} | {row['time'] * 1e3:.1f} ±{row['noise'] * 1e3:.1f} | {row['time'] / base['time']:.2f} | "
                  f"{row['temp'] / 2**20:.1f} | {row['temp'] / base['temp']:.2f} | {row['compile']:.1f} | {row['diff']:.0e} |")  # fmt: skip
        print(f"\n({shape.name}: {time.perf_counter() - start:.0f} s)\n", flush=True)
        agree &= all(row["diff"] <= (shape.rtol or agreement_rtol()) for row in rows.values() if "diff" in row)
    wrong = hazard()
    print("Largest difference of the gradient from jax.lax.scan's, chunks of two, float64 on the host:")
    for name, diff in wrong.items():
        print(f"- {name}: {diff:.1e}")
    return 0 if agree and wrong["reductions_saveable"] < 1e-9 else 1


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    raise SystemExit(main())
