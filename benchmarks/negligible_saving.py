"""Where checkpointing saves nothing that matters: the plain rewrite against `jax.lax.scan`.

Two workloads, each the gradient of a float32 loss under `jax.jit`, at several sizes:

- `flow`: a normalizing flow's stack of `--layers` autoregressive layers, looped by a scan over
  the stacked layers whose step scans over the `--dims` dimensions, each conditioned by a small
  network on those already transformed (issue 53's spline flow, in small: a layer's inverse);
- `block`: the origin block (`ut_scan.block`) applied N times.

Three programs at each size, side by side in one run, timed in interleaved rounds:

- `lax.scan`: what the user wrote (both loops `jax.lax.scan`);
- `before`: the plain rewrite (`scanrewrite.runtime.scan(unroll=4)` for every loop) with the
  rule off (`negligible_saving=0`: always checkpointed), as the runtime was;
- `after`: the plain rewrite with the backend's own layout: not checkpointed where the runtime's
  count says checkpointing would save `_chunks.NEGLIGIBLE_SAVING` bytes or less.

Columns: what checkpointing would save by the runtime's count (`_memory.saving`, of the outer
loop), what `after` built (`record_sites`), each program's step time as a ratio to `lax.scan`'s
(the median over the rounds of each round's ratio), whether `after` compiled to `lax.scan`'s
very program (XLA's text without source locations) and XLA's compiled temp memory. Exits 1
where a rewrite's results differ from `lax.scan`'s by more than `_common.agreement_rtol()`, or
with `--check` where the saving is negligible and `after` is neither `lax.scan`'s program nor
within 1.05x its time, or where it is not and `after` keeps as much memory as `lax.scan`.

    python benchmarks/negligible_saving.py                # both workloads, CPU sizes (~2 minutes)
    python benchmarks/negligible_saving.py --smoke        # one tiny size of each, for CI
    python benchmarks/negligible_saving.py --workloads flow --batches 256 4096 --repeats 40
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys

import jax
import jax.numpy as jnp
import ut_scan
from _common import Progress, agreement_rtol, compile_with_costs, interleaved_times, max_rel_diff

import scanrewrite.runtime
from scanrewrite.runtime import _chunks

UNROLL = 4
PROGRAMS = ("lax.scan", "before", "after")


def flow_loss(loop):
    """The flow's loss on `((w1, w2), x)`: per layer a conditioner (w1 (dims, hidden), w2 (dims,
    hidden, 3)) that reads the dimensions already transformed; `x` (batch, dims)."""

    def layer(x, weights):
        w1, w2 = weights

        def dim(z, inp):
            i, w2i, xi = inp
            hidden = jnp.tanh(z @ w1)  # dimension i is conditioned on those already transformed
            shift, log_scale, skew = jnp.moveaxis(hidden @ w2i, -1, 0)
            scale = jax.nn.softplus(log_scale) + 1e-3
            bend = jnp.tanh(skew * xi)
            y = xi * scale + shift + 0.1 * bend
            return z.at[:, i].set(y), jnp.log(scale + 0.1 * skew * (1 - bend**2) + 1.0)

        z, log_dets = loop(dim, jnp.zeros_like(x), (jnp.arange(x.shape[1]), w2, x.T))
        return z[:, ::-1], jnp.sum(log_dets)

    def loss(weights, x):
        z, log_dets = loop(layer, x, weights)
        return 0.5 * jnp.mean(z**2) - jnp.sum(log_dets) / x.shape[0]

    return loss


def block_loss(loop, n):
    def loss(params, h0):
        h, _ = loop(lambda h, _: (ut_scan.block(params, h), None), h0, length=n)
        return jnp.mean(h**2)

    return loss


def loops() -> dict:
    lax_scan = lambda f, init, xs=None, length=None: jax.lax.scan(f, init, xs, length)
    rewrite = lambda f, init, xs=None, length=None: scanrewrite.runtime.scan(f, init, xs, length, unroll=UNROLL)
    return {"lax.scan": lax_scan, "before": rewrite, "after": rewrite}


def cases(args) -> list[tuple[str, object, tuple]]:
    """(label, loss of a loop, its inputs) for every size asked for."""
    key = jax.random.PRNGKey(0)
    found = []
    if "flow" in args.workloads:
        for batch in args.batches:
            keys = jax.random.split(key, 3)
            w1 = jax.random.normal(keys[0], (args.layers, args.dims, args.hidden)) / math.sqrt(args.dims)
            w2 = jax.random.normal(keys[1], (args.layers, args.dims, args.hidden, 3)) / math.sqrt(args.hidden)
            x = jax.random.normal(keys[2], (batch, args.dims))
            label = f"flow {args.layers} layers x {args.dims} dims, batch {batch}"
            found.append((label, flow_loss, ((w1, w2), x)))
    if "block" in args.workloads:
        params = ut_scan.init_params(key, args.width)
        h0 = jax.random.normal(jax.random.fold_in(key, 1), (args.block_batch, args.seq, args.width))
        for n in args.ns:
            found.append((f"block width {args.width}, N={n}", lambda loop, n=n: block_loss(loop, n), (params, h0)))
    return found


def measure(make_loss, inputs, repeats: int) -> dict:
    """Each program's step time as a ratio to `lax.scan`'s and its temp memory, the largest
    difference of the rewrites' results from `lax.scan`'s, what `after`'s outer loop saves and
    builds, and whether it compiled to `lax.scan`'s program."""
    saved, backend = _chunks._FORCE_LAYOUT, _chunks.layout()
    layouts = {"lax.scan": backend, "before": backend._replace(negligible_saving=0), "after": backend}
    compiled, temp, plans = {}, {}, {}
    try:
        for name, loop in loops().items():
            _chunks._FORCE_LAYOUT = layouts[name]
            with scanrewrite.runtime.record_sites() as sites:
                fn = jax.jit(jax.value_and_grad(make_loss(loop), argnums=(0, 1)))
                compiled[name], _, temp[name] = compile_with_costs(fn, *inputs)
            plans[name] = [plan for built in sites.plans.values() for plan in built]
    finally:
        _chunks._FORCE_LAYOUT = saved
    times = interleaved_times(compiled, inputs, repeats)
    base = times["lax.scan"]
    # Each round's ratio, then their median: load from other processes falls on both alike.
    ratio = {name: statistics.median(t / b for t, b in zip(values, base)) for name, values in times.items()}
    expected = compiled["lax.scan"](*inputs)
    diff = max(max_rel_diff(compiled[name](*inputs), expected) for name in ("before", "after"))
    # The outer loop's plan is the one built last: an inner scan is planned while its step traces.
    outer = plans["after"][-1]
    same = _hlo(compiled["after"]) == _hlo(compiled["lax.scan"])
    return dict(ratio=ratio, base=statistics.median(base), temp=temp, diff=diff, saving=_saving(outer),
                chunk=outer.chunk, same=same)  # fmt: skip


