"""What the benchmarks share: a progress bar, compiling with its costs, interleaved timing, the
largest relative difference between two results and how large it may be, writing a figure, and
pinning the runtime's layout."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from scanrewrite.runtime import _chunks

#: The runtime's layouts a benchmark can pin with `--layout` (`backend`: the one it would pick).
LAYOUTS = {
    "backend": None,
    "rolled": _chunks.Layout(rolled_chunk=True, rolled_rest=True),  # chunks of exactly k steps
    "straight": _chunks.Layout(rolled_chunk=False, rolled_rest=False),
}


def pin_layout(name: str) -> _chunks.Layout:
    """Build every runtime program from now on with the layout `name` of `LAYOUTS`; return it."""
    _chunks._FORCE_LAYOUT = LAYOUTS[name]
    return _chunks.layout()


class Progress:
    """A one-line progress bar on stderr, advanced once per finished step."""

    def __init__(self, total: int):
        self.total, self.done = total, 0

    def step(self, what: str) -> None:
        self.done += 1
        bar = "#" * (30 * self.done // self.total)
        print(f"\r[{bar:<30}] {self.done}/{self.total} {what[:40]:<40}", end="", file=sys.stderr, flush=True)
        if self.done == self.total:
            print(file=sys.stderr)


def compile_with_costs(jitted: Callable, *args: Any) -> tuple[Any, float, int]:
    """(the compiled function, seconds to lower and compile it, XLA's temp memory in bytes)."""
    return compile_lowered(*lower_timed(jitted, *args))


def lower_timed(jitted: Callable, *args: Any) -> tuple[Any, float]:
    """(`jitted` lowered for `args`, the seconds that took): tracing, the Python part."""
    start = time.perf_counter()
    return jitted.lower(*args), time.perf_counter() - start


def compile_lowered(lowered: Any, lower_seconds: float) -> tuple[Any, float, int]:
    """`compile_with_costs` of what `lower_timed` gave: XLA's compile, which releases the GIL,
    so that several can run in threads while the next is traced."""
    start = time.perf_counter()
    compiled = lowered.compile()
    return compiled, lower_seconds + time.perf_counter() - start, compiled.memory_analysis().temp_size_in_bytes


def peak_bytes(compiled: Any) -> int | None:
    """XLA's peak memory of a compiled program on an accelerator (arguments, outputs,
    temporaries and a loop's stacked state at once); None on the CPU, whose count is not a peak.

    On a TPU v5e, `temp_size_in_bytes` leaves out what a scan stacks for its backward pass: the
    gradient of `jax.lax.scan` of 1,024 GRU-like steps had 0.43 MiB of temporaries and a peak of
    128.8 MiB, the checkpointed scan 0.40 and 28.1 MiB, the rewrite's chunks of 4 0.58 and 15.5
    MiB (docs/benchmarks.md), so there only the peak orders small steps' programs."""
    if jax.devices()[0].platform == "cpu":
        return None
    return getattr(compiled.memory_analysis(), "peak_memory_in_bytes", None)


def interleaved_times(
    compiled: dict[str, Callable], args: tuple, repeats: int, after_round: Callable[[int], None] = lambda _: None
) -> dict[str, list[float]]:
    """Seconds of one call of each function, `repeats` rounds of all of them in turn.

    Interleaved, so that load from other processes falls on every variant alike.
    """
    times: dict[str, list[float]] = {name: [] for name in compiled}
    for repeat in range(repeats):
        for name, fn in compiled.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[name].append(time.perf_counter() - start)
        after_round(repeat)
    return times


def max_rel_diff(actual: Any, expected: Any) -> float:
    """The largest difference over the leaves of two pytrees, relative to each leaf's largest
    expected magnitude; infinite if `actual` holds a NaN."""
    worst = 0.0
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected), strict=True):
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        if np.isnan(a).any():
            return math.inf
        worst = max(worst, float(np.max(np.abs(a - e)) / (np.max(np.abs(e)) + 1e-30)))
    return worst


def agreement_rtol() -> float:
    """The largest `max_rel_diff` at which a float32 program and its rewrite still count as
    computing the same, on jax's default device at its default matmul precision.

    On the CPU float32 products are exact float32, and n steps of them agree to 1e-4. A TPU
    multiplies float32 in bfloat16 passes by default and a recent GPU in TF32 (8 and 10 bits of
    mantissa): a last-bit difference upstream, from a different fusion of the same steps, moves
    a product by about 1e-3 there. A wrong step (one dropped, the order flipped) moves results
    by far more than either bound.
    """
    return 1e-4 if jax.devices()[0].platform == "cpu" else 1e-2


def figure(panels: int):
    """A matplotlib figure with `panels` axes side by side (matplotlib is imported only here, so
    the benchmarks run without it unless asked for a plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 3.8), layout="constrained")
    return fig, list(axes) if panels > 1 else [axes]


def save(fig, path: str, caption: str) -> None:
    """Write `fig` to `path` (the format from its suffix), titled `caption` and the device and jax
    it was measured on; say so on stderr."""
    device = jax.devices()[0]
    fig.suptitle(f"{caption}, {device.platform}, jax {jax.__version__}", fontsize=9)
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}", file=sys.stderr)
