"""One compiled unit per runtime call, cached weakly on `f`, as `jax.lax.scan` caches its body.

A runtime call is staged as one `jax.jit` function: outside any trace (and under
`jax.vmap`/`jax.grad` without `jit`) the chunk loop, the leftover steps, the stacking and the
concatenation then run as one XLA program instead of op by op. Inside a trace that stages a
program (an outer `jit`) it is inlined (`INLINE`), so the outer program is unchanged; eagerly
it is not (`_inline`), so that the derivative jax takes of it stays one jitted function whose
program jax caches. `jax.jit` caches its trace and its executable on the staged function, so
the staged function is cached here, on `f` (weakly: the entry dies with `f`) and on a key of
every static setting. A closure made anew on every call is cached by the structure of its
traced jaxpr instead (`_by_structure`, `_structure`), or of the whole program's where that is
one loop of it (`_whole_by_structure`).

The cache key is the call's `_plan.Request` (its API, static arguments, layout and every
resolved setting), or for `map`'s batches a tuple of the same; which of the four ways below a
call is staged (`Staging`) is decided in `_plan.request`, with its reason.
"""

from __future__ import annotations

import collections
import contextvars
import enum
import functools
import types
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import jax
import numpy as np

from scanrewrite.runtime import _structure, _trace
from scanrewrite.runtime._compat import INLINE, bare_jaxpr

# Staged functions kept per `f` (per static key, least recently used first). A bound: keys
# that hold a fresh object per call (an inline `buffers=lambda c: ...`) must not pile up.
MAX_PER_F = 16

_Build = Callable[[Callable[[], Callable]], Callable]
_cache: weakref.WeakKeyDictionary[Any, collections.OrderedDict[Hashable, Callable]] = weakref.WeakKeyDictionary()
# Staged functions kept by structure (`_by_structure`), least recently used first.
MAX_STRUCTURES = 64
_structures: collections.OrderedDict[Hashable, Callable] = collections.OrderedDict()
#: The function (weakly) last staged for each code object, to tell a closure made anew.
_staged_code: weakref.WeakKeyDictionary[types.CodeType, weakref.ref] = weakref.WeakKeyDictionary()


class Staging(enum.Enum):
    """How a call is staged. Every path caches the jitted program on `f` (weakly) where `f` can
    be keyed; they differ in what happens to an `f` staged for this call only (one that cannot
    be keyed, or a closure made anew, `_made_anew`):

    - `CACHED`: a `jax.jit` of its own for this call (one trace and one compile).
    - `ONCE_IN_PLACE`: the program traced where it is called, not staged.
    - `ONCE_BY_STEP`: `f` traced first, its call staged by the structure of its jaxpr
        (`_by_structure`).
    - `ONCE_BY_PROGRAM`: the program (one loop of `f`) traced whole and staged by its
        structure (`_whole_by_structure`).
    """

    CACHED = "cached on f"
    ONCE_IN_PLACE = "cached on f, else traced in place"
    ONCE_BY_STEP = "cached on f, else by the structure of its step"
    ONCE_BY_PROGRAM = "cached on f, else by the structure of its program"


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


