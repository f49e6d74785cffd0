"""The jax APIs that differ across the releases the runtime supports (jax 0.4.31 to the newest).

Every difference is handled here, by asking jax whether it has the newer API, never by comparing
version numbers, so the rest of the runtime (and the tests) call one name on every release.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import jax.extend.core

# `Literal` and `DropVar`: `jax.core` lost them and `jax.extend.core` lacks `DropVar` on older
# releases; `jax._src.core` has both on every one.
from jax._src import core as jax_core
from jax._src.interpreters import batching

__all__ = [
    "INLINE", "ClosedJaxpr", "Jaxpr", "bare_jaxpr", "bind_equation", "current_trace", "scan_counts", "enable_x64", "is_eval_trace", "jax_core",
    "lax_unroll", "leading_slice", "make_user_context", "sub_jaxprs", "trace_of", "trace_past_vmap", "typeof",
]  # fmt: skip

#: A jaxpr with the values of its constants, as `jax.make_jaxpr` returns it: `ClosedJaxpr(jaxpr,
#: consts)`. On newer jax (0.12) every `Jaxpr` holds its constants and this is `Jaxpr` itself.
ClosedJaxpr = jax.extend.core.ClosedJaxpr
Jaxpr = jax.extend.core.Jaxpr


def bare_jaxpr(closed: Any) -> Any:
    """The jaxpr of `closed` holding none of its constants' values (so that keeping it keeps no
    array alive): `ClosedJaxpr(bare_jaxpr(closed), consts)` is `closed` with `consts`.

    Older jax's `closed.jaxpr` holds none; newer jax's is `closed` itself, constants and all."""
    return ClosedJaxpr(closed.jaxpr, [None] * len(closed.consts)).jaxpr


def sub_jaxprs(eqn: Any) -> Iterator[tuple[Any, list[Any]]]:
    """(jaxpr, consts) of each jaxpr among an equation's parameters (a loop's body, a branch,
    a call's), closed or not."""
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(item, "jaxpr") and hasattr(item, "consts"):
                yield item.jaxpr, list(item.consts)
            elif type(item).__name__ == "Jaxpr":
                yield item, []


