"""The plain rewrite (`scanrewrite --unroll 4`, `checkpoint=True`) against its peers, on the
accelerator shapes: what users get without the tuner.

On an accelerator `checkpoint=True` keeps the outputs of the step's reductions
(`reductions_saveable`, maxima where `_extremes` proves it safe) where the step has any. This
script measures, as `memory_curve.py` does (same shapes, same `value_and_grad`, interleaved
rounds, XLA's compiled temp memory), the plain rewrite as it is and as it was before that
default (`checkpoint=True` keeping nothing), beside `jax.lax.scan`, the checkpointed scan
`lax.scan(jax.checkpoint(f))` and the Python for-loop, and gives each program's largest
relative difference from each of those three: the last bits, in bfloat16 (the GPT-style stack)
and float32 (the origin block, the GRU-like step).

    python benchmarks/default_rewrite.py                  # GPT-style stack, origin block, GRU
    python benchmarks/default_rewrite.py --smoke          # tiny, on the CPU

Exits 1 if the plain rewrite is slower than the checkpointed scan beyond noise or keeps more
memory, on an accelerator, or if any program differs from `jax.lax.scan` beyond the shape's
tolerance.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time
from collections.abc import Callable

import jax
from _common import Progress, agreement_rtol

import memory_curve as mc
import scanrewrite.runtime
from scanrewrite.runtime import _chunks

PLAIN = "rewrite --unroll 4"
BEFORE = "rewrite --unroll 4, keeping nothing (before)"
PEERS = ("lax.scan", mc.CHECKPOINTED, mc.FOR_LOOP)


@contextlib.contextmanager
def keeping_nothing():
    """The backend's layout, with `checkpoint=True` keeping no reduction (the default before)."""
    saved = _chunks._FORCE_LAYOUT
    _chunks._FORCE_LAYOUT = _chunks.layout()._replace(keeps_reductions=False)
    try:
        yield
    finally:
        _chunks._FORCE_LAYOUT = saved


def programs(shape: mc.Shape) -> dict[str, Callable]:
    """name -> loop(step, h, xs): the peers, then the plain rewrite now and before."""
    n = shape.n
    scan = functools.partial(jax.lax.scan, length=n)
    rewrite = functools.partial(scanrewrite.runtime.scan, length=n, unroll=4)
    found = {"lax.scan": scan, mc.CHECKPOINTED: lambda step, h, xs: scan(jax.checkpoint(step), h, xs)}
    if shape.for_loop:
        found[mc.FOR_LOOP] = lambda step, h, xs: mc._for_loop(step, h, xs, n)

    def before(step, h, xs):
        with keeping_nothing():  # read when the call is planned, inside this trace
            return rewrite(step, h, xs)

    found[PLAIN] = rewrite
    found[BEFORE] = before
    return found


def table(rows: dict[str, dict]) -> str:
    base = rows[mc.CHECKPOINTED]
    refs = [name for name in PEERS if "diffs" in rows.get(name, {})]
    head = "| program | step (ms) | vs ckpt | temp memory (MiB) | vs ckpt | XLA peak (MiB) | vs ckpt | compile (s) | " + (
        " | ".join(f"rel diff vs {ref}" for ref in refs)) + " |"  # fmt: skip
    lines = [head, "| --- |" + " ---: |" * (7 + len(refs))]
    for name, row in rows.items():
        if "time" not in row:
            lines.append(f"| {name} | {row.get('error', 'did not run')} |" + " |" * (6 + len(refs)))
            continue
        diffs = " | ".join(f"{row['diffs'].get(ref, 0.0):.1e}" for ref in refs)
        peak = "n/a | n/a"
        if row.get("peak") and base.get("peak"):
            peak = f"{row['peak'] / 2**20:.1f} | {row['peak'] / base['peak']:.2f}"
        lines.append(
            f"| {name} | {row['time'] * 1e3:.1f} ±{row['noise'] * 1e3:.1f} | {row['time'] / base['time']:.2f} | "
            f"{row['temp'] / 2**20:.1f} | {row['temp'] / base['temp']:.2f} | {peak} | {row['compile']:.1f} | {diffs} |"
        )
    return "\n".join(lines)


def never_worse(rows: dict[str, dict]) -> bool:
    """The plain rewrite no slower (beyond both rows' noise) and no larger than the checkpointed
    scan: by XLA's peak where the backend gives one (`_common.peak_bytes`: on a TPU the temp
    size leaves out what a scan stacks), else by its temp size."""
    plain, base = rows.get(PLAIN, {}), rows[mc.CHECKPOINTED]
    if "time" not in plain or "time" not in base:
        return False
    noise = plain["noise"] + base["noise"]
    memory = "peak" if plain.get("peak") and base.get("peak") else "temp"
    return plain["time"] <= base["time"] + noise and plain[memory] <= base[memory]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=["gpt", "origin", "gru"], default=["gpt", "origin", "gru"])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (for the CPU, in seconds)")
    parser.add_argument("--compile-threads", type=int, default=4, help="compile this many programs at a time")
    args = parser.parse_args(argv)
    device = jax.devices()[0]
    print(f"benchmarks/default_rewrite.py on {device.platform} ({device.device_kind}), jax {jax.__version__}\n")
    shapes = [(mc.SMOKE if args.smoke else mc.SHAPES)[name]() for name in args.shapes]
    progress = Progress(sum(len(programs(shape)) + shape.repeats for shape in shapes))
    ok = True
    for shape in shapes:
        start = time.perf_counter()
        with scanrewrite.runtime.record_sites() as sites:
            rows = mc.measure(shape, args.compile_threads, progress, found=programs(shape), references=PEERS)
        built = sorted({plan.describe() for plans in sites.plans.values() for plan in plans})
        print(f"\n## {shape.title}\n\n{table(rows)}\n\nWhat the runtime built (record_sites):\n")
        print("\n".join(f"- {line}" for line in built))
        print(f"\n({shape.name}: {time.perf_counter() - start:.0f} s)\n", flush=True)
        agree = all(row["diff"] <= (shape.rtol or agreement_rtol()) for row in rows.values() if "diff" in row)
        ok &= agree and (device.platform == "cpu" or never_worse(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    raise SystemExit(main())
