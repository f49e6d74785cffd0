"""`nnx_scan` and `linen_scan`: Flax's scan-over-layers transforms, with the loop chunked.

Both run Flax's own transform (`flax.nnx.scan`, `flax.linen.scan`) on a shadow of its module
(`_reroute`) whose `jax.lax.scan` is the runtime's `scan`: Flax builds the same parameter tree,
splits the RNG streams per step, stacks and updates variables and handles `Carry`, `StateAxes`,
broadcasts and `sow` exactly as it does unrewritten, and only the loop over the stacked arrays
runs as checkpointed chunks of `unroll` straight-line steps. Flax is imported when they are
called, never when the runtime is.

A per-step `nnx.remat`, `nn.remat` or `nn.checkpoint` of the scanned function is a checkpoint
equation inside Flax's step, beside Flax's own bookkeeping; it is taken off the step and its
policy handed to the chunks (`_absorb`), as `scan` does for a step that is only a checkpoint.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal

from scanrewrite.runtime import _override
from scanrewrite.settings import ORIGINAL, Settings

__all__ = ["linen_scan", "nnx_scan"]


def _scan_for(site: _override.Site | None, api: str, written: Settings) -> Callable:
    """The `jax.lax.scan` a shadow of Flax calls: the runtime's, with the settings this call of
    `api` wrote (resolved when the loop is traced, where an `override` may be in force)."""
    from scanrewrite.runtime import _call
    from scanrewrite.runtime._flax_absorb import absorb

    def scan(f, init, xs=None, length=None, reverse=False, unroll_=1, _split_transpose=False, **kwargs):
        # Flax passes its own `unroll` (by keyword): the rewrite's `unroll` is the one that counts.
        del unroll_, kwargs
        settings = _override.resolve(site, written, api=api)
        note, remat = None, False
        if settings.checkpoint is not False and settings.unroll is not ORIGINAL:
            f, policy = absorb(f, init, xs)
            if policy is not None:
                note = f"a per-step remat inside Flax's step (policy {getattr(policy, '__name__', policy)}) is taken over"
                # The user asked for recomputation: checkpointed whatever it saves (`_plan.unneeded`).
                remat = True
                if settings.checkpoint is True:
                    settings = dataclasses.replace(settings, checkpoint=policy)
                    note += " by the chunks"
                else:
                    note += "; the call's own checkpoint wins"
        return _call.scan(f, init, xs, length, reverse, _split_transpose, settings, site, note, remat)

    return scan


class _Default:
    """An argument not given: Flax's default applies (its defaults are Flax's objects)."""

    def __repr__(self) -> str:
        return "<Flax's default>"


_DEFAULT: Any = _Default()


def _given(**arguments: Any) -> dict[str, Any]:
    return {name: value for name, value in arguments.items() if value is not _DEFAULT}


def nnx_scan(
    f: Any = _DEFAULT,
    *,
    length: int | None = _DEFAULT,
    reverse: bool = _DEFAULT,
    unroll: int | bool = 1,
    _split_transpose: bool = _DEFAULT,
    in_axes: Any = _DEFAULT,
    out_axes: Any = _DEFAULT,
    transform_metadata: Mapping[str, Any] = _DEFAULT,
    graph: bool | None = _DEFAULT,
    graph_updates: bool | None = _DEFAULT,
    checkpoint: bool | Callable[..., Any] = True,
    levels: int | Literal["auto"] = 1,
    store: int = 0,
) -> Any:
    """As `flax.nnx.scan`, with the loop computed as checkpointed chunks of `unroll` steps.

    **Arguments:**

    - `f`, `length`, `reverse`, `_split_transpose`, `in_axes`, `out_axes`,
        `transform_metadata`, `graph`, `graph_updates`: As `flax.nnx.scan`, passed to it
        unchanged where given (so a Flax without `graph` works as long as it is not passed).
        Without `f`, a decorator, as `flax.nnx.scan(in_axes=...)` is.
    - `unroll`, `checkpoint`, `levels`, `store`: As `scanrewrite.runtime.scan`. `unroll` is
        the chunk size; Flax's own loop is not unrolled.

    **Returns:**

    What `flax.nnx.scan` returns: the same parameters, random numbers, state updates, outputs
    and gradients, for the same arguments.
    """
    import flax.nnx.transforms.iteration as iteration

    from scanrewrite.runtime._reroute import shadow

    site = _override.call_site()
    module = shadow(iteration, _scan_for(site, "nnx_scan", Settings(unroll, checkpoint, levels, store)))
    kwargs = _given(
        length=length, reverse=reverse, _split_transpose=_split_transpose, in_axes=in_axes, out_axes=out_axes,
        transform_metadata=transform_metadata, graph=graph, graph_updates=graph_updates,
    )  # fmt: skip
    return module.scan(**kwargs) if f is _DEFAULT else module.scan(f, **kwargs)


def linen_scan(
    target: Any,
    variable_axes: Mapping[Any, Any] = _DEFAULT,
    variable_broadcast: Any = _DEFAULT,
    variable_carry: Any = _DEFAULT,
    split_rngs: Mapping[Any, bool] = _DEFAULT,
    in_axes: Any = _DEFAULT,
    out_axes: Any = _DEFAULT,
    length: int | None = _DEFAULT,
    reverse: bool = _DEFAULT,
    _unroll: int | bool | None = None,
    data_transform: Callable[..., Any] | None = _DEFAULT,
    metadata_params: Mapping[Any, Any] = _DEFAULT,
    methods: Any = _DEFAULT,
    _split_transpose: bool = _DEFAULT,
    check_constancy_invariants: bool = _DEFAULT,
    *,
    unroll: int | bool = 1,
    checkpoint: bool | Callable[..., Any] = True,
    levels: int | Literal["auto"] = 1,
    store: int = 0,
) -> Any:
    """As `flax.linen.scan`, with the loop computed as checkpointed chunks of `unroll` steps.

    **Arguments:**

    - `target` and every other argument of `flax.linen.scan` (`variable_axes`, `split_rngs`,
        `in_axes`, `length`, `methods`, `data_transform`, ...), in its order: As
        `flax.linen.scan`, passed to it unchanged where given (so a Flax without
        `check_constancy_invariants` works as long as it is not passed).
    - `unroll`, `checkpoint`, `levels`, `store`: As `scanrewrite.runtime.scan` (`unroll` is the
        chunk size, not Flax's). `unroll` by position (`flax.linen.scan`'s tenth argument,
        `_unroll`) wins over `unroll=`, as in `scan`.

    **Returns:**

    What `flax.linen.scan` returns (a module class, or a function of a module): `init` with the
    same seed gives the same parameters, and `apply` the same outputs, state and gradients.
    """
    import flax.core.axes_scan as axes_scan
    import flax.core.lift as lift
    import flax.linen.transforms as transforms

    from scanrewrite.runtime._reroute import shadow

    site = _override.call_site()
    written = Settings(unroll if _unroll is None else _unroll, checkpoint, levels, store)
    scan = _scan_for(site, "linen_scan", written)
    shadow_lift = shadow(lift, scan, {"axes_scan": shadow(axes_scan, scan)})
    module = shadow(transforms, scan, {"lift": shadow_lift})
    kwargs = _given(
        variable_axes=variable_axes, variable_broadcast=variable_broadcast, variable_carry=variable_carry,
        split_rngs=split_rngs, in_axes=in_axes, out_axes=out_axes, length=length, reverse=reverse,
        data_transform=data_transform, metadata_params=metadata_params, methods=methods,
        _split_transpose=_split_transpose, check_constancy_invariants=check_constancy_invariants,
    )  # fmt: skip
    return module.scan(target, **kwargs)