def bind_equation(eqn: Any, args: Any) -> list[Any]:
    """`eqn`'s primitive bound anew on `args`, as `jax.core.eval_jaxpr` binds it: its outputs.

    Newer jax's `get_bind_params` gives the parameters to bind with, the functions a call
    runs among them; older jax's (0.4) gives those functions apart, as `(subfuns, params)`."""
    params = eqn.primitive.get_bind_params(eqn.params)
    subfuns, params = params if isinstance(params, tuple) else ((), params)
    with eqn.ctx.manager if hasattr(eqn, "ctx") else contextlib.nullcontext():
        out = eqn.primitive.bind(*subfuns, *args, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def scan_counts(eqn: Any) -> tuple[int, int]:
    """(constants, carry leaves) among the inputs of a `scan` equation, the rest being `xs`.

    Older jax gives the counts as parameters; newer jax (0.12) a flat tree of the three groups
    (`ft_in`), having moved a carry leaf the loop never changes among the constants."""
    if "num_consts" in eqn.params:
        return eqn.params["num_consts"], eqn.params["num_carry"]
    consts, carry, _ = eqn.params["ft_in"].unpack()
    return len(list(consts)), len(list(carry))


# jax.core.get_aval was deprecated in jax 0.8.2 and removed in 0.10.0; jax.typeof replaces it.
_typeof = getattr(jax, "typeof", None) or jax.core.get_aval
# Before jax 0.4.36 the abstract value of an array (or of a tracer of one, outside `jit`) was a
# `ConcreteArray`, which holds the value and whose `update` takes no `shape`; `raise_to_shaped`
# gives its `ShapedArray` (weak type kept), which is what newer jax's `get_aval` returns.
_shaped = jax_core.raise_to_shaped if hasattr(jax_core, "ConcreteArray") else None


def typeof(x: Any) -> Any:
    """The abstract value of `x` (a `jax.core.ShapedArray` for an array, a Python scalar or a
    tracer): its `shape`, `dtype` and `weak_type`.

    `jax.typeof` where jax has it; on older releases (jax 0.4.38 has none), `jax.core.get_aval`.
    """
    return _typeof(x) if _shaped is None else _shaped(_typeof(x))


def leading_slice(aval: Any) -> Any:
    """The abstract value of `x[0]` for an `x` of abstract value `aval` (as `jax.lax.scan`
    types a step's slice of `xs`), with the sharding, where the aval has one, less its first axis.

    Newer jax gives an aval a sharding whose spec names an entry per axis; older jax has none.
    """
    sharding = getattr(aval, "sharding", None)
    spec = getattr(sharding, "spec", None)
    if spec is None or len(spec) != len(aval.shape):
        return aval.update(shape=aval.shape[1:])
    return aval.update(shape=aval.shape[1:], sharding=sharding.update(spec=jax.sharding.PartitionSpec(*spec[1:])))


#: `jax.jit(inline=INLINE)` inlines the staged function into an enclosing trace's jaxpr, so a
#: traced program is the one the call it replaces would give. Newer jax reads `inline=True` as
#: "inline while lowering" (the jaxpr keeps a nested `jit`); `jax.Inline.JAX_EARLY` is the old
#: meaning there.
INLINE: Any = jax.Inline.JAX_EARLY if hasattr(jax, "Inline") else True

#: `jax.make_user_context(default)`: a context-managed value that is part of jax's jit cache
#: key, so changing it makes jitted functions trace again. None on releases without it (about
#: 0.7 and older); there `scanrewrite.runtime.override` clears jax's caches instead.
make_user_context = getattr(jax, "make_user_context", None)


def lax_unroll(unroll: Any) -> Any:
    """`unroll` as every supported `jax.lax.scan` accepts it, meaning what newer jax means.

    Newer jax reads `unroll=0` as "unroll the whole loop", the same as `unroll=True`; jax 0.4.38
    rejects 0 (it wants a bool or a positive int). So 0 becomes `True`; anything else is unchanged.
    """
    if not isinstance(unroll, bool) and unroll == 0:
        return True
    return unroll


def enable_x64(new_val: bool = True) -> Any:
    """A context manager that turns 64-bit types on (or off, with `False`) inside its block.

    `jax.enable_x64` where jax has it; on older releases, `jax.experimental.enable_x64`, which
    newer jax removed. (The runtime itself does not need it; the tests compare in float64.)
    """
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(new_val)
    from jax.experimental import enable_x64 as experimental_enable_x64

    return experimental_enable_x64(new_val)


# jax 0.4.36 made tracing "stackless": the trace an operation is made in is `trace_ctx.trace`, a
# tracer's `_trace` is that trace, and a trace knows its `parent_trace`. Before (jax 0.4.35 and
# older) traces stood on a stack of `MainTrace`s (the innermost transformation last), and a
# tracer's `_trace` was a new `Trace` object per operation around its `main`: there a trace is
# named by its `MainTrace`, and the one around it is the one below it on the stack.
if hasattr(jax_core, "trace_ctx"):

    def current_trace() -> Any:
        """The trace that a jax operation made now is made in (innermost transformation)."""
        return jax_core.trace_ctx.trace

    def trace_of(tracer: Any) -> Any:
        """The trace of `tracer`, as `current_trace` names it inside that transformation."""
        return tracer._trace

    def trace_past_vmap(trace: Any) -> Any:
        """`trace`, or where it is `jax.vmap`'s, the first trace around it that is not."""
        while isinstance(trace, batching.BatchTrace):
            trace = trace.parent_trace
        return trace

    def is_eval_trace(trace: Any) -> bool:
        """Whether `trace` is no transformation: operations run eagerly."""
        return isinstance(trace, jax_core.EvalTrace)

else:

    def current_trace() -> Any:
        return jax_core.thread_local_state.trace_state.trace_stack.stack[-1]

    def trace_of(tracer: Any) -> Any:
        return tracer._trace.main

    def trace_past_vmap(trace: Any) -> Any:
        stack = jax_core.thread_local_state.trace_state.trace_stack.stack
        level = trace.level
        while level > 0 and issubclass(stack[level].trace_type, batching.BatchTrace):
            level -= 1
        return stack[level]

    def is_eval_trace(trace: Any) -> bool:
        return issubclass(trace.trace_type, jax_core.EvalTrace)
