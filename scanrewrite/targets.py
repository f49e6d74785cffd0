"""The scan APIs that scanrewrite knows, as data.

Each row names an API by its qualified name (and the short name `--targets` selects it
by), the runtime function that replaces it, and the parameters of that replacement. The
replacement mirrors the original's signature and only adds keyword-only options, so every
call the original accepts binds the same way after the rewrite. The codemod uses the
parameter lists to tell whether a call already passes `unroll` (positionally or by keyword),
whether a `*args` or `**kwargs` could carry it, and whether the replacement takes a
`checkpoint` or `levels` option (`levels` only where the runtime nests its own
checkpointed loop: `eqxi_scan` delegates that to equinox, so an `eqxi.scan` call gets none).
Adding an API is adding a row. `lax.fori_loop` and `lax.map` are rewritten only on request
(`default=False`): they are as often loops that are never differentiated (a sampler, an
optimizer), which checkpointing does not help.

This module is pure data (and the check of a selection): it must not import jax.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One recognised scan API and the runtime function that replaces it."""

    #: The name `--targets` selects it by, e.g. ``"lax.scan"``.
    name: str
    #: The qualified name the call must resolve to, e.g. ``"jax.lax.scan"``.
    qualified_name: str
    #: The dotted name written in its place, e.g. ``"scanrewrite.runtime.scan"``.
    replacement: str
    #: The replacement's positional-or-keyword parameters, in order. Where the original takes
    #: `unroll` by position, the replacement names that position `_unroll` (here `unroll`) and
    #: takes `unroll` by keyword only too, so that ``unroll=`` in a `functools.partial` and an
    #: unroll a later call passes by position do not collide.
    params: tuple[str, ...]
    #: The replacement's keyword-only parameters.
    keyword_only: tuple[str, ...]
    #: Those of them the original does not take: no call of the original passes them,
    #: not even through ``**kwargs``.
    added: tuple[str, ...] = ()
    #: Whether it is rewritten when no selection is given.
    default: bool = True
    #: The parameter that takes the function run at every step.
    body: str = "f"
    #: The extras of the `scanrewrite` distribution that the replacement needs at run time
    #: (`[project.optional-dependencies]` in its `pyproject.toml`): a project whose code is
    #: rewritten must depend on `scanrewrite[...]` with these.
    extras: tuple[str, ...] = ("runtime",)


TARGETS: tuple[Target, ...] = (
    Target(
        name="lax.scan",
        qualified_name="jax.lax.scan",
        replacement="scanrewrite.runtime.scan",
        params=("f", "init", "xs", "length", "reverse", "unroll", "_split_transpose"),
        keyword_only=("unroll", "checkpoint", "levels", "store"),
        added=("checkpoint", "levels", "store"),
    ),
    Target(
        name="eqxi.scan",
        qualified_name="equinox.internal.scan",
        replacement="scanrewrite.runtime.eqxi_scan",
        params=("f", "init", "xs", "length"),
        keyword_only=("buffers", "kind", "checkpoints", "unroll", "store"),
        added=("unroll", "store"),
    ),
    Target(
        name="lax.fori_loop",
        qualified_name="jax.lax.fori_loop",
        replacement="scanrewrite.runtime.fori_loop",
        params=("lower", "upper", "body_fun", "init_val"),
        keyword_only=("unroll", "checkpoint", "levels", "store"),
        added=("checkpoint", "levels", "store"),
        default=False,
        body="body_fun",
    ),
    Target(
        name="lax.map",
        qualified_name="jax.lax.map",
        replacement="scanrewrite.runtime.map",
        params=("f", "xs"),
        keyword_only=("batch_size", "unroll", "checkpoint", "levels", "store"),
        added=("unroll", "checkpoint", "levels", "store"),
        default=False,
    ),
    Target(
        name="nnx.scan",
        qualified_name="flax.nnx.scan",
        replacement="scanrewrite.runtime.nnx_scan",
        params=("f",),
        keyword_only=(
            "length", "reverse", "unroll", "_split_transpose", "in_axes", "out_axes", "transform_metadata",
            "graph", "graph_updates", "checkpoint", "levels", "store",
        ),  # fmt: skip
        added=("checkpoint", "levels", "store"),
        default=False,
        extras=("runtime", "flax"),
    ),
    Target(
        name="linen.scan",
        qualified_name="flax.linen.scan",
        replacement="scanrewrite.runtime.linen_scan",
        params=(
            "target", "variable_axes", "variable_broadcast", "variable_carry", "split_rngs", "in_axes", "out_axes",
            "length", "reverse", "unroll", "data_transform", "metadata_params", "methods", "_split_transpose",
            "check_constancy_invariants",
        ),  # fmt: skip
        keyword_only=("unroll", "checkpoint", "levels", "store"),
        added=("checkpoint", "levels", "store"),
        default=False,
        body="target",
        extras=("runtime", "flax"),
    ),
)

#: The names a selection is made of, in the table's order.
TARGET_NAMES: tuple[str, ...] = tuple(target.name for target in TARGETS)
#: The selection when none is given.
DEFAULT_TARGETS: tuple[str, ...] = tuple(target.name for target in TARGETS if target.default)


def select(names: str | Iterable[str]) -> tuple[Target, ...]:
    """The targets named, in the table's order; `names` may be one comma-separated string.

    Raises `ValueError`, one line, for a name not in `TARGET_NAMES` (with the closest one,
    if any) and for an empty selection.
    """
    if isinstance(names, str):
        names = names.split(",")
    wanted = {name.strip() for name in names} - {""}
    unknown = sorted(wanted - set(TARGET_NAMES))
    if unknown:
        close = difflib.get_close_matches(unknown[0], TARGET_NAMES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown target {unknown[0]!r}{hint}; the targets are {', '.join(TARGET_NAMES)}")
    if not wanted:
        raise ValueError(f"no targets given; the targets are {', '.join(TARGET_NAMES)}")
    return tuple(target for target in TARGETS if target.name in wanted)


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
#: The runtime's own policies (`scanrewrite.runtime.NAME`, `scanrewrite.runtime._policies`):
#: they keep the outputs of reductions, alone or beside a dots policy.
RUNTIME_POLICIES: tuple[str, ...] = (
    "reductions_saveable",
    "dots_with_no_batch_dims_and_reductions_saveable",
    "dots_and_reductions_saveable",
)
#: Every policy a name stands for, jax's and the runtime's.
ALL_POLICIES: tuple[str, ...] = (*CHECKPOINT_POLICIES, *RUNTIME_POLICIES)
