"""`fori_loop` and `map`: jax's other scans, chunked and checkpointed as `scan` is.

`jax.lax.fori_loop` with bounds known at trace time is `jax.lax.scan` over the carry
`(i, val)` with no `xs` (which is why jax can reverse-differentiate it only then), and
`jax.lax.map` is `jax.lax.scan` with an empty carry (with `batch_size`, a scan over batches,
each a `jax.vmap` of `f`, and the last partial batch after it). Both are built here on the
runtime's `_call.scan`, so they chunk, checkpoint, store, nest, stage, cache, override and tune
as `scan` does, and compute what jax computes: the same scan body, the same carry, the same index.

The scan body is the user's function bound, as `self`, to a `_Body`: `_staging` keys a bound
method on its `self`, weakly, so the staged unit is cached on the user's function itself (as
`jax.lax.fori_loop` caches its scan body on `body_fun`) and dies with it. A fresh closure per
call would be a fresh cache key per call: a trace and a compile on every call.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from scanrewrite.runtime import _call, _chunks, _levels, _override, _staging
from scanrewrite.runtime._compat import typeof
from scanrewrite.runtime._validate import check_checkpoint, check_store, check_unroll, scan_length
from scanrewrite.settings import DEFAULTS, ORIGINAL, Settings

__all__ = ["fori_loop", "map"]

_Val = TypeVar("_Val")
_X = TypeVar("_X")
_Y = TypeVar("_Y")


@dataclass(frozen=True)
class _Body:
    """A scan body made of `step` and the function it is bound to as a method's `self`.

    Equal for equal `step` and `method`, so a second call finds the first call's cache entry.
    `method` is the user's function's `__func__` when that is itself a bound method: it is
    then bound to the method's instance, on which the cache keys, as it does for `scan`.
    """

    step: Callable[[Callable, Any, Any], tuple[Any, Any]]
    method: Callable | None = None

    def __call__(self, owner: Any, carry: Any, x: Any) -> tuple[Any, Any]:
        fn = owner if self.method is None else types.MethodType(self.method, owner)
        return self.step(fn, carry, x)


def _bound(step: Callable[[Callable, Any, Any], tuple[Any, Any]], fn: Callable) -> Callable:
    """`lambda carry, x: step(fn, carry, x)`, as a callable the staging cache keys on `fn`."""
    if isinstance(fn, types.MethodType):
        return types.MethodType(_Body(step, fn.__func__), fn.__self__)
    return types.MethodType(_Body(step), fn)


def _fori_step(body_fun: Callable, carry: Any, _: None) -> tuple[Any, None]:
    i, val = carry
    return (i + 1, body_fun(i, val)), None


def _map_step(f: Callable, carry: tuple[()], x: Any) -> tuple[tuple[()], Any]:
    return carry, f(x)


def _batch_step(f: Callable, carry: tuple[()], xs: Any) -> tuple[tuple[()], Any]:
    return carry, jax.vmap(f)(xs)


def _check_settings(
    unroll: Any, checkpoint: Any, levels: Any, store: Any, expected: str = "a bool or a non-negative int"
) -> None:
    check_unroll(unroll, expected)
    check_checkpoint(checkpoint)
    _levels.check(levels)
    check_store(store)


def _static_bounds(lower: Any, upper: Any) -> tuple[int, int] | None:
    """`(lower, steps)` as ints when both bounds are known at trace time, else None.

    With the check `jax.lax.fori_loop` makes first: the bounds have one dtype, or both are
    signed ints of which exactly one is weakly typed (a Python int).
    """
    lower_type, upper_type = typeof(lower), typeof(upper)
    if lower_type.dtype != upper_type.dtype:
        signed = all(np.issubdtype(t.dtype, np.signedinteger) for t in (lower_type, upper_type))
        if not (signed and lower_type.weak_type != upper_type.weak_type):
            raise TypeError(
                "lower and upper arguments to fori_loop must have equal types, "
                f"got {lower_type.dtype.name} and {upper_type.dtype.name}"
            )
    try:
        # As jax decides: a tracer cannot be an int (a `ConcretizationTypeError`).
        lower_, upper_ = int(lower), int(upper)
    except TypeError:
        return None
    return lower_, max(upper_ - lower_, 0)


def fori_loop(
    lower: Any,
    upper: Any,
    body_fun: Callable[[Any, _Val], _Val],
    init_val: _Val,
    *,
    unroll: int | bool | None = 1,
    checkpoint: bool | Callable[..., Any] = True,
    levels: int | Literal["auto"] = 1,
    store: int = 0,
) -> _Val:
    """As `jax.lax.fori_loop`; with bounds known at trace time, as `scan`'s chunked,
    checkpointed loop over the index range.

    **Arguments:**

    - `lower`, `upper`, `body_fun`, `init_val`: As `jax.lax.fori_loop`.
    - `unroll`, `checkpoint`, `levels`, `store`: As `scan`, over the `upper - lower` steps
        (`None`, jax's default, is `1`).

    **Returns:**

    As `jax.lax.fori_loop`: the value after the last step.

    When `lower` and `upper` are concrete at trace time (Python ints, or arrays outside any
    trace), jax runs the loop as `jax.lax.scan` over the carry `(i, val)`, and so does this:
    the same carry, `i` a weakly typed int from `lower` up, as jax gives it, through `scan`'s
    chunks of `unroll` steps, each in `jax.checkpoint`, so that reverse-mode differentiation
    keeps about `steps / unroll` values instead of every step's residuals. `upper <= lower` is
    no step. Staged and cached on `body_fun` as `scan` is on `f`.

    With a traced bound (an argument of `jax.jit`, a value under `jax.vmap`) jax runs a
    `jax.lax.while_loop`, which cannot be reverse-differentiated anyway; then this is exactly
    `jax.lax.fori_loop(lower, upper, body_fun, init_val)`: the settings do not apply (jax
    would reject an `unroll` there, so it is not passed on) and the call is no site for
    `override` or `record_sites`. Under `jax.disable_jit()` it is `jax.lax.fori_loop` too,
    which then runs step by step on Python values.
    """
    if not callable(body_fun):
        raise TypeError(f"fori_loop: `body_fun` must be callable, got {body_fun!r}")
    unroll = DEFAULTS.unroll if unroll is None else unroll  # jax's default, as the runtime's
    _check_settings(unroll, checkpoint, levels, store, "None, a bool or a non-negative int")
    bounds = _static_bounds(lower, upper)
    if bounds is None or jax.config.jax_disable_jit:
        return jax.lax.fori_loop(lower, upper, body_fun, init_val)
    site = _override.call_site()
    settings = _override.resolve(site, Settings(unroll, checkpoint, levels, store), api="fori_loop")
    if settings.unroll is ORIGINAL:  # `override(unroll=ORIGINAL)`: the loop the rewrite replaced
        return jax.lax.fori_loop(lower, upper, body_fun, init_val)
    first, steps = bounds
    step = _bound(_fori_step, body_fun)
    (_, result), _ = _call.scan(step, (first, init_val), None, steps, False, False, settings, site)
    return result


def map(
    f: Callable[[_X], _Y],
    xs: _X,
    *,
    batch_size: int | None = None,
    unroll: int | bool = 1,
    checkpoint: bool | Callable[..., Any] = True,
    levels: int | Literal["auto"] = 1,
    store: int = 0,
) -> _Y:
    """As `jax.lax.map`, computed as `scan`'s chunked, checkpointed loop.

    **Arguments:**

    - `f`, `xs`: As `jax.lax.map`.
    - `batch_size`: As `jax.lax.map`: `None` applies `f` to one slice of `xs` per step; an int
        `b > 0` applies `jax.vmap(f)` to `b` slices per step, and to the last `N % b` slices
        after the loop; `0` is one `jax.vmap(f)` over all of `xs`.
    - `unroll`, `checkpoint`: As `scan`, with a step of the loop (one slice, or one batch) as
        its step.
    - `store`: As `scan`, in steps of the loop.
    - `levels`: As `scan`. `map` has no carry, so nested blocks keep nothing that the chunks
        do not, and every level above 1 only adds a forward recomputation: leave it at 1.

    **Returns:**

    As `jax.lax.map`: the outputs of `f`, stacked.

    Under reverse-mode differentiation `jax.lax.map` keeps the residuals of every slice; with
    `checkpoint=True` the backward pass recomputes each chunk of `unroll` steps from its
    slices of `xs`, so it keeps one chunk's residuals at a time. Staged as one unit (the loop,
    the last batch, the concatenation) and cached on `f` as `scan` is. Under
    `jax.disable_jit()` this is `jax.lax.map`, which then runs step by step.
    """
    if not callable(f):
        raise TypeError(f"map: `f` must be callable, got {f!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 0):
        raise ValueError(f"`batch_size` must be None or a non-negative int, got {batch_size!r}")
    _check_settings(unroll, checkpoint, levels, store)
    if jax.config.jax_disable_jit:
        return jax.lax.map(f, xs, batch_size=batch_size)
    site = _override.call_site()
    settings = _override.resolve(site, Settings(unroll, checkpoint, levels, store), api="map")
    if settings.unroll is ORIGINAL:  # `override(unroll=ORIGINAL)`: the map the rewrite replaced
        return jax.lax.map(f, xs, batch_size=batch_size)
    if batch_size is None:
        return _call.scan(_bound(_map_step, f), (), xs, None, False, False, settings, site)[1]
    scan_length(xs, None)  # jax's checks of `xs`, in `scan`'s words

    def build(get_batch):
        def run(xs):
            batch = get_batch()
            n = scan_length(xs, None)
            batches = n // batch_size if batch_size else 0
            if batches == 0:
                return batch((), xs)[1]
            head = batches * batch_size
            blocked = jax.tree_util.tree_map(lambda a: a[:head].reshape(batches, batch_size, *a.shape[1:]), xs)
            ys = _call.scan(batch, (), blocked, None, False, False, settings, site)[1]
            ys = jax.tree_util.tree_map(lambda y: y.reshape(head, *y.shape[2:]), ys)
            if head == n:
                return ys
            rest = batch((), jax.tree_util.tree_map(lambda a: a[head:], xs))[1]
            return jax.tree_util.tree_map(lambda y, r: jnp.concatenate([y, r]), ys, rest)

        return run

    # Every resolved setting is part of the key, as in a scan's `_plan.Request`.
    key = ("map", batch_size, _chunks.layout(), settings)
    return _staging.staged(_bound(_batch_step, f), key, build)(xs)
