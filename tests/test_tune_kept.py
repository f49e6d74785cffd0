"""`_jaxpr.kept_at_least`, the lower bound on what a program keeps for its backward pass, and the
tuner leaving out a policy on every step whose bound is over the budget. Tiny programs on the
CPU; the bound is checked against XLA's compiled temp memory."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import scanrewrite.runtime
import scanrewrite.tune
from scanrewrite.runtime import _chunks
from scanrewrite.tune._jaxpr import kept_at_least
from tests.test_tune import load
from tests.test_tune_budget import ONE_SITE

STEPS, WIDTH = 6, 32
#: One step's dot output, the value `dots_saveable` keeps of it (float32).
DOT_BYTES = WIDTH * WIDTH * 4


def _step(h, w):
    return jnp.tanh(h @ w)


def _straight(ws, h):
    for w in ws:
        h = jax.checkpoint(_step, policy=jax.checkpoint_policies.dots_saveable)(h, w)
    return jnp.sum(h)


def _inputs(seed=0):
    keys = jax.random.split(jax.random.key(seed))
    return jax.random.normal(keys[0], (STEPS, WIDTH, WIDTH)) / WIDTH, jax.random.normal(keys[1], (WIDTH, WIDTH))


def _temp(fn, *args) -> int:
    return jax.jit(fn).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_every_steps_kept_dot_counts_once_and_the_bound_is_below_xlas_memory():
    grad = jax.grad(_straight, argnums=(0, 1))
    kept = kept_at_least(jax.make_jaxpr(grad)(*_inputs()))
    assert kept == STEPS * DOT_BYTES
    assert kept <= _temp(grad, *_inputs())


def test_two_independent_backward_chains_are_not_summed():
    """Nothing orders one chain's backward pass after the other's forward pass, so XLA may run
    them one after the other: only one chain's values are alive for sure."""
    both = jax.grad(lambda a, b: _straight(*a) + _straight(*b), argnums=(0, 1))
    kept = kept_at_least(jax.make_jaxpr(both)(_inputs(0), _inputs(1)))
    assert kept == STEPS * DOT_BYTES
    assert kept <= _temp(both, _inputs(0), _inputs(1))


def test_a_chain_read_after_another_counts_both():
    """The second stack reads the first's output: its backward pass runs before the first's,
    both stacks' dots alive."""
    chained = jax.grad(lambda ws, vs, h: _straight(vs, _straight(ws, h) * h), argnums=(0, 1, 2))
    ws, h = _inputs(0)
    vs, _ = _inputs(1)
    kept = kept_at_least(jax.make_jaxpr(chained)(ws, vs, h))
    assert kept == 2 * STEPS * DOT_BYTES
    assert kept <= _temp(chained, ws, vs, h)


@pytest.mark.parametrize("program", ["forward only", "checkpoint keeping nothing", "rolled"])
def test_what_keeps_no_dot_straight_line_counts_at_most_one_step(program: str):
    ws, h = _inputs()
    if program == "forward only":
        fn, expected = _straight, 0
    elif program == "checkpoint keeping nothing":
        def fn(ws, h):
            for w in ws:
                h = jax.checkpoint(_step)(h, w)
            return jnp.sum(h)

        fn, expected = jax.grad(fn, argnums=(0, 1)), 0
    else:
        step = jax.checkpoint(lambda h, w: (_step(h, w), None), policy=jax.checkpoint_policies.dots_saveable)
        fn, expected = jax.grad(lambda ws, h: jnp.sum(jax.lax.scan(step, h, ws)[0]), argnums=(0, 1)), DOT_BYTES
    assert kept_at_least(jax.make_jaxpr(fn)(ws, h)) <= expected


@pytest.fixture
def straight_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`ONE_SITE` with an accelerator's layout: each step straight-line, as a policy on every
    step is built there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(_chunks, "NEGLIGIBLE_SAVING", 0)
    layout = _chunks.layout()._replace(rolled_chunk=False, rolled_rest=False, negligible_bytes=0)
    monkeypatch.setattr(_chunks, "_FORCE_LAYOUT", layout)
    path = tmp_path / "one.py"
    path.write_text(ONE_SITE)
    return path


def test_a_policy_on_every_step_over_the_budget_by_its_bound_is_not_compiled(straight_line: Path):
    fn, args = load(straight_line, "one_kept").factory()
    policy = "dots_and_reductions_saveable"
    with scanrewrite.runtime.override(unroll=8, checkpoint=policy):
        floor = kept_at_least(jax.make_jaxpr(fn)(*args))
    assert floor > 0
    ample = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0, memory_budget="100x", stores=(1, 4))
    rows = {row.label: row for row in ample.sites[0].rows}
    compiled = rows[f"per-step {policy}"].memory_bytes
    assert compiled is not None and floor <= compiled
    report = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0, memory_budget=floor - 1, stores=(1, 4))
    rows = {row.label: row for row in report.sites[0].rows}
    assert rows[f"per-step {policy}"].note.startswith(f"not compiled: per-step {policy} keeps at least")
    # Its stored counts are predicted from the bound, as from a compiled program's memory.
    assert rows[f"per-step {policy}, store=4"].note.startswith("not compiled: predicted")
    for label in (f"per-step {policy}", f"per-step {policy}, store=4"):
        assert rows[label].compile_s is None and rows[label].memory_bytes is None
    assert rows["k=1"].compile_s is not None and report.compiled < ample.compiled
