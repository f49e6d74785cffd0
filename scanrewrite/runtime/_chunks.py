"""The chunked computation itself: `n // k` chunks through an outer loop, then `n % k` steps.

Pure tracing code: it builds the program and runs whatever is around it (eagerly, or inside
the staged unit of `_staging`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from scanrewrite.runtime import _trace


class Layout(NamedTuple):
    """How the steps of a chunk (and the leftover steps) are laid out in the program.

    `rolled_chunk`: a chunk's k steps are an inner `jax.lax.scan` instead of k straight-line
    copies of the step. `rolled_rest`: the `n % k` leftover steps are a `jax.lax.scan` of steps
    each checkpointed as a chunk is, instead of straight-line steps checkpointed together.
    `fit_chunk`: chunks as long as `_plan.chunk_size` fits to the step for the requested k
    (rolled: one that keeps no more memory and compiles faster; straight-line: one that keeps no
    more memory than one step per chunk), instead of k itself.
    `negligible_bytes`: with `fit_chunk`, where one step per chunk keeps at most this many
    bytes for the backward pass, one step per chunk, which compiles fastest, whatever k
    (`_memory.negligible`).
    `negligible_saving`: where checkpointing the default way (`checkpoint=True`, one level, no
    stored steps, no per-step checkpoint of the user's) would save at most this many bytes
    (`_memory.saving`), nothing is checkpointed (`_plan.unneeded`); 0: always checkpointed.
    `keeps_reductions`: `checkpoint=True` keeps the outputs of the step's reductions
    (`reductions_saveable`) where that keeps its maxima (`_plan.make`).
    """

    rolled_chunk: bool
    rolled_rest: bool
    fit_chunk: bool = False
    negligible_bytes: int = 0
    negligible_saving: int = 0
    keeps_reductions: bool = False


#: On XLA:CPU, the memory at stake (what one step per chunk keeps for the backward pass, by
#: `_memory`'s count) that no layout is worth saving: a CPU process that runs jax holds about
#: 200 MB before it computes anything, and compiling a gradient adds about as much again
#: (docs/runtime.md, "Where the memory cannot matter").
NEGLIGIBLE_BYTES = 1 << 20

#: On every backend, the memory that checkpointing must save to be worth its recomputation:
#: below it, `checkpoint=True` builds the program of `jax.lax.scan` (docs/runtime.md, "Where
#: checkpointing would save nothing that matters").
NEGLIGIBLE_SAVING = 16 << 20


# Tests and benchmarks pin a layout here; None picks it from the backend (`layout()`).
_FORCE_LAYOUT: Layout | None = None


def layout() -> Layout:
    """The layout for the backend this process computes on.

    On XLA:CPU the steps stay rolled: unrolling gains nothing there (docs/benchmarks.md), and
    k straight-line steps whose LAPACK calls (a solve, a Cholesky) do not depend on each other
    are run concurrently by XLA:CPU, which can deadlock its intra-op thread pool
    (docs/limits.md). Rolled, the chunk size only trades carries for residuals, so it is
    fitted to the step (`fit_chunk`): where the memory at stake is `NEGLIGIBLE_BYTES` or less,
    one step per chunk. Accelerators get the straight-line chunk that unrolling is for, fitted
    too: no larger than what keeps no more memory than one step per chunk, and there
    `checkpoint=True` keeps the step's reductions, which ran faster in less memory on a TPU
    (docs/runtime.md, "Keeping reductions by default").
    """
    if _FORCE_LAYOUT is not None:
        return _FORCE_LAYOUT
    rolled = jax.default_backend() == "cpu"
    negligible = NEGLIGIBLE_BYTES if rolled else 0
    return Layout(rolled, rolled, True, negligible, NEGLIGIBLE_SAVING, keeps_reductions=not rolled)


def wrapper(checkpoint: Any, *, prevent_cse: bool) -> Callable[[Callable], Callable]:
    """The transformation applied to each chunk: `jax.checkpoint` (with a policy), or none."""
    if checkpoint is False:
        return lambda fn: fn
    if checkpoint is True:
        return lambda fn: jax.checkpoint(fn, prevent_cse=prevent_cse)
    return lambda fn: jax.checkpoint(fn, prevent_cse=prevent_cse, policy=checkpoint)


def identity(fn: Callable) -> Callable:
    return fn


def steps(step: Callable, size: int, reverse: bool, rolled: bool) -> Callable:
    """`size` consecutive steps: (carry, xs) -> (carry, stacked ys).

    Straight-line code, or with `rolled` one `jax.lax.scan` over them. One step is the step
    itself, with its x and y given a leading axis of one.
    """
    if rolled and size > 1:
        return lambda carry, xs: jax.lax.scan(step, carry, xs, size, reverse)

    def run(carry, xs):
        ys = [None] * size
        for i in reversed(range(size)) if reverse else range(size):
            carry, ys[i] = step(carry, jax.tree_util.tree_map(lambda a: a[i], xs))
        return carry, jax.tree_util.tree_map(lambda *y: jnp.stack(y), *ys)

    return run


def chunked(
    body: _trace.Body,
    xs: Any,
    n: int,
    k: int,
    reverse: bool,
    outer: Callable[[Callable, Any, Any, int], tuple[Any, Any]],
    chunk_wrapper: Callable[[Callable], Callable],
    lone_wrapper: Callable[[Callable], Callable] | None,
    steps_layout: Layout,
    *,
    step_wrapper: Callable[[Callable], Callable] = identity,
    one_step_wrapper: Callable[[Callable], Callable] | None = None,
) -> tuple[Any, Any]:
    """Run `n > 0` steps of `body` as `n // k` chunks through `outer`, then the `n % k` left over.

    `outer(chunk, carry, chunked_xs, chunks)` loops over the chunks, each in `chunk_wrapper`.
    One chunk of all `n` steps runs in `lone_wrapper`, with no loop around it (unless
    `lone_wrapper` is None). The leftover steps run after the chunks: straight-line in
    `lone_wrapper`, or rolled, as a loop of steps each in `chunk_wrapper`. Each step of a
    chunk, and each straight-line leftover step, is in `step_wrapper` (`_memory.Fit`). One step
    per chunk is the step in `one_step_wrapper` (by default `chunk_wrapper`) through `outer`.
    """
    chunks, rest = divmod(n, k)
    step = step_wrapper(body.step)
    chunk = steps(step, k, reverse, steps_layout.rolled_chunk)
    if chunks == 1 and rest == 0 and lone_wrapper is not None:
        return lone_wrapper(chunk)(body.init, xs)
    if k == 1:
        # The step itself, as `jax.lax.scan(jax.checkpoint(f))` has it: a chunk's axis of one
        # around every x and y made XLA keep a copy of the xs' cotangent.
        return outer((one_step_wrapper or chunk_wrapper)(body.step), body.init, xs, n)
    wrapped = chunk_wrapper(chunk)
    if steps_layout.rolled_rest:
        # One loop whose steps are checkpointed each: XLA compiles one differentiated step for
        # it, where a checkpointed loop compiles a forward, a recomputing and a backward loop.
        step = chunk_wrapper(body.step)
        leftover = lambda carry, rest_xs: jax.lax.scan(step, carry, rest_xs, rest, reverse)
    else:
        leftover = (lone_wrapper or identity)(steps(step, rest, reverse, False))
    return in_blocks(
        body.init, xs, n, k, reverse, lambda carry, chunked_xs: outer(wrapped, carry, chunked_xs, chunks), leftover
    )


def in_blocks(
    carry: Any,
    xs: Any,
    count: int,
    size: int,
    reverse: bool,
    run_blocks: Callable[[Any, Any], tuple[Any, Any]],
    run_rest: Callable[[Any, Any], tuple[Any, Any]],
) -> tuple[Any, Any]:
    """Run `count` units as `count // size` blocks of `size`, then the `count % size` left over.

    `run_blocks(carry, blocked_xs)` gets every leaf of `xs` reshaped to `(blocks, size, ...)`
    and returns per-block outputs of that shape; `run_rest(carry, rest_xs)` gets the leftover
    units (only when there are any). The leftover units hold the highest indices, or with
    `reverse` the lowest, so in a loop's direction they always run after the blocks. Returns
    the final carry and the outputs stacked on a leading axis of `count`, in unit order.
    """
    blocks, rest = divmod(count, size)
    tree_map = jax.tree_util.tree_map
    # The blocks cover indices [lo, hi).
    lo = rest if reverse else 0
    hi = lo + blocks * size

    def to_blocks(a):
        return (a if rest == 0 else a[lo:hi]).reshape(blocks, size, *a.shape[1:])

    carry, ys = run_blocks(carry, tree_map(to_blocks, xs))
    ys = tree_map(lambda y: y.reshape(blocks * size, *y.shape[2:]), ys)
    if rest == 0:
        return carry, ys
    carry, ys_rest = run_rest(carry, tree_map(lambda a: a[:lo] if reverse else a[hi:], xs))
    if reverse:
        return carry, tree_map(lambda r, y: jnp.concatenate([r, y]), ys_rest, ys)
    return carry, tree_map(lambda y, r: jnp.concatenate([y, r]), ys, ys_rest)
