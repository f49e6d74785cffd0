"""Flax's own scan transforms, run with their `jax.lax.scan` replaced by the runtime's.

`nnx.scan` and Linen `nn.scan` do everything Flax decides (split the graph or the variable
collections, split the RNG streams per step, stack and unstack parameters, handle `Carry`,
`StateAxes`, broadcasts, `sow`) around exactly one `jax.lax.scan` over a pure function of
arrays: in `flax.nnx.transforms.iteration` (as `jax.lax.scan`) and in `flax.core.axes_scan`
(as `lax.scan`, reached from `flax.core.lift.scan` and `flax.linen.transforms.scan`). A
*shadow* of such a module is a copy of its namespace in which `jax`/`lax` are stand-ins whose
`scan` is a given function, and every function defined in the module is a copy of it (same
code, defaults and closure) that reads its globals from that namespace: so the functions and
closures Flax builds while transforming run the given scan, and nothing else changes. Flax's
modules are never modified, so an unrewritten `nnx.scan` next to a rewritten one is unaffected,
and each rewritten call has shadows of its own (two calls never share a scan function).

Which names a shadow replaces is Flax's internals; `tests/test_runtime_flax_*.py` pin that
the given scan is reached on every supported Flax version.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ScanNamespace", "shadow"]


class ScanNamespace:
    """A stand-in for a module (`jax` or `jax.lax`): `overrides` first, then the module."""

    def __init__(self, module: Any, overrides: Mapping[str, Any]):
        self._module = module
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def _copy(function: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    """`function` with `namespace` as its globals, and everything else the same."""
    copy = types.FunctionType(
        function.__code__, namespace, function.__name__, function.__defaults__, function.__closure__
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__dict__.update(function.__dict__)
    copy.__qualname__ = function.__qualname__
    copy.__doc__ = function.__doc__
    return copy


def shadow(module: types.ModuleType, scan: Callable, replace: Mapping[str, Any] = {}) -> types.ModuleType:
    """A shadow of `module` whose `jax.lax.scan` and `lax.scan` are `scan`, and whose globals
    named in `replace` are the values given (e.g. a shadow of a module it calls into)."""
    import jax

    copy = types.ModuleType(module.__name__)
    namespace = copy.__dict__
    namespace.update(module.__dict__)
    lax = ScanNamespace(jax.lax, {"scan": scan})
    for name, value in module.__dict__.items():
        if value is jax:
            namespace[name] = ScanNamespace(jax, {"lax": lax})
        elif value is jax.lax:
            namespace[name] = lax
    namespace.update(replace)
    for name, value in module.__dict__.items():
        if isinstance(value, types.FunctionType) and value.__globals__ is module.__dict__:
            namespace[name] = _copy(value, namespace)
    return copy
