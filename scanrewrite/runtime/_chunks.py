"""The chunked computation itself: `n // k` chunks through an outer loop, then `n % k` steps.

Pure tracing code: it builds the program and runs whatever is around it (eagerly, or inside
the staged unit of `_staging`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from scanrewrite.runtime._compat import typeof


class Layout(NamedTuple):
    """How the steps of a chunk (and the leftover steps) are laid out in the program.

    `rolled_chunk`: a chunk's k steps are an inner `jax.lax.scan` (one trace of `f`) instead
    of k straight-line copies. `rolled_rest`: the same for the `n % k` leftover steps.
    """

    rolled_chunk: bool
    rolled_rest: bool


# Tests and benchmarks pin a layout here; None picks it from the backend (`layout()`).
_FORCE_LAYOUT: Layout | None = None


def layout() -> Layout:
    """The layout for the backend this process computes on.

    On XLA:CPU the steps stay rolled: unrolling gains nothing there (docs/benchmarks.md), and
    k straight-line steps whose LAPACK calls (a solve, a Cholesky) do not depend on each other
    are run concurrently by XLA:CPU, which can deadlock its intra-op thread pool
    (docs/limits.md). Accelerators get the straight-line chunk that unrolling is for.
    """
    if _FORCE_LAYOUT is not None:
        return _FORCE_LAYOUT
    rolled = jax.default_backend() == "cpu"
    return Layout(rolled_chunk=rolled, rolled_rest=rolled)


def wrapper(checkpoint: Any, *, prevent_cse: bool) -> Callable[[Callable], Callable]:
    """The transformation applied to each chunk: `jax.checkpoint` (with a policy), or none."""
    if checkpoint is False:
        return lambda fn: fn
    if checkpoint is True:
        return lambda fn: jax.checkpoint(fn, prevent_cse=prevent_cse)
    return lambda fn: jax.checkpoint(fn, prevent_cse=prevent_cse, policy=checkpoint)


def identity(fn: Callable) -> Callable:
    return fn


def _call(f: Callable, carry: Any, x: Any) -> Any:
    return f(carry, x)


def _steps(f: Callable, size: int, reverse: bool, rolled: bool) -> Callable:
    """`size` consecutive steps of `f`: (carry, xs) -> (carry, stacked ys).

    Straight-line code, or with `rolled` one `jax.lax.scan` over them.
    """
    if rolled:
        try:
            hash(f)
        except TypeError:  # `jax.lax.scan` hashes its body; an `equinox.Module` of arrays cannot be
            f = functools.partial(_call, f)
        return lambda carry, xs: jax.lax.scan(f, carry, xs, size, reverse)

    def run(carry, xs):
        ys = [None] * size
        for i in reversed(range(size)) if reverse else range(size):
            carry, ys[i] = f(carry, jax.tree_util.tree_map(lambda a: a[i], xs))
        return carry, jax.tree_util.tree_map(lambda *y: jnp.stack(y), *ys)

    return run


def _promote_weak_init(f: Callable, init: Any, xs: Any) -> Any:
    """Promote weakly typed leaves of `init` to the dtype `f` returns, as `jax.lax.scan` does.

    The outer loop would promote them too, but only after tracing the whole chunk (k steps) a
    second time; this costs one trace of `f`.
    """
    init_leaves = jax.tree_util.tree_leaves(init)
    if not any(getattr(typeof(leaf), "weak_type", False) for leaf in init_leaves):
        return init
    out_carry, _ = jax.eval_shape(lambda c, xs: f(c, jax.tree_util.tree_map(lambda a: a[0], xs)), init, xs)
    out_leaves = jax.tree_util.tree_leaves(out_carry)
    if len(out_leaves) != len(init_leaves):
        return init  # the outer jax.lax.scan reports the mismatch in its own words
    return jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(init),
        [
            jax.lax.convert_element_type(leaf, jnp.result_type(leaf, out.dtype))
            # Also when only weakness differs: every loop then sees the carry type f returns, so
            # no loop (a leftover loop, a nested level) traces f again for a changed type.
            if getattr(typeof(leaf), "weak_type", False)
            and (typeof(leaf).dtype != out.dtype or not getattr(out, "weak_type", False))
            else leaf
            for leaf, out in zip(init_leaves, out_leaves)
        ],
    )


def chunked(
    f: Callable,
    init: Any,
    xs: Any,
    n: int,
    k: int,
    reverse: bool,
    outer: Callable[[Callable, Any, Any, int], tuple[Any, Any]],
    chunk_wrapper: Callable[[Callable], Callable],
    remainder_wrapper: Callable[[Callable], Callable],
    steps_layout: Layout,
) -> tuple[Any, Any]:
    """Run `n > 0` steps as `n // k` chunks through `outer` plus the `n % k` leftover steps."""
    chunks = n // k
    # Steps outside the outer loop must see jax arrays of canonical dtype, as in a loop body.
    xs = jax.tree_util.tree_map(jnp.asarray, xs)
    init = _promote_weak_init(f, init, xs)
    chunk = chunk_wrapper(_steps(f, k, reverse, steps_layout.rolled_chunk))
    leftover = remainder_wrapper(_steps(f, n % k, reverse, steps_layout.rolled_rest))
    return in_blocks(
        init, xs, n, k, reverse, lambda carry, chunked_xs: outer(chunk, carry, chunked_xs, chunks), leftover
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
