"""Benchmark the origin workload: one block of layers applied n times (a Universal Transformer).

Every variant computes `jax.value_and_grad` of the same loss under `jax.jit`: the block
(attention-style mixing, an MLP, layer norms, parameters shared across the n applications)
looped by `jax.lax.scan`, `lax.scan(unroll=k)` and `scanrewrite.runtime.scan(unroll=k)` for
each k, `lax.scan(jax.checkpoint(f))`, `equinox.internal.scan(kind="checkpointed")`, a Python
for-loop, and the runtime's other checkpoint modes. For each it reports the step time as a ratio
to `lax.scan` (runs interleaved across variants, median), XLA's compiled temp memory, compile
time, and the largest relative difference of the loss and gradients from `lax.scan`'s; a
variant that does not fit in the device's memory is a row that says so. Exits 1 if any variant's
results differ from `lax.scan`'s by more than `_common.agreement_rtol()`.

    python benchmarks/ut_scan.py                 # CPU-sized, under 2 minutes on 2 cores
    python benchmarks/ut_scan.py --gpu           # accelerator-sized preset
    python benchmarks/ut_scan.py --n 12 --ks 3 4 6 --width 128
    python benchmarks/ut_scan.py --ks 1 2 3 4 6 8 --plot docs/img/ut_scan.png  # and the figure
    python benchmarks/ut_scan.py --tune          # scanrewrite.tune on the same workload
    python benchmarks/ut_scan.py --tune --memory-budget 0.5x --policies none,dots_saveable
    scanrewrite-tune benchmarks/ut_scan.py:factory --diff   # the same through the command

`--tune` runs the tuner on the workload as `scanrewrite --unroll 4` leaves it (one site,
`unroll=4`) and prints its tables: every chunk size in `--ks` (default the tuner's 1, 2, 3, 4,
6, 8) against `lax.scan`, and the pick.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import math
import statistics
from collections.abc import Callable

import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from _common import (
    agreement_rtol,
    compile_lowered,
    compile_with_costs,
    figure,
    interleaved_times,
    lower_timed,
    max_rel_diff,
    save,
)

import scanrewrite.runtime

PRESETS = {
    "cpu": dict(batch=4, seq=32, width=64, n=8, ks=[1, 2, 4], repeats=15),
    "gpu": dict(batch=32, seq=512, width=512, n=12, ks=[2, 3, 4, 6], repeats=30),
}


def init_params(key, width: int) -> dict:
    keys = jax.random.split(key, 6)
    dense = lambda k, i, o: jax.random.normal(k, (i, o)) / math.sqrt(i)
    return {
        "q": dense(keys[0], width, width),
        "k": dense(keys[1], width, width),
        "v": dense(keys[2], width, width),
        "o": dense(keys[3], width, width),
        "up": dense(keys[4], width, 4 * width),
        "down": dense(keys[5], 4 * width, width),
        "ln1": jnp.ones(width),
        "ln2": jnp.ones(width),
    }


def layer_norm(h, scale):
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    return (h - mean) * jax.lax.rsqrt(var + 1e-5) * scale


def block(params: dict, h):
    """One application of the shared block to a (batch, seq, width) activation."""
    x = layer_norm(h, params["ln1"])
    q, k, v = x @ params["q"], x @ params["k"], x @ params["v"]
    scores = jnp.einsum("bsd,btd->bst", q, k) / math.sqrt(h.shape[-1])
    h = h + jnp.einsum("bst,btd->bsd", jax.nn.softmax(scores, axis=-1), v) @ params["o"]
    x = layer_norm(h, params["ln2"])
    return h + jax.nn.gelu(x @ params["up"]) @ params["down"]


def make_variants(n: int, ks: list[int], extras: bool = True) -> dict[str, Callable]:
    """name -> loop(step, h) that applies `step` n times to `h`: the origin discussion's
    variants, and with `extras` the rewrite's other settings at the largest k."""
    lax_scan = lambda step, h, **kw: jax.lax.scan(step, h, length=n, **kw)[0]
    runtime = lambda step, h, **kw: scanrewrite.runtime.scan(step, h, length=n, **kw)[0]

    def python_loop(step, h):
        for _ in range(n):
            h, _ = step(h, None)
        return h

    variants = {"lax.scan": lax_scan}
    for k in ks:
        if k > 1:  # unroll=1 is lax.scan itself
            variants[f"lax.scan(unroll={k})"] = functools.partial(lax_scan, unroll=k)
    variants |= {
        "lax.scan(jax.checkpoint(f))": lambda step, h: lax_scan(jax.checkpoint(step), h),
        'eqxi.scan(kind="checkpointed")': lambda step, h: eqxi.scan(
            step, h, None, n, kind="checkpointed"
        )[0],
        "Python for-loop": python_loop,
    }
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    for k in ks:
        variants[f"scanrewrite k={k}"] = functools.partial(runtime, unroll=k)
    if not extras:
        return variants
    k = ks[-1]
    variants[f"scanrewrite k={k}, checkpoint=False"] = functools.partial(runtime, unroll=k, checkpoint=False)
    variants[f"scanrewrite k={k}, dots_with_no_batch_dims_saveable"] = functools.partial(
        runtime, unroll=k, checkpoint=policy
    )
    variants[f'scanrewrite eqxi_scan(kind="checkpointed") k={k}'] = lambda step, h: (
        scanrewrite.runtime.eqxi_scan(step, h, None, n, kind="checkpointed", unroll=k)[0]
    )
    return variants


