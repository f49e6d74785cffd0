"""Step time against memory: every program between the for-loop and the checkpointed scan.

For three shapes (a GPT-style stack of layers with their own parameters in bfloat16, the origin
block shared by 12 applications in float32, a small GRU-like step over 1,024 steps) it compiles
`jax.jit(jax.value_and_grad(loss))` with the loop written as each peer writes it, and reports
per program: the median step time (interleaved runs), XLA's compiled temp memory
(`compile().memory_analysis()`), compile time, and the largest relative difference of the
loss and gradients from the reference (`lax.scan`, or `lax.scan(jax.checkpoint(f))` where
`lax.scan` does not fit). A program the device cannot hold is a row that says so.

The peers: `lax.scan`, `lax.scan(unroll=k)`, `lax.scan(jax.checkpoint(f))` with and without
`unroll=k`, the Python for-loop and its per-step checkpointed form, hand-built stored points
(the first N - s steps in `lax.scan(jax.checkpoint(f))`, the last s stored) and a per-step
`jax.checkpoint(policy=dots_with_no_batch_dims_saveable)` in the for-loop. The runtime's
programs (rows `runtime ...`): per-step checkpoints, chunks of k (also not checkpointed, on
small steps), a policy, `store=s` where the runtime has it, the dots policy on every step
alone and with stored steps, `dots_saveable` (the batch dims' dots too) on every step, the
runtime's policies that keep reductions' outputs (`REDUCTIONS`, at k=1 and on every step), and
the for-loop's program (`unroll=True, checkpoint=False`).

The runtime's *pick* at a budget is its fastest program whose temp memory fits. The checks of
issue 41 are printed as pass or fail, against the for-loop (memory m1, time t1) and
`lax.scan(jax.checkpoint(f))` (m0, t0): at m1 the pick takes at most 1.02 t1; at m0 at most t0;
at m0 + f (m1 - m0) for f = 1/4, 1/2, 3/4 at most the straight line t0 + f (t1 - t0) (on the
GPT-style stack 3% under it at 1/2); never slower than t0 at a budget from m0 up; on the small
step no slower than the best `lax.scan(jax.checkpoint(f), unroll=k)`; and the plain rewrite
(`unroll=4`) neither slower nor larger than `lax.scan(jax.checkpoint(f))`. A check passes
*within noise* where it misses by less than the larger half interquartile range of the two
step times it compares. Beside each check between the two points stands `mix_bound`: what
mixing whole steps' states (checkpointed, with a policy, stored) would reach at its budget if
each step cost in the mix what it costs in a program that does the same to every step.

    python benchmarks/memory_curve.py                       # accelerator sizes, all three shapes
    python benchmarks/memory_curve.py --shapes origin gru   # some of them
    python benchmarks/memory_curve.py --smoke               # tiny, on the CPU in seconds
    python benchmarks/memory_curve.py --json r.json --plot docs/img/memory_curve.png
    python benchmarks/memory_curve.py --from-json r.json --plot docs/img/memory_curve.png

Exits 1 if a program's results differ from the reference beyond the shape's tolerance.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import functools
import inspect
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from _common import Progress, agreement_rtol, compile_lowered, lower_timed, peak_bytes

import scanrewrite.runtime

DOTS = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
#: Also the attention scores (dots with batch dims): more bytes a step than `DOTS`, less recomputed.
ALL_DOTS = jax.checkpoint_policies.dots_saveable
#: The runtime's policies that keep reductions' outputs (each softmax's maximum and sum) besides.
REDUCTIONS = {
    "reductions_saveable": scanrewrite.runtime.reductions_saveable,
    "dots_with_no_batch_dims_and_reductions_saveable": scanrewrite.runtime.dots_with_no_batch_dims_and_reductions_saveable,
    "dots_and_reductions_saveable": scanrewrite.runtime.dots_and_reductions_saveable,
}
#: Whether the runtime keeps the residuals of its last `store` steps (issue 41's runtime side).
HAS_STORE = "store" in inspect.signature(scanrewrite.runtime.scan).parameters
CHECKPOINTED = "lax.scan(jax.checkpoint(f))"
FOR_LOOP = "for-loop"


@dataclasses.dataclass(frozen=True)
class Shape:
    """A workload: `make(key)` gives (params, h0, xs); `step(params)(h, x) -> (h, y)`."""

    name: str
    title: str
    n: int
    ks: tuple[int, ...]
    make: Callable[[Any], tuple[Any, Any, Any]]
    step: Callable[[Any], Callable]
    repeats: int
    #: The stored steps of the hand-built points and of `store=`.
    stores: tuple[int, ...]
    #: Store the last steps straight-line (the for-loop's program) or as a rolled `lax.scan`.
    stored_straight: bool = True
    #: Whether to build the for-loop with a checkpoint, and with a policy, per step
    #: (straight-line programs of N checkpointed steps: slow to compile where N is large).
    straight_policies: bool = True
    rtol: float | None = None
    #: Whether the loop runs over the (stacked, per-layer) parameters as its `xs`.
    params_as_xs: bool = False
    #: The runtime's stored steps, where not `stores` (straight-line on an accelerator: few).
    runtime_stores: tuple[int, ...] | None = None
    #: Stored steps after steps checkpointed with the dots policy each (`unroll=True`), where
    #: `straight_policies`.
    policy_stores: tuple[int, ...] = ()
    #: The runtime's chunks of k not checkpointed at all (`lax.scan(unroll=k)`'s program).
    plain_ks: tuple[int, ...] = ()
    #: Whether to build the for-loop (and the runtime's program of it): N straight-line steps,
    #: which XLA takes minutes to compile where N is in the thousands.
    for_loop: bool = True
    #: Whether to build the hand-built stored points (where `store=` has not been seen to build
    #: the same programs: on the GPT-style stack it has, to 2 MiB and 0.5 ms).
    hand_built: bool = True

    def arrays(self) -> tuple[Any, Any, Any]:
        """(params, h0, xs) from the key 0, drawn in one compiled program: eagerly, each
        operation on each parameter's shape compiles alone (72 s for the GPT-style stack on a
        TPU v5e)."""
        return jax.jit(self.make)(jax.random.PRNGKey(0))


# --- the workloads --------------------------------------------------------------------------


def _layer_norm(h, scale):
    h32 = h.astype(jnp.float32)
    mean = h32.mean(-1, keepdims=True)
    var = ((h32 - mean) ** 2).mean(-1, keepdims=True)
    return ((h32 - mean) * jax.lax.rsqrt(var + 1e-5)).astype(h.dtype) * scale


def gpt_shape(layers: int, batch: int, seq: int, width: int, heads: int, repeats: int) -> Shape:
    """Pre-LN blocks, each with its own parameters (scanned over as `xs`), multi-head causal
    attention and a 4x MLP, in bfloat16."""
    dtype = jnp.bfloat16

    def make(key):
        keys = jax.random.split(key, 5)
        dense = lambda k, i, o: (jax.random.normal(k, (layers, i, o)) / math.sqrt(i)).astype(dtype)
        params = {
            "qkv": dense(keys[0], width, 3 * width),
            "o": dense(keys[1], width, width),
            "up": dense(keys[2], width, 4 * width),
            "down": dense(keys[3], 4 * width, width),
            "ln1": jnp.ones((layers, width), dtype),
            "ln2": jnp.ones((layers, width), dtype),
        }
        h0 = jax.random.normal(keys[4], (batch, seq, width)).astype(dtype)
        return params, h0, None

    mask = jnp.tril(jnp.ones((seq, seq), bool))

    def step(_params):
        def block(h, p):
            x = _layer_norm(h, p["ln1"])
            q, k, v = jnp.split(x @ p["qkv"], 3, axis=-1)
            split = lambda t: t.reshape(batch, seq, heads, width // heads)
            q, k, v = split(q), split(k), split(v)
            scores = jnp.einsum("bshd,bthd->bhst", q, k) / math.sqrt(width // heads)
            scores = jnp.where(mask, scores.astype(jnp.float32), -1e30)
            attn = jax.nn.softmax(scores, axis=-1).astype(dtype)
            mixed = jnp.einsum("bhst,bthd->bshd", attn, v).reshape(batch, seq, width)
            h = h + mixed @ p["o"]
            x = _layer_norm(h, p["ln2"])
            return h + jax.nn.gelu(x @ p["up"]) @ p["down"], None

        return block

    title = f"GPT-style stack: {layers} layers, batch {batch}, seq {seq}, width {width}, {heads} heads, bfloat16"
    quarter = max(layers // 4, 1)
    stores = tuple(sorted({quarter, max(layers // 2, 1), max(layers - quarter, 1)}))
    # A layer stored keeps about 0.47 GiB more than one checkpointed with the dots policy (TPU
    # v5e, 16 layers): these fill a quarter, half and three quarters of the way from the
    # checkpointed scan's memory to the for-loop's.
    policy_stores = tuple(sorted({max(layers // 16, 1), max(layers * 3 // 8, 1), max(layers * 11 // 16, 1)}))
    return Shape("gpt", title, layers, (2, 4), make, step, repeats, stores, rtol=5e-2, params_as_xs=True,
                 policy_stores=policy_stores)  # fmt: skip


def origin_shape(n: int, batch: int, seq: int, width: int, repeats: int) -> Shape:
    """`ut_scan.py`'s block, its parameters shared by the n applications, in float32."""
    from ut_scan import block, init_params

    def make(key):
        params = init_params(key, width)
        return params, jax.random.normal(jax.random.fold_in(key, 1), (batch, seq, width)), None

    step = lambda params: lambda h, _: (block(params, h), None)
    title = f"origin block: shared, applied {n} times, batch {batch}, seq {seq}, width {width}, float32"
    quarter = max(n // 4, 1)
    stores = tuple(sorted({quarter, max(n // 2, 1), max(n - quarter, 1)}))
    return Shape("origin", title, n, (2, 3, 4), make, step, repeats, stores, policy_stores=stores)


def gru_shape(n: int, batch: int, hidden: int, inputs: int, repeats: int) -> Shape:
    """A GRU-like cell over n steps of inputs: small steps, where the loop's overhead shows."""

    def make(key):
        keys = jax.random.split(key, 4)
        dense = lambda k, i, o: jax.random.normal(k, (i, o)) / math.sqrt(i)
        params = {"x": dense(keys[0], inputs, 3 * hidden), "h": dense(keys[1], hidden, 3 * hidden),
                  "b": jnp.zeros(3 * hidden)}  # fmt: skip
        xs = jax.random.normal(keys[2], (n, batch, inputs))
        return params, jax.random.normal(keys[3], (batch, hidden)), xs

    def step(params):
        def cell(h, x):
            gx, gh = x @ params["x"] + params["b"], h @ params["h"]
            z = jax.nn.sigmoid(gx[:, :hidden] + gh[:, :hidden])
            r = jax.nn.sigmoid(gx[:, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
            c = jnp.tanh(gx[:, 2 * hidden :] + r * gh[:, 2 * hidden :])
            h = (1 - z) * h + z * c
            return h, h[:, :4]

        return cell

    title = f"GRU-like cell: {n} steps, batch {batch}, hidden {hidden}, inputs {inputs}, float32"
    # Few: on an accelerator stored steps are straight-line code, and hundreds of them compile
    # for minutes.
    stores = tuple(sorted({max(n // 64, 1), max(n // 16, 1), max(n // 4, 1)}))
    return Shape("gru", title, n, (2, 4, 8, 16), make, step, repeats, stores, stored_straight=False,
                 straight_policies=False, runtime_stores=stores[:2], plain_ks=(4, 16))  # fmt: skip


SHAPES = {
    # Of the stored steps after the dots policy, the half-way one: the reductions' policies
    # outran the others by 25-40 ms in less memory (TPU v5e), and a part must stay in 10 minutes.
    "gpt": lambda: dataclasses.replace(gpt_shape(16, 8, 1024, 1024, 16, repeats=8), hand_built=False, policy_stores=(6,)),
    "origin": lambda: origin_shape(12, 16, 512, 512, repeats=10),
    # The for-loop of 1,024 GRU steps did not compile in 4 minutes on the TPU v5e, nor its
    # gradient in 9 on XLA:CPU: the checks that need its point are n/a there.
    "gru": lambda: dataclasses.replace(gru_shape(1024, 16, 128, 64, repeats=10), for_loop=False),
}
# Two steps, one k and one stored step each: the same path, a few dozen tiny compiles.
SMOKE = {
    "gpt": lambda: dataclasses.replace(gpt_shape(2, 1, 4, 8, 2, repeats=2), ks=(2,), stores=(1,), policy_stores=(1,)),
    "origin": lambda: dataclasses.replace(origin_shape(2, 1, 4, 8, repeats=2), ks=(2,), stores=(1,), policy_stores=(1,)),
    "gru": lambda: dataclasses.replace(gru_shape(2, 1, 4, 4, repeats=2), ks=(2,), stores=(1,), runtime_stores=(1,), plain_ks=(2,)),
}


# --- the programs -----------------------------------------------------------------------------


def _split(xs, at: int):
    if xs is None:
        return None, None
    return jax.tree_util.tree_map(lambda x: x[:at], xs), jax.tree_util.tree_map(lambda x: x[at:], xs)


def _for_loop(step, h, xs, n):
    ys = []
    for i in range(n):
        h, y = step(h, None if xs is None else jax.tree_util.tree_map(lambda x, i=i: x[i], xs))
        ys.append(y)
    return h, None if ys[0] is None else jax.tree_util.tree_map(lambda *y: jnp.stack(y), *ys)


def _concat(first, second):
    if first is None:
        return None
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), first, second)


def variants(shape: Shape) -> dict[str, Callable]:
    """name -> loop(step, h, xs) -> (h, ys): the peers, then the runtime's programs."""
    n = shape.n
    scan = lambda step, h, xs, **kw: jax.lax.scan(step, h, xs, length=n, **kw)
    runtime = lambda step, h, xs, **kw: scanrewrite.runtime.scan(step, h, xs, length=n, **kw)
    found: dict[str, Callable] = {"lax.scan": scan}
    found |= {f"lax.scan(unroll={k})": functools.partial(scan, unroll=k) for k in shape.ks}
    found[CHECKPOINTED] = lambda step, h, xs: scan(jax.checkpoint(step), h, xs)
    for k in shape.ks:
        found[f"lax.scan(jax.checkpoint(f), unroll={k})"] = lambda step, h, xs, k=k: scan(jax.checkpoint(step), h, xs, unroll=k)
    if shape.for_loop:
        found[FOR_LOOP] = lambda step, h, xs: _for_loop(step, h, xs, n)
    if shape.straight_policies:
        found["for-loop, jax.checkpoint per step"] = lambda step, h, xs: _for_loop(jax.checkpoint(step), h, xs, n)
        found["for-loop, dots policy per step"] = lambda step, h, xs: _for_loop(jax.checkpoint(step, policy=DOTS), h, xs, n)

    def stored(step, h, xs, s):
        head, tail = _split(xs, n - s)
        h, ys_head = jax.lax.scan(jax.checkpoint(step), h, head, length=n - s)
        if shape.stored_straight:
            h, ys_tail = _for_loop(step, h, tail, s)
        else:
            h, ys_tail = jax.lax.scan(step, h, tail, length=s)
        return h, _concat(ys_head, ys_tail)

    if shape.hand_built:
        for s in shape.stores:
            found[f"hand-built: checkpoint {n - s}, store last {s}"] = functools.partial(stored, s=s)
    found["runtime k=1"] = functools.partial(runtime, unroll=1)
    found |= {f"runtime k={k}": functools.partial(runtime, unroll=k) for k in shape.ks}
    found |= {f"runtime k={k}, checkpoint=False": functools.partial(runtime, unroll=k, checkpoint=False) for k in shape.plain_ks}
    found["runtime k=1, dots policy"] = functools.partial(runtime, unroll=1, checkpoint=DOTS)
    for name in list(REDUCTIONS)[:2]:
        found[f"runtime k=1, {name}"] = functools.partial(runtime, unroll=1, checkpoint=REDUCTIONS[name])
    if HAS_STORE:
        stores = shape.stores if shape.runtime_stores is None else shape.runtime_stores
        found |= {f"runtime store={s}": functools.partial(runtime, unroll=1, store=s) for s in stores}
        if shape.straight_policies:
            # Each step checkpointed alone with the policy (the straight-line layout's rule), the last s stored.
            found["runtime unroll=True, dots policy"] = functools.partial(runtime, unroll=True, checkpoint=DOTS)
            found |= {f"runtime unroll=True, dots policy, store={s}": functools.partial(runtime, unroll=True, checkpoint=DOTS, store=s)
                      for s in shape.policy_stores}  # fmt: skip
            found["runtime unroll=True, dots_saveable"] = functools.partial(runtime, unroll=True, checkpoint=ALL_DOTS)
            found |= {f"runtime unroll=True, {name}": functools.partial(runtime, unroll=True, checkpoint=policy)
                      for name, policy in REDUCTIONS.items()}  # fmt: skip
    if shape.for_loop:
        found["runtime unroll=True, checkpoint=False"] = functools.partial(runtime, unroll=True, checkpoint=False)
    return found


def gradient(shape: Shape, loop: Callable) -> Callable:
    """`jax.jit(jax.value_and_grad(loss))` of `shape`'s steps run by `loop` (a value of
    `variants`), with respect to (params, h0): what every program of a shape computes."""

    def loss(params, h0, xs):
        h, ys = loop(shape.step(params), h0, params if shape.params_as_xs else xs)
        total = jnp.mean(h.astype(jnp.float32) ** 2)
        return total if ys is None else total + jnp.mean(ys.astype(jnp.float32) ** 2)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def _is_oom(error: BaseException) -> bool:
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def measure(
    shape: Shape,
    threads: int,
    progress: Progress | None = None,
    save: Callable[[dict], None] = lambda rows: None,
    found: dict[str, Callable] | None = None,
    references: tuple[str, ...] = (),
) -> dict[str, dict]:
    """name -> {temp, compile, time, noise, diff} or {error}, for every program of `found`
    (default: the variants of `shape`); `save` is handed the rows once compiled, so that a run
    cut short keeps them. `diff` is against the first of `lax.scan`, the checkpointed scan and
    the for-loop that ran; with `references`, `diffs` also holds the difference from each of
    those programs that ran."""
    params, h0, xs = shape.arrays()
    grad_step = functools.partial(gradient, shape)
    found = variants(shape) if found is None else found
    rows: dict[str, dict] = {}
    compiled = {}
    with concurrent.futures.ThreadPoolExecutor(max(threads, 1)) as pool:
        futures = {}
        for name, loop in found.items():  # traced here, compiled `threads` at a time
            try:
                futures[name] = pool.submit(compile_lowered, *lower_timed(grad_step(loop), params, h0, xs))
            except Exception as error:  # noqa: BLE001 - a row that says why, the others go on
                rows[name] = {"error": _reason(error)}
        for name in found:
            if name in rows:
                if progress:
                    progress.step(f"{shape.name}: {name}")
                continue
            try:
                compiled[name], seconds, temp = futures[name].result()
                rows[name] = {"compile": seconds, "temp": temp, "peak": peak_bytes(compiled[name])}
            except Exception as error:  # noqa: BLE001
                rows[name] = {"error": _reason(error)}
            if progress:
                progress.step(f"{shape.name}: {name}")
    save(rows)
    args = (params, h0, xs)
    # Compared on the device, leaf by leaf, so that no gradient of a large model is copied to
    # the host (in float64 that took minutes on the GPT-style stack).
    reference, reference_out = None, None
    for name in ("lax.scan", CHECKPOINTED, FOR_LOOP, *compiled):
        if name in compiled:
            try:
                reference_out = jax.block_until_ready(compiled[name](*args))
                reference = name
                break
            except Exception as error:  # noqa: BLE001 - compiled but the device cannot run it
                rows[name] = {"error": _reason(error)}
                del compiled[name]
    others = {}
    for name in references:
        if name in compiled and name != reference:
            try:
                others[name] = jax.block_until_ready(compiled[name](*args))
            except Exception as error:  # noqa: BLE001 - it is then a row that says why
                rows[name] = {"error": _reason(error)}
                del compiled[name]
    for name in list(compiled):
        try:
            if name == reference or name in others:
                out = reference_out if name == reference else others[name]
            else:
                out = jax.block_until_ready(compiled[name](*args))
        except Exception as error:  # noqa: BLE001
            rows[name] = {"error": _reason(error)}
            del compiled[name]
            continue
        rows[name]["diff"] = float(_rel_diff(out, reference_out))
        rows[name]["reference"] = reference
        if references:
            against = {reference: reference_out, **others}
            rows[name]["diffs"] = {ref: float(_rel_diff(out, ref_out)) for ref, ref_out in against.items()}
        del out
    del reference_out, others

    def timed(round_: int) -> None:
        if progress:
            progress.step(f"{shape.name}: timing round {round_ + 1}")

    times = _interleaved(compiled, args, shape.repeats, rows, timed)
    for name, values in times.items():
        if values:
            rows[name]["time"] = statistics.median(values)
            rows[name]["noise"] = _half_iqr(values)
    return rows


@jax.jit
def _rel_diff(actual, expected):
    """`_common.max_rel_diff` on the device, in float32 (infinite on a NaN)."""
    worst = jnp.float32(0)
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected), strict=True):
        a, e = a.astype(jnp.float32), e.astype(jnp.float32)
        diff = jnp.max(jnp.abs(a - e)) / (jnp.max(jnp.abs(e)) + 1e-30)
        worst = jnp.maximum(worst, jnp.where(jnp.isnan(a).any(), jnp.inf, diff))
    return worst


def _interleaved(compiled: dict, args: tuple, repeats: int, rows: dict, after_round) -> dict[str, list[float]]:
    """`_common.interleaved_times`, but a variant whose run fails is dropped and its row says why."""
    times: dict[str, list[float]] = {name: [] for name in compiled}
    for repeat in range(repeats):
        for name, fn in compiled.items():
            if "error" in rows[name]:
                continue
            start = time.perf_counter()
            try:
                jax.block_until_ready(fn(*args))
            except Exception as error:  # noqa: BLE001
                rows[name] = {"error": _reason(error)}
                continue
            times[name].append(time.perf_counter() - start)
        after_round(repeat)
    return times


def _reason(error: BaseException) -> str:
    if _is_oom(error):
        return "does not fit: " + str(error).strip().splitlines()[0][:100]
    return f"failed: {type(error).__name__}: {str(error).strip().splitlines()[0][:100] if str(error).strip() else ''}"


def _half_iqr(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return (q3 - q1) / 2


# --- the curve and its checks -------------------------------------------------------------


def runtime_rows(rows: dict[str, dict]) -> dict[str, dict]:
    return {name: row for name, row in rows.items() if name.startswith("runtime") and "time" in row}


#: A program within this fraction of a budget counts as fitting it (XLA's temp memory moves by
#: a few hundred bytes between programs that keep the same arrays).
SLACK = 0.005


def pick(rows: dict[str, dict], budget: float) -> tuple[str, dict] | None:
    """The runtime's fastest program whose temp memory fits `budget` bytes (within `SLACK`)."""
    fits = [(name, row) for name, row in runtime_rows(rows).items() if row["temp"] <= budget * (1 + SLACK)]
    return min(fits, key=lambda item: item[1]["time"]) if fits else None


def frontier(rows: dict[str, dict]) -> list[tuple[str, dict]]:
    """The runtime's picks, as memory grows: each program that is faster than every smaller one."""
    found, best = [], math.inf
    for name, row in sorted(runtime_rows(rows).items(), key=lambda item: (item[1]["temp"], item[1]["time"])):
        if row["time"] < best:
            found.append((name, row))
            best = row["time"]
    return found


#: Programs that do the same to every step (checkpoint it, with a policy or not, or store it):
#: the other programs mix these states, some steps one way and the rest another.
UNIFORM = (CHECKPOINTED, "for-loop, dots policy per step", "runtime unroll=True, dots_saveable",
           *(f"runtime unroll=True, {name}" for name in REDUCTIONS), FOR_LOOP)  # fmt: skip


def mix_bound(rows: dict[str, dict], budget: float) -> float | None:
    """The fastest step any mix of the `UNIFORM` programs' per-step states could take within
    `budget` bytes, were each step's time and memory the same in every mix as in its uniform
    program: the lower convex hull of their points at `budget` (None where none fits)."""
    points = [(rows[name]["temp"], rows[name]["time"]) for name in UNIFORM if "time" in rows.get(name, {})]
    best = min((t for m, t in points if m <= budget * (1 + SLACK)), default=math.inf)
    for m_a, t_a in points:
        for m_b, t_b in points:
            if m_a < budget < m_b:
                best = min(best, t_a + (budget - m_a) / (m_b - m_a) * (t_b - t_a))
    return None if best == math.inf else best


@dataclasses.dataclass
class Check:
    what: str
    got: float | None  # the pick's step time, seconds
    limit: float | None  # the largest that passes, seconds
    noise: float = 0.0
    picked: str = ""
    #: `mix_bound` at the check's budget, seconds: what mixing whole steps' states could reach.
    bound: float | None = None

    @property
    def verdict(self) -> str:
        if self.picked == "nothing fits":
            return "FAIL"  # the runtime has no program at that memory
        if self.got is None or self.limit is None:
            return "n/a"
        if self.got <= self.limit:
            return "pass"
        return "pass within noise" if self.got <= self.limit + self.noise else "FAIL"


def checks(shape: Shape, rows: dict[str, dict]) -> list[Check]:
    """Issue 41's checks on the runtime's picks (see the module's docstring)."""
    found = []
    ok = lambda name: name in rows and "time" in rows[name]
    if not ok(CHECKPOINTED):
        return [Check(f"{CHECKPOINTED} ran", None, None)]
    t0, m0, n0 = rows[CHECKPOINTED]["time"], rows[CHECKPOINTED]["temp"], rows[CHECKPOINTED]["noise"]

    def at(budget: float, limit: float, what: str, noise: float, mixes: bool = True) -> Check:
        """The check at `budget`, beside `mix_bound` there where `mixes` (and the for-loop ran)."""
        chosen, bound = pick(rows, budget), mix_bound(rows, budget) if mixes and ok(FOR_LOOP) else None
        if chosen is None:
            return Check(what, None, limit, noise, "nothing fits", bound)
        name, row = chosen
        return Check(what, row["time"], limit, max(noise, row["noise"]), name, bound)

    if ok(FOR_LOOP):
        t1, m1, n1 = rows[FOR_LOOP]["time"], rows[FOR_LOOP]["temp"], rows[FOR_LOOP]["noise"]
        found.append(at(m1, 1.02 * t1, "at the for-loop's memory: <= 1.02x its time", n1))
    found.append(at(m0, t0, f"at {CHECKPOINTED}'s memory: <= 1.00x its time", n0))
    if ok(FOR_LOOP) and m1 > m0:
        for fraction in (0.25, 0.5, 0.75):
            line = t0 + fraction * (t1 - t0)
            budget = m0 + fraction * (m1 - m0)
            what = f"at {fraction:g} of the way to the for-loop's memory: at or below the line"
            found.append(at(budget, line, what, max(n0, n1)))
            if shape.name == "gpt" and fraction == 0.5:
                found.append(at(budget, 0.97 * line, "GPT-style stack, half-way: >= 3% below the line", max(n0, n1)))
    found.append(_never_slower(rows, m0, t0, n0))
    unrolled = [name for name in rows if name.startswith("lax.scan(jax.checkpoint(f)") and ok(name)]
    if shape.name == "gru" and unrolled:
        best = min(unrolled, key=lambda name: rows[name]["time"])
        row = rows[best]
        found.append(at(row["temp"], row["time"], f"small steps: no slower than the best, {best}", row["noise"], mixes=False))
    if ok("runtime k=4"):
        row = rows["runtime k=4"]
        larger = row["temp"] > m0 * (1 + SLACK)
        check = Check(f"plain rewrite unroll=4: no slower than {CHECKPOINTED} (and no larger)", row["time"], t0,
                      max(n0, row["noise"]), "runtime k=4" + (f", LARGER: {row['temp'] / m0:.2f}x the memory" if larger else ""))  # fmt: skip
        if larger:
            check.limit = -1.0  # fails whatever the time
        found.append(check)
    return found


def _never_slower(rows: dict, m0: float, t0: float, noise: float) -> Check:
    """Slower than `lax.scan(jax.checkpoint(f))` at some budget from its memory up: the picks get
    only faster as the budget grows, so the worst is at its own memory."""
    chosen = pick(rows, m0)
    what = f"at no budget from {CHECKPOINTED}'s memory up slower than it"
    if chosen is None:
        return Check(what, None, t0, noise, "nothing fits")
    return Check(what, chosen[1]["time"], t0, max(noise, chosen[1]["noise"]), chosen[0])


# --- output -------------------------------------------------------------------------------


def table(shape: Shape, rows: dict[str, dict], threads: int, device_rtol: float | None = None) -> str:
    """The Markdown table: every program, with ratios to the checkpointed scan and the for-loop;
    agreement within the shape's tolerance, else `device_rtol` (default: this device's)."""
    rtol = shape.rtol or device_rtol or agreement_rtol()
    ck, loop = rows.get(CHECKPOINTED, {}), rows.get(FOR_LOOP, {})
    ratio = lambda a, b: f"{a / b:.2f}" if a is not None and b else "-"
    compile_note = f", {threads} at a time" if threads > 1 else ""
    lines = [
        f"*{shape.title}: `value_and_grad` under `jit`, median of {shape.repeats} interleaved runs*",
        "",
        f"| program | step (ms) | vs ckpt | vs for-loop | temp memory (MiB) | vs ckpt | vs for-loop | compile (s{compile_note}) | agrees |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, row in rows.items():
        if "error" in row:
            lines.append(f"| {name} | {row['error']} | | | | | | | |")
            continue
        t, m = row.get("time"), row["temp"]
        agree = "yes" if row["diff"] <= rtol else "NO"
        lines.append(
            f"| {name} | {t * 1e3:.1f} ±{row['noise'] * 1e3:.1f} | {ratio(t, ck.get('time'))} | {ratio(t, loop.get('time'))} "
            f"| {m / 2**20:.1f} | {ratio(m, ck.get('temp'))} | {ratio(m, loop.get('temp'))} | {row['compile']:.1f} "
            f"| {agree} ({row['diff']:.0e}) |"
        )
    reference = next((row["reference"] for row in rows.values() if "reference" in row), None)
    lines += ["", f"(Agreement: largest relative difference of loss and gradients from `{reference}`, at most {rtol:g}.)"]
    lines += ["", "Picks (the runtime's fastest program within each budget): "
              + ", ".join(f"{row['temp'] / 2**20:.0f} MiB {name} ({row['time'] * 1e3:.1f} ms)" for name, row in frontier(rows))]  # fmt: skip
    lines += ["", "| check | pick | its step (ms) | limit (ms) | best mix of steps' states (ms) | |",
              "| --- | --- | ---: | ---: | ---: | --- |"]  # fmt: skip
    ms = lambda seconds: "-" if seconds is None or seconds < 0 else f"{seconds * 1e3:.1f}"
    for check in checks(shape, rows):
        lines.append(f"| {check.what} | {check.picked} | {ms(check.got)} | {ms(check.limit)} | {ms(check.bound)} | {check.verdict} |")
    lines += ["", "(Best mix: the lower convex hull of " + ", ".join(f"`{name}`" for name in UNIFORM)
              + ", each step's time and memory taken as in its uniform program: what storing some steps and "
              "checkpointing the rest, with or without a policy, could reach at that budget.)"]
    return "\n".join(lines)


def plot(results: dict[str, dict], path: str, caption: str) -> None:
    """Step time against temp memory, one panel per shape: every program a point, the runtime's
    picks a line, the checkpointed scan's and the for-loop's memory as vertical lines, and
    between them the straight line and `mix_bound`."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from _common import figure

    fig, axes = figure(len(results))
    for ax, (title, rows) in zip(axes, results.items()):
        for name, row in rows.items():
            if "time" not in row:
                continue
            runtime = name.startswith("runtime")
            ax.plot(row["temp"] / 2**30, row["time"] * 1e3, "o" if runtime else "s",
                    color="black" if runtime else "tab:blue", markersize=4 if runtime else 5, alpha=0.8)  # fmt: skip
            ax.annotate(name.replace("lax.scan", "scan").replace("jax.checkpoint", "ckpt"), (row["temp"] / 2**30, row["time"] * 1e3),
                        fontsize=5, xytext=(3, 2), textcoords="offset points")  # fmt: skip
        line = frontier(rows)
        if line:
            xs, ys = [], []
            for _, row in line:  # a staircase: a pick holds until a faster one fits
                if ys:
                    xs.append(row["temp"] / 2**30)
                    ys.append(ys[-1])
                xs.append(row["temp"] / 2**30)
                ys.append(row["time"] * 1e3)
            ax.plot(xs, ys, "-", color="black", linewidth=1.2, label="runtime's pick at each budget")
        for name, style in ((CHECKPOINTED, "--"), (FOR_LOOP, ":")):
            if name in rows and "temp" in rows[name]:
                ax.axvline(rows[name]["temp"] / 2**30, linestyle=style, color="grey", linewidth=0.8, label=f"{name}'s memory")
        if CHECKPOINTED in rows and FOR_LOOP in rows and "time" in rows[CHECKPOINTED] and "time" in rows[FOR_LOOP]:
            a, b = rows[CHECKPOINTED], rows[FOR_LOOP]
            ax.plot([a["temp"] / 2**30, b["temp"] / 2**30], [a["time"] * 1e3, b["time"] * 1e3], color="tab:red",
                    linewidth=0.8, label="straight line between them")  # fmt: skip
            budgets = [a["temp"] + i / 64 * (b["temp"] - a["temp"]) for i in range(65)]
            ax.plot([m / 2**30 for m in budgets], [mix_bound(rows, m) * 1e3 for m in budgets], ":", color="tab:green",
                    linewidth=1.0, label="best mix of whole steps' states")  # fmt: skip
        ax.set(xlabel="compiled temp memory (GiB)", ylabel="step time (ms)", title=title)
        ax.title.set_fontsize(7)
        ax.legend(fontsize=5)
    fig.suptitle(caption, fontsize=8)
    fig.savefig(path, dpi=130)
    print(f"plot written to {path}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (for the CPU, in seconds)")
    parser.add_argument("--repeats", type=int, help="timed runs per program (default: the shape's)")
    parser.add_argument("--compile-threads", type=int, default=4, help="compile this many programs at a time")
    parser.add_argument("--json", help="also write every number to this file")
    parser.add_argument("--plot", help="also draw the figure to this image file (needs matplotlib)")
    parser.add_argument("--from-json", help="measure nothing: print the tables and draw the figure of this file")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as file:
            saved = json.load(file)
        results = {title: rows for title, rows in saved["results"].items()}
        for title, rows in results.items():
            shape = next((make() for make in (*SHAPES.values(), *SMOKE.values()) if make().title == title), None)
            if shape is not None:
                print(f"## {shape.name}\n\n{table(shape, rows, saved.get('compile_threads', args.compile_threads), saved.get('rtol'))}\n")
        if args.plot:
            plot(results, args.plot, saved["caption"])
        return 0
    device = jax.devices()[0]
    shapes = [(SMOKE if args.smoke else SHAPES)[name]() for name in args.shapes]
    if args.repeats:
        shapes = [dataclasses.replace(shape, repeats=args.repeats) for shape in shapes]
    caption = f"benchmarks/memory_curve.py on {device.platform} ({device.device_kind}), jax {jax.__version__}"
    print(f"{caption}; the runtime {'has' if HAS_STORE else 'has no'} `store=`\n")
    progress = Progress(sum(len(variants(shape)) + shape.repeats for shape in shapes))
    results, agree = {}, True
    def save(rows: dict | None = None, shape: Shape | None = None) -> None:
        if rows is not None:
            results[shape.title] = rows
        if args.json:  # after each step, so that a run cut short keeps what it measured
            with open(args.json, "w") as file:
                json.dump({"caption": caption, "rtol": agreement_rtol(), "compile_threads": args.compile_threads, "results": results}, file, indent=1)

    for shape in shapes:
        start = time.perf_counter()
        rows = measure(shape, args.compile_threads, progress, functools.partial(save, shape=shape))
        save(rows, shape)
        print(f"## {shape.name}\n\n{table(shape, rows, args.compile_threads)}\n")
        print(f"({shape.name}: {time.perf_counter() - start:.0f} s in all)\n", flush=True)
        rtol = shape.rtol or agreement_rtol()
        agree &= all(row["diff"] <= rtol for row in rows.values() if "diff" in row)
    if args.plot:
        plot(results, args.plot, caption)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    raise SystemExit(main())
