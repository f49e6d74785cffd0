"""Chunked, checkpointed scans with an unrolled inner body.

`scan` and `eqxi_scan` take the arguments of `jax.lax.scan` and `equinox.internal.scan`, so a
rewritten call only changes the callee and appends `unroll=k`. A scan of N steps becomes an
outer loop over `N // k` chunks, each chunk k steps of straight-line code (so XLA can fuse and
schedule across steps), followed by the `N % k` leftover steps (the highest indices, or with
`reverse=True` the lowest), also straight-line. Each chunk is wrapped in `jax.checkpoint`, so the backward pass keeps
about `N / k` carries plus the residuals of the one chunk it is recomputing, instead of the
residuals of all N steps: the memory of a checkpointed scan with the speed of an unrolled loop.
This is the "checkpoint-of-unrolled-scan" of the equinox discussion that motivates the project.
For long scans, `levels` nests the checkpointing (blocks of chunks; see `_levels`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import jax
import jax.numpy as jnp

from scanrewrite.runtime import _levels

__all__ = ["eqxi_scan", "scan"]

_Carry = TypeVar("_Carry")
_X = TypeVar("_X")
_Y = TypeVar("_Y")


def _scan_length(xs: Any, length: Any) -> int:
    """N, from `length` and the leading axes of `xs`, with the checks `jax.lax.scan` makes."""
    lengths = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(xs):
        shape = getattr(leaf, "shape", None)
        if not shape:
            raise ValueError(
                f"scan got `xs{jax.tree_util.keystr(path)}` with no leading axis to scan over: {leaf!r}"
            )
        lengths.append((jax.tree_util.keystr(path), shape[0]))
    if length is not None:
        if isinstance(length, bool):
            raise ValueError(f"`length` must be an int, got {length!r}")
        try:
            length = operator.index(length)
        except TypeError:
            raise ValueError(f"`length` must be an int, got {length!r}") from None
        if length < 0:
            raise ValueError(f"`length` must be non-negative, got {length}")
        for where, n in lengths:
            if n != length:
                raise ValueError(f"scan got `length={length}` but `xs{where}` has leading axis {n}")
        return length
    if not lengths:
        raise ValueError("scan got `xs=None` (or an `xs` with no arrays) and no `length`")
    (first_where, first), *rest = lengths
    for where, n in rest:
        if n != first:
            raise ValueError(
                f"scan got inconsistent lengths: `xs{first_where}` has leading axis {first} "
                f"but `xs{where}` has {n}"
            )
    return first


def _chunk_size(unroll: Any, n: int) -> int:
    """Steps per chunk, k, for a scan of `n > 0` steps; `unroll` is validated beforehand."""
    if unroll is False:
        return 1
    if unroll is True or unroll == 0:
        return n
    return min(unroll, n)


def _check_unroll(unroll: Any) -> None:
    if isinstance(unroll, bool):
        return
    try:
        k = operator.index(unroll)
    except TypeError:
        raise ValueError(f"`unroll` must be a bool or a non-negative int, got {unroll!r}") from None
    if k < 0:
        raise ValueError(f"`unroll` must be a bool or a non-negative int, got {unroll!r}")


def _wrapper(checkpoint: Any, *, prevent_cse: bool) -> Callable[[Callable], Callable]:
    """The transformation applied to each chunk: `jax.checkpoint` (with a policy), or none."""
    if checkpoint is False:
        return lambda fn: fn
    if checkpoint is True:
        return lambda fn: jax.checkpoint(fn, prevent_cse=prevent_cse)
    if callable(checkpoint):
        return lambda fn: jax.checkpoint(fn, prevent_cse=prevent_cse, policy=checkpoint)
    raise ValueError(
        f"`checkpoint` must be True, False or a policy from `jax.checkpoint_policies`, got {checkpoint!r}"
    )


def _steps(f: Callable, size: int, reverse: bool) -> Callable:
    """`size` consecutive steps of `f` as straight-line code: (carry, xs) -> (carry, stacked ys)."""

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
    if not any(getattr(jax.typeof(leaf), "weak_type", False) for leaf in init_leaves):
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
            if getattr(jax.typeof(leaf), "weak_type", False)
            and (jax.typeof(leaf).dtype != out.dtype or not getattr(out, "weak_type", False))
            else leaf
            for leaf, out in zip(init_leaves, out_leaves)
        ],
    )


def _chunked(
    f: Callable,
    init: Any,
    xs: Any,
    n: int,
    k: int,
    reverse: bool,
    outer: Callable[[Callable, Any, Any, int], tuple[Any, Any]],
    chunk_wrapper: Callable[[Callable], Callable],
    remainder_wrapper: Callable[[Callable], Callable],
) -> tuple[Any, Any]:
    """Run `n > 0` steps as `n // k` chunks through `outer` plus `n % k` straight-line steps."""
    chunks, rest = divmod(n, k)
    # The remainder holds the highest indices forward and the lowest reversed, so it always
    # runs after the chunks; the chunked part covers indices [lo, hi).
    lo = rest if reverse else 0
    hi = lo + chunks * k
    tree_map = jax.tree_util.tree_map
    # Steps outside the outer loop must see jax arrays of canonical dtype, as in a loop body.
    xs = tree_map(jnp.asarray, xs)

    def split(a):
        body = a if rest == 0 else a[lo:hi]
        return body.reshape(chunks, k, *a.shape[1:])

    init = _promote_weak_init(f, init, xs)
    carry, ys = outer(chunk_wrapper(_steps(f, k, reverse)), init, tree_map(split, xs), chunks)
    ys = tree_map(lambda y: y.reshape(chunks * k, *y.shape[2:]), ys)
    if rest == 0:
        return carry, ys
    xs_rest = tree_map(lambda a: a[:rest] if reverse else a[hi:], xs)
    carry, ys_rest = remainder_wrapper(_steps(f, rest, reverse))(carry, xs_rest)
    if reverse:
        return carry, tree_map(lambda r, y: jnp.concatenate([r, y]), ys_rest, ys)
    return carry, tree_map(lambda y, r: jnp.concatenate([y, r]), ys, ys_rest)


def scan(
    f: Callable[[_Carry, _X], tuple[_Carry, _Y]],
    init: _Carry,
    xs: _X | None = None,
    length: int | None = None,
    reverse: bool = False,
    unroll: int | bool = 1,
    _split_transpose: bool = False,
    *,
    checkpoint: bool | Callable[..., Any] = True,
    levels: int | Literal["auto"] = 1,
) -> tuple[_Carry, _Y]:
    """As `jax.lax.scan`, computed as checkpointed chunks of `unroll` straight-line steps.

    **Arguments:**

    - `f`, `init`, `xs`, `length`, `reverse`: As `jax.lax.scan`.
    - `unroll`: steps per chunk, k. `True` or `0`: one chunk of all N steps. `False` or `1`: one
        step per chunk. An int larger than N behaves as N.
    - `_split_transpose`: As `jax.lax.scan` (forwarded to the outer loop).
    - `checkpoint`: `True` wraps each chunk (and the `N % k` leftover steps) in
        `jax.checkpoint`, so the backward pass recomputes it from its input carry. A policy
        such as `jax.checkpoint_policies.dots_saveable` is passed to
        `jax.checkpoint(policy=...)`. `False` does not checkpoint at all: the result is then an
        unrolled scan with every step's residuals saved, as `jax.lax.scan(unroll=k)`.
    - `levels`: nested checkpointing for long scans. `1`: one loop over the `N // k` chunks,
        keeping `N // k` carries for the backward pass. `2`: the chunks are grouped into about
        `sqrt(N / k)` blocks, each block in `jax.checkpoint` (without the policy: a block
        keeps only its input carry), so the backward pass keeps about `2 sqrt(N / k)` carries
        plus one chunk's residuals, for one more forward recomputation. `L`: the same, L deep,
        about `L (N / k) ** (1 / L)` carries. A level that would hold fewer than two blocks is
        not built (so a too large `levels` acts as the largest that N supports). `"auto"`: the
        smallest level count that keeps at most 64 carries. With `checkpoint=False` nothing is
        recomputed at any level.

    **Returns:**

    As `jax.lax.scan`: the final carry and the stacked per-step outputs, in the original order.

    `f` is traced `k + N % k` times (plus once more when `init` has weakly typed leaves), so
    compile time grows with k, not with N. Python side effects in `f` run once per trace.
    """
    if not callable(f):
        raise TypeError(f"scan: `f` must be callable, got {f!r}")
    _check_unroll(unroll)
    chunk_wrapper = _wrapper(checkpoint, prevent_cse=False)
    _levels.check(levels)
    n = _scan_length(xs, length)
    if n == 0:
        return jax.lax.scan(f, init, xs, length, reverse, unroll, _split_transpose)

    def loop(body, carry, looped_xs, count):
        return jax.lax.scan(body, carry, looped_xs, count, reverse, 1, _split_transpose)

    def outer(chunk, carry, chunked_xs, chunks):
        return _levels.nested(
            loop,
            chunk,
            carry,
            chunked_xs,
            chunks,
            _levels.resolve(levels, chunks),
            reverse,
            # Blocks keep only their input carry, whatever the chunks' policy saves.
            _wrapper(checkpoint is not False, prevent_cse=False),
        )

    return _chunked(
        f,
        init,
        xs,
        n,
        _chunk_size(unroll, n),
        reverse,
        outer,
        chunk_wrapper,
        # Outside a loop, common-subexpression elimination could merge the recomputation
        # with the forward pass and keep the residuals after all.
        _wrapper(checkpoint, prevent_cse=True),
    )


def eqxi_scan(
    f: Callable[[_Carry, _X], tuple[_Carry, _Y]],
    init: _Carry,
    xs: _X,
    length: int | None = None,
    *,
    buffers: Callable[[_Carry], Any | Sequence[Any]] | None = None,
    kind: Literal["lax", "checkpointed"],
    checkpoints: None | int | Literal["all"] = None,
    unroll: int | bool = 1,
) -> tuple[_Carry, _Y]:
    """As `equinox.internal.scan`, computed as chunks of `unroll` straight-line steps.

    **Arguments:**

    - `f`, `init`, `xs`, `length`, `buffers`: As `equinox.internal.scan`. The carry of a chunk
        is the carry of `f`, so `buffers` selects the same nodes in both.
    - `kind`: `"lax"`: the outer loop is `scan` (each chunk in `jax.checkpoint`).
        `"checkpointed"`: the outer loop is `equinox.internal.scan(kind="checkpointed")` over
        chunks, which already recomputes, so chunks are not wrapped again. Like equinox's, it
        has no forward-mode autodifferentiation.
    - `checkpoints`: As `equinox.internal.scan`, counted in chunk boundaries: an int is capped
        at the number of chunks, `"all"` checkpoints every chunk, `None` lets equinox choose.
    - `unroll`: steps per chunk, as in `scan`.

    **Returns:**

    As `equinox.internal.scan`.
    """
    import equinox.internal as eqxi

    _check_unroll(unroll)
    if kind not in ("lax", "checkpointed"):
        raise ValueError(f"`kind` must be 'lax' or 'checkpointed', got {kind!r}")
    is_int = isinstance(checkpoints, int) and not isinstance(checkpoints, bool)
    if not (checkpoints is None or checkpoints == "all" or is_int):
        raise ValueError(f"`checkpoints` must be None, an int or 'all', got {checkpoints!r}")
    init, xs = jax.tree_util.tree_map(jnp.asarray, (init, xs))
    if kind == "lax":
        # equinox.internal.scan(kind="lax") is jax.lax.scan and ignores the other options.
        return scan(f, init, xs, length, unroll=unroll)
    n = _scan_length(xs, length)
    if n == 0:
        return eqxi.scan(f, init, xs, length, buffers=buffers, kind=kind, checkpoints=checkpoints)

    def outer(chunk, carry, chunked_xs, chunks):
        outer_checkpoints = min(checkpoints, chunks) if is_int else checkpoints
        return eqxi.scan(
            chunk, carry, chunked_xs, chunks, buffers=buffers, kind=kind, checkpoints=outer_checkpoints
        )

    identity = _wrapper(False, prevent_cse=False)
    return _chunked(f, init, xs, n, _chunk_size(unroll, n), False, outer, identity, identity)
