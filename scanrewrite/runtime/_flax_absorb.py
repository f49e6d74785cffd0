"""A per-step Flax remat taken off Flax's scan step, its policy handed to the chunks.

Flax's step around `nnx.remat(f)`/`nn.remat(Block)` is one checkpoint equation plus Flax's
bookkeeping (outputs reordered, RNG keys folded, variables repacked), so it is not the lone
checkpoint that `_trace.body` absorbs. Inside a checkpointed chunk that checkpoint would make
the backward pass recompute every step twice; a checkpoint computes what its body computes, so
replaying the step with its body inlined computes the same numbers.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import jax

from scanrewrite.runtime._compat import leading_slice, typeof
from scanrewrite.runtime._trace import CHECKPOINT_PRIMITIVES, replay_step

__all__ = ["absorb"]

tree_util = jax.tree_util

# The absorbed step per Flax step function (NNX keeps one per transform) and input types, so
# that an eager call again finds the runtime's staged unit for it.
_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def absorb(f: Callable, init: Any, xs: Any) -> tuple[Callable, Any]:
    """(a step computing what `f` computes, None), or, where `f`'s step holds exactly one
    top-level per-step checkpoint (and no other), (that step with the checkpoint inlined, its
    policy or True). `f` is traced here once and never again: the step replays its trace."""
    if jax.config.jax_disable_jit:
        return f, None
    carry = tree_util.tree_map(lambda leaf: typeof(jax.numpy.asarray(leaf)), init)
    x = tree_util.tree_map(lambda leaf: leading_slice(typeof(jax.numpy.asarray(leaf))), xs)
    key = tree_util.tree_flatten((carry, x))
    key = (key[1], tuple(key[0]))
    try:
        found = _cache.get(f, {}).get(key)
    except TypeError:  # an unhashable input type: no cache
        found = None
    if found is not None:
        return found
    closed, out = jax.make_jaxpr(f, return_shape=True)(carry, x)
    checkpoints = [i for i, eqn in enumerate(closed.jaxpr.eqns) if eqn.primitive.name in CHECKPOINT_PRIMITIVES]
    out_tree = tree_util.tree_structure(out)
    if len(checkpoints) != 1 or closed.jaxpr.eqns[checkpoints[0]].params.get("differentiated"):
        # Not `f` itself: a Flax step traced a second time draws other RNG keys (`init`
        # would give other parameters than Flax's own scan).
        found = (replay_step(closed, out_tree), None)
    else:
        eqn = closed.jaxpr.eqns[checkpoints[0]]
        found = (_inlined(closed, checkpoints[0], out_tree), eqn.params["policy"] or True)
    try:
        _cache.setdefault(f, {})[key] = found
    except TypeError:
        pass
    return found


def _inlined(closed: Any, index: int, out_tree: Any) -> Callable[[Any, Any], tuple[Any, Any]]:
    """The traced step as a function, its equation `index` (a checkpoint) replaced by the
    equations inside it."""
    jaxpr = closed.jaxpr

    def step(carry, x):
        env = dict(zip(jaxpr.constvars, closed.consts))
        env.update(zip(jaxpr.invars, [*tree_util.tree_leaves(carry), *tree_util.tree_leaves(x)]))

        def read(v):
            return v.val if hasattr(v, "val") else env[v]  # a literal has a value

        for i, eqn in enumerate(jaxpr.eqns):
            args = [read(v) for v in eqn.invars]
            if i == index:
                outs = jax.core.eval_jaxpr(eqn.params["jaxpr"], (), *args)
            else:
                subfuns, params = eqn.primitive.get_bind_params(eqn.params)
                outs = eqn.primitive.bind(*subfuns, *args, **params)
                outs = outs if eqn.primitive.multiple_results else [outs]
            env.update(zip(eqn.outvars, outs))
        return tree_util.tree_unflatten(out_tree, [read(v) for v in jaxpr.outvars])

    return step
