"""Chunked, checkpointed scans with an unrolled inner body.

`scan` and `eqxi_scan` take the arguments of `jax.lax.scan` and `equinox.internal.scan`, so a
rewritten call only changes the callee and appends `unroll=k`. A scan of N steps becomes an
outer loop over `N // k` chunks, each chunk k steps of straight-line code (so XLA can fuse and
schedule across steps), followed by the `N % k` leftover steps (the highest indices, or with
`reverse=True` the lowest), also straight-line. (On XLA:CPU the steps of a chunk stay a rolled
inner loop instead, and the leftover steps are a loop too: see `_chunks.layout`; there the chunks
are ones that keep no more memory than k and compile faster, or where the memory at stake is
negligible, one step each: see `_memory`.) `f` is traced
once and its jaxpr replayed for every copy of the step (`_trace`). Each chunk is wrapped in
`jax.checkpoint`, so the backward pass keeps
about `N / k` carries plus the residuals of the one chunk it is recomputing, instead of the
residuals of all N steps: the memory of a checkpointed scan with the speed of an unrolled loop.
This is the "checkpoint-of-unrolled-scan" of the equinox discussion that motivates the project.
For long scans, `levels` nests the checkpointing (blocks of chunks; see `_levels`).
`fori_loop` and `map` are the same loop for `jax.lax.fori_loop` and `jax.lax.map` (`_loops`).

Each call is staged as one compiled unit, cached weakly on `f` (`_staging`), so it costs what
`jax.lax.scan` costs outside `jit` too; its settings are resolved per call site (`_override`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import jax
import jax.numpy as jnp

from scanrewrite.runtime import _chunks, _levels, _memory, _override, _staging, _trace
from scanrewrite.runtime._compat import lax_unroll
from scanrewrite.runtime._flax import linen_scan, nnx_scan
from scanrewrite.runtime._loops import fori_loop, map
from scanrewrite.runtime._override import ORIGINAL, Site, override, record_sites
from scanrewrite.runtime._validate import check_checkpoint, check_unroll, chunk_size, scan_length

__all__ = [
    "ORIGINAL",
    "Site",
    "eqxi_scan",
    "fori_loop",
    "linen_scan",
    "map",
    "nnx_scan",
    "override",
    "record_sites",
    "scan",
]

_Carry = TypeVar("_Carry")
_X = TypeVar("_X")
_Y = TypeVar("_Y")


def _settings_key(settings: dict[str, Any]) -> tuple:
    """The resolved settings in the cache key: every one, whatever `resolve` returns."""
    return tuple(sorted(settings.items()))


def _scan(f, init, xs, length, reverse, _split_transpose, settings):
    """`scan` with its settings resolved for the call site."""
    unroll, checkpoint = settings["unroll"], settings["checkpoint"]
    levels = settings.get("levels", 1)  # eqxi_scan(kind="lax") has no `levels`
    if unroll is ORIGINAL:  # `override(unroll=ORIGINAL)`: the scan the rewrite replaced
        return jax.lax.scan(f, init, xs, length, reverse, 1, _split_transpose)
    check_unroll(unroll)
    check_checkpoint(checkpoint)
    _levels.check(levels)
    n = scan_length(xs, length)
    if n == 0:
        return jax.lax.scan(f, init, xs, length, reverse, lax_unroll(unroll), _split_transpose)
    layout = _chunks.layout()
    # Called on arrays (or vmap's tracers of them), not on those of a transformation that
    # differentiates: see `run`.
    constant_inputs = _trace.undifferentiated((init, xs))
    # Nothing around the call differentiates it, so nothing differentiates a scan inside `f`:
    # those build what they build on arrays, as this one does (`_trace.forward_only`).
    forward = _trace.forward_only((init, xs))
    # The program is one loop of `f` (traced once, replayed nowhere): `_staging` traces the
    # program itself instead of `f` first.
    whole = layout.rolled_chunk and (forward or checkpoint is False)
    # What one call keeps, `jax.vmap` around it repeats; its trace of `f` cannot tell.
    batch = _memory.batch_size((init, xs)) if layout.negligible_bytes else 1

    def build(get_f):
        def run(init, xs):
            def loop(body, carry, looped_xs, count):
                return jax.lax.scan(body, carry, looped_xs, count, reverse, 1, _split_transpose)

            def outer(chunk, carry, chunked_xs, chunks):
                levels_here = _levels.resolve(levels, chunks)
                # Blocks keep only their input carry, whatever the chunks' policy saves.
                block_wrapper = _chunks.wrapper(checkpoint is not False, prevent_cse=False)
                return _levels.nested(loop, chunk, carry, chunked_xs, chunks, levels_here, reverse, block_wrapper)

            if whole:
                # Rolled and not checkpointed, chunks only nest loops, and XLA:CPU then keeps
                # the residuals of both loops (1.5x `lax.scan`'s memory); where nothing can
                # differentiate the scan, there is no backward pass to keep memory for. Either
                # way this is `lax.scan` of `f`, which compiles fastest and traces `f` once.
                step = _trace.marked_forward(get_f()) if forward else get_f()
                return jax.lax.scan(step, init, xs, length, reverse, 1, _split_transpose)
            n = scan_length(xs, length)
            xs = jax.tree_util.tree_map(jnp.asarray, xs)  # as a loop body sees them
            # The chunks take over a per-step checkpoint around `f`, and its policy where the
            # call names none: checkpointing each step inside a checkpointed chunk again would
            # recompute every step twice in the backward pass.
            body = _trace.body(get_f(), init, xs, absorb=checkpoint is not False)
            if layout.rolled_chunk and constant_inputs and body.constant_consts:
                # As above, where only the step's constants tell (under `jax.grad` of others).
                return jax.lax.scan(body.step, body.init, xs, length, reverse, 1, _split_transpose)
            chunk_checkpoint = body.checkpoint if checkpoint is True and body.checkpoint is not None else checkpoint
            fitted = _memory.Fit(chunk_size(unroll, n))
            if layout.fit_chunk and chunk_checkpoint is True and 1 < fitted.size:
                # Rolled, k only trades carries for residuals: where the memory at stake is
                # negligible, build the chunks that compile fastest, else those that keep no
                # more and compile faster (`_memory`).
                fitted = _memory.negligible(body, n, levels, batch, layout.negligible_bytes) or (
                    _memory.rolled_chunk_size(body, n, fitted.size, levels)
                )
            return _chunks.chunked(
                body,
                xs,
                n,
                fitted.size,
                reverse,
                outer,
                _chunks.wrapper(chunk_checkpoint, prevent_cse=False),
                # Outside a loop, common-subexpression elimination could merge the recomputation
                # with the forward pass and keep the residuals after all.
                _chunks.wrapper(chunk_checkpoint, prevent_cse=True),
                layout,
                checkpoint_steps=fitted.checkpoint_steps,
            )

        return run

    key = ("scan", length, reverse, _split_transpose, layout, constant_inputs, forward, batch, *_settings_key(settings))
    staged = _staging.staged(f, key, build, unstaged_once=layout.rolled_chunk, by_structure=True, whole=whole)
    return staged(init, xs)


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
        step per chunk. An int larger than N behaves as N. On the CPU, where a chunk's steps
        stay rolled, a k between 1 and N with `checkpoint=True` and one level builds 1 or a
        divisor of N below k instead, or where k leaves steps over, blocks of a divisor of N
        whose steps are each checkpointed too, wherever that keeps no more memory by the
        runtime's count of the step's carry and residuals (the numbers are the same); and 1
        wherever that keeps 1 MiB or less, which compiles fastest (`_memory.negligible`).
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
        recomputed at any level. Part of the staging key, as every setting.

    **Returns:**

    As `jax.lax.scan`: the final carry and the stacked per-step outputs, in the original order.

    The call runs as one compiled program, cached on `f` (weakly) and every static setting:
    as with `jax.lax.scan`, calling again with the same `f`, settings, shapes and dtypes
    neither retraces `f` nor recompiles, and a change to a global that `f` reads is not seen
    by an already cached `f`. `f` is traced as often as by `jax.lax.scan` (once, or twice when
    a weakly typed `init` leaf changes dtype) and its jaxpr replayed for every copy of the
    step, so Python side effects in `f` run as often as under `jax.lax.scan`.
    """
    settings = _override.resolve(_override.call_site(), unroll=unroll, checkpoint=checkpoint, levels=levels)
    if not callable(f):
        raise TypeError(f"scan: `f` must be callable, got {f!r}")
    return _scan(f, init, xs, length, reverse, _split_transpose, settings)


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

    As `equinox.internal.scan`. Staged and cached as `scan` is (`buffers` is part of the key,
    by identity).
    """
    import equinox.internal as eqxi

    # `checkpoint` is what `kind="lax"` passes to `scan`; `kind="checkpointed"` ignores it.
    settings = _override.resolve(_override.call_site(), unroll=unroll, checkpoint=True)
    if settings["unroll"] is ORIGINAL:  # `override(unroll=ORIGINAL)`: the scan the rewrite replaced
        return eqxi.scan(f, init, xs, length, buffers=buffers, kind=kind, checkpoints=checkpoints)
    check_unroll(settings["unroll"])
    if kind not in ("lax", "checkpointed"):
        raise ValueError(f"`kind` must be 'lax' or 'checkpointed', got {kind!r}")
    is_int = isinstance(checkpoints, int) and not isinstance(checkpoints, bool)
    if not (checkpoints is None or checkpoints == "all" or is_int):
        raise ValueError(f"`checkpoints` must be None, an int or 'all', got {checkpoints!r}")
    init, xs = jax.tree_util.tree_map(jnp.asarray, (init, xs))
    if kind == "lax":
        # equinox.internal.scan(kind="lax") is jax.lax.scan and ignores the other options.
        return _scan(f, init, xs, length, False, False, settings)
    n = scan_length(xs, length)
    if n == 0:
        return eqxi.scan(f, init, xs, length, buffers=buffers, kind=kind, checkpoints=checkpoints)
    unroll = settings["unroll"]
    layout = _chunks.layout()

    def build(get_f):
        def run(init, xs):
            def outer(chunk, carry, chunked_xs, chunks):
                outer_checkpoints = min(checkpoints, chunks) if is_int else checkpoints
                return eqxi.scan(
                    chunk, carry, chunked_xs, chunks, buffers=buffers, kind=kind, checkpoints=outer_checkpoints
                )

            n = scan_length(xs, length)
            # Equinox hands `f` its `buffers` wrapped, so `f` must trace on them: no replay.
            body = _trace.body(get_f(), init, xs, replay=buffers is None)
            # No lone chunk: equinox's loop is what checkpoints, also around a single chunk.
            k = chunk_size(unroll, n)
            return _chunks.chunked(body, xs, n, k, False, outer, _chunks.identity, None, layout)

        return run

    key = ("eqxi_scan", length, kind, checkpoints, buffers, layout, *_settings_key(settings))
    # Equinox hands `f` its `buffers` wrapped, so `f` must trace on them: not by structure.
    by_structure = buffers is None
    return _staging.staged(f, key, build, unstaged_once=layout.rolled_chunk, by_structure=by_structure)(init, xs)
