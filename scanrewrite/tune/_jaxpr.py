"""What the tuner reads from the function's jaxpr: traced with every site as the scan it
replaced, each site's number of steps, the narrowest float it computes in, and which site a
difference between two traces comes from; traced with a candidate, a lower bound on the memory
its backward pass keeps (`kept_at_least`).

A site is found by the source of the `scan` equations: jax records the Python frames of
each equation, innermost first, and the first frame at a site's file and line is that site.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from scanrewrite.runtime import Site, sub_jaxprs


def _site_of(eqn: Any, sites: Mapping[tuple[str, int], Site]) -> Site | None:
    traceback = eqn.source_info.traceback
    for frame in traceback.frames if traceback is not None else ():
        site = sites.get((_real(frame.file_name), frame.line_num))
        if site is not None:
            return site
    return None


def _real(path: str) -> str:
    return os.path.realpath(path) if path else path


def _by_place(sites: list[Site]) -> dict[tuple[str, int], Site]:
    return {(site.path, site.line): site for site in sites}


def _equations(jaxpr: Any) -> Iterator[Any]:
    """Every equation of `jaxpr` and of the jaxprs inside its equations, however deep, in order."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub, _ in sub_jaxprs(eqn):
            yield from _equations(sub)


def scan_lengths(jaxpr: Any, sites: list[Site]) -> dict[Site, int]:
    """The number of steps of each site's scan, in a closed jaxpr traced with every site as
    the scan it replaced (the first scan equation found at the site, however deep)."""
    places = _by_place(sites)
    found: dict[Site, int] = {}
    for eqn in _equations(jaxpr.jaxpr):
        site = _site_of(eqn, places) if eqn.primitive.name == "scan" else None
        if site is not None:
            found.setdefault(site, int(eqn.params["length"]))
    return found


def narrowest_float(jaxpr: Any) -> np.dtype | None:
    """The narrowest float dtype of a value a closed jaxpr computes (an equation's output,
    however deep), or None where it computes no float."""
    import jax.numpy as jnp

    dtypes = (getattr(var.aval, "dtype", None) for eqn in _equations(jaxpr.jaxpr) for var in eqn.outvars)
    found = {np.dtype(dtype) for dtype in dtypes if dtype is not None and jnp.issubdtype(dtype, jnp.floating)}
    return min(found, key=lambda dtype: (jnp.finfo(dtype).bits, dtype.name)) if found else None


def differing_site(trace: Callable[[], Any], sites: list[Site]) -> Site | None:
    """The site whose scan differs between two traces of the function (`trace()` twice,
    jax's caches cleared between them), where the first difference lies inside one; None
    where it lies elsewhere or the traces agree."""
    import jax

    first = trace()
    jax.clear_caches()
    second = trace()
    return _first_difference(first.jaxpr, list(first.consts), second.jaxpr, list(second.consts), _by_place(sites))


def _first_difference(a: Any, a_consts: list[Any], b: Any, b_consts: list[Any], places) -> Site | None:
    if len(a.eqns) != len(b.eqns) or len(a.constvars) != len(b.constvars):
        return None
    # Variables of `a` whose values differ from their counterparts in `b`.
    differing = {var for var, x, y in zip(a.constvars, a_consts, b_consts) if not _same_value(x, y)}
    for x, y in zip(a.eqns, b.eqns):
        if not _differs(x, y, differing):
            continue
        site = _site_of(x, places)
        if site is not None:
            return site
        for (sub_a, consts_a), (sub_b, consts_b) in zip(sub_jaxprs(x), sub_jaxprs(y)):
            site = _first_difference(sub_a, consts_a, sub_b, consts_b, places)
            if site is not None:
                return site
        differing.update(x.outvars)
    return None


