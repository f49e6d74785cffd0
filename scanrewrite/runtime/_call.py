"""From a call's resolved settings to its running program: validate, request, stage, run.

The public functions (`scanrewrite.runtime.scan`, `eqxi_scan`, `fori_loop`, `map`, the Flax
scans) resolve their settings for their call site (`_override.resolve`) and hand them here:

    settings -> checks -> _plan.request -> _staging.staged(f, request, _program.program, path)
             -> the staged program on (init, xs), which plans (`_plan.make`) and builds

`ORIGINAL` and a scan of no steps run the call they replaced, unplanned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from scanrewrite.runtime import _chunks, _levels, _override, _plan, _program, _staging
from scanrewrite.runtime._compat import lax_unroll, typeof
from scanrewrite.runtime._validate import check_checkpoint, check_store, check_unroll, scan_length
from scanrewrite.settings import DEFAULTS, ORIGINAL, Settings

__all__ = ["eqxi_scan", "scan"]


def check(settings: Settings) -> Settings:
    """`settings` with `unroll` and `store` as Python ints (or `unroll` a bool); a `ValueError`
    naming the first bad setting (`unroll` already not `ORIGINAL`), one not given included."""
    unroll = check_unroll(settings.unroll)
    check_checkpoint(settings.checkpoint)
    _levels.check(settings.levels)
    return dataclasses.replace(settings, unroll=unroll, store=check_store(settings.store))


def _types(tree: Any) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return treedef, tuple(typeof(leaf) for leaf in leaves)


def _run(f: Callable, req: _plan.Request, init: Any, xs: Any, site: Any, note: str | None = None) -> Any:
    staged = _staging.staged(f, req, lambda get_f: _program.program(req, get_f), req.staging)
    key = (req, _types((init, xs))) if _override._recorders else None
    with _override.building(site, key, note):
        return staged(init, xs)


def scan(f: Callable, init: Any, xs: Any, length: Any, reverse: bool, split_transpose: bool,
         settings: Settings, site: Any = None, note: str | None = None, remat: bool = False) -> Any:  # fmt: skip
    """`scanrewrite.runtime.scan` with its settings resolved for `site`; `note` is a reason
    for `record_sites` to give, `remat` whether a per-step checkpoint of the user's was taken
    over (inside Flax's step: `_plan.Request.remat`)."""
    if settings.unroll is ORIGINAL:  # `override(unroll=ORIGINAL)`: the scan the rewrite replaced
        return jax.lax.scan(f, init, xs, length, reverse, 1, split_transpose)
    settings = check(settings)
    if scan_length(xs, length) == 0:
        return jax.lax.scan(f, init, xs, length, reverse, lax_unroll(settings.unroll), split_transpose)
    req = _plan.request("scan", settings, length, reverse, split_transpose, _chunks.layout(), init, xs, remat=remat)
    return _run(f, req, init, xs, site, note)


def eqxi_scan(f: Callable, init: Any, xs: Any, length: Any, buffers: Any, kind: str, checkpoints: Any,
              settings: Settings, site: Any = None) -> Any:  # fmt: skip
    """`scanrewrite.runtime.eqxi_scan` with its settings resolved for `site` (validated but
    for `unroll` not being `ORIGINAL`)."""
    import equinox.internal as eqxi

    # It takes no `levels` (None, so that no override gives it any): one level.
    settings = dataclasses.replace(settings, levels=DEFAULTS.levels)
    init, xs = jax.tree_util.tree_map(jnp.asarray, (init, xs))
    if kind == "lax":
        # equinox.internal.scan(kind="lax") is jax.lax.scan and ignores the other options.
        return scan(f, init, xs, length, False, False, settings, site)
    if scan_length(xs, length) == 0:
        return eqxi.scan(f, init, xs, length, buffers=buffers, kind=kind, checkpoints=checkpoints)
    # `store` is for `kind="lax"`: equinox's loop decides what it keeps.
    settings = check(dataclasses.replace(settings, store=0))
    req = _plan.request("eqxi_scan", settings, length, False, False, _chunks.layout(), init, xs, kind=kind,
                        checkpoints=checkpoints, buffers=buffers)  # fmt: skip
    return _run(f, req, init, xs, site)
