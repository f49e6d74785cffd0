"""`f` traced once into a jaxpr and replayed for every copy of the step that the runtime builds.

A chunk's k straight-line steps, the leftover steps, a rolled inner loop and every nested
level all run the same step. Tracing `f` once and replaying its jaxpr (binding the traced
equations again, which runs none of the user's Python) makes `f` trace exactly as often as in
`jax.lax.scan`, whatever the chunk size, layout or `levels`: once, or twice when weakly typed
`init` leaves change dtype. Compile time then does not pay for tracing Python k times, and
trace-time side effects (a `print`, a counter, a numpy constant drawn while tracing) happen as
often as in `jax.lax.scan`, with every copy of the step computing with the same constants.

A step that is nothing but a per-step checkpoint (`jax.lax.scan(jax.checkpoint(layer), ...)`,
`jax.remat(layer, policy=p)`, `equinox.filter_checkpoint(layer)`: a jaxpr of one checkpoint
equation) is replayed without it, and its policy is handed to the caller (`Body.checkpoint`):
the runtime checkpoints whole chunks, and a checkpoint around every step inside them would
make the backward pass recompute each step twice.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from scanrewrite.runtime import _reveal
from scanrewrite.runtime._compat import (
    ClosedJaxpr,
    current_trace,
    is_eval_trace,
    leading_slice,
    trace_of,
    trace_past_vmap,
    typeof,
)

tree_util = jax.tree_util


class Body(NamedTuple):
    """A step traced once: `step(carry, x) -> (carry, y)` computes what `f` computes (by
    replaying its jaxpr), and `init` is the initial carry with weakly typed leaves promoted to
    the carry type `f` returns, as `jax.lax.scan` promotes them."""

    step: Callable[[Any, Any], tuple[Any, Any]]
    init: Any
    #: The per-step checkpoint taken off `f`: True, its policy, or None where `f` had none.
    checkpoint: Any = None
    #: The closed jaxpr of `f` (carry leaves, then x leaves, in; carry, then y leaves, out), or
    #: None where the step is `f` itself.
    jaxpr: Any = None
    #: Whether the constants the step closes over are arrays (or `vmap`'s tracers of them),
    #: which nothing around the call can differentiate (`undifferentiated`); True where there
    #: is no jaxpr.
    constant_consts: bool = True
    #: For each constant of `jaxpr`, whether a transformation around the call differentiates
    #: it (`differentiated`).
    differentiated: tuple[bool, ...] = ()


#: The checkpoint primitive's names across the supported jax versions.
CHECKPOINT_PRIMITIVES = frozenset({"checkpoint", "remat", "remat2"})


class Traced(NamedTuple):
    """`f` traced once: its closed jaxpr, its output structure, and the carry with weakly
    typed leaves promoted to the dtype `f` returns (the carry the jaxpr was traced for)."""

    closed: Any
    out_tree: Any
    init: Any


class Replay:
    """A step already traced (`jaxpr` and `out_tree` of a `Traced`), as a function again, with
    the constants it closes over given here, so that one jaxpr can serve steps that close over
    other arrays of the same types (`_staging`). `body` takes its jaxpr as it is, traced for
    the carry the caller promoted, instead of tracing it again. `constant` and
    `differentiated`: `Body.constant_consts` and `Body.differentiated` of the original
    constants, which the constants given here, an enclosing `jit`'s arguments, no longer tell."""

    def __init__(self, jaxpr: Any, consts: Any, out_tree: Any, constant: bool, differentiated: tuple[bool, ...]):
        self.closed = ClosedJaxpr(jaxpr, list(consts))
        self.out_tree, self.constant, self.differentiated = out_tree, constant, differentiated

    def __call__(self, carry: Any, x: Any) -> tuple[Any, Any]:
        return replay_step(self.closed, self.out_tree)(carry, x)


#: The traces of steps traced for a call that nothing around can differentiate
#: (`marked_forward`), innermost last: a call inside such a step is not differentiated either.
_forward_traces: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar("forward_traces", default=())


def _in_forward_trace(tracer: Any) -> bool:
    return any(trace_of(tracer) is t for t in _forward_traces.get())


def forward_only(tree: Any) -> bool:
    """Whether nothing can differentiate a call on the leaves of `tree`, now or later: they are
    `undifferentiated`, and the call is made eagerly, under `jax.vmap` alone, or inside a step
    traced for such a call, so that nothing the step closes over is differentiated either.
    Under `jax.grad` (or inside `jax.jit`, which may be differentiated from outside) it is not,
    whatever the leaves are."""
    if not undifferentiated(tree):
        return False
    current = trace_past_vmap(current_trace())
    return is_eval_trace(current) or any(current is t for t in _forward_traces.get())


