"""Whether a step may keep its maxima and minima for the backward pass: a rule that follows
every use of each one through the step's forward derivative.

The hazard. A maximum `m = max(x)` equals one element of `x` exactly. The backward pass of a
checkpointed step recomputes `x`, and XLA, compiling the recomputation apart from the forward
pass, may round it otherwise by a last bit. Recomputed too, `m` stays equal to an element of
the recomputed `x`; kept from the forward pass, it may equal none. A function that is not
continuous where the two meet (`x == m`, `relu(x - m)`, `abs(x - m)`, the derivative of `max`
itself, which compares `m` with `x`) then changes by far more than rounding: the gradient is
wrong. The tie is made by the maximum itself, so it is certain, not a coincidence of the data.

The rule. Each value of the step's `jax.jvp` (the forward computation and the derivative jax
makes of it, every input differentiated, the constants the step closes over included) carries
two marks: whether it depends on a kept maximum or minimum (`KEPT`), and whether it depends on
a value the backward pass recomputes (`RECOMPUTED`: every input, and all computed from one).
A kept maximum itself is only `KEPT`: the backward pass reads the forward pass's own value.
So does a kept sum, which marks nothing: it is the same in both passes, as a constant is.
Marks flow through every primitive. Keeping is safe where no value marked both reaches a
primitive that is not continuous there: anything but the primitives listed as continuous here
(sums, products, `exp`, data movement, ...). Two proven exceptions keep the softmax and
logsumexp: a singular function (`div`'s divisor, `log`, `rsqrt`) of a value known positive
(a sum of `exp`s plus what is not negative), and `abs`, `sign` or a comparison with zero whose
result the sign of its operand fixes. A loop, a branch or Python of the user's own (a
`custom_vjp`'s backward pass, a callback) is not looked into: a maximum inside or entering one
is unsafe. Within a chunk one step's carry is the next step's input, so a carry that leaves
the step marked `KEPT` enters it marked so, until nothing changes.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.interpreters import partial_eval as pe

from scanrewrite.runtime._compat import bare_jaxpr, sub_jaxprs

__all__ = ["EXTREMES", "has_extremes", "jvp_jaxpr", "maxima_unsafe"]

EXTREMES = frozenset({lax.reduce_max_p, lax.reduce_min_p})

#: A value's marks, or-ed: see the module.
KEPT, RECOMPUTED, POSITIVE, NONNEGATIVE, ZERO = 1, 2, 4, 8, 16
_BOTH = KEPT | RECOMPUTED
_SIGN = POSITIVE | NONNEGATIVE | ZERO

#: Continuous in every operand, and with a continuous derivative where jax's rule does not
#: spell the derivative out as primitives of its own (which the rule then reads).
_CONTINUOUS = frozenset(
    {"add", "add_any", "sub", "mul", "neg", "exp", "exp2", "tanh", "logistic", "sin", "cos", "atan", "sinh", "cosh",
     "asinh", "erf", "erfc", "square", "integer_pow", "reduce_sum", "reduce_prod", "cumsum", "cumprod",
     "cumlogsumexp", "dot_general", "conv_general_dilated", "broadcast_in_dim", "reshape", "squeeze",
     "expand_dims", "transpose", "copy", "copy_p", "concatenate", "pad", "slice", "split", "rev",
     "reduce_precision", "optimization_barrier", "stop_gradient", "real", "imag", "conj", "complex",
     "convert_element_type", "device_put", "sharding_constraint", "mesh_cast", "reshard", "pvary", "psum",
     "all_gather", "ppermute", "all_to_all", "one_minus_square", "fma", "fmuladd", "expm1"}
)  # fmt: skip
#: Continuous in some operands, not in the others (a predicate, an index), by position.
_DISCRETE_OPERANDS = {
    "select_n": lambda n: range(1),
    "dynamic_slice": lambda n: range(1, n),
    "dynamic_update_slice": lambda n: range(2, n),
    "gather": lambda n: range(1, 2),
    "scatter-add": lambda n: range(1, 2),
    "scatter_add": lambda n: range(1, 2),
    "scatter": lambda n: range(1, 2),
}
#: Singular where their operand (the divisor of `div`, the base of `pow`) is zero or less.
_SINGULAR = {"div": 1, "log": 0, "log2": 0, "log1p": 0, "sqrt": 0, "rsqrt": 0, "cbrt": 0, "pow": 0}
#: Primitives that call a jaxpr on their operands once, looked into. In a `jvp_jaxpr` a
#: `custom_jvp_call` left is the primal half of one whose rule is already spelled out beside it.
_CALLS = frozenset({"jit", "pjit", "closed_call", "core_call", "checkpoint", "remat", "remat2", "custom_jvp_call"})


def jvp_jaxpr(closed: Any) -> Any:
    """The jaxpr of `jax.jvp` of the closed jaxpr `closed` with every input differentiated, its
    constants (what the step closes over) first among them: inputs, the constants' and then
    `closed`'s own; outputs, `closed`'s and then their tangents; what no output needs removed."""
    jaxpr = bare_jaxpr(closed)
    count = len(jaxpr.constvars)
    avals = [v.aval for v in (*jaxpr.constvars, *jaxpr.invars)]

    def jvp(*primals: Any) -> Any:
        inexact = lambda p: jnp.issubdtype(p.dtype, jnp.inexact)  # noqa: E731
        tangents = tuple(jnp.zeros_like(p) if inexact(p) else np.zeros(p.shape, jax.dtypes.float0) for p in primals)
        fun = lambda *args: jax.core.eval_jaxpr(jaxpr, args[:count], *args[count:])  # noqa: E731
        primals_out, tangents_out = jax.jvp(fun, primals, tangents)
        return [*primals_out, *tangents_out]

    traced = bare_jaxpr(jax.make_jaxpr(jvp)(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]))
    return pe.dce_jaxpr(traced, [True] * len(traced.outvars), instantiate=True)[0]


def maxima_unsafe(jvp: Any, carry: range = range(0)) -> str | None:
    """Why keeping the maxima and minima of a step could change a derivative, or None where it
    cannot (see the module). `jvp` is the step's `jvp_jaxpr`; `carry`, the positions of its
    carry among `jvp`'s inputs, in the order of the step's first outputs."""
    marks = [RECOMPUTED] * len(jvp.invars)
    half = len(jvp.outvars) // 2
    while True:
        why, out = _flow(jvp, marks, kept_sums=True)
        if why is not None:
            return why
        entering = [i for n, i in enumerate(carry) if (out[n] | out[half + n]) & KEPT and not marks[i] & KEPT]
        if not entering:
            return None
        for i in entering:
            marks[i] |= KEPT


def has_extremes(jaxpr: Any) -> bool:
    """Whether `jaxpr` (or one inside it) takes a maximum or minimum."""
    return any(eqn.primitive in EXTREMES or any(has_extremes(sub) for sub, _ in sub_jaxprs(eqn)) for eqn in jaxpr.eqns)


def _flow(jaxpr: Any, marks_in: list[int], *, kept_sums: bool) -> tuple[str | None, list[int]]:
    """The first unsafe use in `jaxpr` whose inputs carry `marks_in`, or None and the marks of
    its outputs. Its own constants are constants (`jvp_jaxpr` made the step's its inputs).
    With `kept_sums`, the policy keeps its sums (it does outside a `custom_jvp` call or a
    checkpoint of the step's own, which jax keeps or recomputes whole)."""
    marks = dict(zip(jaxpr.invars, marks_in))
    read = lambda v: _literal(v.val) if hasattr(v, "val") else marks.get(v, 0)  # noqa: E731
    for eqn in jaxpr.eqns:
        why, out = _equation(eqn, [read(v) for v in eqn.invars], kept_sums)
        if why is not None:
            return why, []
        marks.update(zip(eqn.outvars, out))
    return None, [read(v) for v in jaxpr.outvars]


def _literal(value: Any) -> int:
    value = np.asarray(value)
    if value.size != 1 or not np.issubdtype(value.dtype, np.number) or np.iscomplexobj(value):
        return 0
    return POSITIVE | NONNEGATIVE if value > 0 else ZERO | NONNEGATIVE if value == 0 else 0


def _equation(eqn: Any, ins: list[int], kept_sums: bool) -> tuple[str | None, list[int]]:
    """The unsafe use `eqn` makes of operands marked `ins`, or None and its outputs' marks."""
    name, outs = eqn.primitive.name, len(eqn.outvars)
    union = functools.reduce(lambda a, b: a | b, ins, 0) & _BOTH
    inner = [sub for sub, _ in sub_jaxprs(eqn)]
    if not union and not eqn.effects and not any(map(has_extremes, inner)):
        return None, [_sign(eqn, ins)] * outs  # a constant: the same in both passes
    if eqn.primitive in EXTREMES:
        return None, [KEPT | (ins[0] & _SIGN)]
    if name == "reduce_sum" and kept_sums and math.prod(eqn.invars[0].aval.shape[a] for a in eqn.params["axes"]) > 1:
        # Kept, the forward pass's own value in both passes, as a constant is; a sum of one
        # element is that element, and keeps its marks.
        return None, [_sign(eqn, ins)]
    if name in _CALLS and inner:
        within = kept_sums and name in ("jit", "pjit", "closed_call", "core_call")
        return _flow(inner[0], ins + [RECOMPUTED] * (len(inner[0].invars) - len(ins)), kept_sums=within)
    if inner or _opaque(eqn):
        if union & KEPT or any(map(has_extremes, inner)):
            return f"a maximum is inside {name}, or enters it, which is not looked into", []
        return None, [union] * outs
    if name in _CONTINUOUS and not _discrete_or_singular(eqn):
        return None, [union | _sign(eqn, ins)] * outs
    if name == "convert_element_type":  # to an integer or boolean: not continuous
        return _unless_both(name, union, union, outs)
    if name in _DISCRETE_OPERANDS:
        discrete = functools.reduce(lambda a, i: a | ins[i], _DISCRETE_OPERANDS[name](len(ins)), 0)
        return _unless_both(name, discrete, union | _sign(eqn, ins), outs)
    if name in _SINGULAR or name == "integer_pow":
        operand = ins[_SINGULAR.get(name, 0)]
        safe = operand & POSITIVE or not (operand & KEPT and operand & RECOMPUTED)
        why = None if safe else f"it takes {name} of a value that meets a kept maximum, where {name} is singular"
        return why, [union | _sign(eqn, ins)] * outs
    if name == "abs" and ins[0] & NONNEGATIVE:
        return None, [union | _sign(eqn, ins)] * outs
    if _fixed_by_sign(eqn, ins):
        return None, [0] * outs  # the same in both passes
    return _unless_both(name, union, union, outs)


def _discrete_or_singular(eqn: Any) -> bool:
    """Whether `eqn`, of a primitive otherwise continuous, converts to an integer or boolean, or
    raises to a negative power."""
    if eqn.primitive.name == "convert_element_type":
        return not jnp.issubdtype(eqn.params["new_dtype"], jnp.inexact)
    return eqn.primitive.name == "integer_pow" and eqn.params["y"] < 0


def _unless_both(name: str, operands: int, out: int, outs: int) -> tuple[str | None, list[int]]:
    if operands & KEPT and operands & RECOMPUTED:
        return f"it compares ({name}) a maximum with a value the backward pass recomputes", []
    return None, [out] * outs


def _sign(eqn: Any, ins: list[int]) -> int:
    """What is known of the sign of `eqn`'s output, from its operands' (`ins`). `POSITIVE`
    means positive, or zero in both passes alike: a term masked out (`where(mask, e, 0)`) or
    `exp` of `-inf`. (`exp` underflowing in one pass and not in the other is a coincidence of
    the data at its threshold, not a tie the maximum makes.)"""
    name = eqn.primitive.name
    signed = POSITIVE | NONNEGATIVE
    every = functools.reduce(lambda a, b: a & b, ins, signed) & signed
    if name in ("exp", "exp2", "logistic"):
        return signed
    if name in ("square", "abs") or (name == "integer_pow" and eqn.params["y"] % 2 == 0):
        return NONNEGATIVE | (ins[0] & POSITIVE)
    if name == "mul" and eqn.invars[0] is eqn.invars[1]:
        return NONNEGATIVE
    if name in ("mul", "div", "sqrt", "rsqrt", "concatenate"):
        return every
    if name == "select_n":  # a case that is zero in both passes is a term masked out
        return functools.reduce(lambda a, b: a & (signed if b & ZERO else b), ins[1:], signed) & signed
    if name in ("add", "add_any"):
        nonnegative = every & NONNEGATIVE
        return nonnegative | (POSITIVE if nonnegative and (ins[0] | ins[1]) & POSITIVE else 0)
    if name == "reduce_sum":
        empty = any(eqn.invars[0].aval.shape[a] == 0 for a in eqn.params["axes"])
        return ins[0] & (NONNEGATIVE if empty else signed)
    if name in ("broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "copy", "copy_p",
                "convert_element_type", "stop_gradient", "slice", "rev", "reduce_precision"):  # fmt: skip
        return ins[0] & _SIGN
    return 0


def _fixed_by_sign(eqn: Any, ins: list[int]) -> bool:
    """Whether the sign of its operand fixes what `eqn` gives: `sign` of a value known positive,
    or a comparison of one known positive or not negative with zero (as jax's derivative of
    `abs` makes)."""
    name = eqn.primitive.name
    if name == "sign":
        return bool(ins[0] & POSITIVE)
    if name not in ("ge", "lt", "gt", "le") or not hasattr(eqn.invars[1], "val"):
        return False
    zero = np.asarray(eqn.invars[1].val).size == 1 and np.asarray(eqn.invars[1].val) == 0
    return bool(zero and ins[0] & (NONNEGATIVE if name in ("ge", "lt") else POSITIVE))


def _opaque(eqn: Any) -> bool:
    """Whether `eqn` runs Python of its own (a `custom_vjp`'s backward pass, a callback)."""
    return any(
        (callable(value) and not isinstance(value, type)) or hasattr(value, "call_wrapped")  # jax's WrappedFun
        for value in eqn.params.values()
    )
