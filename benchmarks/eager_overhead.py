"""What a runtime call costs where users call scans: eagerly, under vmap/grad without jit, in jit.

The workload is the one issue 8 measured: an extended Kalman filter step (8-dim state, a
`jax.jacfwd` of the dynamics, a `jnp.linalg.solve`) scanned over 50 steps. Each row is a way of
calling it; each column the median time of one call (interleaved runs, warm caches except where
the row says otherwise) of `scanrewrite.runtime.scan(unroll=k)` as a ratio to `jax.lax.scan`'s.
Compile time has its own benchmark, `benchmarks/compile_time.py`. A closure rebuilt is a step
made anew on every call that the runtime has seen the structure of (its program is cached by
that structure); a first sight is one new to jax's caches and to the runtime's.

    python benchmarks/eager_overhead.py              # about 10 minutes on 2 cores
    python benchmarks/eager_overhead.py --repeats 5  # quicker, noisier
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp

import scanrewrite.runtime
from scanrewrite.runtime import _staging

from _common import Progress

D, T, BATCH = 8, 50, 16
KS = (1, 3, 4)


def make_step(seed: int = 0) -> Callable:
    """A fresh EKF step closure (the `def step` inside a function that users write)."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    W = jax.random.normal(k1, (D, D)) / D**0.5
    H = jax.random.normal(k2, (D // 2, D))
    Q, R = 0.01 * jnp.eye(D), 0.1 * jnp.eye(D // 2)

    def dynamics(x):
        return jnp.tanh(W @ x) + 0.5 * x

    def step(carry, y):
        m, P = carry
        F = jax.jacfwd(dynamics)(m)
        m, P = dynamics(m), F @ P @ F.T + Q
        S = H @ P @ H.T + R
        K = jnp.linalg.solve(S, H @ P).T
        m, P = m + K @ (y - H @ m), P - K @ S @ K.T
        return (m, P), m

    return step


def first_sight(call: Callable[[], object]) -> Callable[[], object]:
    """`call` with the runtime's programs by structure forgotten (`_staging._by_structure`): a
    program new to jax's caches and to the runtime's. They are put back after it, for the rows
    of closures rebuilt, which are interleaved with this one."""

    def run():
        kept = dict(_staging._structures)
        _staging._structures.clear()
        try:
            return call()
        finally:
            _staging._structures.clear()
            _staging._structures.update(kept)

    return run


def rebuilt_loss(scan: Callable, ys: jax.Array) -> Callable:
    """A loss that builds its step anew on every call, as a test's loss function does."""
    return lambda m: scan(make_step(), (m, jnp.eye(D)), ys)[1].sum()


def call_rows(args) -> tuple[dict, dict]:
    """name -> impl -> list of seconds per call."""
    same = make_step()
    m0, P0 = jnp.zeros(D), jnp.eye(D)
    ys = jax.random.normal(jax.random.PRNGKey(1), (T, D // 2))
    m0s = jnp.zeros((BATCH, D))
    impls = {"lax.scan": jax.lax.scan}
    for k in KS:
        impls[f"k={k}"] = lambda f, *a, k=k: scanrewrite.runtime.scan(f, *a, unroll=k)
    rows: dict[str, Callable[[Callable], Callable[[], object]]] = {
        "eager, same f": lambda scan: lambda: scan(same, (m0, P0), ys),
        "eager, closure rebuilt": lambda scan: lambda: scan(make_step(), (m0, P0), ys),
        "eager, fresh closure (first sight)": lambda scan: first_sight(lambda: scan(make_step(), (m0, P0), ys)),
        "vmap without jit": lambda scan: lambda: jax.vmap(lambda m: scan(same, (m, P0), ys)[1])(m0s),
        "grad without jit": lambda scan: lambda: jax.grad(lambda m: scan(same, (m, P0), ys)[1].sum())(m0),
        "grad without jit, closure rebuilt": lambda scan: lambda: jax.grad(rebuilt_loss(scan, ys))(m0),
        "grad without jit, first sight": lambda scan: first_sight(lambda: jax.grad(rebuilt_loss(scan, ys))(m0)),
    }
    jitted = {name: jax.jit(lambda m, scan=scan: scan(same, (m, P0), ys)[1]) for name, scan in impls.items()}
    rows["inside jit"] = lambda scan: None  # filled below, per impl
    calls = {}
    for row, make in rows.items():
        for name, scan in impls.items():
            fn = (lambda fn=jitted[name]: fn(m0)) if row == "inside jit" else make(scan)
            calls[row, name] = fn
    times = {key: [] for key in calls}
    progress = Progress(len(calls) * (args.repeats + 1))
    for key, fn in calls.items():  # warm-up: compile once (what is new at every call compiles again)
        jax.block_until_ready(fn())
        progress.step(f"warm {key[0]} {key[1]}")
    for _ in range(args.repeats):  # interleaved, so load from other processes falls on all alike
        for key, fn in calls.items():
            # jax.lax.scan compiles every closure made anew; so does the runtime at first sight.
            repeats = 1 if "closure" in key[0] or "sight" in key[0] else 5
            start = time.perf_counter()
            for _ in range(repeats):
                jax.block_until_ready(fn())
            times[key].append((time.perf_counter() - start) / repeats)
            progress.step(f"{key[0]} {key[1]}")
    return times, impls


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per call (median)")
    args = parser.parse_args(argv)
    device = jax.devices()[0]
    print(f"EKF step D={D} T={T} vmap batch={BATCH}, repeats={args.repeats}, on {device.platform}, jax {jax.__version__}\n")
    times, impls = call_rows(args)
    names = [name for name in impls if name != "lax.scan"]
    lines = ["| call | lax.scan (ms) | " + " | ".join(names) + " |", "| --- | ---: |" + " ---: |" * len(names)]
    for row in dict.fromkeys(key[0] for key in times):
        base = statistics.median(times[row, "lax.scan"])
        ratios = [f"{statistics.median(times[row, name]) / base:.2f}x" for name in names]
        lines.append(f"| {row} | {base * 1e3:.2f} | " + " | ".join(ratios) + " |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