def staged(f: Callable, key: Hashable, build: _Build, path: Staging = Staging.CACHED) -> Callable:
    """The jitted `build(get_f)`, cached on `f` (weakly) and `key`; uncached if it cannot be.

    `build` receives a function that returns `f` and must not hold `f` itself, so that the
    cached entry does not keep `f` alive. `f` is not cached (a fresh staged function per
    call, so one trace and one compile per call) when it cannot be hashed or weakly
    referenced, when `key` cannot be hashed (a policy that is not hashable), or when `f`
    holds arrays (an `equinox.Module` with array fields, a `functools.partial` of an array):
    those must not be baked into a cached program as constants.

    `path` says what an `f` staged for this call only (one not cached, or one made anew,
    `_made_anew`) gets. Past `CACHED`, it gets no jitted unit of its own: that would be traced
    and compiled for this one call, and outside `jit` (under `vmap` or `grad` too) that
    compiles more than the loops alone do (XLA gets the transformation's transposes and a
    differentiated `jit` besides; docs/benchmarks.md, "Real test suites"). Inside `jit` both
    are the same program. `ONCE_IN_PLACE`: `build(lambda: f)` itself, traced where it is
    called. `ONCE_BY_STEP`: `f` is traced first and its call staged by the structure of its
    jaxpr (`_by_structure`), so a closure made anew reuses the program compiled for the one
    before; `build` must then take any step that computes what `f` does (a `_trace.Replay`).
    `ONCE_BY_PROGRAM`: `build` makes one loop of `f` (tracing `f` once, replaying it nowhere),
    so the program itself is traced and staged by structure (`_whole_by_structure`).
    """
    handle = None if _holds_arrays(f) else _weak_handle(f)
    if path is not Staging.CACHED and (handle is None or _made_anew(f, handle[0])):
        once = "for this call only" if handle is None else "made anew"
        if path is Staging.ONCE_BY_PROGRAM:
            how = f"by the structure of its whole program (f {once})"
            return lambda init, xs: _run_as(how, _whole_by_structure, build(lambda: f), key, init, xs)
        if path is Staging.ONCE_BY_STEP:
            how = f"by the structure of its step (f {once})"
            return lambda init, xs: _run_as(how, _by_structure, f, key, build, init, xs)
        return lambda init, xs: _run_as(f"traced in place (f {once})", build(lambda: f), init, xs)
    if handle is not None:
        owner, extra, get_f = handle
        try:
            full_key = (extra, key)
            hash(full_key)
            entries = _cache.get(owner)
        except TypeError:  # an unhashable setting, or an `owner` whose hash fails on its data
            handle = None
    if handle is None:
        jitted = jax.jit(build(lambda: f), inline=INLINE)
        return lambda *args: _run_as("a jit of its own for this call (f cannot be cached)", jitted, *args)
    if entries is None:
        entries = _cache[owner] = collections.OrderedDict()

    def call(*args):
        inline = _inline(args)
        fn = entries.get((*full_key, inline))
        if fn is None:
            fn = entries[(*full_key, inline)] = jax.jit(build(get_f), inline=inline)
            if len(entries) > MAX_PER_F:
                entries.popitem(last=False)
        else:
            entries.move_to_end((*full_key, inline))
        return _run_as("cached on f", fn, *args)

    return call


#: How the call whose program is being traced was staged (`how_staged`).
_how: contextvars.ContextVar[str] = contextvars.ContextVar("how_staged", default="")


def _run_as(how: str, fn: Callable, *args: Any) -> Any:
    token = _how.set(how)
    try:
        return fn(*args)
    finally:
        _how.reset(token)


def how_staged() -> str:
    """How the call whose program is being traced now was staged (for its plan), or ""."""
    return _how.get()


def _by_structure(f: Callable, key: Hashable, build: _Build, init: Any, xs: Any) -> Any:
    """`build`'s program for `f`, called on `(init, xs)`, staged and cached by the structure
    of `f`'s traced jaxpr (`_structure.key`) with its constants as arguments, and `key`.

    jax compiles an eager `jax.lax.scan` again for every new closure, since it caches the
    executable on the jaxpr object; the same structure here finds the same jitted function,
    whose trace, derivatives (jax caches `jvp`, linearization and transposition of a jitted
    function on its jaxpr) and executables jax has cached. `f` is traced once here and never
    again; where its jaxpr has no key, the program runs unstaged, as before.
    """
    if jax.config.jax_disable_jit:
        return build(lambda: f)(init, xs)
    traced = _trace.trace(f, init, xs)
    if traced is None:  # `build` traces `f` again and raises jax's own error
        return build(lambda: f)(init, xs)
    closed, out_tree, init = traced
    # What the runtime reads off the constants themselves (`_trace.Body`), which the staged
    # function's arguments no longer show: part of the key, as it decides the program.
    seen = _trace.read_consts(closed.consts)
    replay = _trace.Replay(closed.jaxpr, closed.consts, out_tree, *seen)
    unstaged = lambda: _run_as(f"traced in place, not by structure ({how_staged()})", build(lambda: replay), init, xs)
    if not _eager((closed.consts, init, xs)):
        # Inside a trace that stages a program (`jax.jit`) nothing compiles here to be saved:
        # the program is the one traced in place.
        return unstaged()
    structure = _structure.key(closed)
    if structure is None:
        return unstaged()
    full_key = (structure, out_tree, seen, key)
    try:
        fn = _recall(full_key)
    except TypeError:  # an unhashable setting
        return unstaged()
    if fn is None:
        jaxpr = bare_jaxpr(closed)  # no array is kept here

        def run(consts, init, xs):
            return build(lambda: _trace.Replay(jaxpr, consts, out_tree, *seen))(init, xs)

        fn = _remember(full_key, run)
    return fn(list(closed.consts), init, xs)


