"""`scanrewrite-tune` keeps only what helps, proven on the program itself, end to end through
the command: numbers checked against the original's, the full write-back (a checkpoint
policy and `levels`), and a site reverted where the original scan wins.

Programs are tiny; where a test needs a site's candidate to differ, fail or be slow, its
step asks the runtime's `resolve` which setting it is being traced under (as a step too
large for the device, or one with a trace-time side effect, would behave differently).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from click.testing import CliRunner

import scanrewrite.tune
from scanrewrite.runtime import Call, Settings, Site
from scanrewrite.tune import ORIGINAL_SCAN, Candidate, _verify
from scanrewrite.tune._command import main
from scanrewrite.tune._rounding import references
from scanrewrite.tune._verify import Tolerance, compare, flat, to_host
from tests.test_tune import invoke, load, write
from tests.treecheck import assert_trees_close


@pytest.fixture
def project(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """conftest's project folder, with `sys.path` restored after the tuner's factory import."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    return project


def test_compare_leaf_by_leaf_within_the_dtype_tolerance():
    expected = {"loss": jnp.float32(2.0), "grad": jnp.array([1.0, 1e-7, -3.0]), "steps": jnp.array([1, 2])}
    same = compare(to_host(expected), to_host(expected), Tolerance())
    assert (same.max_rel_diff, same.agrees) == (0.0, True)
    # A last-bit change in float32 passes; a small element far below the leaf's scale too.
    close = {**expected, "grad": jnp.array([1.0 + 2e-7, 3e-7, -3.0])}
    assert compare(to_host(close), to_host(expected), Tolerance()).agrees
    for wrong in (
        {**expected, "loss": jnp.float32(2.01)},
        {**expected, "steps": jnp.array([1, 3])},
        {**expected, "grad": jnp.array([1.0, jnp.nan, -3.0])},
        {**expected, "grad": jnp.array([1.0, 1e-7, -3.0], jnp.float16)},
        {"loss": jnp.float32(2.0), "grad": jnp.array([1.0, 1e-7, -3.0])},
    ):
        assert not compare(to_host(wrong), to_host(expected), Tolerance()).agrees, wrong
    loss = {**expected, "loss": jnp.float32(2.01)}
    assert compare(to_host(loss), to_host(expected), Tolerance()).max_rel_diff == pytest.approx(0.005, rel=1e-3)
    assert compare(to_host(loss), to_host(expected), Tolerance(rtol=1e-2)).agrees
    assert not compare(to_host(close), to_host(expected), Tolerance(rtol=0, atol=0)).agrees


@pytest.mark.parametrize("where", ["host", "device"])
def test_compare_infinities_and_half_precision(where: str, monkeypatch: pytest.MonkeyPatch):
    """Small leaves are compared on the host and large ones on the device, alike."""
    if where == "device":
        monkeypatch.setattr(_verify, "DEVICE_ELEMENTS", 1)
    expected = {"grad": jnp.array([1.0, jnp.inf, -jnp.inf, jnp.nan]), "h": jnp.array([1.0, 2.0, -4.0], jnp.bfloat16),
                "steps": jnp.array([1, 2])}  # fmt: skip
    # The candidate's outputs stay on the device, the original's are on the host.
    assert compare(flat(expected), to_host(expected), Tolerance()) == compare(to_host(expected), to_host(expected), Tolerance())
    assert compare(flat(expected), to_host(expected), Tolerance()).agrees
    bf16_close = {**expected, "h": jnp.array([1.0, 2.0, -4.03125], jnp.bfloat16)}  # one ulp at -4
    found = compare(flat(bf16_close), to_host(expected), Tolerance())
    assert found.agrees and found.max_rel_diff == pytest.approx(0.03125 / 4)
    for wrong in (
        {**expected, "grad": jnp.array([1.0, 3e38, -jnp.inf, jnp.nan])},  # an infinity gone
        {**expected, "grad": jnp.array([1.0, -jnp.inf, -jnp.inf, jnp.nan])},  # of the other sign
        {**expected, "grad": jnp.array([1.0, jnp.inf, -jnp.inf, 0.0])},  # a NaN gone
        {**expected, "h": jnp.array([1.0, 2.0, -4.5], jnp.bfloat16)},
        {**expected, "steps": jnp.array([1, 3])},
    ):
        assert not compare(flat(wrong), to_host(expected), Tolerance()).agrees, wrong
    steps = {**expected, "steps": jnp.array([1, 3])}
    assert compare(flat(steps), to_host(expected), Tolerance()).max_rel_diff == pytest.approx(0.5)


