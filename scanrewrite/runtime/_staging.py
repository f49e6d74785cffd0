"""One compiled unit per runtime call, cached weakly on `f`, as `jax.lax.scan` caches its body.

A runtime call is staged as one `jax.jit(..., inline=INLINE)` function: outside any trace (and
under `jax.vmap`/`jax.grad` without `jit`) the chunk loop, the leftover steps, the stacking
and the concatenation then run as one XLA program instead of op by op; inside an outer `jit`
the staged jaxpr is inlined, so the outer program is unchanged. `jax.jit` caches its trace
and its executable on the staged function, so the staged function is cached here, on `f`
(weakly: the entry dies with `f`) and on a key of every static setting.

The cache key, built by the callers in `__init__`: a tuple of
`(api, static arguments of the call..., Layout, *sorted(resolved settings.items()))`. The
resolved settings are whatever `_override.resolve` returns, so a setting added there (and
passed to `resolve` by the caller) is part of the key with no other change.
"""

from __future__ import annotations

import collections
import functools
import types
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import jax
import numpy as np

from scanrewrite.runtime._compat import INLINE

# Staged functions kept per `f` (per static key, least recently used first). A bound: keys
# that hold a fresh object per call (an inline `buffers=lambda c: ...`) must not pile up.
MAX_PER_F = 16

_Build = Callable[[Callable[[], Callable]], Callable]
_cache: weakref.WeakKeyDictionary[Any, collections.OrderedDict[Hashable, Callable]] = weakref.WeakKeyDictionary()
#: The function (weakly) last staged for each code object, to tell a closure made anew.
_staged_code: weakref.WeakKeyDictionary[types.CodeType, weakref.ref] = weakref.WeakKeyDictionary()


def _is_array(leaf: Any) -> bool:
    return isinstance(leaf, (jax.Array, np.ndarray))


def _holds_arrays(f: Any) -> bool:
    """Whether `f` carries arrays as data (an `equinox.Module`, a `functools.partial`, or a
    method bound to one)."""
    if isinstance(f, types.MethodType):
        return _holds_arrays(f.__self__)
    if isinstance(f, functools.partial):
        return _holds_arrays(f.func) or any(map(_is_array, jax.tree_util.tree_leaves((f.args, f.keywords))))
    return any(_is_array(leaf) for leaf in jax.tree_util.tree_leaves(f) if leaf is not f)


def _weak_handle(f: Callable) -> tuple[Any, Hashable, Callable[[], Callable]] | None:
    """(what to key weakly on, extra static key, how to get `f` back), or None if uncacheable.

    A bound method is a fresh object at every attribute access, so it is keyed on its
    instance and function instead of on itself.
    """
    if isinstance(f, types.MethodType):
        owner, func = f.__self__, f.__func__
        try:
            ref = weakref.ref(owner)
            hash(owner)
        except TypeError:
            return None
        return owner, func, lambda: types.MethodType(func, ref())
    try:
        ref = weakref.ref(f)
        hash(f)
    except TypeError:
        return None
    return f, None, ref


def _made_anew(f: Callable, owner: Any) -> bool:
    """Whether `f` is a new function object for code already staged with another one (a
    closure that its enclosing function makes anew on every call, as `def _body` inside a
    loss function is): then no later call will find `f` in the cache. Records `f`'s code."""
    func = f.__func__ if isinstance(f, types.MethodType) else f
    code = getattr(func, "__code__", None)
    if not isinstance(code, types.CodeType) or owner in _cache:
        return False
    seen = _staged_code.get(code)
    _staged_code[code] = weakref.ref(owner)
    return seen is not None and seen() is not owner


def staged(f: Callable, key: Hashable, build: _Build, *, unstaged_once: bool = False) -> Callable:
    """The jitted `build(get_f)`, cached on `f` (weakly) and `key`; uncached if it cannot be.

    `build` receives a function that returns `f` and must not hold `f` itself, so that the
    cached entry does not keep `f` alive. `f` is not cached (a fresh staged function per
    call, so one trace and one compile per call) when it cannot be hashed or weakly
    referenced, when `key` cannot be hashed (a policy that is not hashable), or when `f`
    holds arrays (an `equinox.Module` with array fields, a `functools.partial` of an array):
    those must not be baked into a cached program as constants.

    With `unstaged_once`, an `f` that would be staged for this call only (one not cached, or
    one made anew, `_made_anew`) gets `build(lambda: f)` itself, traced where it is called:
    a jitted unit of its own would be traced and compiled for this one call, and outside
    `jit` (under `vmap` or `grad` too) that compiles more than the loops alone do (XLA gets
    the transformation's transposes and a differentiated `jit` besides; docs/benchmarks.md,
    "Real test suites"). Inside `jit` both are the same program.
    """
    handle = None if _holds_arrays(f) else _weak_handle(f)
    if unstaged_once and (handle is None or _made_anew(f, handle[0])):
        return build(lambda: f)
    if handle is not None:
        owner, extra, get_f = handle
        try:
            full_key = (extra, key)
            hash(full_key)
            entries = _cache.get(owner)
        except TypeError:  # an unhashable setting, or an `owner` whose hash fails on its data
            handle = None
    if handle is None:
        return jax.jit(build(lambda: f), inline=INLINE)
    if entries is None:
        entries = _cache[owner] = collections.OrderedDict()
    fn = entries.get(full_key)
    if fn is None:
        fn = entries[full_key] = jax.jit(build(get_f), inline=INLINE)
        if len(entries) > MAX_PER_F:
            entries.popitem(last=False)
    else:
        entries.move_to_end(full_key)
    return fn


def cache_size() -> int:
    """Live staged functions in the cache (for tests)."""
    return sum(len(entries) for entries in _cache.values())
