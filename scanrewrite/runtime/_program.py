"""A call's program, built from its plan: the function `_staging` stages for a `_plan.Request`.

`program(req, get_f)` is `run(init, xs)`, which traces the step (`_trace.body`), decides the
plan (`_plan.make`), reports it (`_override.built`, for `record_sites`) and builds exactly it:

    steps - store checkpointed steps, in loop order first:
        (steps - store) // chunk chunks through the outer loop (`_levels.nested` over
        `jax.lax.scan`, or `equinox.internal.scan`), each in `jax.checkpoint`, then the
        leftover steps (`_chunks.chunked`)
    store steps after them, not checkpointed (straight-line, or on the rolled layout a loop)

With `store` the stored steps are the last ones in loop order (the highest indices; with
`reverse=True` the lowest), so the backward pass reaches them first and frees their residuals
before it recomputes any chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from scanrewrite.runtime import _chunks, _levels, _override, _plan, _policies, _trace
from scanrewrite.runtime._validate import scan_length

__all__ = ["program"]


def program(req: _plan.Request, get_f: Callable[[], Callable]) -> Callable[[Any, Any], tuple[Any, Any]]:
    """The program of a call asking for `req`, on `f = get_f()` (not held here, so that a cached
    program does not keep `f` alive)."""
    if req.kind == "checkpointed":
        return lambda init, xs: _equinox(req, get_f(), init, xs)
    return lambda init, xs: _scan(req, get_f(), init, xs)


def _loop(req: _plan.Request) -> Callable:
    def loop(body, carry, looped_xs, count):
        return jax.lax.scan(body, carry, looped_xs, count, req.reverse, 1, req.split_transpose)

    return loop


def _scan(req: _plan.Request, f: Callable, init: Any, xs: Any) -> tuple[Any, Any]:
    n = scan_length(xs, req.length)
    if req.whole:
        # Rolled and not checkpointed, chunks only nest loops, and XLA:CPU then keeps the
        # residuals of both loops (1.5x `lax.scan`'s memory); where nothing can differentiate
        # the scan, there is no backward pass to keep memory for. Either way this is `lax.scan`
        # of `f`, which compiles fastest and traces `f` once.
        why = "rolled layout, " + ("nothing can differentiate the call" if req.forward else "checkpoint=False")
        _override.built(_plan.loop_plan(req, n, why))
        step = _trace.marked_forward(f) if req.forward else f
        return jax.lax.scan(step, init, xs, req.length, req.reverse, 1, req.split_transpose)
    xs = jax.tree_util.tree_map(jnp.asarray, xs)  # as a loop body sees them
    body = _trace.body(f, init, xs, absorb=req.checkpoint is not False, reveal=_policies.is_ours(req.checkpoint))
    if req.layout.rolled_chunk and req.constant_inputs and body.constant_consts:
        # As above, where only the step's constants tell (under `jax.grad` of others).
        _override.built(_plan.loop_plan(req, n, "rolled layout, nothing can differentiate the call or its step"))
        return jax.lax.scan(body.step, body.init, xs, req.length, req.reverse, 1, req.split_transpose)
    plan = _plan.make(req, body, n)
    _override.built(plan)
    if plan.program is _plan.Program.LOOP:  # checkpointing would save nothing that matters
        return jax.lax.scan(body.step, body.init, xs, req.length, req.reverse, 1, req.split_transpose)
    loop = _loop(req)

    def outer(chunk, carry, chunked_xs, chunks):
        levels = _levels.resolve(req.levels, chunks)
        # Blocks keep only their input carry, whatever the chunks' policy saves.
        block_wrapper = _chunks.wrapper(plan.checkpoint is not False, prevent_cse=False)
        return _levels.nested(loop, chunk, carry, chunked_xs, chunks, levels, req.reverse, block_wrapper)

    def checkpointed(body, rest_xs, count):
        chunk_checkpoint = plan.checkpoint if plan.checkpoint_chunks else False
        return _chunks.chunked(
            body,
            rest_xs,
            count,
            plan.chunk,
            req.reverse,
            outer,
            _chunks.wrapper(chunk_checkpoint, prevent_cse=False),
            # Outside a loop, common-subexpression elimination could merge the recomputation
            # with the forward pass and keep the residuals after all.
            _chunks.wrapper(chunk_checkpoint, prevent_cse=True),
            req.layout,
            # A step in a checkpointed chunk is recomputed inside the chunk's loop; a step
            # checkpointed alone is straight-line code, where the recomputation could merge.
            step_wrapper=_chunks.wrapper(plan.checkpoint, prevent_cse=not plan.checkpoint_chunks)
            if plan.checkpoint_steps
            else _chunks.identity,
            # Measured on a TPU v5e (`prevent_cse=True` against `False`): with no policy, the
            # GPT-style stack's checkpointed scan as written kept 29 MiB less at the same speed;
            # with `reductions_saveable` the origin block ran at 18.7 ms in 372 MiB against 23.6
            # in 403 (the GPT-style stack: 158.4 against 157.7 ms, 29 MiB less); with a policy
            # that keeps dots, `False` ran 4-19% faster in 5-10% less memory on both.
            one_step_wrapper=_chunks.wrapper(chunk_checkpoint, prevent_cse=_policies.keeps_no_dots(plan.checkpoint)),
        )

    return _stored_last(body, xs, n, plan.store, req.reverse, req.layout, checkpointed)


def _stored_last(body: _trace.Body, xs: Any, n: int, store: int, reverse: bool, layout: _chunks.Layout,
                 checkpointed: Callable) -> tuple[Any, Any]:  # fmt: skip
    """`checkpointed(body, xs, n)`, but for the last `store` steps in loop order, which run
    after it (straight-line, or rolled as a loop where the layout rolls chunks) and are not
    checkpointed: the backward pass keeps their residuals."""
    if store == 0:
        return checkpointed(body, xs, n)
    stored = _chunks.steps(body.step, store, reverse, layout.rolled_chunk)
    if store == n:
        return stored(body.init, xs)
    tree_map = jax.tree_util.tree_map
    # In index order, the checkpointed steps are [lo, lo + n - store), the stored ones the rest.
    lo = store if reverse else 0
    head = tree_map(lambda a: a[lo : lo + n - store], xs)
    tail = tree_map(lambda a: a[:store] if reverse else a[n - store :], xs)
    carry, ys = checkpointed(body, head, n - store)
    carry, ys_stored = stored(carry, tail)
    first, last = (ys_stored, ys) if reverse else (ys, ys_stored)
    return carry, tree_map(lambda a, b: jnp.concatenate([a, b]), first, last)


def _equinox(req: _plan.Request, f: Callable, init: Any, xs: Any) -> tuple[Any, Any]:
    import equinox.internal as eqxi

    is_int = isinstance(req.checkpoints, int) and not isinstance(req.checkpoints, bool)

    def outer(chunk, carry, chunked_xs, chunks):
        checkpoints = min(req.checkpoints, chunks) if is_int else req.checkpoints
        return eqxi.scan(chunk, carry, chunked_xs, chunks, buffers=req.buffers, kind=req.kind, checkpoints=checkpoints)

    n = scan_length(xs, req.length)
    # Equinox hands `f` its `buffers` wrapped, so `f` must trace on them: no replay.
    body = _trace.body(f, init, xs, replay=req.buffers is None)
    plan = _plan.make(req, body, n)
    _override.built(plan)
    # No lone chunk: equinox's loop is what checkpoints, also around a single chunk.
    return _chunks.chunked(body, xs, n, plan.chunk, False, outer, _chunks.identity, None, req.layout)
