"""Checkpoint policies of the runtime's own, which keep the outputs of reductions.

A reduction reads its whole input and writes a fraction of it: its output costs few bytes to
keep and a pass over the input to recompute. Kept, the elementwise work around it recomputes
inside the backward pass's kernels. On a TPU v5e, keeping each softmax's maximum and sum made
the checkpointed scan of a 16-layer GPT-style stack run at 0.80x its time in 0.77x its memory
(`benchmarks/reduction_policies.py`).

A kept maximum is not always safe (`_extremes` says why and decides it for a step). So each
policy here keeps sums (whose derivative is linear) wherever it is used, and a rewritten scan
keeps maxima and minima too where `_extremes.maxima_unsafe` proves that no derivative of the
step can compare one with a value the backward pass recomputes: `resolve` gives the policy to
build, and says what it keeps of the step, as jax's own partial evaluation decides it.
"""

from __future__ import annotations

import collections
from typing import Any

import jax
import jax.extend.core
from jax import lax
from jax._src.ad_checkpoint import saved_residuals

from scanrewrite.runtime._compat import bare_jaxpr, sub_jaxprs
from scanrewrite.runtime._extremes import EXTREMES, jvp_jaxpr, maxima_unsafe
from scanrewrite.runtime._validate import check_checkpoint
from scanrewrite.targets import ALL_POLICIES, CHECKPOINT_POLICIES

__all__ = [
    "dots_and_reductions_saveable",
    "dots_with_no_batch_dims_and_reductions_saveable",
    "has_reductions",
    "is_ours",
    "keeps_no_dots",
    "named_policy",
    "policy_of",
    "reductions_saveable",
    "resolve",
    "with_maxima",
]

_SUMS = frozenset({lax.reduce_sum_p})


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


def named_policy(name: str) -> Any:
    """The policy `name` stands for: `jax.checkpoint_policies.NAME` for a name in
    `targets.CHECKPOINT_POLICIES`, this module's for one of its own; a `ValueError` naming
    `checkpoint` for any other name."""
    if name in CHECKPOINT_POLICIES:
        return getattr(jax.checkpoint_policies, name)
    if name in ALL_POLICIES:
        return globals()[name]
    raise ValueError(f"`checkpoint` must be True, False, a policy or one's name ({', '.join(ALL_POLICIES)}), got {name!r}")


def policy_of(checkpoint: Any) -> Any:
    """`checkpoint` as a call passes it: True, False or a policy, which a name given instead
    becomes (`named_policy`); a `ValueError` naming `checkpoint` for anything else."""
    if isinstance(checkpoint, str):
        return named_policy(checkpoint)
    check_checkpoint(checkpoint)
    return checkpoint


def _with_maxima(policy: Any) -> Any:
    def keep(prim: Any, *args: Any, **params: Any) -> bool:
        return prim in EXTREMES or policy(prim, *args, **params)

    keep.__name__ = f"{policy.__name__} (maxima and minima too)"
    return keep


#: Each policy -> the same keeping maxima and minima too (made once: the program's cache keys on it).
_WITH_MAXIMA = {
    policy: _with_maxima(policy)
    for policy in (reductions_saveable, dots_with_no_batch_dims_and_reductions_saveable, dots_and_reductions_saveable)
}


def with_maxima(policy: Any) -> Any:
    """`policy`, one of this module's, keeping maxima and minima too, whatever the step: what
    `resolve` builds where the step allows it (and what the tests attack where it does not)."""
    return _WITH_MAXIMA[policy]


def is_ours(policy: Any) -> bool:
    """Whether `policy` is one of this module's three (without maxima: as a call passes it)."""
    return any(p is policy for p in _WITH_MAXIMA)  # a user's policy may not hash


def has_reductions(closed: Any | None) -> bool:
    """Whether the step whose closed jaxpr is `closed` sums or takes a maximum or minimum that
    a policy can keep: outside a `custom_jvp` or `custom_vjp` call, which jax keeps or recomputes
    whole."""

    def walk(jaxpr: Any) -> bool:
        for eqn in jaxpr.eqns:
            if eqn.primitive in _SUMS or eqn.primitive in EXTREMES:
                return True
            if not eqn.primitive.name.startswith("custom_") and any(walk(sub) for sub, _ in sub_jaxprs(eqn)):
                return True
        return False

    return closed is not None and walk(bare_jaxpr(closed))


def keeps_no_dots(checkpoint: Any) -> bool:
    """Whether `checkpoint` (as a plan holds it) keeps no matrix product's output: `True` (keeps
    nothing) or `reductions_saveable`, with or without maxima."""
    return checkpoint is True or checkpoint is reductions_saveable or checkpoint is _WITH_MAXIMA[reductions_saveable]


def resolve(policy: Any, closed: Any | None, carries: int = 0) -> tuple[Any, str | None]:
    """The policy to build for a step whose closed jaxpr is `closed` (None: not traced), whose
    first `carries` inputs and outputs are its carry, and why; `policy` itself, and no reason,
    where it is not one of this module's."""
    if not is_ours(policy):
        return policy, None
    try:
        if closed is None:
            why = "the step has no jaxpr to check"
        else:
            first = len(bare_jaxpr(closed).constvars)
            why = maxima_unsafe(jvp_jaxpr(closed), range(first, first + carries))
    except Exception as exc:  # noqa: BLE001 - a step jax cannot differentiate forward keeps sums
        why = f"its jax.jvp could not be traced ({type(exc).__name__})"
    if why is not None:
        built, reason = policy, f"{policy.__name__} keeps sums, not maxima: {why}"
    else:
        why = "nothing compares them with a value the backward pass recomputes"
        built, reason = _WITH_MAXIMA[policy], f"{policy.__name__} may keep the step's maxima and minima too: {why}"
    return built, reason if closed is None else f"{reason}; {kept(built, closed)}"


#: How `kept` names the values a policy keeps, by the primitive that made them.
_KINDS = {"reduce_sum": "sum", "reduce_max": "maximum", "reduce_min": "minimum", "dot_general": "matrix product"}
_PLURAL = {"reduce_sum": "sums", "reduce_max": "maxima", "reduce_min": "minima", "dot_general": "matrix products"}


def kept(policy: Any, closed: Any) -> str:
    """What `jax.checkpoint(policy=policy)` keeps of one step whose closed jaxpr is `closed`,
    as jax's partial evaluation decides it (a `custom_jvp` call is kept or recomputed whole):
    e.g. "it keeps 1 maximum, 2 sums of each step"."""
    fun = jax.extend.core.jaxpr_as_fun(closed)
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in bare_jaxpr(closed).invars]

    def count(keep: Any) -> collections.Counter:
        residuals = saved_residuals(jax.checkpoint(fun, policy=keep), *avals)
        return collections.Counter(where.split()[2] for _, where in residuals if where.startswith("output of "))

    try:
        counts = count(policy)
        if set(counts) - set(_KINDS):  # older jax names the `reduce_precision` around a kept value
            by_kind = lambda kind: lambda p, *a, **k: p.name == kind and policy(p, *a, **k)  # noqa: E731
            counts = collections.Counter({kind: sum(count(by_kind(kind)).values()) for kind in _KINDS})
    except Exception as exc:  # noqa: BLE001 - a step jax cannot differentiate keeps what it keeps
        return f"what it keeps of each step could not be read ({type(exc).__name__})"
    named = [f"{n} {_KINDS[kind] if n == 1 else _PLURAL[kind]}" for kind, n in sorted(counts.items()) if n]
    return "it keeps " + (", ".join(named) if named else "no reduction's output") + " of each step"
