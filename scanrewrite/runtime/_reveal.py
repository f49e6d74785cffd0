"""jax's own softmax and logsumexp written out in a step, so that a checkpoint policy sees them.

Newer jax computes `jax.nn.softmax` (by default from jax 0.12) and `jax.nn.logsumexp` as
`custom_jvp` functions. `jax.checkpoint` keeps or recomputes a `custom_jvp` call whole, asking
its policy about the call and never about the maximum and sum inside it, so a policy that keeps
reductions keeps nothing of them. `reveal` replaces each such call in a step by the equations
of the function it calls, with the maximum's derivative stopped, which is jax's own softmax
before it became a `custom_jvp` (`jax_softmax_custom_jvp=False`): the same values, and the
same derivative (the softmax does not change when its input shifts, so the maximum's is zero,
as the `custom_jvp` rules say; logsumexp stops it itself). Only jax's own two functions are
replaced, found by the function a call runs; a user's `custom_jvp` is the user's rule.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

import jax

from scanrewrite.runtime._compat import bare_jaxpr, bind_equation, sub_jaxprs
from scanrewrite.runtime._extremes import EXTREMES

__all__ = ["reveal"]


def _source(function: Any) -> str:
    return os.path.realpath(inspect.getsourcefile(inspect.unwrap(function)) or "")


#: (function name, source file) of the `custom_jvp` functions `reveal` writes out.
_JAX_OWN = frozenset({("_softmax", _source(jax.nn.softmax)), ("_logsumexp_impl", _source(jax.nn.logsumexp))})


def reveal(closed: Any) -> Any:
    """`closed` (a step's closed jaxpr) with jax's own softmax and logsumexp calls replaced by
    their equations, also inside the jitted functions it calls (which are inlined) and its
    checkpoints; `closed` itself where it has none."""
    if not _has_own(closed.jaxpr):
        return closed
    jaxpr = bare_jaxpr(closed)
    consts = list(closed.consts)
    avals = [v.aval for v in jaxpr.invars]
    return jax.make_jaxpr(lambda *args: _eval(jaxpr, consts, args))(*avals)


def _is_own(eqn: Any) -> bool:
    if eqn.primitive.name != "custom_jvp_call":
        return False
    info = getattr(eqn.params["call_jaxpr"].jaxpr, "debug_info", None)
    name, _, where = (getattr(info, "func_src_info", None) or "").partition(" at ")
    return (name, os.path.realpath(where.rpartition(":")[0])) in _JAX_OWN


def _has_own(jaxpr: Any) -> bool:
    return any(_is_own(eqn) or any(_has_own(sub) for sub, _ in sub_jaxprs(eqn)) for eqn in jaxpr.eqns)


def _eval(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], *, stop_extremes: bool = False) -> list[Any]:
    """`jaxpr` evaluated on `args` (as `jax.core.eval_jaxpr`), jax's own `custom_jvp` calls
    written out; with `stop_extremes`, every maximum and minimum's derivative stopped."""
    env = {**dict(zip(jaxpr.constvars, consts)), **dict(zip(jaxpr.invars, args))}
    read = lambda v: v.val if hasattr(v, "val") else env[v]  # noqa: E731
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        inner = [sub for sub, _ in sub_jaxprs(eqn)]
        if _is_own(eqn):
            call = eqn.params["call_jaxpr"]
            outs = _eval(call.jaxpr, call.consts, ins, stop_extremes=True)
        elif eqn.primitive.name in ("pjit", "jit", "closed_call") and _has_own(inner[0]):
            call = eqn.params["jaxpr" if "jaxpr" in eqn.params else "call_jaxpr"]
            outs = _eval(call.jaxpr, call.consts, ins, stop_extremes=stop_extremes)
        elif eqn.primitive.name in ("checkpoint", "remat", "remat2") and _has_own(inner[0]):
            body = eqn.params["jaxpr"]
            run = jax.checkpoint(
                lambda *a, body=body: _eval(body, (), a, stop_extremes=stop_extremes),
                prevent_cse=eqn.params["prevent_cse"],
                policy=eqn.params["policy"],
            )
            outs = run(*ins)
        else:
            outs = bind_equation(eqn, ins)
            if stop_extremes and eqn.primitive in EXTREMES:
                outs = [jax.lax.stop_gradient(out) for out in outs]
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]