def _hlo(compiled) -> str:
    """The compiled program's text without its source locations: two programs that XLA compiled
    alike compare equal, whichever Python built them."""
    text = re.sub(r", metadata=\{[^}]*\}", "", compiled.as_text())
    tables = re.compile(r"^(\d+ |FileNames|FunctionNames|FileLocations|StackFrames)")
    return "\n".join(line for line in text.splitlines() if not tables.match(line))


def _saving(plan) -> tuple[int, bool] | None:
    """(the saving a plan's reason states, whether it was negligible), where it states one."""
    for reason in plan.reasons:
        for phrase, negligible in (("it would save ", True), ("it saves ", False)):
            if phrase in reason:
                return int(reason.split(phrase)[1].split(" bytes")[0]), negligible
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=("flow", "block"), default=["flow", "block"])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--dims", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=32, help="the conditioner's width")
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64, 256, 360, 512, 1024, 4096])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--block-batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--ns", type=int, nargs="+", default=[4, 8, 16, 20, 32, 64])
    parser.add_argument("--repeats", type=int, default=30, help="interleaved rounds of timed calls")
    parser.add_argument("--check", action="store_true", help="exit 1 where `after` misses the bounds")
    parser.add_argument("--smoke", action="store_true", help="one tiny size of each workload, 3 rounds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.batches, args.ns, args.dims, args.hidden, args.layers, args.repeats = [8], [2], 4, 4, 2, 3
        args.width, args.seq = 16, 8
    found = cases(args)
    progress = Progress(len(found))
    device = jax.devices()[0]
    print(
        f"value_and_grad under jit, float32; jax {jax.__version__} on {device.platform}; unroll={UNROLL}; "
        f"negligible saving {_chunks.NEGLIGIBLE_SAVING} bytes; {args.repeats} interleaved rounds\n"
    )
    print(
        "| workload | saving (count) | after builds | lax.scan step | before | after | after = lax.scan's HLO "
        "| temp lax.scan | before | after |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    failed = False
    for label, make_loss, inputs in found:
        row = measure(make_loss, inputs, args.repeats)
        progress.step(label)
        ratio, temp = row["ratio"], row["temp"]
        saved, negligible = row["saving"] or (None, False)  # None: a plan the rule does not weigh
        built = "jax.lax.scan" if negligible else f"chunks of {row['chunk']}, checkpointed"
        mib = {name: temp[name] / 2**20 for name in PROGRAMS}
        print(
            f"| {label} | {'-' if saved is None else f'{saved / 2**20:.2f} MiB'} | {built} | {row['base'] * 1e3:.2f} ms | {ratio['before']:.2f}x | "
            f"{ratio['after']:.2f}x | {'yes' if row['same'] else 'no'} | {mib['lax.scan']:.2f} MiB | "
            f"{mib['before']:.2f} | {mib['after']:.2f} |"
        )
        failed |= row["diff"] > agreement_rtol()
        if args.check and negligible:
            failed |= not row["same"] and ratio["after"] > 1.05
        elif args.check:
            failed |= temp["after"] >= temp["lax.scan"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