def marked_forward(f: Callable) -> Callable:
    """`f` for a `forward_only` call: while it runs, the trace it is traced in is marked as one
    that nothing differentiates, so that a scan inside it sees its inputs as `undifferentiated`
    and builds what it builds on arrays (a loop without checkpoints, where it would keep
    residuals for a backward pass that never comes)."""

    @functools.wraps(f, updated=())  # not `f`'s fields (an `equinox.Module`'s arrays)
    def step(carry, x):
        token = _forward_traces.set((*_forward_traces.get(), current_trace()))
        try:
            return f(carry, x)
        finally:
            _forward_traces.reset(token)

    return step


def trace(f: Callable, init: Any, xs: Any) -> Traced | None:
    """`f` traced for the carry `init` and one slice of `xs`, as `jax.lax.scan` traces it:
    once, and once more where a weakly typed leaf of `init` changes dtype (the carry is then
    promoted). None where `f` does not return a `(carry, y)` pair of `init`'s structure."""
    init = tree_util.tree_map(jnp.asarray, init)  # a Python scalar becomes a weakly typed array
    traced = _trace(f, init, xs)
    if traced is not None:
        promoted = _promote(init, traced[0], same_dtype=False)
        if promoted is not init:
            init, traced = promoted, _trace(f, promoted, xs)
    return None if traced is None else Traced(*traced, init)


def undifferentiated(tree: Any) -> bool:
    """Whether no transformation can differentiate through the leaves of `tree`: arrays,
    tracers of a step traced for a `forward_only` call, or `jax.vmap`'s tracers of either
    (tracers of `jit`, `grad` and the rest may be)."""
    for leaf in tree_util.tree_leaves(tree):
        while isinstance(leaf, jax.core.Tracer) and hasattr(leaf, "batch_dim"):  # vmap's tracer
            leaf = leaf.val
        if isinstance(leaf, jax.core.Tracer) and not _in_forward_trace(leaf):
            return False
    return True


def differentiated(value: Any) -> bool:
    """Whether `value`, closed over by the step, is differentiated by a transformation around
    the scan (it is, or wraps, a tracer of `jax.grad`, `jax.vjp` or `jax.jvp` with a tangent).
    False where that cannot be seen: inside a `jax.jit` that is differentiated from outside."""
    while isinstance(value, jax.core.Tracer):
        if hasattr(value, "tangent"):  # jvp's and linearize's tracers
            return not isinstance(value.tangent, jax.interpreters.ad.Zero)
        value = getattr(value, "val", None)  # vmap's tracer, around one of those
    return False


def read_consts(consts: Any) -> tuple[bool, tuple[bool, ...]]:
    """What the runtime reads off the constants a step closes over: `Body.constant_consts` and
    `Body.differentiated`."""
    return undifferentiated(consts), tuple(map(differentiated, consts))


def body(f: Callable, init: Any, xs: Any, *, replay: bool = True, absorb: bool = False, reveal: bool = False) -> Body:
    """`f` traced for the carry `init` and one slice of `xs` (pytrees of arrays).

    Traces `f` once, and once more only where `jax.lax.scan` traces it again: when a weakly
    typed leaf of `init` changes dtype. A weakly typed leaf that `f` returns strongly typed,
    with the same dtype, is made strong without a trace (the program is the same), so that
    every loop around the step sees the carry type `f` returns. With `replay=False` the step
    is `f` itself, traced again wherever it is called (for a carry that the outer loop hands
    to `f` in another form, as equinox's `buffers` do). Where `f` does not return a
    `(carry, y)` pair of the carry's structure and types, `jax.lax.scan` is called so that
    it raises its own error. Under `jax.disable_jit()` the step is `f` itself, called on
    concrete values step by step, as `jax.lax.scan` then calls it. With `absorb`, a per-step
    checkpoint around all of `f` is taken off the replayed step and returned as
    `Body.checkpoint`. With `reveal`, jax's own softmax and logsumexp are written out in the
    replayed step, so that a policy sees their reductions (`_reveal`). A `Replay` is not traced
    again.
    """
    if jax.config.jax_disable_jit:
        return Body(f, init)
    if isinstance(f, Replay):
        traced = Traced(f.closed, f.out_tree, tree_util.tree_map(jnp.asarray, init))
        constant, seen = f.constant, f.differentiated
    else:
        traced = trace(f, init, xs)
        consts = () if traced is None else traced.closed.consts
        constant, seen = read_consts(consts)
    if traced is not None:
        closed, out_tree, init = traced
        closed = _reveal.reveal(closed) if reveal else closed
        init = _promote(init, closed, same_dtype=True)
        carry_in = [typeof(leaf) for leaf in tree_util.tree_leaves(init)]
        if all(map(_typematch, carry_in, closed.out_avals[: len(carry_in)])):
            if not replay:
                return Body(f, init)
            inner = _per_step_checkpoint(closed) if absorb else None
            if inner is not None:
                policy = inner.params["policy"] or True
                return Body(_replay_inner(closed, inner, out_tree), init, policy, closed, constant, seen)
            return Body(replay_step(closed, out_tree), init, None, closed, constant, seen)
    jax.lax.scan(f, init, xs)  # raises jax's own error for what `f` returned
    raise TypeError(f"scan: `f` must return a (carry, y) pair with the carry's structure and types, f={f!r}")


