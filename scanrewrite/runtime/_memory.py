"""What the backward pass of rolled, checkpointed chunks keeps, and the chunk size to build.

On XLA:CPU a chunk's steps stay a rolled loop (`_chunks.layout`), so there the chunk size k
decides what the backward pass keeps, not how fast a step runs. For one level of checkpointed
chunks of d steps over N steps, it keeps the input carry of every chunk and of every leftover
step, and while it recomputes a chunk, the residuals of that chunk's d steps:

    kept(d) = (N // d + N % d) * carry_bytes + d * residual_bytes

Checkpointed chunks compile slower than `jax.lax.scan` under `grad` (a chunk's step is compiled
forward, recomputed with its residuals, and backward, in nested loops), and leftover steps add a
loop of their own. `jax.lax.scan(jax.checkpoint(f))` (d = 1) compiles faster than `jax.lax.scan`,
and a d that divides N has no leftover loop. So where the model says d keeps no more than the
requested k, the runtime builds d instead: the same numbers, no more memory, less to compile.
Where no such d is left and k leaves steps over, blocks of b steps (b divides N), each step
checkpointed inside its checkpointed block, keep

    kept_in_blocks(b) = (N // b + b) * carry_bytes + residual_bytes

and leave no steps over: the backward pass recomputes a block's carries, then each step with
its residuals, which costs a forward pass more than chunks of k but compiles as fast as chunks
that divide N (a loop of leftover steps compiles about as long as the chunks' backward pass).

Where what one step per chunk keeps, kept(1), is negligible (`negligible`: 1 MiB or less on
the CPU), none of this is worth its compile time: one step per chunk is built whatever k.

The residual bytes are a lower bound, read off the step's jaxpr without tracing it again. An
equation whose derivative needs a value of the step keeps it (the tables below: `log` its
input, `exp` its output, `tanh` a value of its own, a product each factor where the other has
a tangent), counted once, if it varies from step to step (it depends on the carry, or on `xs`
other than through a slice that the loop already holds) and its tangent reaches the step's
outputs (`stop_gradient` cuts it off). The carry and the slices are taken to have a tangent (so
a product with a slice of data that has none counts a factor that jax does not keep); a
closed-over value has one where it is seen to be differentiated (`_trace.differentiated`), as the
parameters of `jax.grad(loss)(params, h)` are: then `params @ h` keeps every step's h. A value
computed from closed-over values only is kept once by a loop. A nested `jax.lax.scan` keeps what
its body keeps by the same count, at each of its steps (a rewritten scan inside the step is one,
checkpointed or not); an equation the tables do not know (a `custom_jvp`, a `while_loop`) counts
as nothing. The tests check the bound against what
`jax.vjp` of the step keeps, on every jax release the matrix runs. Since kept(d) - kept(k)
falls as the residuals grow when d < k, a d < k that the lower bound admits keeps no more than k
for the true residuals too, which is why only d < k are candidates (and blocks, which keep one
step's residuals, for k > 1).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from scanrewrite.runtime import _levels, _trace
from scanrewrite.runtime._compat import scan_counts


class StepBytes(NamedTuple):
    """The bytes of a step's carry, and of the residuals that one step adds to a stack."""

    carry: int
    residuals: int


