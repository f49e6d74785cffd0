"""The scan APIs that scanrewrite knows, as data.

Each row names an API by its qualified name, the runtime function that replaces it,
and the parameters of that replacement. The replacement mirrors the original's
signature and only adds keyword-only options, so every call the original accepts
binds the same way after the rewrite. The codemod uses the parameter lists to tell
whether a call already passes `unroll` (positionally or by keyword), whether a
`*args` or `**kwargs` could carry it, and whether the replacement takes a
`checkpoint` or `levels` option (`levels` only where the runtime nests its own
checkpointed loop: `eqxi_scan` delegates that to equinox, so an `eqxi.scan` call gets none).
Adding an API is adding a row.

This module is pure data: it must not import jax.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One recognised scan API and the runtime function that replaces it."""

    #: The qualified name the call must resolve to, e.g. ``"jax.lax.scan"``.
    qualified_name: str
    #: The dotted name written in its place, e.g. ``"scanrewrite.runtime.scan"``.
    replacement: str
    #: The replacement's positional-or-keyword parameters, in order.
    params: tuple[str, ...]
    #: The replacement's keyword-only parameters.
    keyword_only: tuple[str, ...]
    #: Those of them the original does not take: no call of the original passes them,
    #: not even through ``**kwargs``.
    added: tuple[str, ...] = ()
    #: The parameter that takes the function run at every step.
    body: str = "f"


TARGETS: tuple[Target, ...] = (
    Target(
        qualified_name="jax.lax.scan",
        replacement="scanrewrite.runtime.scan",
        params=("f", "init", "xs", "length", "reverse", "unroll", "_split_transpose"),
        keyword_only=("checkpoint", "levels"),
        added=("checkpoint", "levels"),
    ),
    Target(
        qualified_name="equinox.internal.scan",
        replacement="scanrewrite.runtime.eqxi_scan",
        params=("f", "init", "xs", "length"),
        keyword_only=("buffers", "kind", "checkpoints", "unroll"),
        added=("unroll",),
    ),
)

#: Names in `jax.checkpoint_policies` that are policies themselves. The others there
#: (`save_only_these_names`, `offload_dot_with_no_batch_dims`, ...) are factories that
#: need arguments, so `checkpoint=jax.checkpoint_policies.NAME` would be wrong for them.
CHECKPOINT_POLICIES: tuple[str, ...] = (
    "checkpoint_dots",
    "checkpoint_dots_with_no_batch_dims",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "everything_saveable",
    "nothing_saveable",
)
