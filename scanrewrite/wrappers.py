"""The per-step checkpoint wrappers that scanrewrite recognises around a scanned function, as data.

A user who scans `jax.checkpoint(step)` already asked for each step to be recomputed in
the backward pass; the runtime checkpoints whole chunks instead, so it takes over the
wrapper at trace time rather than recompute every step twice. The codemod only
recognises the wrapper (to report it, and to leave alone what the runtime cannot take
over): each row names an API by its qualified name and sorts its options into those
the runtime carries over to its chunks and those it cannot.

This module is pure data: it must not import jax.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wrapper:
    """One recognised per-step checkpoint API."""

    #: The qualified name the wrapper must resolve to, e.g. ``"jax.checkpoint"``.
    qualified_name: str
    #: Keyword options the runtime carries over (a `policy`) or has no use for (`prevent_cse`).
    carried: tuple[str, ...]
    #: Keyword options it cannot carry over, unless they have their do-nothing value
    #: (`()`, `[]` or `False`).
    uncarried: tuple[str, ...] = ()
    #: Whether a call without the function returns a decorator, `eqx.filter_checkpoint(policy=p)`.
    factory: bool = False


_JAX_CARRIED = ("prevent_cse", "policy")
_JAX_UNCARRIED = ("static_argnums", "static_argnames", "concrete")

WRAPPERS: tuple[Wrapper, ...] = (
    Wrapper("jax.checkpoint", _JAX_CARRIED, _JAX_UNCARRIED),
    Wrapper("jax.remat", _JAX_CARRIED, _JAX_UNCARRIED),
    # Removed in jax 0.10, still in code written for older versions.
    Wrapper("jax.ad_checkpoint.checkpoint", _JAX_CARRIED, _JAX_UNCARRIED),
    Wrapper("jax.ad_checkpoint.remat", _JAX_CARRIED, _JAX_UNCARRIED),
    Wrapper("equinox.filter_checkpoint", ("prevent_cse", "policy"), factory=True),
)

#: What binds a wrapper's options ahead of the function, `functools.partial(jax.checkpoint, policy=p)`.
PARTIAL = "functools.partial"
