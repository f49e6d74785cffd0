"""`scanrewrite.runtime.fori_loop` and `map` against `jax.lax.fori_loop` and `jax.lax.map`:
where opting in (`--targets lax.fori_loop,lax.map`) pays, and where it does not.

Four workloads, each compiled under `jax.jit` as jax's function and as the runtime's at
`unroll` k = 1 and 4: XLA's compiled temp memory, compile time (lower + compile) and the median
step time (interleaved rounds), each as a ratio to jax's, and the largest relative difference of
the results.

- `fori grad`: the gradient of a 64-step rollout (`fori_loop(0, 64, ...)`, a 32x32 carry, a
  residual-heavy step): a loop that is differentiated, what the opt-in is for.
- `map grad`: the gradient of the mean per-example loss of a small MLP over 64 examples
  (`lax.map`, and `lax.map(batch_size=8)`).
- `fori forward`: the same rollout, forward only, as in a sampler or an optimizer loop that is
  never differentiated: checkpointing has nothing to save there.

    python benchmarks/loops.py                 # a few minutes on 2 cores
    python benchmarks/loops.py --repeats 5     # quicker, noisier
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import jax
import jax.numpy as jnp

import scanrewrite.runtime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Progress, compile_with_costs, interleaved_times, max_rel_diff

STEPS, D, EXAMPLES = 64, 32, 64
KS = (1, 4)


def fori_workload(fori_loop, forward_only=False):
    def rollout_step(i, h):  # fresh per workload: nothing is cached from an earlier compile
        return jnp.sin(jnp.tanh(h @ h.T / D + 0.01 * i) + h)

    def rollout(h0):
        return fori_loop(0, STEPS, rollout_step, h0)

    if forward_only:
        return jax.jit(rollout), (jnp.eye(D) * 0.5,)
    return jax.jit(jax.grad(lambda h0: jnp.sum(rollout(h0) ** 2))), (jnp.eye(D) * 0.5,)


def per_example_loss(params, x):
    hidden = jnp.tanh(params["w1"] @ x)
    return jnp.sum(jnp.sin(params["w2"] @ hidden) ** 2)


def map_workload(lax_map, batch_size=None):
    key1, key2, key3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(key1, (4 * D, D)) / D, "w2": jax.random.normal(key2, (D, 4 * D)) / D}
    xs = jax.random.normal(key3, (EXAMPLES, D, D))

    def loss(params):
        return jnp.mean(lax_map(lambda x: per_example_loss(params, x), xs, batch_size=batch_size))

    return jax.jit(jax.grad(loss)), (params,)


def variants(workload, jax_fn, runtime_fn, **kwargs):
    made = {"jax": workload(jax_fn, **kwargs)}
    for k in KS:
        made[f"k={k}"] = workload(lambda *a, k=k, **kw: runtime_fn(*a, unroll=k, **kw), **kwargs)
    return made


WORKLOADS = {
    "fori grad": lambda: variants(fori_workload, jax.lax.fori_loop, scanrewrite.runtime.fori_loop),
    "map grad": lambda: variants(map_workload, jax.lax.map, scanrewrite.runtime.map),
    "map grad, batch_size=8": lambda: variants(map_workload, jax.lax.map, scanrewrite.runtime.map, batch_size=8),
    "fori forward": lambda: variants(fori_workload, jax.lax.fori_loop, scanrewrite.runtime.fori_loop, forward_only=True),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed rounds (median)")
    parser.add_argument("--compile-repeats", type=int, default=3, help="compiles per variant (median)")
    args = parser.parse_args(argv)
    device = jax.devices()[0]
    print(f"steps={STEPS}, D={D}, examples={EXAMPLES}, on {device.platform}, jax {jax.__version__}\n")
    names = [f"k={k}" for k in KS]
    per_workload = len(KS) + 1
    progress = Progress(len(WORKLOADS) * (per_workload * (args.compile_repeats + 1) + args.repeats))
    header = "| workload | jax: temp, compile, step | " + " | ".join(
        f"{name}: temp, compile, step, max rel diff" for name in names
    )
    lines = [header + " |", "| --- | --- |" + " --- |" * len(names)]
    for workload, make in WORKLOADS.items():
        compiled, temp = {}, {}
        seconds = {name: [] for name in ["jax", *names]}
        for _ in range(args.compile_repeats):  # fresh functions, interleaved
            for name, (fn, fn_args) in make().items():
                compiled[name], spent, temp[name] = compile_with_costs(fn, *fn_args)
                seconds[name].append(spent)
                progress.step(f"{workload} compile {name}")
        seconds = {name: statistics.median(values) for name, values in seconds.items()}
        results = {name: jax.block_until_ready(fn(*fn_args)) for name, fn in compiled.items()}
        for name in compiled:
            progress.step(f"{workload} warm {name}")
        times = interleaved_times(compiled, fn_args, args.repeats, lambda _: progress.step(f"{workload} timing"))
        step = {name: statistics.median(values) for name, values in times.items()}
        cells = [
            f"{temp[name] / temp['jax']:.2f}x, {seconds[name] / seconds['jax']:.2f}x, {step[name] / step['jax']:.2f}x, "
            f"{max_rel_diff(results[name], results['jax']):.0e}"
            for name in names
        ]
        base = f"{temp['jax'] / 2**10:.0f} KiB, {seconds['jax']:.2f} s, {step['jax'] * 1e3:.2f} ms"
        lines.append(f"| {workload} | {base} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