#: Each compilation draws a new constant at trace time: the program is not a function of
#: its inputs alone, and two compilations of the original disagree.
DRAWS_AT_TRACE_TIME = '''\
import jax.numpy as jnp
import numpy as np
import scanrewrite.runtime

rng = np.random.default_rng(0)


def step(h, x):
    return h * x * rng.uniform(0.5, 1.5), h


def fn(xs):
    return scanrewrite.runtime.scan(step, 1.0, xs, unroll=1)


def factory():
    return fn, (jnp.linspace(0.5, 1.5, 6),)
'''

#: The second site computes other numbers with k=4 (as a trace-time cache or counter would
#: once its step is traced several times); k=1, its written setting, is right.
BREAKS_AT_K4 = '''\
import jax
import jax.numpy as jnp
import scanrewrite.runtime
from scanrewrite.runtime._override import Settings, Site, resolve


def step(h, w):
    return jnp.tanh(h @ w), jnp.sum(h)


def broken_step(h, w):
    scale = 1.5 if resolve(Site.parse((__file__, 18)), Settings(unroll=1), api="scan").unroll == 4 else 1.0
    return jnp.tanh(h @ w) * scale, jnp.sum(h)


def loss(ws, h):
    h, a = scanrewrite.runtime.scan(step, h, ws, unroll=1)
    h, b = scanrewrite.runtime.scan(broken_step, h, ws[::-1], unroll=1)
    return jnp.sum(h) + jnp.sum(a) + jnp.sum(b)


def factory():
    ws = jnp.stack([jnp.eye(8) * (0.5 + 0.1 * i) for i in range(4)])
    return jax.value_and_grad(loss), (ws, jnp.ones((8, 8)))
'''
GOOD_SITE, BROKEN_SITE = 17, 18


def test_a_program_that_differs_between_compilations_cannot_be_tuned(project: Path):
    write(project, "draws.py", DRAWS_AT_TRACE_TIME)
    result = invoke("draws.py:factory", "--ks", "1,2", "--repeats", "1", "--warmup", "0", "--write")
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: the scan at draws.py:13 computes different numbers each time it is compiled")
    assert re.search(r"max rel diff \d\.\de[-+]\d\d between two compilations", line)
    assert (project / "draws.py").read_text() == DRAWS_AT_TRACE_TIME


def test_a_candidate_that_computes_other_numbers_is_reported_and_never_written(project: Path):
    write(project, "breaks.py", BREAKS_AT_K4)
    result = invoke("breaks.py:factory", "--ks", "1,4", "--repeats", "1", "--warmup", "0", "--keep-rewrites", "--diff")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert re.fullmatch(rf"error: breaks\.py:{BROKEN_SITE}: k=4 computes different numbers \(max rel diff \d\.\de-\d\d\)", errors[0])
    site_table = result.stderr.split(f"breaks.py:{BROKEN_SITE} (")[1].split("\n\n")[0]
    assert re.search(r"\| k=4 \|.*\| \d\.\de-\d\d \| differs \|", site_table)
    assert re.search(r"\| k=1 \(written\) \|.*\| (0|\d\.\de-\d\d) \| pick \|", site_table)
    assert f"breaks.py:{BROKEN_SITE} (scan, written unroll=1): pick k=1" in result.stderr
    assert "computes in" not in result.stderr  # a float32 program: the dtype's tolerance alone
    # Every row shows its difference; the verified picks may still be written.
    rows = [row for row in result.stderr.splitlines() if row.startswith("| ") and not row.startswith(("| candidate", "| configuration", "| ---"))]
    assert len(rows) in (8, 9) and all(re.search(r"\| (0|\d\.\de[-+]\d\d) \| [a-z ]*\| [^|]*\|$", row) for row in rows), rows
    assert "unroll=4" not in "".join(line for line in result.stdout.splitlines() if line.startswith("+") and "broken" in line)