def _whole_by_structure(program: Callable, key: Hashable, init: Any, xs: Any) -> Any:
    """`program(init, xs)`, staged and cached by the structure of its own traced jaxpr (with its
    constants as arguments) and `key`, for a program that is one loop of `f`.

    `_by_structure` traces `f` alone, and its staged function replays `f`'s equations into the
    program it builds around them: where that program is only the loop of `f`, tracing the
    program at once traces `f` as often (once), and the staged function binds only the loop's
    equation again, which costs nothing beside the trace of `f` it saves.
    """
    if jax.config.jax_disable_jit or not _eager((init, xs)):
        return program(init, xs)
    closed, out = jax.make_jaxpr(program, return_shape=True)(init, xs)
    out_tree = jax.tree_util.tree_structure(out)
    structure = _structure.key(closed) if _eager(closed.consts) else None
    full_key = ("whole", structure, out_tree, key)
    try:
        fn = None if structure is None else _recall(full_key)
    except TypeError:  # an unhashable setting
        structure = None
    if structure is None:  # run as traced, in place
        leaves = jax.tree_util.tree_leaves((init, xs))
        return jax.tree_util.tree_unflatten(out_tree, jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *leaves))
    if fn is None:
        jaxpr = bare_jaxpr(closed)  # no array is kept here

        def run(consts, init, xs):
            out = jax.core.eval_jaxpr(jaxpr, consts, *jax.tree_util.tree_leaves((init, xs)))
            return jax.tree_util.tree_unflatten(out_tree, out)

        fn = _remember(full_key, run)
    return fn(list(closed.consts), init, xs)


def _recall(full_key: Hashable) -> Callable | None:
    """The program kept by structure under `full_key`, now the most recently used, or None.
    Raises `TypeError` where `full_key` cannot be hashed."""
    fn = _structures.get(full_key)
    if fn is not None:
        _structures.move_to_end(full_key)
    return fn


def _remember(full_key: Hashable, run: Callable) -> Callable:
    """`run` staged (a `jax.jit` that is not inlined) and kept in the programs by structure
    under `full_key`; past `MAX_STRUCTURES`, the least recently used one goes."""
    _structures[full_key] = fn = jax.jit(run, inline=False)
    if len(_structures) > MAX_STRUCTURES:
        _structures.popitem(last=False)
    return fn


def _eager(tree: Any) -> bool:
    """Whether the leaves of `tree` are arrays, or tracers of transformations applied eagerly
    (`jax.grad`, `jax.jvp`, `jax.vmap` and their nestings, down to arrays), not of a trace
    that stages a program (`jax.jit`, `jax.make_jaxpr`, or older jax's partial evaluation)."""
    for leaf in jax.tree_util.tree_leaves(tree):
        while isinstance(leaf, jax.core.Tracer):
            if hasattr(leaf, "primal"):  # jvp's and linearize's tracers
                leaf = leaf.primal
            elif hasattr(leaf, "batch_dim"):  # vmap's
                leaf = leaf.val
            else:
                return False
    return True


def _inline(inputs: Any) -> Any:
    """How to stage a call on `inputs`: inlined into a trace that stages a program (which is
    then unchanged), else (eagerly, also under `jax.grad` and `jax.vmap`) a call of its own,
    whose derivative stays one jitted function that jax caches with its executable. Inlined
    there, the derivative's equations would be transposed one by one on every call, and a
    loop among them compiled anew each time."""
    return False if _eager(inputs) else INLINE


def cache_size() -> int:
    """Live staged functions in the cache (for tests)."""
    return sum(len(entries) for entries in _cache.values())
