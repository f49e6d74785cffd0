"""`scanrewrite-tune --memory-budget` spending memory: the for-loop's program and stored steps
tried at `scan` sites, what is predicted over the budget left uncompiled, a budget of the
device's memory, and the tuner's own wall time. Tiny programs on the CPU, one repeat; nothing
asserts a timing."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from click.testing import CliRunner
from jax.experimental.compilation_cache import compilation_cache

import scanrewrite.runtime
import scanrewrite.tune
from scanrewrite.tune import Candidate
from scanrewrite.tune._candidates import ORIGINAL_SCAN
from scanrewrite.tune._command import main
from scanrewrite.tune._compile import BASELINE, Program, judged_bytes
from scanrewrite.tune._report import describe_built
from tests.test_tune import load
from tests.treecheck import assert_trees_close

HAS_STORE = "store" in inspect.signature(scanrewrite.runtime.scan).parameters

ONE_SITE = '''\
import jax
import jax.numpy as jnp
import scanrewrite.runtime


def step(h, w):
    return jnp.tanh(h @ w), jnp.sum(h)


def loss(ws, h):
    h, ys = scanrewrite.runtime.scan(step, h, ws, unroll=2)
    return jnp.sum(h) + jnp.sum(ys)


def factory():
    ws = jnp.stack([jnp.eye(8) * (0.5 + 0.1 * i) for i in range(8)])
    return jax.value_and_grad(loss, argnums=(0, 1)), (ws, jnp.ones((8, 8)))
'''
SITE_LINE = 11


@pytest.fixture
def program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    # A tiny step, whose saving every backend weighs as negligible (`jax.lax.scan` at every k):
    # checkpointed as a large step's, so that the candidates keep different memory.
    monkeypatch.setattr(scanrewrite.runtime._chunks, "NEGLIGIBLE_SAVING", 0)
    path = tmp_path / "one.py"
    path.write_text(ONE_SITE)
    return path


def test_a_budget_adds_the_for_loops_program_and_the_pick_fits(program: Path):
    fn, args = load(program, "one_budget").factory()
    report = scanrewrite.tune.tune(fn, args, ks=[1, 2], repeats=1, warmup=0, memory_budget="1x", stores=(4,))
    (site,) = report.sites
    rows = {row.label: row for row in site.rows}
    # The for-loop's program: every one of the 8 steps stored, nothing checkpointed.
    assert rows["for-loop program"].candidate == Candidate(8, store=8)
    chosen = next(row for row in site.rows if row.note == "pick")
    assert chosen.memory_bytes <= report.limit == report.whole[0].memory_bytes
    # On the CPU the memory is XLA's temp size, exactly, and the report says so.
    with scanrewrite.runtime.override(unroll=scanrewrite.runtime.ORIGINAL):
        original = jax.jit(fn).lower(*args).compile().memory_analysis().temp_size_in_bytes
    assert report.whole[0].memory_bytes == original and "memory: XLA's temp memory; memory budget" in report.table()
    # Each row says what the runtime built there, as `record_sites()` reports it.
    assert "stored, " in rows["for-loop program"].built and "store=8 of 8" in rows["for-loop program"].built
    assert "(asked 2)" in rows["k=2 (written)"].built and "store=0 of 8" in rows["k=2 (written)"].built
    assert "(asked 1)" in rows["k=1, store=4"].built and "store=4 of 8" in rows["k=1, store=4"].built
    assert "checkpoint=dots_and_reductions_saveable" in rows["per-step dots_and_reductions_saveable"].built
    assert rows["original jax.lax.scan"].built == "" and "| the runtime built |" in report.table()
    with scanrewrite.runtime.override(unroll=1, store=4), scanrewrite.runtime.record_sites() as found:
        jax.jit(fn).lower(*args)
    assert rows["k=1, store=4"].built == describe_built(found.plans[site.site])
    assert f"| {describe_built(found.plans[site.site])} |" in report.table()
    # The tuner says what it cost.
    assert report.wall_s > 0 and 0 < report.compiled <= 2 + len([row for row in site.rows if row.compile_s is not None])
    assert f"tuned in {report.wall_s:.1f} s: {report.compiled} programs compiled" in report.table()
    # Without a budget nothing spends memory: the candidates are those of before.
    plain = scanrewrite.tune.tune(fn, args, ks=[1, 2], repeats=1, warmup=0)
    assert [str(row.candidate) for row in plain.sites[0].rows] == ["k=1", "k=2", "original scan"]


@pytest.mark.parametrize(
    "temp, peak, platform, judged",
    [(100, 300, "tpu", 300), (300, 100, "gpu", 100), (100, None, "tpu", 100), (100, 0, "tpu", 100), (100, 300, "cpu", 100)],
)
def test_memory_is_the_peak_where_an_accelerator_reports_one_else_the_temp_size(temp, peak, platform, judged):
    assert judged_bytes(temp, peak, platform) == judged


def test_a_program_over_the_budget_that_spends_memory_is_not_timed(program: Path):
    fn, args = load(program, "one_over").factory()
    first = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0, memory_budget="100x", stores=(4,))
    memory = {str(row.candidate): row.memory_bytes for row in first.sites[0].rows}
    least = min(memory.values())
    assert memory["for-loop program"] > least, "the for-loop's program keeps more than the least"
    report = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0, memory_budget=least, stores=(4,))
    row = next(row for row in report.sites[0].rows if str(row.candidate) == "for-loop program")
    assert row.note == "over budget: not timed" and row.timing is None and row.memory_bytes > least
    assert report.sites[0].pick != Candidate(8, store=8)


def test_a_fraction_of_the_devices_memory_needs_a_device_that_reports_it(program: Path):
    # The CPU reports no memory size: one line, exit 2.
    result = CliRunner().invoke(main, ["-q", "one.py:factory", "--ks", "1", "--repeats", "1", "--memory-budget", "0.8"])
    assert result.exit_code == 2
    assert "error: a budget of 0.8 of the device's memory, but the device reports no memory size" in result.stderr


@pytest.mark.skipif(not HAS_STORE, reason="the runtime keeps no stored steps yet (store=)")
def test_stored_steps_are_predicted_compiled_where_they_fit_and_written_back(program: Path):
    fn, args = load(program, "one_store").factory()
    # A budget halfway between single steps and the for-loop's program.
    first = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0, memory_budget="100x", stores=(1,))
    memory = {str(row.candidate): row.memory_bytes for row in first.sites[0].rows}
    budget = (memory["k=1"] + memory["for-loop program"]) // 2
    options = ["--ks", "1", "--repeats", "1", "--warmup", "0", "--keep-rewrites", "--memory-budget", str(budget)]
    result = CliRunner().invoke(main, ["-q", "one.py:factory", *options, "--stores", "1,2,4,6,7", "--write"])
    assert result.exit_code == 0, result.output
    tables = result.stdout
    assert "k=1, store=1" in tables and "tuned in" in tables
    # Every store the prediction put over the budget, or behind a larger one that fits, is
    # reported and not compiled.
    assert "not compiled:" in tables
    after = program.read_text()
    fn_after, args_after = load(program, "one_store_after").factory()
    assert assert_trees_close(jax.jit(fn_after)(*args_after), jax.jit(fn)(*args), rtol=1e-5, atol=1e-6) == 3
    if "store=" in after:
        assert "unroll=1, store=" in after


@pytest.mark.skipif(not HAS_STORE, reason="the runtime keeps no stored steps yet (store=)")
def test_by_default_the_stored_counts_go_on_to_fill_the_budget(program: Path):
    """8 steps: a quarter, half and three quarters stored (2, 4, 6), then the largest count
    predicted to fit under the budget (here every count does: 7, the last below the for-loop's
    program)."""
    fn, args = load(program, "one_fill").factory()
    report = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0, memory_budget="3x")
    rows = {str(row.candidate): row for row in report.sites[0].rows}
    assert rows["k=1, store=7"].memory_bytes is not None and rows["k=1, store=6"].memory_bytes is not None
    assert "k=1, store=5" not in rows
    picked = next(row for row in report.sites[0].rows if row.note == "pick")
    assert picked.memory_bytes <= report.limit


@pytest.mark.skipif(not HAS_STORE, reason="the runtime keeps no stored steps yet (store=)")
def test_each_stage_of_the_progress_keeps_the_total_it_announced(program: Path):
    # Filling the budget adds stored counts once others are compiled (k=1, store=7 here): the
    # count went from `tuning 12/36` to `tuning 13/42`. Now each stage ends at its total.
    options = ["--ks", "1", "--repeats", "2", "--warmup", "0", "--memory-budget", "3x"]
    result = CliRunner().invoke(main, ["-v", "one.py:factory", *options])
    assert result.exit_code == 0, result.output
    assert "k=1, store=7" in result.stdout
    steps = re.findall(r"^(tuning|whole program) (\d+)/(\d+): ", result.stderr, re.MULTILINE)
    stages = {}
    for stage, done, total in steps:
        stages.setdefault(stage, []).append((int(done), int(total)))
    assert list(stages) == ["tuning", "whole program"]
    for counts in stages.values():
        assert len({total for _, total in counts}) == 1
        assert [done for done, _ in counts] == sorted({done for done, _ in counts})
        assert counts[-1][0] == counts[-1][1]
    assert stages["whole program"][-1] == (2, 2)


def test_the_for_loops_program_stores_every_step_also_where_f_checkpoints_itself(program: Path):
    """A step written as `jax.checkpoint(step)` (the runtime takes its checkpoint over): the
    for-loop's program keeps every step's residuals, more than k = 1, where `checkpoint=False`
    would have kept the user's per-step checkpoint; and the runtime's policies are tried (rolled,
    and on every step)."""
    program.write_text(ONE_SITE.replace("scanrewrite.runtime.scan(step,", "scanrewrite.runtime.scan(jax.checkpoint(step),"))
    fn, args = load(program, "one_checkpointed").factory()
    report = scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0, memory_budget="100x", stores=(2,))
    memory = {str(row.candidate): row.memory_bytes for row in report.sites[0].rows}
    assert memory["for-loop program"] > memory["k=1"], memory
    policy = "dots_with_no_batch_dims_and_reductions_saveable"
    assert {"k=1, reductions_saveable", f"per-step {policy}", f"per-step {policy}, store=2", "per-step dots_and_reductions_saveable"} <= set(memory)
    assert not any(row.differs for row in report.sites[0].rows)


@pytest.mark.main_only("threads=1: the same sharing, one compile at a time", ids=["2"])
@pytest.mark.parametrize("threads", [1, 2], ids=["1", "2"])
def test_configurations_that_lower_to_one_program_compile_once(program: Path, threads: int):
    """The site as the scan it replaced, with no other site, is the program with every site as
    lax.scan: its lowering is the same, so XLA compiles it once (on an accelerator a compile
    is a minute or more) and both configurations run the one executable."""
    fn, args = load(program, f"one_lowering_{threads}").factory()
    measured = Program(fn, args, {})
    (site,) = measured.sites()
    baseline, original, k1 = measured.compile_all(
        [BASELINE, ((site, ORIGINAL_SCAN),), ((site, Candidate(1)),)], threads
    )
    assert original.executable is baseline.executable and original.memory_bytes == baseline.memory_bytes
    assert original.program == baseline.program and original.comparison is None
    # One program, one compile time: the first compile's, not the second lowering's alone.
    assert original.compile_s == baseline.compile_s
    assert k1.executable is not baseline.executable and k1.program != baseline.program
    assert measured.compiled_count == 2
    # Once forgotten, an executable is not handed out again: the program compiles anew.
    measured.forget([])
    (again,) = measured.compile_all([((site, ORIGINAL_SCAN),)], threads)
    assert again.executable is not None and again.memory_bytes == baseline.memory_bytes


def test_no_program_is_loaded_from_the_persistent_compilation_cache(program: Path, tmp_path_factory):
    """With the user's persistent compilation cache on, the tuner's warm-up wrote lax.scan's
    program there and its measured compile loaded it (0.07 s against 0.77 s for the programs
    beside it): while tuning the cache is off, and after it is as the user set it."""
    fn, args = load(program, "one_uncached").factory()
    cache = tmp_path_factory.mktemp("jax-cache")
    settings = {"jax_compilation_cache_dir": str(cache), "jax_persistent_cache_min_compile_time_secs": 0.0,
                "jax_persistent_cache_min_entry_size_bytes": 0}  # fmt: skip
    before = {name: getattr(jax.config, name) for name in settings}
    try:
        for name, value in settings.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()
        scanrewrite.tune.tune(fn, args, ks=[1], repeats=1, warmup=0)
        assert list(cache.iterdir()) == []  # nothing written, so nothing could be loaded
        assert jax.config.jax_enable_compilation_cache
        jax.jit(lambda x: x * 3 + 1).lower(jnp.ones(5)).compile()
        assert list(cache.iterdir()) != []  # the user's cache again
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()


def test_compiling_several_at_a_time_measures_the_same_programs(program: Path):
    """`compile_threads`: the same candidates, temp memory and picks as one at a time (only the
    compile times are each one among several), said in the report's last line."""
    fn, args = load(program, "one_threads").factory()
    kwargs = dict(ks=[1, 2], repeats=1, warmup=0, memory_budget="100x", stores=(2,))
    one = scanrewrite.tune.tune(fn, args, **kwargs)
    several = scanrewrite.tune.tune(fn, args, compile_threads=3, **kwargs)
    memory = lambda report: [(str(row.candidate), row.memory_bytes) for row in report.sites[0].rows]  # noqa: E731
    assert memory(several) == memory(one) and several.compiled == one.compiled
    # Stored counts given are tried as given: none goes on to fill the budget.
    assert {row.candidate.store for row in one.sites[0].rows if row.candidate and row.candidate.store} == {2, 8}
    assert "programs compiled (3 at a time)" in several.table() and "at a time" not in one.table()
    with pytest.raises(scanrewrite.tune.TuneError, match="`compile_threads` must be a positive int, got 0"):
        scanrewrite.tune.tune(fn, args, compile_threads=0, **kwargs)


