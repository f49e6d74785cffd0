"""Checkpoint policies of the runtime's own, which keep the outputs of reductions.

A reduction reads its whole input and writes a fraction of it: its output costs few bytes to
keep and a pass over the input to recompute. Kept, the elementwise work around it recomputes
inside the backward pass's kernels. On a TPU v5e, keeping each softmax's maximum and sum made
the checkpointed scan of a 16-layer GPT-style stack run at 0.80x its time in 0.77x its memory
(`benchmarks/reduction_policies.py`).

A kept maximum is not always safe. `reduce_max`'s derivative compares the maximum with its
operand; with the maximum kept and the operand recomputed, a recomputation that rounds
otherwise (XLA compiles it apart) finds no element equal to it, and the gradient is wrong by far
more than rounding. A comparison of the kept maximum with any recomputed value is exposed the
same way. So each policy here keeps sums (whose derivative is linear) wherever it is used, and
a rewritten scan keeps maxima and minima too where `maxima_unsafe` finds no such comparison in
its step's derivative (`jvp_jaxpr`): `resolve` gives the policy to build.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.interpreters import partial_eval as pe

from scanrewrite.runtime._compat import bare_jaxpr, sub_jaxprs

__all__ = [
    "dots_and_reductions_saveable",
    "dots_with_no_batch_dims_and_reductions_saveable",
    "jvp_jaxpr",
    "keeps_no_dots",
    "maxima_unsafe",
    "reductions_saveable",
    "resolve",
]

_SUMS = frozenset({lax.reduce_sum_p})
_MAXIMA = frozenset({lax.reduce_max_p, lax.reduce_min_p})
#: Primitives that compare their operands, whose derivatives too (`max`, `min`).
_COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "max", "min", "clamp"})
#: Primitives that call a jaxpr on their operands once. In a `jvp_jaxpr` a `custom_jvp_call`
#: left is the primal half of one whose rule is already spelled out beside it.
_CALLS = frozenset({"jit", "pjit", "closed_call", "core_call", "checkpoint", "remat", "remat2", "custom_jvp_call"})


def reductions_saveable(prim: Any, *_: Any, **__: Any) -> bool:
    """Keeps the outputs of sums along axes, and in a rewritten scan those of maxima and minima
    where that is safe for its step (see the module); recomputes everything else."""
    return prim in _SUMS


def dots_with_no_batch_dims_and_reductions_saveable(prim: Any, *args: Any, **params: Any) -> bool:
    """`jax.checkpoint_policies.dots_with_no_batch_dims_saveable` and `reductions_saveable`."""
    return prim in _SUMS or jax.checkpoint_policies.dots_with_no_batch_dims_saveable(prim, *args, **params)


def dots_and_reductions_saveable(prim: Any, *args: Any, **params: Any) -> bool:
    """`jax.checkpoint_policies.dots_saveable` (dots with batch dimensions too) and
    `reductions_saveable`."""
    return prim in _SUMS or jax.checkpoint_policies.dots_saveable(prim, *args, **params)


def _with_maxima(policy: Any) -> Any:
    def keep(prim: Any, *args: Any, **params: Any) -> bool:
        return prim in _MAXIMA or policy(prim, *args, **params)

    keep.__name__ = f"{policy.__name__} (maxima and minima too)"
    return keep


#: Each policy -> the same keeping maxima and minima too (made once: the program's cache keys on it).
_WITH_MAXIMA = {
    policy: _with_maxima(policy)
    for policy in (reductions_saveable, dots_with_no_batch_dims_and_reductions_saveable, dots_and_reductions_saveable)
}


def keeps_no_dots(checkpoint: Any) -> bool:
    """Whether `checkpoint` (as a plan holds it) keeps no matrix product's output: `True` (keeps
    nothing) or `reductions_saveable`, with or without maxima."""
    return checkpoint is True or checkpoint is reductions_saveable or checkpoint is _WITH_MAXIMA[reductions_saveable]


def resolve(policy: Any, closed: Any | None) -> tuple[Any, str | None]:
    """The policy to build for a step whose closed jaxpr is `closed` (None: not traced), and
    why; `policy` itself, and no reason, where it is not one of this module's."""
    ours = next((p for p in _WITH_MAXIMA if p is policy), None)  # a user's policy may not hash
    if ours is None:
        return policy, None
    try:
        why = "the step has no jaxpr to check" if closed is None else maxima_unsafe(jvp_jaxpr(closed))
    except Exception as exc:  # noqa: BLE001 - a step jax cannot differentiate forward keeps sums
        why = f"its jax.jvp could not be traced ({type(exc).__name__})"
    if why is not None:
        return policy, f"{policy.__name__} keeps sums, not maxima: {why}"
    reason = "nothing differentiates them or compares them with what the backward pass recomputes"
    return _WITH_MAXIMA[policy], f"{policy.__name__} keeps the step's maxima and minima too: {reason}"