#: A bfloat16 computation with float32 outputs (as accelerator users train), whose site computes
#: a wrong step with k=4: 1.25 times the step's update, a difference bfloat16's rounding cannot make.
BF16_BREAKS_AT_K4 = '''\
import jax
import jax.numpy as jnp
import scanrewrite.runtime
from scanrewrite.runtime._override import Settings, Site, resolve


def step(h, w):
    scale = 1.25 if resolve(Site.parse((__file__, 14)), Settings(unroll=1), api="scan").unroll == 4 else 1.0
    a = jax.nn.softmax(h @ w, axis=-1)
    return jnp.tanh(a @ w.T + h) * jnp.bfloat16(scale), jnp.sum(h.astype(jnp.float32))


def loss(ws, h):
    h, ys = scanrewrite.runtime.scan(step, h, ws, unroll=1)
    return jnp.sum(h.astype(jnp.float32) ** 2) + jnp.sum(ys)


def factory():
    ws = (jax.random.normal(jax.random.PRNGKey(0), (6, 8, 8)) * 0.5).astype(jnp.bfloat16)
    h = jax.random.normal(jax.random.PRNGKey(1), (4, 8)).astype(jnp.bfloat16)
    return jax.value_and_grad(loss, argnums=(0, 1)), (ws, h)
'''


