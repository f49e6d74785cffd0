"""The jax APIs that differ across the releases the runtime supports (jax 0.4.38 to the newest).

Every difference is handled here, by asking jax whether it has the newer API, never by comparing
version numbers, so the rest of the runtime (and the tests) call one name on every release.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.extend.core

# `Literal` and `DropVar`: `jax.core` lost them and `jax.extend.core` lacks `DropVar` on older
# releases; `jax._src.core` has both on every one.
from jax._src import core as jax_core

__all__ = [
    "INLINE", "ClosedJaxpr", "Jaxpr", "bare_jaxpr", "enable_x64", "jax_core", "lax_unroll", "leading_slice",
    "make_user_context", "typeof",
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

# jax.core.get_aval was deprecated in jax 0.8.2 and removed in 0.10.0; jax.typeof replaces it.
_typeof = getattr(jax, "typeof", None) or jax.core.get_aval


def typeof(x: Any) -> Any:
    """The abstract value of `x` (a `jax.core.ShapedArray` for an array, a Python scalar or a
    tracer): its `shape`, `dtype` and `weak_type`.

    `jax.typeof` where jax has it; on older releases (jax 0.4.38 has none), `jax.core.get_aval`.
    """
    return _typeof(x)


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
