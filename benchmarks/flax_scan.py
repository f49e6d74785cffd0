"""Flax's scans over layers and their rewrites: compiled temp memory, step and compile time.

The workload is a stack of DEPTH residual MLP blocks with LayerNorm, the gradient of a loss
under `jax.jit`. Side by side in one run, each group against its own baseline:

- NNX (blocks built with `nnx.vmap`): `nnx.scan`, `nnx.scan` over `nnx.remat`, and the rewrite
  (`scanrewrite.runtime.nnx_scan(..., unroll=k)` of the scan over `nnx.remat`) at several k;
- Linen: `nn.scan(nn.remat(Block))`, `nn.remat_scan` (nested, lengths whose product is DEPTH,
  where DEPTH allows) and the rewrite (`scanrewrite.runtime.linen_scan`) at several k.

Columns are ratios to the group's first row: step time (median of interleaved calls), compiled
temp memory (exact, `memory_analysis`), compile time (lower + compile), and the largest relative
difference of the loss and gradients from the baseline (`nn.remat_scan` has a parameter tree
of its own, so it has none).

    python benchmarks/flax_scan.py                      # DEPTH=16, k 2 4 8
    python benchmarks/flax_scan.py --depth 48 --dim 256 --ks 4 8 --repeats 20
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys

import jax
import jax.numpy as jnp
from _common import Progress, compile_with_costs, interleaved_times, max_rel_diff

import scanrewrite.runtime


def nnx_programs(depth: int, dim: int, seq: int, ks: list[int]) -> dict[str, tuple]:
    """name -> (jitted gradient, its arguments)."""
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.norm = nnx.LayerNorm(dim, rngs=rngs)
            self.up = nnx.Linear(dim, 4 * dim, rngs=rngs)
            self.down = nnx.Linear(4 * dim, dim, rngs=rngs)

        def __call__(self, x):
            return x + self.down(jax.nn.gelu(self.up(self.norm(x))))

    @nnx.vmap(in_axes=0, out_axes=0)
    def make(key):
        return Block(nnx.Rngs(key))

    graphdef, state = nnx.split(make(jax.random.split(jax.random.key(0), depth)))
    x = jnp.linspace(-1.0, 1.0, seq * dim).reshape(seq, dim)

    def program(scan, remat):
        body = (lambda x, block: block(x)) if not remat else nnx.remat(lambda x, block: block(x))
        forward = scan(body)

        def grad(state, x):
            return nnx.grad(lambda blocks, x: jnp.mean(forward(x, blocks) ** 2))(nnx.merge(graphdef, state), x)

        return jax.jit(grad), (state, x)

    axes = dict(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    programs = {
        "nnx.scan": program(lambda body: nnx.scan(body, **axes), False),
        "nnx.scan(nnx.remat)": program(lambda body: nnx.scan(body, **axes), True),
    }
    for k in ks:
        rewrite = lambda body, k=k: scanrewrite.runtime.nnx_scan(body, **axes, unroll=k)  # noqa: E731
        programs[f"rewrite of nnx.scan(nnx.remat), k={k}"] = program(rewrite, True)
    return programs


def _remat_scan_lengths(depth: int) -> tuple[int, int] | None:
    """Two lengths whose product is `depth`, as close to its square root as divisors allow."""
    best = max((a for a in range(2, int(math.isqrt(depth)) + 1) if depth % a == 0), default=None)
    return None if best is None else (best, depth // best)


def linen_programs(depth: int, dim: int, seq: int, ks: list[int]) -> dict[str, tuple]:
    import flax.linen as nn

    def residual(x):
        return x + nn.Dense(dim)(jax.nn.gelu(nn.Dense(4 * dim)(nn.LayerNorm()(x))))

    class Block(nn.Module):  # a scan body: (carry, x) -> (carry, y)
        @nn.compact
        def __call__(self, x, _):
            return residual(x), None

    class NestedBlock(nn.Module):  # an `nn.remat_scan` body: carry -> carry
        @nn.compact
        def __call__(self, x):
            return residual(x)

    x = jnp.linspace(-1.0, 1.0, seq * dim).reshape(seq, dim)
    options = dict(variable_axes={"params": 0}, split_rngs={"params": True}, in_axes=nn.broadcast, length=depth)

    def program(stack):
        variables = stack.init(jax.random.key(0), x, None)

        def grad(params, x):
            return jax.grad(lambda params: jnp.mean(stack.apply({"params": params}, x, None)[0] ** 2))(params)

        return jax.jit(grad), (variables["params"], x)

    programs = {"nn.scan(nn.remat(Block))": program(nn.scan(nn.remat(Block), **options)())}
    lengths = _remat_scan_lengths(depth)
    if lengths is not None:
        nested = nn.remat_scan(NestedBlock, lengths=lengths)()
        params = nested.init(jax.random.key(0), x)["params"]

        def nested_grad(params, x):
            return jax.grad(lambda params: jnp.mean(nested.apply({"params": params}, x) ** 2))(params)

        programs[f"nn.remat_scan, lengths={lengths}"] = (jax.jit(nested_grad), (params, x))
    for k in ks:
        stack = scanrewrite.runtime.linen_scan(nn.remat(Block), **options, unroll=k)()
        programs[f"rewrite of nn.scan(nn.remat), k={k}"] = program(stack)
    return programs


def measure(groups: dict[str, dict[str, tuple]], repeats: int) -> list[tuple[str, str, float, float, float, str]]:
    progress = Progress(sum(len(programs) for programs in groups.values()))
    rows = []
    for programs in groups.values():
        compiled, costs, results = {}, {}, {}
        for name, (jitted, args) in programs.items():
            compiled[name], seconds, temp = compile_with_costs(jitted, *args)
            costs[name] = (seconds, temp)
            results[name] = compiled[name](*args)
            progress.step(name)
        # Each with its own arguments bound (`nn.remat_scan` has a tree of its own).
        bound = {name: functools.partial(fn, *programs[name][1]) for name, fn in compiled.items()}
        times = interleaved_times(bound, (), repeats)
        base = next(iter(compiled))
        for name in compiled:
            shapes = [jax.tree_util.tree_map(jnp.shape, results[n]) for n in (name, base)]
            same_tree = jax.tree_util.tree_structure(results[name]) == jax.tree_util.tree_structure(results[base])
            same_tree = same_tree and shapes[0] == shapes[1]
            diff = f"{max_rel_diff(results[name], results[base]):.1e}" if same_tree else "n/a"
            rows.append(
                (
                    base,
                    name,
                    statistics.median(times[name]) / statistics.median(times[base]),
                    costs[name][1] / max(costs[base][1], 1),
                    costs[name][0] / costs[base][0],
                    diff,
                )
            )
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    groups = {
        "nnx": nnx_programs(args.depth, args.dim, args.seq, args.ks),
        "linen": linen_programs(args.depth, args.dim, args.seq, args.ks),
    }
    rows = measure(groups, args.repeats)
    print(f"depth={args.depth} dim={args.dim} seq={args.seq} on {jax.devices()[0].platform}; ratios to the group's first row")
    print("| program | step time | temp memory | compile time | max rel diff |")
    print("|---|---|---|---|---|")
    for base, name, step, temp, compile_time, diff in rows:
        print(f"| {name} | {step:.2f} | {temp:.2f} | {compile_time:.2f} | {diff} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