@pytest.mark.parametrize("threads", ["1", "3"])
def test_a_bfloat16_program_is_judged_by_its_rounding_and_a_wrong_candidate_still_differs(project: Path, threads):
    # With several compiles at a time the rounding's programs compile beside the original.
    write(project, "bf16.py", BF16_BREAKS_AT_K4)
    args = ["--ks", "1,4", "--repeats", "1", "--warmup", "0", "--keep-rewrites", "--compile-threads", threads, "-v"]
    result = CliRunner().invoke(main, ["bf16.py:factory", *args], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    told = re.findall(r"^tuning (\d+)/(\d+): (.*) \(\d+ s\)$", result.stderr, re.MULTILINE)
    assert [label for _, _, label in told][:4] == [
        "lax.scan at every site", "as written", "rounding: checkpointed scan at every site",
        "rounding: steps stored at every site",
    ]  # fmt: skip
    assert told[-1][0] == told[-1][1]  # the stage ends at the total it announced
    header = result.stdout.split("\n\n")[0]
    assert "the function computes in bfloat16, so a leaf's rtol is at least 2x its largest difference among " in header
    assert ("(the original compiled twice, the checkpointed scan at every site, the for-loop's program at scan sites "
            "and one stored step at Flax sites)") in header
    table = result.stdout.split("bf16.py:14 (scan, ")[1].split("\n\n")[0]
    assert re.search(r"\| k=4 \|.*\| \d\.\de[-+]\d\d \| differs \|", table), table
    assert re.search(r"\| k=1 \(written\) \|.*\| pick \|", table), table
    assert re.fullmatch(r"error: bf16\.py:14: k=4 computes different numbers \(max rel diff \d\.\de[-+]\d\d\)",
                        [line for line in result.stderr.splitlines() if line.startswith("error:")][0])  # fmt: skip


def test_the_rounding_of_a_narrow_precision_raises_the_rtol_of_wider_leaves_up_to_that_precision():
    expected = to_host({"loss": jnp.float32(2.0), "grad": jnp.array([1.0, -3.0], jnp.float32)})
    rounded = to_host({"loss": jnp.float32(2.02), "grad": jnp.array([1.0, -3.0], jnp.float32)})  # 1e-2 off
    nan = to_host({"loss": jnp.float32(jnp.nan), "grad": jnp.array([1.0, -3.0], jnp.float32)})
    far = to_host({"loss": jnp.float32(3.0), "grad": jnp.array([1.0, -3.0], jnp.float32)})  # 0.33 off
    bf16 = jnp.dtype(jnp.bfloat16)
    # Twice the largest difference among the programs equal up to rounding, leaf by leaf; a
    # program with a NaN out of place tells nothing; never more than bfloat16's own rtol.
    # (The leaves in order: grad, loss.)
    assert _verify.rounding_of([rounded, expected, nan], expected, bf16) == (pytest.approx((0.0, 2e-2)), (0.0, 0.0))
    # A leaf as large as the rest keeps the capped rtol alone: no atol.
    assert _verify.rounding_of([far], expected, bf16) == ((0.0, _verify.RTOL["bfloat16"]), (0.0, 0.0))
    raised = Tolerance(rounding=(0.0, 2e-2), precision="bfloat16")
    assert not compare(rounded, expected, Tolerance()).agrees and compare(rounded, expected, raised).agrees
    assert not compare(far, expected, raised).agrees
    wrong_grad = to_host({"loss": jnp.float32(2.0), "grad": jnp.array([1.0, -3.001], jnp.float32)})
    assert not compare(wrong_grad, expected, raised).agrees  # the grad leaf keeps float32's 1e-4
    assert "computes in bfloat16" in raised.describe() and "raised on 1 of 2 leaves, to at most 2.0e-02" in raised.describe()


def test_a_leaf_whose_value_is_rounding_alone_gets_an_atol_of_that_rounding_and_no_more():
    # As a TPU v5e measured a Flax attention's gradients: the key bias's, which a softmax cannot
    # see, is rounding alone (6.9e-6 beside the kernels' 0.3), and an equal program differs on
    # it by 1.9x its size.
    grads = lambda kernel, bias: to_host({"bias": jnp.array(bias, jnp.bfloat16), "kernel": jnp.array(kernel, jnp.bfloat16)})
    expected = grads([0.25, -0.3], [6.9e-6, -2e-6])
    equal = grads([0.25, -0.3], [-6.3e-6, 3e-6])  # the bias 1.3e-5 off
    bf16 = jnp.dtype(jnp.bfloat16)
    rtol, atol = _verify.rounding_of([equal], expected, bf16)
    assert rtol == (_verify.RTOL["bfloat16"], 0.0) and atol[0] == pytest.approx(2 * 1.32e-5, rel=1e-2) and atol[1] == 0
    raised = Tolerance(rounding=rtol, precision="bfloat16", rounding_atol=atol)
    assert not compare(equal, expected, Tolerance(rounding=rtol, precision="bfloat16")).agrees  # the rtol alone
    assert compare(equal, expected, raised).agrees and compare(grads([0.25, -0.3], [-1.4e-5, 0.0]), expected, raised).agrees
    # Its difference is reported at the magnitude its atol stands for (atol / rtol, 5.3e-4),
    # not over its own size, where the rounding that passes reads as 1.9.
    assert compare(equal, expected, raised).max_rel_diff == pytest.approx(1.32e-5 / (2 * 1.32e-5 / 0.05), rel=2e-2)
    assert compare(equal, expected, Tolerance(rounding=rtol, precision="bfloat16")).max_rel_diff > 1.5
    # Past twice that rounding, or a gradient of the kernels' size, it differs.
    assert not compare(grads([0.25, -0.3], [-3e-5, 0.0]), expected, raised).agrees
    assert not compare(grads([0.25, -0.3], [1e-2, 0.0]), expected, raised).agrees
    assert not compare(grads([0.25, -0.4], [6.9e-6, -2e-6]), expected, raised).agrees
    assert "the atol of 1 whose value is rounding alone" in raised.describe()
    # Never more than bfloat16's rtol of the largest gradient, however far the equal program.
    assert _verify.rounding_of([grads([0.25, -0.3], [0.5, 0.0])], expected, bf16)[1][0] == pytest.approx(0.05 * 0.3, rel=1e-2)
    # A leaf larger than that rounding keeps the capped rtol alone, however far it moves.
    expected = grads([0.25, -0.3], [0.1, 0.0])
    assert _verify.rounding_of([grads([0.25, -0.3], [0.2, 0.0])], expected, bf16)[1] == (0.0, 0.0)


def test_stored_steps_are_a_rounding_reference_at_scan_and_flax_sites():
    apis = ("scan", "nnx_scan", "linen_scan", "eqxi_scan", "map")
    calls = {Site("/model.py", line): Call(api, Settings(unroll=1)) for line, api in enumerate(apis, 1)}
    _, loops = references(calls, dict.fromkeys(calls, 4))
    # The for-loop's program at a scan site; one stored step at Flax's (see `_rounding`); the
    # others keep their scan.
    expected = [Candidate(4, store=4)] + [Candidate(1, store=1)] * 2 + [ORIGINAL_SCAN] * 2
    assert [candidate for _, candidate in loops] == expected


LONG_SCAN = '''\
import jax
import jax.numpy as jnp
import scanrewrite.runtime


def step(h, w):
    return jnp.tanh(h @ w), jnp.sum(h)


def loss(ws, h):
    h, ys = scanrewrite.runtime.scan(
        step, h, ws, unroll=1, checkpoint=jax.checkpoint_policies.everything_saveable
    )
    return jnp.sum(h) + jnp.sum(ys)


def factory():
    ws = jnp.stack([jnp.eye(4) * (0.9 + 0.001 * i) for i in range(64)])
    return jax.value_and_grad(loss), (ws, jnp.ones((4, 4)))
'''


def test_a_budget_pick_with_a_policy_and_levels_is_written_back(project: Path):
    program = write(project, "long.py", LONG_SCAN)
    fn, args = load(program, "long_first").factory()
    first = scanrewrite.tune.tune(
        fn, args, ks=[1], checkpoints="nothing_saveable", levels=[2], keep_rewrites=True, repeats=1, warmup=0
    )
    (site,) = first.sites
    memory = {str(row.candidate): row.memory_bytes for row in site.rows}
    assert set(memory) == {"k=1", "k=1, levels=2", "k=1, nothing_saveable", "k=1, nothing_saveable, levels=2"}
    target = memory.pop("k=1, nothing_saveable, levels=2")
    assert target < min(memory.values()), "only the policy with levels=2 fits the budget below"

    options = ["--ks", "1", "--policies", "nothing_saveable", "--levels", "2", "--repeats", "1", "--warmup", "0"]
    result = invoke("long.py:factory", *options, "--memory-budget", str(target), "--keep-rewrites", "--stores", "", "--write")
    assert result.exit_code == 0, result.output
    assert "pick k=1, nothing_saveable, levels=2 (fastest within the memory budget)" in result.stdout
    # Written as the formatters lay out a call that no longer fits on one indented line.
    assert program.read_text() == LONG_SCAN.replace(
        "        step, h, ws, unroll=1, checkpoint=jax.checkpoint_policies.everything_saveable\n",
        "        step,\n        h,\n        ws,\n        unroll=1,\n"
        "        checkpoint=jax.checkpoint_policies.nothing_saveable,\n        levels=2,\n",
    )
    fn_after, args_after = load(program, "long_after").factory()
    assert assert_trees_close(jax.jit(fn_after)(*args_after), jax.jit(fn)(*args), rtol=1e-5, atol=1e-6) == 2


#: Every rewritten setting of the site is slow (a host callback that sleeps, which adds no
#: number): the original scan is the fastest by far, and the site is reverted.
SLOW_WHEN_REWRITTEN = '''\
import time

import jax
import jax.numpy as jnp
import numpy as np
import scanrewrite.runtime
from scanrewrite.runtime import ORIGINAL
from scanrewrite.runtime._override import Settings, Site, resolve


def pause():
    time.sleep(0.05)
    return np.zeros((), np.float32)


def step(h, x):
    if resolve(Site.parse((__file__, 23)), Settings(unroll=1), api="scan").unroll is not ORIGINAL:
        h = h + jax.pure_callback(pause, jax.ShapeDtypeStruct((), jnp.float32))
    return h * x, h


def fn(xs):
    h, hs = scanrewrite.runtime.scan(step, jnp.float32(1.0), xs, unroll=2)
    return h, hs


def factory():
    return fn, (jnp.linspace(0.5, 1.5, 4),)
'''


def test_a_site_where_the_original_wins_is_reverted(project: Path):
    program = write(project, "slow.py", SLOW_WHEN_REWRITTEN)
    result = invoke("slow.py:factory", "--ks", "1", "--repeats", "3", "--warmup", "0", "--write")
    assert result.exit_code == 0, result.output
    assert "slow.py:23 (scan, written unroll=2): pick original jax.lax.scan (fastest)" in result.stdout
    assert re.search(r"\| original jax\.lax\.scan \|.*\| 0 \| pick \|", result.stdout)
    # The write-back says what it did to the imports, as `scanrewrite -v` does.
    assert result.stderr.splitlines()[-3:-1] == [
        "slow.py:6: removed 'import scanrewrite.runtime'",
        "wrote the picks into slow.py",
    ]
    after = program.read_text()
    assert "    h, hs = jax.lax.scan(step, jnp.float32(1.0), xs)\n" in after
    # The module-level import only the reverted call used is gone; the others stay.
    assert "import scanrewrite.runtime\n" not in after and "from scanrewrite.runtime import ORIGINAL\n" in after
    original = load(write(project, "original.py", SLOW_WHEN_REWRITTEN), "slow_original")
    fn_after, args = load(program, "slow_after").factory()
    assert assert_trees_close(jax.jit(fn_after)(*args), jax.jit(original.fn)(*args), rtol=1e-6, atol=1e-6) == 2

    # --keep-rewrites keeps the rewrite: the original is not even tried.
    program.write_text(SLOW_WHEN_REWRITTEN)
    kept = invoke("slow.py:factory", "--ks", "1", "--repeats", "1", "--warmup", "0", "--keep-rewrites", "--check")
    assert "| original jax.lax.scan |" not in kept.stdout
    assert program.read_text() == SLOW_WHEN_REWRITTEN
