"""Checks of a runtime call's arguments, with the messages `jax.lax.scan` gives."""

from __future__ import annotations

import operator
from typing import Any

import jax
import numpy as np
from jax._src.interpreters import partial_eval as pe

from scanrewrite.runtime._compat import jax_core


def scan_length(xs: Any, length: Any) -> int:
    """N, from `length` and the leading axes of `xs`, with the checks `jax.lax.scan` makes."""
    lengths = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(xs):
        shape = getattr(leaf, "shape", None)
        if not shape:
            raise ValueError(
                f"scan got `xs{jax.tree_util.keystr(path)}` with no leading axis to scan over: {leaf!r}"
            )
        lengths.append((jax.tree_util.keystr(path), shape[0]))
    if length is not None:
        if isinstance(length, bool):
            raise ValueError(f"`length` must be an int, got {length!r}")
        try:
            length = operator.index(length)
        except TypeError:
            raise ValueError(f"`length` must be an int, got {length!r}") from None
        if length < 0:
            raise ValueError(f"`length` must be non-negative, got {length}")
        for where, n in lengths:
            if n != length:
                raise ValueError(f"scan got `length={length}` but `xs{where}` has leading axis {n}")
        return length
    if not lengths:
        raise ValueError("scan got `xs=None` (or an `xs` with no arrays) and no `length`")
    (first_where, first), *rest = lengths
    for where, n in rest:
        if n != first:
            raise ValueError(
                f"scan got inconsistent lengths: `xs{first_where}` has leading axis {first} "
                f"but `xs{where}` has {n}"
            )
    return first


def chunk_size(unroll: Any, n: int) -> int:
    """Steps per chunk, k, for a scan of `n > 0` steps; `unroll` is validated beforehand."""
    if unroll is False:
        return 1
    if unroll is True or unroll == 0:
        return n
    return min(unroll, n)


def check_unroll(unroll: Any, expected: str = "a bool or a non-negative int") -> bool | int:
    """`unroll` as a bool or a Python int; a `ValueError` saying it must be `expected` unless it
    is a bool or an int >= 0 known at trace time (a concrete array of one int counts)."""
    if isinstance(unroll, bool):
        return unroll
    if isinstance(unroll, jax_core.Tracer):
        raise ValueError(f"`unroll` must be known at trace time ({expected}), got a traced value {unroll!r}")
    try:
        k = operator.index(unroll)
    except TypeError:
        k = -1
    if k < 0:
        raise ValueError(f"`unroll` must be {expected}, got {unroll!r}")
    return k


def is_int_at_least(value: Any, least: int) -> bool:
    """Whether `value` is an int (or has `__index__`), not a bool, and at least `least`."""
    if isinstance(value, bool):
        return False
    try:
        return operator.index(value) >= least
    except TypeError:
        return False


def check_store(store: Any) -> int:
    """`store` as a Python int; a `ValueError` naming `store` unless it is an int >= 0 (not a
    bool) known at trace time (a concrete array of one int counts)."""
    if isinstance(store, jax_core.Tracer):
        raise ValueError(
            "`store` must be known at trace time (an int, the steps whose residuals are kept), got a traced "
            f"value {store!r}: pass it as a static argument"
        )
    if not is_int_at_least(store, 0):
        raise ValueError(f"`store` must be a non-negative int (the steps whose residuals are kept), got {store!r}")
    # An array would reach the plan's arithmetic and its cache key as an array.
    return operator.index(store)


#: What a policy may answer (`jax.checkpoint_policies`' offloading ones answer jax's own types).
_ANSWERS = (bool, np.bool_, pe.SaveableType, pe.RecomputeType, pe.Offloadable)
#: The operand of the `sin` a policy is asked about: a matrix, as a policy that reads its
#: operands' shapes (`avals[0].shape[0]`) may expect.
_OPERAND = jax_core.ShapedArray((2, 2), np.dtype("float32"))


def check_checkpoint(checkpoint: Any) -> None:
    """Raise a `ValueError` naming `checkpoint` unless it is True, False or a policy: a callable
    that, asked about one `sin` as jax asks (`policy(prim, *avals, **params)`), answers whether
    to keep its output."""
    if checkpoint is True or checkpoint is False:
        return
    if not callable(checkpoint):
        raise ValueError(
            f"`checkpoint` must be True, False or a policy from `jax.checkpoint_policies`, got {checkpoint!r}"
        )
    # Checked here, once per call and in microseconds, not deep inside jax's partial evaluation.
    try:
        answer = checkpoint(jax.lax.sin_p, _OPERAND, accuracy=None)
    except Exception as exc:  # noqa: BLE001 - any failure means it is not a policy
        raise ValueError(
            f"`checkpoint` must be True, False or a policy called as policy(prim, *avals, **params) -> bool, "
            f"got {checkpoint!r}, which raised {type(exc).__name__} when asked about a sin"
        ) from None
    if not isinstance(answer, _ANSWERS):
        raise ValueError(
            f"`checkpoint` must be True, False or a policy called as policy(prim, *avals, **params) -> bool, "
            f"got {checkpoint!r}, which answered {type(answer).__name__} about a sin"
        )