def _opaque(eqn: Any) -> bool:
    """Whether `eqn` runs Python of its own (a `custom_vjp`'s backward pass, a callback)."""
    return any(
        (callable(value) and not isinstance(value, type)) or hasattr(value, "call_wrapped")  # jax's WrappedFun
        for value in eqn.params.values()
    )


def _has_maxima(jaxpr: Any) -> bool:
    return any(eqn.primitive in _MAXIMA or any(_has_maxima(sub) for sub, _ in sub_jaxprs(eqn)) for eqn in jaxpr.eqns)


def jvp_jaxpr(closed: Any) -> Any:
    """The jaxpr of `jax.jvp` of the closed jaxpr `closed` (every input with a tangent, every
    output's tangent used), with what no output needs removed: the primal computation and
    the derivatives jax's rules (a `custom_jvp`'s own included) make of it."""
    fun = jax.extend.core.jaxpr_as_fun(closed)
    avals = [v.aval for v in bare_jaxpr(closed).invars]

    def jvp(*primals: Any) -> Any:
        inexact = lambda p: jnp.issubdtype(p.dtype, jnp.inexact)  # noqa: E731
        tangents = tuple(jnp.zeros_like(p) if inexact(p) else np.zeros(p.shape, jax.dtypes.float0) for p in primals)
        return jax.jvp(fun, primals, tangents)

    traced = jax.make_jaxpr(jvp)(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
    jaxpr = bare_jaxpr(traced)
    return pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))[0]


#: Primitives whose output is their operand's value, laid out or typed otherwise.
_VIEWS = frozenset(
    {"broadcast_in_dim", "reshape", "convert_element_type", "squeeze", "expand_dims", "transpose", "copy", "copy_p",
     "stop_gradient", "reduce_precision"}
)  # fmt: skip


def maxima_unsafe(jaxpr: Any) -> str | None:
    """Why keeping the maxima and minima in `jaxpr` could change a derivative, or None where it
    cannot. `jaxpr` is a step's `jvp_jaxpr`, so a maximum that is differentiated shows as its
    derivative's comparison of the maximum with its operand.

    Unsafe: a maximum (or the same value reshaped, broadcast, converted, with its gradient
    stopped) compared for equality or order, or taken the larger or smaller of, with a value
    that is neither constant nor such a maximum: the backward pass recomputes that value and may
    round it otherwise than the maximum kept from the forward pass, and a comparison that turns
    on equality then turns. Also unsafe: a maximum inside (or one entering) a primitive other
    than a call (a loop, a branch), which is not looked into."""
    return _unsafe(jaxpr, frozenset(), frozenset(jaxpr.constvars))[0]


def _unsafe(jaxpr: Any, maxima: frozenset, fixed: frozenset) -> tuple[str | None, set]:
    """`maxima_unsafe` of a jaxpr whose variables `maxima` are maxima and `fixed` constants;
    also its output variables that are maxima."""
    found, constant = set(maxima), set(fixed)
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        operands = [v for v in eqn.invars if not hasattr(v, "val") and v not in constant]
        if not operands and not eqn.effects:
            constant.update(eqn.outvars)
        elif eqn.primitive in _MAXIMA or (name in _VIEWS and operands[0] in found):
            found.update(eqn.outvars)
        elif name in _COMPARISONS and any(v in found for v in operands):
            if not all(v in found for v in operands):
                return f"it compares ({name}) a maximum with a value the backward pass recomputes", set()
            found.update(eqn.outvars)
        elif (inner := [sub for sub, _ in sub_jaxprs(eqn)]) or _opaque(eqn):
            if name not in _CALLS:
                if any(v in found for v in operands) or any(map(_has_maxima, inner)):
                    return f"a maximum is inside {name}, or enters it, which is not looked into", set()
                continue
            body = inner[0]
            pairs = list(zip(body.invars, eqn.invars))
            why, outs = _unsafe(
                body,
                frozenset(b for b, v in pairs if not hasattr(v, "val") and v in found),
                frozenset([*body.constvars, *(b for b, v in pairs if hasattr(v, "val") or v in constant)]),
            )
            if why is not None:
                return why, set()
            found.update(v for v, b in zip(eqn.outvars, body.outvars) if b in outs)
    return None, {v for v in jaxpr.outvars if not hasattr(v, "val") and v in found}