def kept(n: int, d: int, sizes: StepBytes) -> int:
    """Bytes the backward pass keeps for `n` steps in checkpointed chunks of `d` rolled steps."""
    return (n // d + n % d) * sizes.carry + d * sizes.residuals


def _nbytes(aval: Any) -> int:
    # A PRNG key array's extended dtype has no item size to count: it counts as nothing.
    return aval.size * getattr(aval.dtype, "itemsize", 0)


# What differentiating an equation keeps, by primitive: a value that jax's derivative rule
# computes from the primal in the forward pass, the size of the output, kept by nothing else
# (d tanh(x) = 1 - tanh(x)^2, d x^3 = 3 x^2)...
_KEEPS_NEW = frozenset({"tanh", "logistic", "sqrt", "rsqrt", "integer_pow", "sin", "cos"})
# ...its output (d exp(x) = exp(x))...
_KEEPS_OUTPUT = frozenset({"exp", "exp2", "expm1", "cbrt", "max", "min"})
# ...its input (d log(x) = 1 / x)...
_KEEPS_INPUT = frozenset(
    {"log", "log1p", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"}
    | {"erf", "erfc", "erf_inv", "lgamma", "digamma", "abs"}
)
# ...and each factor of a product where the other factor has a tangent (d(ab) = da b + a db).
_PRODUCTS = frozenset({"mul", "dot_general", "conv_general_dilated"})
# Calls whose body is differentiated as if inlined.
_CALLS = frozenset({"pjit", "jit", "closed_call", "core_call"})


class _New(NamedTuple):
    """The value that differentiating the equation with output `var` computes and keeps."""

    var: Any

    @property
    def aval(self) -> Any:
        return self.var.aval


class _Size(NamedTuple):
    """What `_nbytes` reads of an abstract value."""

    size: int
    dtype: Any


class _Stacked(NamedTuple):
    """A value that a nested loop of `length` steps keeps at every one of its steps."""

    value: Any
    length: int

    @property
    def aval(self) -> _Size:
        return _Size(self.length * self.value.aval.size, self.value.aval.dtype)


def _inexact(var: Any) -> bool:
    return jnp.issubdtype(var.aval.dtype, jnp.inexact)


def _live(jaxpr: Any, outputs: list) -> set:
    """The variables of `jaxpr` whose tangent reaches one of `outputs` (those not
    `stop_gradient` cuts off): only their derivatives are computed, so only they keep values."""
    live = {v for v in outputs if not hasattr(v, "val")}
    for eqn in reversed(jaxpr.eqns):
        if eqn.primitive.name != "stop_gradient" and any(v in live for v in eqn.outvars):
            live.update(v for v in eqn.invars if not hasattr(v, "val"))
    return live


def _residuals(
    jaxpr: Any, varying: set, tangent: set, outputs: list | None = None, *, inline_checkpoints: bool = False
) -> set:
    """The values that vary from step to step and that differentiating `jaxpr` keeps (by the
    tables above), given the sets of its input variables that vary and that have a tangent
    (both grow by the values computed from them; `stop_gradient` and integer values have no
    tangent), and the outputs whose tangent is used (all where None). With
    `inline_checkpoints`, a checkpoint equation of `jaxpr` (not of the calls in it) counts as
    the equations inside it."""
    live = _live(jaxpr, jaxpr.outvars if outputs is None else outputs)
    kept: set = set()
    for eqn in jaxpr.eqns:
        args = [None if hasattr(v, "val") else v for v in eqn.invars]  # a literal has a value
        ins = [v for v in args if v is not None]
        if any(v in varying for v in ins):
            varying.update(eqn.outvars)
        name = eqn.primitive.name
        if name == "stop_gradient" or not any(v in tangent for v in ins):
            continue
        tangent.update(v for v in eqn.outvars if _inexact(v))
        if not any(v in live for v in eqn.outvars):
            continue
        moving = [v for v in ins if v in varying and v in tangent]
        if name in _PRODUCTS and len(args) == 2:
            kept.update(a for a, b in (args, args[::-1]) if a in varying and b in tangent)
        elif name == "div":
            # d(a / b) = da / b - a db / b^2: b is kept, and a where b has a tangent.
            kept.update(v for v in args if v in varying and (v is args[1] or args[1] in tangent))
        elif not moving:
            continue
        elif name in _KEEPS_NEW:
            kept.update(map(_New, eqn.outvars))
        elif name in _KEEPS_OUTPUT:
            kept.update(eqn.outvars)
        elif name in _KEEPS_INPUT:
            kept.update(moving)
        elif name in _trace.CHECKPOINT_PRIMITIVES and not inline_checkpoints:
            kept.update(moving)  # and what its policy saves, which the bound leaves out
        elif name == "scan":
            kept.update(_scan_residuals(eqn, varying, tangent))
        elif name in _CALLS or name in _trace.CHECKPOINT_PRIMITIVES:
            inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
            inner = getattr(inner, "jaxpr", inner)
            if inner is not None and len(inner.invars) == len(eqn.invars):
                # An input kept inside is this one (a literal neither varies nor has a tangent).
                outer = {i: v for i, v in zip(inner.invars, eqn.invars) if not hasattr(v, "val")}
                inside = _residuals(
                    inner,
                    {i for i, v in outer.items() if v in varying},
                    {i for i, v in outer.items() if v in tangent},
                    [i for i, o in zip(inner.outvars, eqn.outvars) if o in live],
                )
                kept.update(outer.get(v, v) for v in inside)
    return kept


def _scan_residuals(eqn: Any, varying: set, tangent: set) -> set:
    """What differentiating a nested `jax.lax.scan` equation keeps, by `_residuals` of its body:
    a value of its own at each of its steps (`_Stacked`), and of its inputs those that vary
    (a slice kept keeps the whole `xs`)."""
    inner = eqn.params["jaxpr"].jaxpr
    n_consts, n_carry = scan_counts(eqn)
    outer = {i: v for i, v in zip(inner.invars, eqn.invars) if not hasattr(v, "val")}
    looped = inner.invars[n_consts:]
    inner_tangent = {i for i, v in outer.items() if v in tangent}
    if inner_tangent:  # the carry's tangent can come from any input, in a later step
        inner_tangent.update(i for i in looped[:n_carry] if _inexact(i))
    inside = _residuals(inner, {i for i, v in outer.items() if v in varying} | set(looped), inner_tangent)
    carry = set(looped[:n_carry])
    whole = {outer[v] for v in inside if v in outer and v not in carry and outer[v] in varying}
    return whole | {_Stacked(v, eqn.params["length"]) for v in inside if v in carry or v not in outer}


def step_bytes(body: _trace.Body) -> StepBytes | None:
    """The carry bytes and a lower bound of the bytes of one step's varying residuals, or None
    where the step was not traced into a jaxpr."""
    if body.jaxpr is None:
        return None
    jaxpr = body.jaxpr.jaxpr
    carry = jaxpr.invars[: len(jax.tree_util.tree_leaves(body.init))]
    # Every carry and slice is taken to have a tangent; a closed-over value, where it is seen to.
    tangent = {v for v in jaxpr.invars if _inexact(v)}
    tangent.update(v for v, seen in zip(jaxpr.constvars, body.differentiated) if seen)
    # A per-step checkpoint taken over (`Body.checkpoint`) is replayed without it: count inside.
    inline = body.checkpoint is not None
    residuals = _residuals(jaxpr, set(jaxpr.invars), tangent, inline_checkpoints=inline)
    residuals -= set(jaxpr.invars[len(carry) :])
    return StepBytes(sum(_nbytes(v.aval) for v in carry), sum(_nbytes(v.aval) for v in residuals))


def batch_size(tree: Any) -> int:
    """How many times `jax.vmap` around the call repeats what one call keeps: the product of the
    axes it maps the leaves of `tree` over (the largest of any leaf), through `jax.grad`'s and
    `jax.jvp`'s tracers; 1 outside `vmap`. A traced step has the shapes of one example."""
    most = 1
    for leaf in jax.tree_util.tree_leaves(tree):
        size = 1
        while isinstance(leaf, jax.core.Tracer):
            if hasattr(leaf, "primal"):  # jvp's and linearize's tracers
                leaf = leaf.primal
            elif hasattr(leaf, "batch_dim"):  # vmap's
                if isinstance(leaf.batch_dim, int):
                    size *= leaf.val.shape[leaf.batch_dim]
                leaf = leaf.val
            else:
                break
        most = max(most, size)
    return most


def negligible(body: _trace.Body, n: int, levels: Any, batch: int, limit: int) -> Fit | None:
    """One step per chunk where the memory at stake is negligible, else None (the memory rule,
    `fit`, decides). This is where the CPU trades memory for compile time.

    At stake is what one step per chunk (`jax.lax.scan(jax.checkpoint(f))`) keeps for the
    backward pass, by `kept`: `n` carries and one step's residuals, `batch` times (a `jax.vmap`
    around the call, `batch_size`). It is the most that the memory rule could save, and where it
    is `limit` bytes or less, one step per chunk is built whatever k: it compiles fastest under
    `jax.grad` (faster than `jax.lax.scan`; chunks of more steps compile up to 1.6x longer than
    `jax.lax.scan` eagerly, docs/benchmarks.md). None where `limit` is 0, where the step has no
    jaxpr, and where `levels` nest one step per chunk (they keep `fit`'s choice)."""
    if limit <= 0 or body.jaxpr is None or not one_level(levels, n):
        return None
    return Fit(1) if batch * kept(n, 1, step_bytes(body)) <= limit else None


def saving(n: int, sizes: StepBytes) -> int:
    """The most that checkpointing `n` steps saves, by `kept`: what a loop that checkpoints
    nothing keeps for the backward pass (every step's residuals) less what the checkpointed
    program that keeps least at one level keeps (one step per chunk: `n` carries and one
    step's residuals). Negative where a step's residuals are smaller than its carry."""
    return n * sizes.residuals - kept(n, 1, sizes)


def one_level(levels: Any, chunks: int) -> bool:
    """Whether `levels` over `chunks` chunks builds one level (no nesting)."""
    return _levels.built_levels(chunks, _levels.resolve(levels, chunks)) == 1


class Fit(NamedTuple):
    """The chunks to build: `size` steps each, and with `checkpoint_steps` every step of a chunk
    in `jax.checkpoint` of its own as well (blocks of checkpointed steps, see `fit`); without
    `checkpoint_chunks`, only the steps are (a policy per step, `_plan.chunk_size`)."""

    size: int
    checkpoint_steps: bool = False
    checkpoint_chunks: bool = True


def rolled_chunk_size(body: _trace.Body, n: int, k: int, levels: Any) -> Fit:
    """The chunks to build for a requested `k` (1 < k <= n) of rolled chunks checkpointed as a
    whole: `fit` for the step's `step_bytes`, or `k` where the step has no jaxpr. (A scan that
    nothing can differentiate is `jax.lax.scan` before it gets here: see `runtime._scan`.)"""
    if body.jaxpr is None:
        return Fit(k)
    return fit(n, k, levels, step_bytes(body))


def kept_in_blocks(n: int, b: int, sizes: StepBytes) -> int:
    """Bytes the backward pass keeps for `n` steps in checkpointed blocks of `b` rolled steps
    (`b` divides `n`), each step also checkpointed: a carry per block, and while a block is
    recomputed, a carry per step of it and the residuals of the one step differentiated."""
    return (n // b + b) * sizes.carry + sizes.residuals


def fit(n: int, k: int, levels: Any, sizes: StepBytes) -> Fit:
    """1 where `kept` says it keeps no more than k (k = n: one chunk of all n steps, with no
    loop); else the divisor of `n` below k that keeps least, where that is no more than k; else
    k where it divides `n`. Where k leaves steps over (a loop of its own, which compiles as
    long as the chunks' backward pass), blocks of a divisor `b` of `n` whose steps are each
    checkpointed too, where `kept_in_blocks` is no more than k keeps (the least of those: b
    near the square root of n); else `k`. Only sizes at one level of chunks are compared
    (`levels` that nest keep `k`).

    Each comparison holds for the true residuals wherever it holds for the lower bound: a
    candidate keeps fewer residuals than k does (d < k steps' worth, or one step's)."""
    if not one_level(levels, n // k):
        return Fit(k)
    budget = kept(n, k, sizes)
    fits = [d for d in range(1, k) if n % d == 0 and one_level(levels, n // d) and kept(n, d, sizes) <= budget]
    if 1 in fits:  # `jax.lax.scan(jax.checkpoint(f))`, which compiles fastest
        return Fit(1)
    if fits:
        return Fit(min(fits, key=lambda d: (kept(n, d, sizes), -d)))
    if n % k == 0:
        return Fit(k)
    blocks = [
        b
        for b in range(2, n)
        if n % b == 0 and one_level(levels, n // b) and kept_in_blocks(n, b, sizes) <= budget
    ]
    if blocks:
        return Fit(min(blocks, key=lambda b: (kept_in_blocks(n, b, sizes), -b)), checkpoint_steps=True)
    return Fit(k)


def slice_bytes(body: _trace.Body) -> int:
    """The bytes of one step's slice of `xs` and of its `ys`, or 0 where the step has no jaxpr."""
    if body.jaxpr is None:
        return 0
    jaxpr = body.jaxpr.jaxpr
    n_carry = len(jax.tree_util.tree_leaves(body.init))
    return sum(_nbytes(v.aval) for v in (*jaxpr.invars[n_carry:], *jaxpr.outvars[n_carry:]))


def kept_line(n: int, d: int, sizes: StepBytes, slices: int = 0) -> int:
    """Bytes the backward pass keeps for `n` steps in checkpointed chunks of `d` straight-line
    steps (the accelerators' layout): a carry per chunk and one entering the leftover steps (one
    checkpointed block of fewer than d), and while it recomputes a chunk, d steps' residuals.
    Leftover steps split `xs` and concatenate `ys`, whose cotangents XLA then copies: `slices`
    (the bytes of one step's x and y) for each of the `n` steps, where any are left over."""
    rest = n % d
    return (n // d + (1 if rest else 0)) * sizes.carry + d * sizes.residuals + (n * slices if rest else 0)


def line_chunk_size(n: int, k: int, levels: Any, sizes: StepBytes, slices: int = 0) -> Fit:
    """The straight-line chunks to build for a requested `k` (1 < k <= n) checkpointed as a
    whole: k where `kept_line` says it keeps no more than one step per chunk
    (`jax.lax.scan(jax.checkpoint(f))`, N carries and one step's residuals), else the largest
    size below k that does (1 at least). Unrolling is what makes a chunk faster there, so the
    largest size that fits is kept; the memory of per-step checkpointing is the bound, since
    that is what a user gets from `jax.checkpoint` in one line.

    Unlike the rolled fit, a size d > 1 keeps more residuals than one step, so where the lower
    bound says d keeps no more, the true residuals may still keep more; where it says d keeps
    more (big blocks, whose residuals are many carries), it certainly does, and 1 is built."""
    limit = kept_line(n, 1, sizes)
    for d in range(k, 1, -1):
        if one_level(levels, n // d) and kept_line(n, d, sizes, slices) <= limit:
            return Fit(d)
    return Fit(1)