def _typematch(a: Any, b: Any) -> bool:
    """Same shape and dtype, whatever the weak types (`jax.lax.scan`'s test of a carry)."""
    return a.shape == b.shape and a.dtype == b.dtype


def _trace(f: Callable, init: Any, xs: Any) -> tuple[Any, Any] | None:
    """(the closed jaxpr of `f`, its output structure), or None if `f` does not return a
    `(carry, y)` pair whose carry has `init`'s structure."""
    # Abstract values, not shapes and dtypes: they keep weak types, shardings and the axes a
    # value varies over inside `shard_map`, which decide how `f` traces.
    carry = tree_util.tree_map(typeof, init)
    x = tree_util.tree_map(lambda leaf: leading_slice(typeof(leaf)), xs)
    closed, out = jax.make_jaxpr(f, return_shape=True)(carry, x)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        return None
    if tree_util.tree_structure(out[0]) != tree_util.tree_structure(init):
        return None
    return closed, tree_util.tree_structure(out)


def _promote(init: Any, closed: Any, *, same_dtype: bool) -> Any:
    """`init` with weakly typed leaves converted to the carry type `f` returns: with
    `same_dtype`, those that only lose their weak type; else those whose shape or dtype
    differs (`jax.lax.scan`'s rule, after which it traces again). `init` itself if none is."""
    leaves = tree_util.tree_leaves(init)
    promoted, changed = [], False
    for leaf, out in zip(leaves, closed.out_avals):
        aval = typeof(leaf)
        if aval.weak_type and (_typematch(aval, out) and not out.weak_type if same_dtype else not _typematch(aval, out)):
            leaf, changed = jax.lax.convert_element_type(leaf, jnp.result_type(leaf, out)), True
        promoted.append(leaf)
    return tree_util.tree_unflatten(tree_util.tree_structure(init), promoted) if changed else init


def replay_step(closed: Any, out_tree: Any) -> Callable[[Any, Any], tuple[Any, Any]]:
    """The traced `f` as a function again: its equations bound anew on every call."""
    jaxpr, consts = closed.jaxpr, closed.consts

    def step(carry, x):
        out = jax.core.eval_jaxpr(jaxpr, consts, *tree_util.tree_leaves(carry), *tree_util.tree_leaves(x))
        return tree_util.tree_unflatten(out_tree, out)

    return step


def _per_step_checkpoint(closed: Any) -> Any:
    """The checkpoint equation that is all of the traced step, or None where the step is more
    (or is a checkpoint already differentiated, which has no plain replay)."""
    eqns = closed.jaxpr.eqns
    if len(eqns) != 1 or eqns[0].primitive.name not in CHECKPOINT_PRIMITIVES:
        return None
    eqn = eqns[0]
    if eqn.params.get("differentiated") or list(eqn.outvars) != list(closed.jaxpr.outvars):
        return None
    return eqn


def _replay_inner(closed: Any, eqn: Any, out_tree: Any) -> Callable[[Any, Any], tuple[Any, Any]]:
    """The traced step as a function again, with its one checkpoint equation `eqn` replaced by
    the equations inside it."""
    jaxpr = closed.jaxpr
    consts = dict(zip(jaxpr.constvars, closed.consts))

    def step(carry, x):
        env = {**consts, **dict(zip(jaxpr.invars, [*tree_util.tree_leaves(carry), *tree_util.tree_leaves(x)]))}
        args = [v.val if hasattr(v, "val") else env[v] for v in eqn.invars]  # a literal has a value
        out = jax.core.eval_jaxpr(eqn.params["jaxpr"], (), *args)
        return tree_util.tree_unflatten(out_tree, out)

    return step
