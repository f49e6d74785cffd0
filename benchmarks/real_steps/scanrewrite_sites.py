"""A pytest plugin that counts the rewritten call sites a test session runs, for
`real_suites.py` (`python -m pytest -p scanrewrite_sites`, with this folder on `PYTHONPATH`).

The whole session runs inside `scanrewrite.runtime.record_sites()`; at its end the plugin
writes to the JSON file that `SCANREWRITE_SITES_OUT` names, per site (``path:line``): the
plans the runtime built there (`Plan.describe()`), whether any of them was built for a call
that something may differentiate (its reasons do not say "nothing can differentiate"), and
whether a call there ran under a derivative (`jax.grad`, `jax.vjp`, `jax.jvp`, `jax.linearize`:
their trace is around the call, also through `jax.jit` and `jax.vmap`, whose traces name the
trace they were made in). The first is what the runtime decided; the second what the tests did:
inside `jax.jit` the runtime plans for a derivative it cannot rule out, which a test may never
take.
"""

from __future__ import annotations

import json
import os

import jax
import pytest
import scanrewrite.runtime
from scanrewrite.runtime import _override

#: The traces of jax's derivatives (`jax.grad` and `jax.vjp` linearize; `jax.jvp` is a JVPTrace).
_DERIVATIVES = ("JVPTrace", "LinearizeTrace")


def _under_derivative() -> bool:
    # jax's trace context, as `scanrewrite.runtime._compat` reads it on jax 0.4.36 and newer.
    trace = jax._src.core.trace_ctx.trace
    while trace is not None:
        if type(trace).__name__ in _DERIVATIVES:
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


class _Count:
    def __init__(self) -> None:
        self.derived: set[object] = set()
        self._resolve = _override.resolve

    def resolve(self, site, written, **kwargs):
        if site is not None and _under_derivative():
            self.derived.add(site)
        return self._resolve(site, written, **kwargs)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    count = _Count()
    # Every runtime function reads `_override.resolve` when called, and names its API to it.
    _override.resolve = count.resolve
    try:
        with scanrewrite.runtime.record_sites() as sites:
            result = yield
    finally:
        _override.resolve = count._resolve
    found = {}
    for site in {*sites, *sites.plans}:
        plans = [plan.describe() for plan in sites.plans.get(site, [])]
        found[f"{site.path}:{site.line}"] = {
            "plans": plans,
            "planned_for_derivative": any("nothing can differentiate" not in plan for plan in plans),
            "under_derivative": site in count.derived,
        }
    path = os.environ.get("SCANREWRITE_SITES_OUT")
    if path:
        with open(path, "w") as file:
            json.dump(found, file, indent=1)
    return result
