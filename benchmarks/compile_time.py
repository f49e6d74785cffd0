"""Compile time of `scanrewrite.runtime.scan(unroll=k)` against the `jax.lax.scan` it replaces.

The workload is the origin block (`ut_scan.block`: layer norms, attention-style mixing, an MLP;
parameters shared) applied N times, small enough that compiling is nearly all of the cost,
as in a unit test. The step closes over the parameters, as users write it. For every N and k,
four ways of paying for compilation, each a ratio of the runtime's seconds to `lax.scan`'s:

- jit forward / jit gradient: `jax.jit(loss)` or `jax.jit(jax.value_and_grad(loss))`, timed
  from trace to compiled executable (`.lower(...).compile()`);
- eager forward / eager gradient: the first call of the scan (or of `jax.value_and_grad` of the
  loss) without `jit`, for a fresh step function: trace, compile and one run.

Every program is new to jax's caches (a fresh step closure each time) and, unless `--rebuilt`,
to the runtime's: its cache of programs by the structure of the step (`_staging._by_structure`,
which serves a closure made anew with the program compiled for the one before) is cleared
before each cell, so each cell is a first sight. With `--rebuilt` it is not: from the second
round on, an eager cell of the runtime finds the program its closure's structure compiled in
the round before, as a test suite does that calls the same loss again (a `jit` cell compiles
the whole program anyway; `jax.lax.scan` compiles every new closure). A warm-up round is not
counted. Cells are medians over `--repeats` rounds, and each round measures `lax.scan` and every
k for one N one after another, so load from other processes falls on all of them alike. Two
clocks: the process's CPU time (robust on a shared machine) and wall time (what a user waits;
on an idle machine it is lower where XLA compiles kernels on several threads). A k at or above
N builds the same program as k = N and is measured once. `--costs` adds the compiled temp
memory (exact) and the step time (median of interleaved runs) of the jit programs, also as
ratios to `lax.scan`.

    python benchmarks/compile_time.py                  # k 1..8, N 1 7 8 12 13 50 64; ~18 min idle
    python benchmarks/compile_time.py --quick          # k 1 3 4 8, N 8 13
    python benchmarks/compile_time.py --ns 8 --ks 3 --kinds jit-grad --repeats 7
    python benchmarks/compile_time.py --layout straight --costs
    python benchmarks/compile_time.py --layout rolled --costs   # the CPU's chunks, of k steps exactly
    python benchmarks/compile_time.py --layout straight --unrolled-base   # also against lax.scan(unroll=k)
    python benchmarks/compile_time.py --workload ekf   # the EKF step of eager_overhead.py, N 50
    python benchmarks/compile_time.py --workload ekf --kinds eager-grad --where   # where the time goes
    python benchmarks/compile_time.py --workload ekf --kinds eager-grad --rebuilt # a closure rebuilt

`--workload ekf` measures the extended Kalman filter step of `benchmarks/eager_overhead.py` (an
8-dim state, a `jax.jacfwd`, a `jnp.linalg.solve`; its carry outweighs its residuals less than
the origin block's) over N = 50 observations, differentiated with respect to the initial mean.

`--where` splits each cell's CPU time into XLA's compilation (per program), lowering to MLIR,
and the rest (tracing, differentiating, dispatching and running), by timing two of jax's
internal functions (`jax._src.compiler.backend_compile_and_load`, `jax._src.interpreters.mlir.
lower_jaxpr_to_module`); it says so and times nothing where this jax has other names.

`--unrolled-base` also measures `jax.lax.scan(..., unroll=k)`, jax's own way to unroll k steps,
and prints the runtime's seconds as ratios to it: on the straight-line layout (accelerators)
the runtime compiles k copies of the step, which is the unrolling asked for, not a cost of the
rewrite.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import eager_overhead
import jax
import jax.numpy as jnp
import ut_scan
from _common import LAYOUTS, Progress, interleaved_times, pin_layout

import scanrewrite.runtime
from scanrewrite.runtime import _staging

KINDS = ("jit-forward", "jit-grad", "eager-forward", "eager-grad")
BASE = "lax.scan"


def loop_of(impl: str | int | tuple, n: int) -> Callable:
    """`(step, h, xs) -> (final h, ys)` for `lax.scan`, `lax.scan(unroll=k)` (`impl` =
    `(BASE, k)`), or the runtime with k = `impl`."""
    if impl == BASE:
        return lambda step, h, xs: jax.lax.scan(step, h, xs, length=n)
    if isinstance(impl, tuple):
        return lambda step, h, xs: jax.lax.scan(step, h, xs, length=n, unroll=impl[1])
    return lambda step, h, xs: scanrewrite.runtime.scan(step, h, xs, length=n, unroll=impl)


def program(kind: str, impl: str | int, n: int, workload: str = "origin") -> Callable:
    """The function whose compilation is measured, with a fresh step closure in every trace."""
    loop = loop_of(impl, n)
    if workload == "ekf":

        def loss(m0, observations):
            step = eager_overhead.make_step()
            return loop(step, (m0, jnp.eye(eager_overhead.D)), observations)[1].sum()

        return jax.value_and_grad(loss) if kind.endswith("grad") else loss

    def loss(params, h0):
        step = lambda h, _: (ut_scan.block(params, h), None)
        return jnp.mean(loop(step, h0, None)[0] ** 2)

    return jax.value_and_grad(loss, argnums=(0, 1)) if kind.endswith("grad") else loss


def timed(fn: Callable[[], object]) -> tuple[object, float, float]:
    """(what `fn()` returned, CPU seconds of this process, wall seconds)."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


