"""A traced step's structure as a hashable key: equal keys compute the same program.

A closure made anew on every call (`def _body` inside a loss function) is a new function for
every cache that keys on `f`, jax's own included, so each call traces and compiles again. Its
jaxpr, with the constants it closes over lifted to arguments, is the same from call to call.
`key` turns that jaxpr into a value that two traced steps share only where binding their
equations computes the same thing for the same arguments, so that `_staging` can reuse one
compiled program for both.

Exact before useful: everything that decides what a step computes is in the key, compared by
value where it is a plain value (numbers by their bits, strings, dtypes, shapes, enums, nested
jaxprs, and jax's own hashable objects that are not functions, by jax's equality: a mesh, an
effect, a custom rule's wrapped function, which jax's caches compare by the rule's identity)
and by identity where it is anything else (a Python function: a callback, a checkpoint policy,
any object jax hands through as it is). A rule or callback defined inside the closure is a new
function on every call, so such a step never matches another and is compiled per call, as
before. Constants inside nested jaxprs are compared by value where they are small, else the
step has no key.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from typing import Any

import jax
import numpy as np

from scanrewrite.runtime._compat import ClosedJaxpr, Jaxpr, jax_core, typeof

#: Largest constant (in elements) inside a nested jaxpr compared by value.
MAX_NESTED_CONST = 64


class Unkeyable(Exception):
    """The jaxpr holds something that cannot be compared exactly: it gets no key."""


class _Same:
    """An object compared by identity, whatever its own `__eq__` says."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def key(closed: Any) -> Hashable | None:
    """The structure of a closed jaxpr, its constants by abstract value only (they are passed
    as arguments); None where something in it cannot be compared exactly."""
    try:
        return (_jaxpr(closed.jaxpr), tuple(_aval(typeof(c)) for c in closed.consts))
    except Unkeyable:
        return None


def _aval(aval: Any) -> Hashable:
    # Shape, dtype, weak type, sharding, and the axes a value varies over (inside `shard_map`).
    try:
        hash(aval)
    except TypeError:
        raise Unkeyable(aval) from None
    return (type(aval), aval, getattr(aval, "weak_type", None))


def _jaxpr(jaxpr: Any) -> Hashable:
    names: dict[Any, int] = {}

    def bind(var: Any) -> Hashable:
        if isinstance(var, jax_core.DropVar):
            return ("_", _aval(var.aval))
        names[var] = len(names)
        return _aval(var.aval)

    def atom(a: Any) -> Hashable:
        if isinstance(a, jax_core.Literal):
            return ("literal", _value(a.val), _aval(a.aval))
        try:
            return names[a]
        except KeyError:  # a variable from outside this jaxpr: not a closed one
            raise Unkeyable(a) from None

    head = (tuple(map(bind, jaxpr.constvars)), tuple(map(bind, jaxpr.invars)))
    eqns = []
    for eqn in jaxpr.eqns:
        eqns.append(
            (
                _Same(eqn.primitive),
                tuple(map(atom, eqn.invars)),
                _value(dict(eqn.params)),
                _value(frozenset(eqn.effects)),
                _context(eqn.ctx),
                tuple(map(bind, eqn.outvars)),
            )
        )
    return (head, tuple(eqns), tuple(map(atom, jaxpr.outvars)), _value(frozenset(jaxpr.effects)))


def _context(ctx: Any) -> Hashable:
    """An equation's context (compute type, mesh, metadata): every field it has, by value."""
    slots = getattr(type(ctx), "__slots__", None)
    if slots is None:
        # Older jax's context has no slots, and no equality but identity, while a loop's own
        # equation gets a new one per trace: its public fields (the private ones hold the
        # context managers that set those same fields).
        fields = getattr(ctx, "__dict__", None)
        if fields is None:
            return _value(ctx)
        return tuple((name, _value(v)) for name, v in fields.items() if not name.startswith("_"))
    return tuple((name, _value(getattr(ctx, name, None))) for name in slots if name != "__weakref__")


def _value(v: Any) -> Hashable:
    if v is None or isinstance(v, (bool, str, bytes)):
        return (type(v), v)
    if isinstance(v, (int, float, complex, np.generic)):
        # By bits, not `==`: 0.0 and -0.0 are equal, and 1 == 1.0 == True.
        array = np.asarray(v)
        return (type(v), array.dtype.str, array.tobytes())
    if isinstance(v, ClosedJaxpr):
        return ("closed", _jaxpr(v.jaxpr), tuple(map(_nested_const, v.consts)))
    if isinstance(v, Jaxpr):
        return ("jaxpr", _jaxpr(v))
    if isinstance(v, (tuple, list)):  # NamedTuples (dimension numbers) keep their type
        return (type(v), tuple(map(_value, v)))
    if isinstance(v, dict):
        # By the names alone (a dict's are distinct): the repr of a value is that of a whole
        # nested jaxpr's key, which costs more than the rest of the key.
        items = sorted(v.items(), key=lambda item: repr(item[0]))
        return (type(v), tuple((name, _value(x)) for name, x in items))
    if isinstance(v, (frozenset, set)):
        return (type(v), frozenset(map(_value, v)))
    if isinstance(v, (np.ndarray, jax.Array)):
        return _nested_const(v)
    if isinstance(v, (np.dtype, enum.Enum, type)) or _jax_value(v):
        return (type(v), v)
    return _Same(v)


def _jax_value(v: Any) -> bool:
    """Whether `v` is one of jax's immutable settings (a dtype, a mesh, a sharding, an effect,
    an abstract value), which compare by value; never a function."""
    module = type(v).__module__ or ""
    if not (module == "jax" or module.startswith(("jax.", "jaxlib.", "ml_dtypes"))) or callable(v):
        return False
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _nested_const(c: Any) -> Hashable:
    if isinstance(c, jax.core.Tracer):  # its value is not known here
        raise Unkeyable(c)
    array = np.asarray(c)
    if array.dtype == object or array.size > MAX_NESTED_CONST:
        raise Unkeyable(c)
    return ("const", array.dtype.str, array.shape, array.tobytes())
