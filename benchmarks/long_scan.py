"""Benchmark long scans: memory and time of the gradient, with and without nested checkpointing.

Every variant computes `jax.grad` of the same loss under `jax.jit`: a scan of N steps whose
step is elementwise work on a carry of `--carry` floats (64 KiB by default) and reads one
scalar of `xs`. Variants: `jax.lax.scan`, `lax.scan(jax.checkpoint(f))`,
`equinox.internal.scan(kind="checkpointed")`, and `scanrewrite.runtime.scan` with `levels`
1, 2 and "auto" for each k. For each N it reports XLA's compiled temp memory (as MiB, as
carries, as a ratio to `lax.scan` and to `levels=1` at the same k), the carries
`levels` promises to keep (`_levels.saved_carries`), the step time as a ratio to
`lax.scan` (runs interleaved across variants, median), compile time, and the largest relative
difference of the gradient from `lax.scan`'s. A progress bar goes to stderr. Exits 1 if a
variant's gradient differs from `lax.scan`'s by more than `_common.agreement_rtol()`.

    python benchmarks/long_scan.py                     # N in 256, 1024, 4096; k in 1, 2, 4
    python benchmarks/long_scan.py --ns 1024 --ks 4 --repeats 3
    python benchmarks/long_scan.py --ks 4 --plot docs/img/long_scan.png   # and the figure
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable

import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from _common import Progress, agreement_rtol, compile_with_costs, figure, interleaved_times, max_rel_diff, save

import scanrewrite.runtime
from scanrewrite.runtime import _levels


def step(c, x):
    return jnp.sin(jnp.tanh(c * x) + c), None


def make_variants(ks: list[int]) -> dict[str, tuple[Callable, int | None, int | str | None]]:
    """name -> (scan(f, init, xs) -> (carry, ys), k, levels); k and levels for the runtime only."""
    runtime = scanrewrite.runtime.scan
    variants = {
        "lax.scan": (jax.lax.scan, None, None),
        "lax.scan(jax.checkpoint(f))": (lambda f, c, xs: jax.lax.scan(jax.checkpoint(f), c, xs), None, None),
        'eqxi.scan(kind="checkpointed")': (lambda f, c, xs: eqxi.scan(f, c, xs, kind="checkpointed"), None, None),
    }
    for k in ks:
        for levels in (1, 2, "auto"):
            run = lambda f, c, xs, k=k, levels=levels: runtime(f, c, xs, unroll=k, levels=levels)
            variants[f"scanrewrite k={k} levels={levels}"] = (run, k, levels)
    return variants


def measure(n: int, args, progress: Progress, measured: dict) -> list[str]:
    carry_shape = (args.carry // 128, 128)
    carry_bytes = 4 * math.prod(carry_shape)
    c0 = jax.random.normal(jax.random.PRNGKey(0), carry_shape)
    xs = jax.random.uniform(jax.random.PRNGKey(1), (n,), minval=0.5, maxval=1.5)
    compiled, rows = {}, {}
    for name, (scan_impl, k, levels) in make_variants(args.ks).items():
        grad = jax.grad(lambda c, xs, scan_impl=scan_impl: jnp.sum(scan_impl(step, c, xs)[0] ** 2))
        compiled[name], seconds, temp = compile_with_costs(jax.jit(grad), c0, xs)
        rows[name] = {"compile": seconds, "temp": temp, "k": k, "levels": levels}
        progress.step(f"N={n} compile {name}")
    reference = jax.block_until_ready(compiled["lax.scan"](c0, xs))
    for name, fn in compiled.items():
        rows[name]["diff"] = max_rel_diff(jax.block_until_ready(fn(c0, xs)), reference)
    times = interleaved_times(
        compiled, (c0, xs), args.repeats, lambda repeat: progress.step(f"N={n} timing, round {repeat + 1}")
    )
    base = statistics.median(times["lax.scan"])
    base_temp = rows["lax.scan"]["temp"]
    lines = [
        f"N = {n}:",
        "",
        (
            "| variant | levels built | carries kept (promised) | temp memory (MiB) | in carries | vs lax.scan "
            "| vs levels=1 | step time vs lax.scan | median step (ms) | compile (s) | max rel diff |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in rows.items():
        median = statistics.median(times[name])
        k, levels = row["k"], row["levels"]
        built = promised = vs_one = "-"
        if k is not None:
            chunks = n // k
            resolved = _levels.resolve(levels, chunks)
            built = str(_levels.built_levels(chunks, resolved))
            promised = str(_levels.saved_carries(chunks, resolved) + (n % k > 0))
            vs_one = f"{row['temp'] / rows[f'scanrewrite k={k} levels=1']['temp']:.3f}"
        lines.append(
            f"| {name} | {built} | {promised} | {row['temp'] / 2**20:.1f} | {row['temp'] / carry_bytes:.0f} "
            f"| {row['temp'] / base_temp:.3f} | {vs_one} | {median / base:.2f} | {median * 1e3:.1f} "
            f"| {row['compile']:.1f} | {row['diff']:.0e} |"
        )
        measured.setdefault(name, {})[n] = (row["temp"] / carry_bytes, median / base, row["diff"])
    return lines


def plot(measured: dict[str, dict[int, tuple[float, float, float]]], args) -> None:
    """Compiled temp memory (in carries) and step time (vs `lax.scan`) against N, one line per
    variant: the runtime's colour is its `levels`, its line style its k."""
    fig, axes = figure(2)
    colours = {"1": "tab:blue", "2": "tab:orange", "auto": "tab:green"}
    styles = ["-", "--", ":", "-."]
    for name, by_n in measured.items():
        ns = sorted(by_n)
        if name.startswith("scanrewrite"):
            k, levels = (part.split("=")[1] for part in name.split()[1:])
            style = dict(color=colours[levels], linestyle=styles[args.ks.index(int(k)) % len(styles)], marker="o")
        else:
            style = dict(color="grey", linestyle=styles[len(axes[0].lines) % len(styles)], marker="s")
        for ax, index in zip(axes, (0, 1)):
            ax.plot(ns, [by_n[n][index] for n in ns], label=name, **style)
    axes[0].set(xscale="log", yscale="log", xlabel="N (steps)", ylabel="compiled temp memory, in carries")
    axes[1].set(xscale="log", xlabel="N (steps)", ylabel="step time vs lax.scan", ylim=(0, None))
    for ax in axes:
        ax.minorticks_off()
        ax.set_xticks(args.ns, [str(n) for n in args.ns])
    axes[0].legend(fontsize=6)
    carry = f"{4 * args.carry / 1024:g} KiB"
    save(fig, args.plot, f"benchmarks/long_scan.py: jax.grad of N steps on a {carry} carry")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[256, 1024, 4096], help="scan lengths")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4], help="chunk sizes for the runtime")
    parser.add_argument("--carry", type=int, default=16384, help="float32 carry elements, a multiple of 128")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per variant")
    parser.add_argument("--plot", help="also write memory and step time against N to this image file (needs matplotlib)")
    args = parser.parse_args(argv)
    device = jax.devices()[0]
    print(
        f"carry {args.carry} float32 ({4 * args.carry // 1024} KiB), ks={args.ks}, repeats={args.repeats}, "
        f"on {device.platform} ({device.device_kind}), jax {jax.__version__}\n"
    )
    progress = Progress(len(args.ns) * (len(make_variants(args.ks)) + args.repeats))
    measured: dict = {}  # variant -> N -> (temp memory in carries, step time vs lax.scan, max rel diff)
    for n in args.ns:
        print("\n".join(measure(n, args, progress, measured)) + "\n", flush=True)
    if args.plot:
        plot(measured, args)
    worst = max(diff for by_n in measured.values() for _, _, diff in by_n.values())
    return 0 if worst <= agreement_rtol() else 1


if __name__ == "__main__":
    raise SystemExit(main())
