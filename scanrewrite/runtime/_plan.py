"""One plan per runtime call: what its program will be, decided before any of it is built, and why.

A call is planned in two steps. `request` reads the call (its settings, resolved for its site,
the layout of the backend, what can differentiate its inputs) into a `Request`: everything the
staging needs, and the staging key itself. Once the staged function has traced the step (the
chunk size is fitted to the step's carry and residuals, which only its jaxpr tells), `make`
decides the rest into a `Plan`: how many steps run where, in chunks of what size, checkpointed
how, at how many levels, and a reason for each choice. `_program` then builds exactly the plan.

The chunk size is decided in one place, `chunk_size`.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import jax

from scanrewrite.runtime import _levels, _memory, _policies, _trace
from scanrewrite.runtime._chunks import Layout
from scanrewrite.runtime._staging import Staging, how_staged
from scanrewrite.runtime._validate import chunk_size as requested_chunk_size
from scanrewrite.settings import DEFAULTS, Settings

__all__ = ["Plan", "Program", "Request", "chunk_size", "loop_plan", "make", "request"]


class Request(NamedTuple):
    """What a call asks for: its API, static arguments, backend layout and resolved settings.

    Hashable wherever its settings are (a policy that is not is not), and the key on which the
    call's staged program is cached: everything here decides the program, and nothing else
    does but `f` and the input types. (Tests read `constant_inputs` and `forward` as entries
    5 and 6 of the key.)
    """

    #: `"scan"` or `"eqxi_scan"` (`fori_loop` and `map` are `scan`s).
    api: str
    length: Any
    reverse: bool
    split_transpose: bool
    layout: Layout
    #: The inputs are arrays (or `vmap`'s tracers of them): nothing differentiates the call.
    constant_inputs: bool
    #: Nor anything around it, so nothing differentiates a scan inside `f` either.
    forward: bool
    unroll: Any
    checkpoint: Any
    levels: Any
    store: int
    #: `eqxi_scan`'s own: its `kind`, `checkpoints` and `buffers` (None for `scan`).
    kind: str | None = None
    checkpoints: Any = None
    buffers: Any = None
    #: How many times `jax.vmap` around the call repeats what one call keeps
    #: (`_memory.batch_size`), where the layout weighs negligible memory; else 1.
    batch: int = 1
    #: A per-step remat of the user's was taken over before the call (inside Flax's step).
    remat: bool = False

    @property
    def whole(self) -> bool:
        """Whether the program is `jax.lax.scan` of `f` (traced once, replayed nowhere): on the
        rolled layout, where nothing can differentiate the call, or nothing is checkpointed."""
        return self.kind is None and self.layout.rolled_chunk and (self.forward or self.checkpoint is False)

    @property
    def staging(self) -> Staging:
        """How the call is staged (`_staging.Staging`); `why_staged` says why."""
        if not self.layout.rolled_chunk:
            return Staging.CACHED
        if self.whole:
            return Staging.ONCE_BY_PROGRAM
        # Equinox hands `f` its `buffers` wrapped, so `f` must trace on them: not by structure.
        return Staging.ONCE_IN_PLACE if self.buffers is not None else Staging.ONCE_BY_STEP


_WHY_STAGED = {
    Staging.CACHED: "a jitted program cached on f, as jax.lax.scan caches its body",
    Staging.ONCE_IN_PLACE: (
        "cached on f; an f staged for one call only (made anew, or unhashable) is traced in place, "
        "since equinox hands it its buffers wrapped"
    ),
    Staging.ONCE_BY_STEP: (
        "cached on f; an f made anew on every call is looked up by the structure of its traced step"
    ),
    Staging.ONCE_BY_PROGRAM: (
        "cached on f; an f made anew on every call is looked up by the structure of its whole program, "
        "one loop of the step"
    ),
}


def request(api: str, settings: Settings, length: Any, reverse: bool, split_transpose: bool,
            layout: Layout, init: Any, xs: Any, *, kind: str | None = None, checkpoints: Any = None,
            buffers: Any = None, remat: bool = False) -> Request:  # fmt: skip
    """The `Request` of a call on `(init, xs)` with its resolved `settings` (validated before,
    every one given: `_call.check`)."""
    if kind == "checkpointed":
        # Equinox's loop checkpoints; nothing of what the inputs are changes the program.
        constant_inputs = forward = False
    else:
        # Called on arrays (or vmap's tracers of them), not on a differentiating transformation's.
        constant_inputs = _trace.undifferentiated((init, xs))
        # Nothing around the call differentiates it, so nothing differentiates a scan inside `f`:
        # those build what they build on arrays, as this one does (`_trace.forward_only`).
        forward = _trace.forward_only((init, xs))
    # What one call keeps, `jax.vmap` around it repeats; its trace of `f` cannot tell.
    batch = _memory.batch_size((init, xs)) if layout.negligible_bytes or layout.negligible_saving else 1
    return Request(
        api, length, reverse, split_transpose, layout, constant_inputs, forward,
        settings.unroll, settings.checkpoint, settings.levels, settings.store,
        kind, checkpoints, buffers, batch, remat,
    )  # fmt: skip


class Program(enum.Enum):
    """The shape of the program a plan builds."""

    CHUNKS = "checkpointed chunks"
    LOOP = "jax.lax.scan of the step"
    EQUINOX = "equinox.internal.scan over chunks"


class Plan(NamedTuple):
    """Everything a call's program is, decided before it is built (`make`), with the reasons.

    The steps run in loop order as: `steps - store` steps in `chunk`-step chunks (and the
    leftover steps, and `levels` nested levels), then `store` steps whose residuals are kept.
    """

    api: str
    program: Program
    #: N, the steps of the scan.
    steps: int
    #: The chunk size the call asked for (`unroll`, as steps of the checkpointed part).
    requested: int
    #: The chunk size built.
    chunk: int
    #: Each step of a chunk is checkpointed too (blocks of checkpointed steps, `_memory.Fit`).
    checkpoint_steps: bool
    #: Each chunk is checkpointed (not where only its steps are: a policy per step).
    checkpoint_chunks: bool
    #: What checkpoints each chunk: True, False, a policy; equinox's loop for `Program.EQUINOX`.
    checkpoint: Any
    #: The last steps in loop order whose residuals are kept (not checkpointed).
    store: int
    #: The levels of nested checkpointing built over the chunks.
    levels: int
    layout: Layout
    staging: Staging
    #: Why each choice was made, one sentence each.
    reasons: tuple[str, ...]

    def describe(self) -> str:
        """The plan in one line: what was built, then why."""
        if self.program is Program.LOOP:
            what = f"{self.program.value}, {self.steps} steps"
        elif self.store == self.steps:
            what = "every step stored, " + ("a plain loop" if self.layout.rolled_chunk else "straight-line")
        else:
            layout = "rolled" if self.layout.rolled_chunk else "straight-line"
            what = f"{self.program.value} of {self.chunk} {layout} steps (asked {self.requested})"
            if self.checkpoint_steps:
                what += ", each step checkpointed too" if self.checkpoint_chunks else ", each step checkpointed alone"
            what += f", checkpoint={_name(self.checkpoint)}, levels={self.levels}"
        what += f", store={self.store} of {self.steps}"
        return f"{what}. Why: " + "; ".join(self.reasons) + "."


def _name(checkpoint: Any) -> str:
    return checkpoint if isinstance(checkpoint, str) else getattr(checkpoint, "__name__", repr(checkpoint))


def _why_staged(req: Request) -> str:
    how = how_staged()
    return f"staged {how}; the rule: {_WHY_STAGED[req.staging]}" if how else _WHY_STAGED[req.staging]


def loop_plan(req: Request, n: int, why: str) -> Plan:
    """The plan of a call built as `jax.lax.scan` of its step, for the reason `why`."""
    return Plan(req.api, Program.LOOP, n, 1, 1, False, True, False, 0, 1, req.layout, req.staging,
                (why, _why_staged(req)))  # fmt: skip


def chunk_size(req: Request, body: _trace.Body, n: int, checkpoint: Any) -> tuple[_memory.Fit, str]:
    """The chunks to build for the `n` checkpointed steps of a call, checkpointed with
    `checkpoint` (after a per-step checkpoint taken over), and why.

    The requested k (`unroll`), except where the layout fits it to the step: with
    `checkpoint=True` and one level, on the rolled layout (XLA:CPU) the size that keeps no more
    memory than k and compiles faster (`_memory.rolled_chunk_size`); on the straight-line layout
    (accelerators) the largest size up to k that keeps no more memory than one step per chunk,
    `jax.lax.scan(jax.checkpoint(f))` (`_memory.line_chunk_size`), and with a policy at one
    level, chunks of k whose steps are each checkpointed with it (the chunks are not)."""
    k = requested_chunk_size(req.unroll, n)
    if req.kind == "checkpointed":
        return _memory.Fit(k), f"chunks of {k} as asked: equinox's loop over them checkpoints"
    if k == 1:
        return _memory.Fit(1), "one step per chunk as asked: jax.lax.scan(jax.checkpoint(f))"
    if not req.layout.fit_chunk:
        return _memory.Fit(k), f"chunks of {k} as asked (a layout pinned without fitting)"
    policy = checkpoint is not True and checkpoint is not False
    if policy and not req.layout.rolled_chunk and _memory.one_level(req.levels, n // k):
        # A policy saves the same values of a step around it as around its chunk, and the
        # backward pass then recomputes one step at a time instead of a chunk's: less memory,
        # the same work: the for-loop's `jax.checkpoint(f, policy=...)` at `unroll=True`.
        why = f"chunks of {k} as asked, each step checkpointed alone with the policy and the chunks not: "
        why += "the policy saves the same values per step, and the backward pass recomputes a step at a time"
        return _memory.Fit(k, checkpoint_steps=True, checkpoint_chunks=False), "straight-line layout: " + why
    if checkpoint is not True:
        return _memory.Fit(k), f"chunks of {k} as asked: the fit counts whole-chunk checkpoints, not a policy's"
    if body.jaxpr is None:
        return _memory.Fit(k), f"chunks of {k} as asked: the step has no jaxpr to count"
    if not _memory.one_level(req.levels, n // k):
        return _memory.Fit(k), f"chunks of {k} as asked: levels that nest are not fitted"
    sizes = _memory.step_bytes(body)
    count = f"by the count of the step's residuals ({sizes.residuals} bytes a step, {sizes.carry} of carry)"
    if req.layout.rolled_chunk:
        if _memory.negligible(body, n, req.levels, req.batch, req.layout.negligible_bytes):
            at_stake = req.batch * _memory.kept(n, 1, sizes)
            why = f"fitted to 1: what one step per chunk keeps ({at_stake} bytes: {n} carries and a step's "
            why += f"residuals) is negligible, at most {req.layout.negligible_bytes} bytes, and it compiles fastest"
            return _memory.Fit(1), "rolled layout (XLA:CPU): " + why
        fit = _memory.fit(n, k, req.levels, sizes)
        if fit.checkpoint_steps:
            why = f"fitted to blocks of {fit.size} checkpointed steps: chunks of {k} leave steps over, "
            why += f"and the blocks keep no more {count}"
        elif fit.size == 1:
            why = f"fitted to 1: keeps no more than chunks of {k} {count}, and compiles fastest"
        elif fit.size != k:
            why = f"fitted to {fit.size}, a divisor of {n}: keeps no more than chunks of {k} {count}"
        else:
            why = f"chunks of {k} as asked: nothing that compiles faster keeps as little {count}"
        return fit, "rolled layout (XLA:CPU): " + why
    fit = _memory.line_chunk_size(n, k, req.levels, sizes, _memory.slice_bytes(body))
    if fit.size == k:
        why = f"chunks of {k} as asked: they keep no more than per-step checkpointing {count}"
    else:
        why = f"fitted to {fit.size}: chunks of {k} keep more than per-step checkpointing {count}"
    return fit, "straight-line layout: " + why


def _keeping(req: Request, body: _trace.Body, checkpoint: Any, fit: _memory.Fit | None, rest: int) -> tuple[Any, list[str]]:
    """The checkpoint to build for chunks `fit` of the `rest` checkpointed steps, and why: one of
    `_policies`' resolved for the step (`_policies.resolve`), and where the layout keeps
    reductions by default, `checkpoint=True` made `reductions_saveable` if that keeps the
    step's maxima (sums alone did not pay: a Flax stack ran at 1.19x on a TPU v5e). A per-step
    checkpoint the user wrote (`jax.checkpoint`, a Flax remat) keeps what it says, nothing:
    with reductions kept, Flax GPT-style stacks over remat ran at 1.07x (NNX's attention) and
    0.94x (Linen's) on a TPU v5e."""
    users = body.checkpoint is not None or req.remat
    default = checkpoint is True and req.layout.keeps_reductions and not users and _policies.has_reductions(body.jaxpr)
    policy = _policies.reductions_saveable if default else checkpoint
    # A carry recomputed inside a checkpointed chunk (or leftover group) of several steps is the
    # next step's input; one step alone gets its carry saved, as the forward pass made it.
    crossing = fit is not None and (
        (fit.size > 1 and fit.checkpoint_chunks) or (rest % fit.size > 1 and not req.layout.rolled_rest)
    )
    built, why = _policies.resolve(policy, body.jaxpr, len(jax.tree_util.tree_leaves(body.init)) if crossing else 0)
    if not default:
        return built, [why] if why is not None else []
    if built is policy:
        return True, [f"checkpoint=True keeps nothing by default: {why}"]
    return built, [f"checkpoint=True keeps the step's reductions on this layout: {why}"]


def unneeded(req: Request, body: _trace.Body, n: int) -> tuple[bool, str] | None:
    """Whether checkpointing the call would save only negligible memory, and why; None where the
    call asked for more than the default: anything but `checkpoint=True` (written or not: the
    runtime cannot tell), one level and nothing stored, a per-step checkpoint around `f` (or a
    remat in Flax's step), or `equinox.internal.scan(kind="checkpointed")`. Negligible is
    `_memory.saving` (times `req.batch`) of at most the layout's `negligible_saving`, by the
    count of the step's carry and residuals."""
    asked = Settings(checkpoint=req.checkpoint, levels=req.levels, store=req.store).changes(DEFAULTS)
    asked = asked or body.checkpoint is not None or req.remat
    if asked or req.kind is not None or not req.layout.negligible_saving or body.jaxpr is None:
        return None
    sizes = _memory.step_bytes(body)
    saved = req.batch * _memory.saving(n, sizes)
    count = f"{max(saved, 0)} bytes ({n} steps' residuals of {sizes.residuals} bytes against {n} carries of {sizes.carry})"
    if saved > req.layout.negligible_saving:
        return False, f"checkpointed: it saves {count}, more than the negligible {req.layout.negligible_saving}"
    return True, f"not checkpointed: it would save {count}, at most {req.layout.negligible_saving}, negligible"


def make(req: Request, body: _trace.Body, n: int) -> Plan:
    """The plan for `n > 0` steps of the traced `body` (where `req.whole` is not the plan)."""
    negligible, why = unneeded(req, body, n) or (False, None)
    if negligible and req.layout.rolled_chunk:
        return loop_plan(req, n, "rolled layout, " + why)
    if negligible:
        k = requested_chunk_size(req.unroll, n)
        return Plan(req.api, Program.CHUNKS, n, k, k, False, True, False, 0, 1, req.layout, req.staging,
                    ("straight-line layout, " + why, _why_staged(req)))  # fmt: skip
    reasons = [why] if why else []
    checkpoint = req.checkpoint
    if body.checkpoint is not None and checkpoint is not False:
        # The chunks take over a per-step checkpoint around `f`, and its policy where the call
        # names none: checkpointing each step inside a checkpointed chunk again would recompute
        # every step twice in the backward pass.
        taken = checkpoint is True
        checkpoint = body.checkpoint if taken else checkpoint
        reasons.append(
            f"a per-step checkpoint around f is taken over by the chunks (policy {_name(body.checkpoint)}"
            f"{'' if taken else ', the call names its own'})"
        )
    if req.kind == "checkpointed":
        store = 0
    else:
        store = min(req.store, n)
        if store:
            reasons.append(
                f"the last {store} steps in loop order keep their residuals (store={req.store}): "
                f"{'straight-line' if not req.layout.rolled_chunk else 'a plain loop'}, not checkpointed"
            )
    rest = n - store
    fit, fit_why = chunk_size(req, body, rest, checkpoint) if rest else (None, None)
    checkpoint, why = _keeping(req, body, checkpoint, fit, rest)
    reasons.extend(why)
    if req.kind == "checkpointed":
        checkpoint = "equinox"
    if rest == 0:
        return Plan(req.api, Program.CHUNKS, n, 0, 0, False, True, checkpoint, store, 0, req.layout, req.staging,
                    (*reasons, "every step is stored: the for-loop's own program", _why_staged(req)))  # fmt: skip
    reasons.append(fit_why)
    k = requested_chunk_size(req.unroll, rest)
    if req.kind == "checkpointed":
        levels = 1
    else:
        chunks = rest // fit.size
        levels = _levels.built_levels(chunks, _levels.resolve(req.levels, chunks))
        if levels > 1:
            reasons.append(f"{levels} levels over {chunks} chunks (levels={req.levels!r})")
    program = Program.EQUINOX if req.kind == "checkpointed" else Program.CHUNKS
    reasons.append(_why_staged(req))
    return Plan(req.api, program, n, k, fit.size, fit.checkpoint_steps, fit.checkpoint_chunks, checkpoint, store,
                levels, req.layout, req.staging, tuple(reasons))  # fmt: skip