ATTENTION = '''\
import jax
import jax.numpy as jnp
import scanrewrite.runtime


def step(h, w):
    return h + jax.nn.softmax(h @ w @ h.T) @ h, jnp.sum(h)


def loss(ws, h):
    h, ys = scanrewrite.runtime.scan(step, h, ws, unroll=1, checkpoint=CHECKPOINT)
    return jnp.sum(h) + jnp.sum(ys)


def factory():
    ws = jnp.stack([jnp.eye(4) * (0.5 + 0.1 * i) for i in range(6)])
    return jax.value_and_grad(loss, argnums=(0, 1)), (ws, jnp.ones((3, 4)) / 4)
'''


@pytest.mark.main_only(
    "the names are data (targets.RUNTIME_POLICIES); each release runs the policies in test_runtime_policies.py"
)
def test_the_runtimes_own_policies_are_tried_on_request(program: Path):
    """`--policies` takes the runtime's policies: tried at every k, and under a budget on every
    step; a site that writes one is not tried with it again."""
    program.write_text(ATTENTION.replace("CHECKPOINT", "True"))
    fn, args = load(program, "attention_policies").factory()
    policies = "reductions_saveable,dots_and_reductions_saveable"
    report = scanrewrite.tune.tune(fn, args, ks=[1], checkpoints=policies, repeats=1, warmup=0,
                                   memory_budget="100x", stores=(2,))  # fmt: skip
    rows = {row.label: row for row in report.sites[0].rows}
    for label in ("k=1, reductions_saveable", "k=1, dots_and_reductions_saveable", "per-step dots_and_reductions_saveable"):
        assert label in rows and rows[label].error is None and not rows[label].differs, (label, list(rows))
    program.write_text(ATTENTION.replace("CHECKPOINT", "scanrewrite.runtime.reductions_saveable"))
    fn, args = load(program, "attention_written").factory()
    report = scanrewrite.tune.tune(fn, args, ks=[1], checkpoints="reductions_saveable,none", repeats=1, warmup=0)
    assert [row.label for row in report.sites[0].rows] == ["k=1 (written)", "k=1, checkpoint=False", "original jax.lax.scan"]