# CPU seconds spent in jax's XLA compilation and lowering calls, appended per call (`--where`).
SPENT: dict[str, list[float]] = {"xla": [], "lowering": []}


def time_internals() -> bool:
    """Wrap the jax internals that `--where` times; False where this jax has other names."""
    from jax._src import compiler
    from jax._src.interpreters import mlir

    targets = ((compiler, "backend_compile_and_load", "xla"), (mlir, "lower_jaxpr_to_module", "lowering"))
    if not all(hasattr(module, name) for module, name, _ in targets):
        return False
    for module, name, key in targets:

        def wrapped(*a, _inner=getattr(module, name), _key=key, **k):
            start = time.process_time()
            try:
                return _inner(*a, **k)
            finally:
                SPENT[_key].append(time.process_time() - start)

        setattr(module, name, wrapped)
    return True


def measure(
    kind: str, impl: str | int, n: int, args: tuple, workload: str = "origin", rebuilt: bool = False
) -> tuple[object, float, float]:
    if not rebuilt:  # a first sight: new to the runtime's cache of programs by structure too
        _staging._structures.clear()
    fn = program(kind, impl, n, workload)
    if kind.startswith("jit"):
        return timed(lambda: jax.jit(fn).lower(*args).compile())
    return timed(lambda: jax.block_until_ready(fn(*args)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=list(range(1, 9)))
    parser.add_argument("--ns", type=int, nargs="+", help="default: 1 7 8 12 13 50 64 (origin), 50 (ekf)")
    parser.add_argument("--workload", choices=("origin", "ekf"), default="origin")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--repeats", type=int, default=3, help="rounds (median)")
    parser.add_argument("--quick", action="store_true", help="k 1 3 4 8 (origin: N 8 13)")
    parser.add_argument("--layout", choices=LAYOUTS, default="backend")
    parser.add_argument("--costs", action="store_true", help="also temp memory and step time (jit)")
    parser.add_argument("--before", choices=LAYOUTS, help="with --costs: also as ratios to this layout's programs")
    parser.add_argument("--unrolled-base", action="store_true", help="also as ratios to lax.scan(unroll=k)")
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--where", action="store_true", help="also CPU time in XLA compilation and lowering")
    parser.add_argument("--rebuilt", action="store_true", help="keep the runtime's programs by structure between rounds")
    args = parser.parse_args(argv)
    if args.ns is None:
        args.ns = [50] if args.workload == "ekf" else [1, 7, 8, 12, 13, 50, 64]
    if args.quick:
        args.ks, args.ns = [1, 3, 4, 8], args.ns if args.workload == "ekf" else [8, 13]
    key = jax.random.PRNGKey(0)
    if args.workload == "ekf":
        if len(set(args.ns)) > 1:
            parser.error("--workload ekf: one N (the observations' length)")
        observations = jax.random.normal(jax.random.PRNGKey(1), (args.ns[0], eager_overhead.D // 2))
        inputs = (jnp.zeros(eager_overhead.D), observations)
    else:
        inputs = (ut_scan.init_params(key, args.width), jax.random.normal(key, (2, 8, args.width)))
    impls = {n: [BASE, *sorted({min(k, n) for k in args.ks})] for n in args.ns}
    if args.unrolled_base:
        impls = {n: [*ks, *((BASE, k) for k in ks[1:] if k > 1)] for n, ks in impls.items()}
    cells = [(kind, impl, n) for n in args.ns for kind in args.kinds for impl in impls[n]]
    layout = pin_layout(args.layout)
    what = "EKF step (8-dim state)" if args.workload == "ekf" else f"origin block (batch 2, seq 8, width {args.width})"
    print(
        f"{what}; {args.repeats} rounds; jax {jax.__version__} on "
        f"{jax.devices()[0].platform}; layout: chunk {'rolled' if layout.rolled_chunk else 'straight'}, "
        f"leftover steps {'rolled' if layout.rolled_rest else 'straight'}, "
        f"chunk size {'fitted to the step' if layout.fit_chunk else 'k'}; "
        f"{'closures rebuilt (programs by structure kept)' if args.rebuilt else 'first sight (cache cleared)'}\n"
    )
    if args.where and not time_internals():
        print("--where: this jax has other internal names; nothing split\n")
        args.where = False
    progress = Progress(len(cells) * (args.repeats + 1))
    seconds: dict[tuple, list[tuple[float, float]]] = {cell: [] for cell in cells}
    spent: dict[tuple, list[tuple[float, float, list[float]]]] = {cell: [] for cell in cells}
    compiled: dict[tuple, object] = {}
    for repeat in range(args.repeats + 1):  # round 0 warms jax and the per-op caches up
        for cell in cells:
            for calls in SPENT.values():
                calls.clear()
            out, cpu, wall = measure(*cell, inputs, args.workload, args.rebuilt)
            if repeat:
                seconds[cell].append((cpu, wall))
                spent[cell].append((sum(SPENT["xla"]), sum(SPENT["lowering"]), SPENT["xla"][:]))
            elif args.costs and cell[0].startswith("jit"):
                compiled[cell] = out
            progress.step(f"round {repeat}: {cell[0]} {cell[1]} N={cell[2]}")
    for clock, index in (("CPU", 0), ("wall", 1)):
        for kind in args.kinds:
            median = {(impl, n): statistics.median(s[index] for s in seconds[kind, impl, n]) for _, impl, n in cells}
            print_table(f"{kind} compile, {clock} time", args, median, lambda n: f"{n:.2f} s")
            if args.unrolled_base:
                unrolled = {(k, n): median[(BASE, k) if k > 1 else BASE, n] for (k, n) in median if isinstance(k, int)}
                what = "runtime / lax.scan(unroll=k)"
                print_table(f"{kind} compile, {clock} time", args, median, lambda n: f"{n:.2f} s", unrolled, what)
    if args.where:
        where(seconds, spent, cells)
    if args.costs:
        before = {}
        if args.before:
            pin_layout(args.before)
            before = {cell: measure(*cell, inputs, args.workload)[0] for cell in compiled}
            pin_layout(args.layout)
        costs(compiled, before, impls, args, inputs)
    return 0


def print_table(
    title: str,
    args,
    values: dict[tuple, float],
    show_base: Callable[[float], str],
    base: dict | None = None,
    what: str | None = None,
) -> None:
    """A markdown table of `values[k, n] / values[lax.scan, n]`, a row per N, a column per k; with
    `base`, of `values[k, n] / base[k, n]` instead (`base` holding the same keys), said to be
    `what` (by default, the ratio of this layout to the one before)."""
    if base is None:
        ratio = {(k, n): values[min(k, n), n] / values[BASE, n] for n in args.ns for k in args.ks}
        what, first = "runtime / lax.scan", "lax.scan"
    else:
        ratio = {(k, n): values[min(k, n), n] / base[min(k, n), n] for n in args.ns for k in args.ks}
        what, first = what or f"layout {args.layout} / layout {args.before}", f"lax.scan ({args.layout})"
    worst, (k, n) = max((r, kn) for kn, r in ratio.items())
    print(f"{title}: {what} (worst {worst:.2f}x at k={k}, N={n})\n")
    print(f"| N | {first} | " + " | ".join(f"k={k}" for k in args.ks) + " |")
    print("| ---: | ---: |" + " ---: |" * len(args.ks))
    for n in args.ns:
        print(f"| {n} | {show_base(values[BASE, n])} | " + " | ".join(f"{ratio[k, n]:.2f}" for k in args.ks) + " |")
    print()


def where(seconds: dict, spent: dict, cells: list) -> None:
    """Per cell, the median CPU seconds in all, in XLA's compilation, in lowering, and the rest,
    with the XLA seconds of each program of the last round that took more than 20 ms."""
    print("CPU time: where it goes (median seconds)\n")
    print("| program | N | impl | total | vs lax.scan | XLA compile | lowering | rest | programs (XLA s) |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for kind, impl, n in cells:
        total = statistics.median(cpu for cpu, _ in seconds[kind, impl, n])
        base = statistics.median(cpu for cpu, _ in seconds[kind, BASE, n])
        xla, lowering = (statistics.median(s[i] for s in spent[kind, impl, n]) for i in (0, 1))
        programs = ", ".join(f"{s:.2f}" for s in spent[kind, impl, n][-1][2] if s > 0.02)
        print(
            f"| {kind} | {n} | {impl} | {total:.2f} | {total / base:.2f}x | {xla:.2f} | {lowering:.2f} | "
            f"{total - xla - lowering:.2f} | {programs} |"
        )
    print()


def costs(compiled: dict, before: dict, impls: dict, args, inputs: tuple) -> None:
    """Temp memory and step time of the jit programs, as ratios to `lax.scan`'s, and where
    `before` holds the same programs built with another layout, as ratios to those too (timed
    interleaved with them)."""
    kinds = [kind for kind in args.kinds if kind.startswith("jit")]
    progress = Progress(len(kinds) * len(args.ns))
    temp, steps = {}, {}
    for kind in kinds:
        for n in args.ns:
            fns = {(kind, impl, n): compiled[kind, impl, n] for impl in impls[n]}
            fns |= {("before", *cell): before[cell] for cell in fns if cell in before}
            for cell, times in interleaved_times(fns, inputs, repeats=15).items():
                steps[cell] = statistics.median(times)
                temp[cell] = max(fns[cell].memory_analysis().temp_size_in_bytes, 1)  # a forward pass may need none
            progress.step(f"step time {kind} N={n}")
    in_kind = lambda values, *prefix: {cell[-2:]: v for cell, v in values.items() if cell[:-2] == prefix}
    tables = (
        ("temp memory", temp, lambda b: f"{b / 1024:.0f} KiB"),
        ("step time", steps, lambda t: f"{t * 1e3:.2f} ms"),
    )
    for kind in kinds:
        for name, values, show in tables:
            print_table(f"{kind} {name}", args, in_kind(values, kind), show)
            if before:
                print_table(f"{kind} {name}", args, in_kind(values, kind), show, in_kind(values, "before", kind))


if __name__ == "__main__":
    sys.exit(main())