def run(args) -> tuple[str, bool]:
    """The Markdown table, and whether every variant's results agree with `lax.scan`'s."""
    key = jax.random.PRNGKey(0)
    params = init_params(key, args.width)
    h0 = jax.random.normal(jax.random.fold_in(key, 1), (args.batch, args.seq, args.width))

    def value_and_grad(loop):
        def loss(params, h0):
            step = lambda h, _: (block(params, h), None)
            return jnp.mean(loop(step, h0) ** 2)

        return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))

    compiled, rows, too_big = {}, {}, {}
    variants = make_variants(args.n, args.ks, extras=not args.origin_only)

    if args.compile_threads > 1:
        # Traced in this thread (the runtime's Python), compiled `compile_threads` at a time.
        with concurrent.futures.ThreadPoolExecutor(args.compile_threads) as pool:
            futures = {
                name: pool.submit(compile_lowered, *lower_timed(value_and_grad(loop), params, h0))
                for name, loop in variants.items()
            }
            concurrent.futures.wait(futures.values())
        attempts = {name: future.result for name, future in futures.items()}
    else:  # one after the other, so that each compile time is its own
        attempts = {
            name: functools.partial(compile_with_costs, value_and_grad(loop), params, h0) for name, loop in variants.items()
        }
    for name, attempt in attempts.items():
        try:
            result = attempt()
        except Exception as error:  # jax's XlaRuntimeError; its module moves between releases
            # An accelerator's compiler refuses a program larger than its memory: that is a
            # result (lax.scan's residuals are what the rewrite saves), not a crash.
            if "RESOURCE_EXHAUSTED" not in str(error) or name == "lax.scan":
                raise
            too_big[name] = str(error).strip().splitlines()[0][:120]
            continue
        compiled[name], seconds, temp = result
        rows[name] = {"compile": seconds, "temp": temp}
    reference = jax.block_until_ready(compiled["lax.scan"](params, h0))
    for name, fn in compiled.items():
        rows[name]["diff"] = max_rel_diff(jax.block_until_ready(fn(params, h0)), reference)
    times = interleaved_times(compiled, (params, h0), args.repeats)
    base = statistics.median(times["lax.scan"])
    base_temp = rows["lax.scan"]["temp"]
    lines = [
        "| variant | step time vs lax.scan | median step (ms) | temp memory (MiB) | vs lax.scan "
        f"| compile (s{f', {args.compile_threads} at a time' if args.compile_threads > 1 else ''}) | loss and grads agree |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    rtol = agreement_rtol()
    for name, row in rows.items():
        median = statistics.median(times[name])
        agree = "yes" if row["diff"] <= rtol else "NO"
        lines.append(
            f"| {name} | {median / base:.2f} | {median * 1e3:.1f} | {row['temp'] / 2**20:.2f} "
            f"| {row['temp'] / base_temp:.2f} | {row['compile']:.1f} | {agree} ({row['diff']:.0e}) |"
        )
        row["time"], row["memory"] = median / base, row["temp"] / base_temp
    lines += [f"| {name} | - | - | out of memory | - | - | {error} |" for name, error in too_big.items()]
    if args.plot:
        plot(rows, args)
    return "\n".join(lines), all(row["diff"] <= rtol for row in rows.values())


def plot(rows: dict[str, dict], args) -> None:
    """Step time and compiled temp memory of `scanrewrite k=K` against k, as ratios to
    `lax.scan`, beside the other loops as horizontal lines."""
    fig, axes = figure(2)
    ks = [k for k in args.ks if f"scanrewrite k={k}" in rows]
    others = ("lax.scan", "lax.scan(jax.checkpoint(f))", 'eqxi.scan(kind="checkpointed")', "Python for-loop")
    for ax, key, label in zip(axes, ("time", "memory"), ("step time", "compiled temp memory")):
        ax.plot(ks, [rows[f"scanrewrite k={k}"][key] for k in ks], "o-", color="black", label="scanrewrite k")
        for name, style in zip(others, ("-", "--", ":", "-.")):
            if name in rows:
                ax.axhline(rows[name][key], linestyle=style, color="grey", label=name)
        ax.set(xlabel="k (unroll)", ylabel=f"{label} vs lax.scan", xticks=ks, ylim=(0, None))
    axes[0].legend(fontsize=7)
    size = f"batch {args.batch}, seq {args.seq}, width {args.width}"
    save(fig, args.plot, f"benchmarks/ut_scan.py: value_and_grad of the block applied n={args.n} times ({size})")


def tune_site(params, h0, n: int):
    """The workload's loss and gradients with its loop written as `scanrewrite --unroll 4`
    writes it: the one site the tuner measures."""

    def loss(params, h0):
        step = lambda h, _: (block(params, h), None)
        h, _ = scanrewrite.runtime.scan(step, h0, length=n, unroll=4)
        return jnp.mean(h**2)

    return jax.value_and_grad(loss, argnums=(0, 1)), (params, h0)


def factory():
    """For `scanrewrite-tune benchmarks/ut_scan.py:factory`: the workload at the CPU preset's size."""
    preset = PRESETS["cpu"]
    key = jax.random.PRNGKey(0)
    params = init_params(key, preset["width"])
    h0 = jax.random.normal(jax.random.fold_in(key, 1), (preset["batch"], preset["seq"], preset["width"]))
    return tune_site(params, h0, preset["n"])


def run_tune(args) -> str:
    import os

    from scanrewrite.tune import tune
    from scanrewrite.tune._command import _Bar

    key = jax.random.PRNGKey(0)
    params = init_params(key, args.width)
    h0 = jax.random.normal(jax.random.fold_in(key, 1), (args.batch, args.seq, args.width))
    fn, fn_args = tune_site(params, h0, args.n)
    bar = _Bar(enabled=True)
    try:
        report = tune(
            fn, fn_args, ks=args.tune_ks, repeats=args.repeats,
            memory_budget=args.memory_budget, checkpoints=args.policies, progress=bar,
        )
    finally:
        bar.close()
    return report.table(lambda site: f"{os.path.relpath(site.path)}:{site.line}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="accelerator-sized preset (flags still override)")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--seq", type=int)
    parser.add_argument("--width", type=int)
    parser.add_argument("--n", type=int, help="applications of the block (scan length)")
    parser.add_argument("--ks", type=int, nargs="+", help="chunk sizes for scanrewrite; the last is also lax.scan's unroll")
    parser.add_argument("--repeats", type=int, help="timed runs per variant")
    parser.add_argument(
        "--origin-only", action="store_true", help="only the origin discussion's variants (not checkpoint=False, a policy, eqxi_scan)"
    )
    parser.add_argument(
        "--compile-threads", type=int, default=1, help="compile this many variants at a time (their compile times then overlap)"
    )
    parser.add_argument("--plot", help="also write step time and memory against k to this image file (needs matplotlib)")
    parser.add_argument("--tune", action="store_true", help="run scanrewrite.tune on the workload and print its tables")
    parser.add_argument("--memory-budget", help="with --tune: bytes ('2GiB') or a fraction of lax.scan's ('0.5x')")
    parser.add_argument("--policies", default="", help="with --tune: checkpoint modes to try too, e.g. none,dots_saveable")
    args = parser.parse_args(argv)
    args.tune_ks = args.ks
    for name, value in PRESETS["gpu" if args.gpu else "cpu"].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.tune:
        from scanrewrite.tune import DEFAULT_KS

        args.tune_ks = list(args.tune_ks or DEFAULT_KS)
    device = jax.devices()[0]
    print(
        f"batch={args.batch} seq={args.seq} width={args.width} n={args.n} "
        f"ks={args.tune_ks if args.tune else args.ks} "
        f"repeats={args.repeats} on {device.platform} ({device.device_kind}), jax {jax.__version__}\n"
    )
    if args.tune:
        print(run_tune(args))
        return 0
    table, agree = run(args)
    print(table)
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
