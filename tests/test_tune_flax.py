"""`scanrewrite-tune --memory-budget` at Flax sites: an `nnx.scan` over `nnx.remat` blocks and a
Linen `nn.scan(nn.remat(Block))`, rewritten, get the stored steps and the runtime's policies as
`scan` sites do, the original is named by the API the user wrote, and the pick and the original
are written back. Tiny models on the CPU, one repeat; nothing asserts a timing."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("flax.nnx", reason="flax is not installed (the `flax` extra)")
import jax  # noqa: E402

import scanrewrite.runtime  # noqa: E402
import scanrewrite.tune  # noqa: E402
from scanrewrite.codemod import rewrite  # noqa: E402
from scanrewrite.runtime import Settings  # noqa: E402
from scanrewrite.tune import ORIGINAL_SCAN, _rounding  # noqa: E402
from scanrewrite.tune._candidates import Candidate  # noqa: E402
from scanrewrite.tune._writeback import plan  # noqa: E402
from tests.test_tune import load  # noqa: E402
from tests.treecheck import assert_trees_close  # noqa: E402

NNX = textwrap.dedent('''\
    import jax
    import jax.numpy as jnp
    from flax import nnx


    class Block(nnx.Module):
        def __init__(self, rngs):
            self.lin = nnx.Linear(8, 8, rngs=rngs)
            self.norm = nnx.LayerNorm(8, rngs=rngs)

        def __call__(self, x):
            return x + jax.nn.softmax(self.norm(self.lin(x)), axis=-1)


    @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    @nnx.remat
    def forward(x, block):
        return block(x)


    def factory():
        blocks = nnx.vmap(lambda key: Block(nnx.Rngs(key)))(jax.random.split(jax.random.key(0), 4))
        graphdef, state = nnx.split(blocks)

        def loss(state, x):
            return jnp.sum(forward(x, nnx.merge(graphdef, state)) ** 2)

        return jax.value_and_grad(loss), (state, jnp.ones((2, 8)))
''')

LINEN = textwrap.dedent('''\
    import jax
    import jax.numpy as jnp
    import flax.linen as nn


    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            return x + jax.nn.softmax(nn.LayerNorm()(nn.Dense(8)(x)), axis=-1), None


    Stack = nn.scan(nn.remat(Block), variable_axes={"params": 0}, split_rngs={"params": True}, length=4)


    def factory():
        x = jnp.ones((2, 8))
        params = Stack().init(jax.random.key(0), x, None)

        def loss(params, x):
            return jnp.sum(Stack().apply(params, x, None)[0] ** 2)

        return jax.value_and_grad(loss), (params, x)
''')

MAIN_AND_NEWEST = pytest.mark.main_only(
    "the tuner at a Flax site, on the main suite's and the newest releases; elsewhere the runtime's "
    "Flax tests reach record_sites' API and plans, and test_tune_budget.py the spending candidates",
    parts=["newest-3.13"],
)


def rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, target: str) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    # A tiny step, whose saving every backend weighs as negligible (`jax.lax.scan` at every k):
    # checkpointed as a large step's, so that the candidates keep different memory.
    monkeypatch.setattr(scanrewrite.runtime._chunks, "NEGLIGIBLE_SAVING", 0)
    path = tmp_path / "model.py"
    path.write_bytes(rewrite(source.encode(), targets=target).code)
    return path


@MAIN_AND_NEWEST
def test_an_nnx_scan_site_spends_memory_and_writes_back_its_pick_and_the_flax_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    path = rewritten(tmp_path, monkeypatch, NNX, "nnx.scan")
    fn, args = load(path, "nnx_tuned").factory()
    report = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0, memory_budget="100x", stores=(1,))
    (site,) = report.sites
    rows = {row.label: row for row in site.rows}
    assert site.kind == "nnx_scan" and not report.errors and not report.differing
    # Flax's loop of 4 steps is found, so stored steps and the runtime's policies are tried.
    assert "store=1 of 4" in rows["k=1, store=1"].built
    assert "checkpoint=reductions_saveable" in rows["k=1, reductions_saveable"].built
    policy_and_store = rows["per-step dots_and_reductions_saveable, store=1"]
    assert "checkpoint=dots_and_reductions_saveable" in policy_and_store.built and "store=1 of 4" in policy_and_store.built
    assert "store=4 of 4" in rows["for-loop program"].built
    # The original is the call the user wrote, in its row and in the pick's heading.
    assert rows["original flax.nnx.scan"].built == "" and "original scan" not in report.table()
    # So is the baseline every ratio is taken to, in the site's table and the whole program's.
    assert site.baseline.label == report.whole[0].label == "flax.nnx.scan at every site"
    assert "lax.scan at every site" not in report.table()
    chosen = next(row for row in site.rows if row.note == "pick")
    assert report.picks == {site.site: chosen.candidate}
    assert f"(nnx_scan, written unroll=4): pick {chosen.label.removesuffix(' (written)')} (" in report.table()

    # Written back: the original is the Flax source as the user wrote it, byte for byte; a pick
    # that spends memory is the runtime's call with its settings, computing the same numbers.
    (original,) = plan({site.site: ORIGINAL_SCAN})
    assert original.after == NNX.encode()
    (spending,) = plan({site.site: policy_and_store.candidate})
    written = tmp_path / "picked.py"
    written.write_bytes(spending.after)
    fn_after, args_after = load(written, "nnx_picked").factory()
    with scanrewrite.runtime.record_sites() as found:
        actual = jax.jit(fn_after)(*args_after)
    policy = scanrewrite.runtime.dots_and_reductions_saveable
    assert [call.settings for call in found.values()] == [Settings(unroll=4, checkpoint=policy, levels=1, store=1)]
    assert assert_trees_close(actual, jax.jit(fn)(*args), rtol=1e-5, atol=1e-6) == 5


@MAIN_AND_NEWEST
def test_a_linen_scan_site_spends_memory_and_names_its_original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = rewritten(tmp_path, monkeypatch, LINEN, "linen.scan")
    fn, args = load(path, "linen_tuned").factory()
    report = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0, memory_budget="1x", stores=(1,))
    (site,) = report.sites
    labels = [row.label for row in site.rows]
    assert site.kind == "linen_scan" and "original flax.linen.scan" in labels
    assert site.baseline.label == "flax.linen.scan at every site"
    assert {"k=1, store=1", "k=1, reductions_saveable", "for-loop program"} <= set(labels)
    assert "per-step dots_with_no_batch_dims_and_reductions_saveable" in labels
    (original,) = plan({site.site: ORIGINAL_SCAN})
    assert original.after == LINEN.encode()


@MAIN_AND_NEWEST
def test_a_bfloat16_flax_site_measures_rounding_with_one_stored_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # The for-loop of Flax layers compiles for minutes on a TPU (`tune/_rounding.py`).
    source = LINEN.replace("nn.Dense(8)", "nn.Dense(8, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)")
    source = source.replace("nn.LayerNorm()", "nn.LayerNorm(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)")
    source = source.replace("x = jnp.ones((2, 8))", "x = jnp.ones((2, 8), jnp.bfloat16)")
    source = source.replace("[0] ** 2)", "[0].astype(jnp.float32) ** 2)")
    path = rewritten(tmp_path, monkeypatch, source, "linen.scan")
    fn, args = load(path, "linen_bf16").factory()
    measured = []
    references = _rounding.references
    monkeypatch.setattr(_rounding, "references", lambda *a: measured.append(references(*a)) or measured[-1])
    report = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0)
    (site,) = report.sites
    # (Listed twice: once for the progress bar's total.)
    assert [[dict(config)[site.site] for config in configs] for configs in measured] == [
        [Candidate(1, True), Candidate(1, store=1)]
    ] * 2
    assert "computes in bfloat16" in report.tolerance.describe() and not report.errors
