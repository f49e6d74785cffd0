"""What the tuner reads from the function's jaxpr, traced with every site as the scan it
replaced: each site's number of steps, the narrowest float it computes in, and which site a
difference between two traces comes from.

A site is found by the source of the `scan` equations: jax records the Python frames of
each equation, innermost first, and the first frame at a site's file and line is that site.
"""

from __future__ import annotations

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