def _differs(x: Any, y: Any, differing: set[Any]) -> bool:
    if x.primitive is not y.primitive or str(x) != str(y):
        return True
    if any(not hasattr(var, "val") and var in differing for var in x.invars):
        return True
    for var_x, var_y in zip(x.invars, y.invars):
        if hasattr(var_x, "val") and not _same_value(var_x.val, getattr(var_y, "val", None)):
            return True
    return any(
        not all(_same_value(p, q) for p, q in zip(consts_a, consts_b))
        for (_, consts_a), (_, consts_b) in zip(sub_jaxprs(x), sub_jaxprs(y))
    )


def _same_value(x: Any, y: Any) -> bool:
    try:
        return bool(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True))
    except (TypeError, ValueError):
        return x is y


#: Equations whose outputs a checkpoint policy keeps (dots, reductions) and XLA materializes:
#: none is fused away into a consumer or computed twice.
_MATERIALIZED = frozenset({"dot_general", "reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin"})
#: Equations whose output is their input's value (jax marks the values a policy keeps with
#: `reduce_precision` to their own precision).
_SAME_VALUE = frozenset({"reduce_precision"})
_CHECKPOINTS = frozenset({"checkpoint", "remat", "remat2"})


def kept_at_least(jaxpr: Any) -> int:
    """A lower bound, in bytes, on the memory that a closed jaxpr's program keeps for its
    backward pass: the outputs of dots and reductions that the recomputation of a checkpoint
    (a differentiated checkpoint equation) reads, alive all at once.

    A value is alive while a checkpoint's recomputation R runs when the equation that computes
    it is an ancestor of R and R or a descendant of R reads it, in any order XLA schedules
    them. Per-step checkpoints straight-line form a chain through the cotangents, so at the
    backward pass of the last step every step's kept values are alive. Only chains within one
    jaxpr are followed (values crossing into another count as nothing), so the bound is low,
    never high; it assumes XLA rematerializes nothing, as it does not below the device's
    memory."""
    return max((_kept_in(sub) for sub in _jaxprs(jaxpr.jaxpr)), default=0)


def _jaxprs(jaxpr: Any) -> Iterator[Any]:
    yield jaxpr
    for eqn in jaxpr.eqns:
        for sub, _ in sub_jaxprs(eqn):
            yield from _jaxprs(sub)


def _kept_in(jaxpr: Any) -> int:
    # Each value's ancestry as a bit mask over the dots and reductions (their outputs) and the
    # recomputations: a few hundred bits where a pass over every equation's ancestors would
    # hold thousands.
    numbers = itertools.count()
    bit: dict[Any, int] = {}  # a dot's or reduction's output: its bit
    sizes: dict[int, int] = {}  # a dot's or reduction's bit: its output's bytes
    ancestry: dict[Any, int] = {}
    recomputations: list[tuple[int, int, set[int]]] = []  # (its bit, its ancestry, bits it reads)
    for eqn in jaxpr.eqns:
        inputs = [var for var in eqn.invars if not hasattr(var, "val")]
        above = 0
        for var in inputs:
            above |= ancestry.get(var, 0) | (1 << bit[var] if var in bit else 0)
        if eqn.primitive.name in _CHECKPOINTS and eqn.params.get("differentiated"):
            own = next(numbers)
            recomputations.append((own, above, {bit[var] for var in inputs if var in bit}))
            above |= 1 << own
        for var in eqn.outvars:
            ancestry[var] = above
            if eqn.primitive.name in _SAME_VALUE and inputs and inputs[0] in bit:
                bit[var] = bit[inputs[0]]
            elif eqn.primitive.name in _MATERIALIZED:
                bit[var] = next(numbers)
                sizes[bit[var]] = _nbytes(var.aval)
    best = 0
    for own, above, _ in recomputations:
        reading = set().union(*(reads for other, ancestors, reads in recomputations if other == own or ancestors >> own & 1))
        best = max(best, sum(sizes[b] for b in reading if above >> b & 1))
    return best


def _nbytes(aval: Any) -> int:
    return int(np.prod(aval.shape, dtype=np.int64)) * getattr(aval.dtype, "itemsize", 0)
