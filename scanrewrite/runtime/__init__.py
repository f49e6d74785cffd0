"""Chunked, checkpointed scans with an unrolled inner body: the public face of the runtime.

`scan` and `eqxi_scan` take the arguments of `jax.lax.scan` and `equinox.internal.scan`, so a
rewritten call only changes the callee and appends `unroll=k`. A scan of N steps becomes an
outer loop over `N // k` chunks, each chunk k steps of straight-line code (so XLA can fuse and
schedule across steps), followed by the `N % k` leftover steps (the highest indices, or with
`reverse=True` the lowest), also straight-line, each chunk in `jax.checkpoint`: the memory of a
checkpointed scan with the speed of an unrolled loop (the "checkpoint-of-unrolled-scan" of the
equinox discussion that motivates the project). `store` keeps the residuals of the last steps
instead, `levels` nests the checkpointing for long scans, and `reductions_saveable` and its two
companions are checkpoint policies that keep what is cheap to keep (`_policies`; the maxima
only where `_extremes` proves it cannot change a gradient, jax's own softmax written out so
that they see it, `_reveal`). `fori_loop` and `map` are the same
loop for `jax.lax.fori_loop` and `jax.lax.map` (`_loops`), `nnx_scan` and `linen_scan` run
Flax's scans on it (`_flax`).

Each function here checks its arguments, resolves its settings (a `Settings`, the type
`scanrewrite.settings` shares with the tuner and the write-back) for its call site
(`_override`) and hands them on; from there a call is a pipeline (docs/runtime.md has the
picture): `_call` validates and asks `_plan` for a request, `_staging` stages one compiled unit
for it, cached weakly on `f`, and `_program` traces the step once (`_trace`), decides the plan
(`_plan.make`: chunk size fitted by `_memory`, stored steps, checkpoint, levels) and builds it
(`_chunks`, `_levels`).

Besides what a rewritten program calls, this is all `scanrewrite.tune` uses of the runtime
(never a private module): `override`, `record_sites` and what they take and give (`Settings`,
`Site`, `Sites`, `Call`), `named_policy` (a policy from its name) and `sub_jaxprs` (the jaxprs
inside an equation, across jax's releases).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from scanrewrite.runtime import _call, _override
from scanrewrite.runtime._compat import sub_jaxprs
from scanrewrite.runtime._flax import linen_scan, nnx_scan
from scanrewrite.runtime._loops import fori_loop, map
from scanrewrite.runtime._override import ORIGINAL, Call, Site, Sites, override, record_sites
from scanrewrite.runtime._policies import (
    dots_and_reductions_saveable,
    dots_with_no_batch_dims_and_reductions_saveable,
    named_policy,
    reductions_saveable,
)
from scanrewrite.runtime._validate import check_store, check_unroll
from scanrewrite.settings import DEFAULTS, Settings

__all__ = [
    "DEFAULTS",
    "ORIGINAL",
    "Call",
    "Settings",
    "Site",
    "Sites",
    "dots_and_reductions_saveable",
    "dots_with_no_batch_dims_and_reductions_saveable",
    "eqxi_scan",
    "fori_loop",
    "linen_scan",
    "map",
    "named_policy",
    "nnx_scan",
    "override",
    "record_sites",
    "reductions_saveable",
    "scan",
    "sub_jaxprs",
]

_Carry = TypeVar("_Carry")
_X = TypeVar("_X")
_Y = TypeVar("_Y")


def scan(
    f: Callable[[_Carry, _X], tuple[_Carry, _Y]],
    init: _Carry,
    xs: _X | None = None,
    length: int | None = None,
    reverse: bool = False,
    _unroll: int | bool | None = None,
    _split_transpose: bool = False,
    *,
    unroll: int | bool = 1,
    checkpoint: bool | Callable[..., Any] = True,
    levels: int | Literal["auto"] = 1,
    store: int = 0,
) -> tuple[_Carry, _Y]:
    """As `jax.lax.scan`, computed as checkpointed chunks of `unroll` straight-line steps.

    **Arguments:**

    - `f`, `init`, `xs`, `length`, `reverse`: As `jax.lax.scan`.
    - `unroll`: steps per chunk, k. `True` or `0`: one chunk of all N steps. `False` or `1`: one
        step per chunk. An int larger than N behaves as N. On the CPU, where a chunk's steps
        stay rolled, a k between 1 and N with `checkpoint=True` and one level builds 1 or a
        divisor of N below k instead, or where k leaves steps over, blocks of a divisor of N
        whose steps are each checkpointed too, wherever that keeps no more memory by the
        runtime's count of the step's carry and residuals, and 1 wherever that keeps 1 MiB or
        less, which compiles fastest (`_memory.negligible`). On accelerators, where a chunk is
        straight-line, it builds the largest size up to k that keeps no more memory than one
        step per chunk by that count (the numbers are the same whatever size is built).
        Passed by keyword, or by position as `jax.lax.scan`'s sixth argument (`_unroll`), which
        wins: `unroll=` a `functools.partial` of `scan` holds (as the rewrite writes it) and an
        unroll a later call passes by position (`partial(scan, f, unroll=4)(init, xs, None,
        False, 2)`) do not collide, and the call's own is used, as by the call it replaced.
    - `_split_transpose`: As `jax.lax.scan` (forwarded to the outer loop).
    - `checkpoint`: `True` wraps each chunk (and the `N % k` leftover steps) in
        `jax.checkpoint`, so the backward pass recomputes it from its input carry, wherever
        that saves more than negligible memory: where, by the runtime's count, it would save
        16 MiB or less (with one level and nothing stored), nothing is checkpointed and the
        program is `jax.lax.scan`'s (`_plan.unneeded`; the rewrite writes no `checkpoint=`,
        and a written `True` is weighed alike). A policy
        such as `jax.checkpoint_policies.dots_saveable` is passed to
        `jax.checkpoint(policy=...)`; `reductions_saveable` (keeps sums, and maxima and minima
        where the step allows) often runs faster than no policy in less memory on an
        accelerator. `False` does not checkpoint at all: the result is then an
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
    - `store`: the last `store` steps in loop order (with `reverse=True` the lowest indices:
        the steps the backward pass reaches first) keep their residuals instead of recomputing
        them: they run after the other `N - store` steps (which run as described above, in
        chunks of k), not checkpointed, straight-line on accelerators (a plain loop on the
        CPU's rolled layout). `store >= N` stores every step: with `checkpoint=False` and
        `unroll=True` too, on accelerators that is the Python for-loop's program. Memory grows
        with `store` from the checkpointed program's towards the for-loop's, recomputation
        falls. A non-negative int.

    **Returns:**

    As `jax.lax.scan`: the final carry and the stacked per-step outputs, in the original order.

    The call runs as one compiled program, cached on `f` (weakly) and every static setting:
    as with `jax.lax.scan`, calling again with the same `f`, settings, shapes and dtypes
    neither retraces `f` nor recompiles, and a change to a global that `f` reads is not seen
    by an already cached `f`. `f` is traced as often as by `jax.lax.scan` (once, or twice when
    a weakly typed `init` leaf changes dtype) and its jaxpr replayed for every copy of the
    step, so Python side effects in `f` run as often as under `jax.lax.scan`.
    """
    unroll = unroll if _unroll is None else _unroll
    site = _override.call_site()
    settings = _override.resolve(site, Settings(unroll, checkpoint, levels, store), api="scan")
    if not callable(f):
        raise TypeError(f"scan: `f` must be callable, got {f!r}")
    return _call.scan(f, init, xs, length, reverse, _split_transpose, settings, site)


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
    store: int = 0,
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
    - `store`: as in `scan`, with `kind="lax"`; `kind="checkpointed"` takes none (equinox's
        loop decides what it keeps), and ignores an `override`'s.

    **Returns:**

    As `equinox.internal.scan`. Staged and cached as `scan` is (`buffers` is part of the key,
    by identity).
    """
    import equinox.internal as eqxi

    # `checkpoint` is what `kind="lax"` passes to `scan`; `kind="checkpointed"` ignores it.
    site = _override.call_site()
    # It takes no `levels`: None, so that no override gives it one.
    settings = _override.resolve(site, Settings(unroll, DEFAULTS.checkpoint, None, store), api="eqxi_scan")
    if settings.unroll is ORIGINAL:  # `override(unroll=ORIGINAL)`: the scan the rewrite replaced
        return eqxi.scan(f, init, xs, length, buffers=buffers, kind=kind, checkpoints=checkpoints)
    check_unroll(settings.unroll)
    if kind not in ("lax", "checkpointed"):
        raise ValueError(f"`kind` must be 'lax' or 'checkpointed', got {kind!r}")
    is_int = isinstance(checkpoints, int) and not isinstance(checkpoints, bool)
    if not (checkpoints is None or checkpoints == "all" or is_int):
        raise ValueError(f"`checkpoints` must be None, an int or 'all', got {checkpoints!r}")
    check_store(store)
    if kind == "checkpointed" and store:
        raise ValueError(f"`store` applies to kind='lax' only (equinox's loop decides what it keeps), got {store!r}")
    return _call.eqxi_scan(f, init, xs, length, buffers, kind, checkpoints, settings, site)
