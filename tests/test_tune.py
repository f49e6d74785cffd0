"""`scanrewrite-tune` end to end on tiny programs in `tmp_path`, and its errors.

Every run compiles the program several times (lax.scan at every site, as written, each
candidate), so the programs are tiny and runs use one repeat and two chunk sizes. Nothing here
asserts a timing: picks are checked against the report's own numbers, and under a memory
budget taken from a first run's compiled memory, which XLA computes deterministically.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from click.testing import CliRunner, Result

import scanrewrite.runtime
import scanrewrite.tune
from scanrewrite.runtime import Site
from scanrewrite.tune import ORIGINAL_SCAN, Candidate
from scanrewrite.tune._command import main
from tests.treecheck import assert_trees_close

# On the CPU the chunk size is fitted to the step: the first site's step keeps more carry than
# residuals, so that k = 1 and k = 4 build programs of different memory there; at the second,
# they build one program, so that its pick is the written k whatever the timings.
TWO_SITES = '''\
import jax
import jax.numpy as jnp
import scanrewrite.runtime


def step(h, w):
    return 0.5 * h + jnp.tanh(h[0] @ w), jnp.sum(h)


def mix(h, w):
    return jnp.tanh(h @ w), jnp.sum(h)


def loss(ws, h):
    h, a = scanrewrite.runtime.scan(step, h, ws, unroll=1)
    h, b = scanrewrite.runtime.scan(mix, h, ws[::-1], unroll=1)
    return jnp.sum(h) + jnp.sum(a) + jnp.sum(b)


def factory():
    ws = jnp.stack([jnp.eye(8) * (0.5 + 0.1 * i) + 0.01 * i for i in range(4)])
    return jax.value_and_grad(loss, argnums=(0, 1)), (ws, jnp.ones((8, 8)))
'''
SITE_A, SITE_B = 15, 16

#: A program that cannot be compiled with `unroll=8` at its site (its step refuses to be traced
#: under that setting, as a step too large for the device would fail), and can with `unroll=1`.
FAILS_AT_K8 = '''\
import jax.numpy as jnp
import scanrewrite.runtime
from scanrewrite.runtime._override import Settings, Site, resolve


def step(h, x):
    if resolve(Site.parse((__file__, 13)), Settings(unroll=1), api="scan").unroll == 8:
        raise ValueError("too many steps traced at once")
    return h * x, h


def fn(xs):
    return scanrewrite.runtime.scan(step, 1.0, xs, unroll=1)[0]


def factory():
    return fn, (jnp.linspace(0.5, 1.5, 8),)
'''


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["-q", *args], catch_exceptions=False)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


@pytest.mark.main_only(
    "tune() and the command with a budget, on each release: "
    "test_tune_verify.py::test_a_budget_pick_with_a_policy_and_levels_is_written_back"
)
def test_two_sites_end_to_end(project: Path, monkeypatch: pytest.MonkeyPatch):
    # Tiny steps, whose memory the CPU would weigh as negligible (one step per chunk at every k):
    # weighed as a large step's, so that k decides the memory, as the test needs.
    monkeypatch.setattr(scanrewrite.runtime._chunks, "NEGLIGIBLE_BYTES", 0)
    monkeypatch.setattr(scanrewrite.runtime._chunks, "NEGLIGIBLE_SAVING", 0)  # and checkpointed
    program = write(project, "two.py", TWO_SITES)
    fn, args = load(program, "two_first").factory()
    # A first run, without a budget, gives each candidate's compiled memory at the first site.
    first = scanrewrite.tune.tune(fn, args, ks=[1, 4], repeats=1, warmup=0, keep_rewrites=True)
    site_a, site_b = Site(str(program.resolve()), SITE_A), Site(str(program.resolve()), SITE_B)
    assert [site.site for site in first.sites] == [site_a, site_b]
    memory = {row.candidate.unroll: row.memory_bytes for row in first.sites[0].rows}
    assert set(memory) == {1, 4} and memory[1] != memory[4]
    least = min(memory, key=memory.get)
    # The first site is written with the other k, so that its pick under the budget below (the
    # least memory) is a change. Its round measures the same two programs as the first run's.
    written_a = 4 if least == 1 else 1
    lines = TWO_SITES.splitlines(keepends=True)
    lines[SITE_A - 1] = lines[SITE_A - 1].replace("unroll=1", f"unroll={written_a}")
    source = "".join(lines)
    program.write_text(source)
    # Nothing that spends memory (stored steps, the for-loop's program): k alone decides here.
    options = ["--ks", "1,4", "--repeats", "1", "--warmup", "0", "--memory-budget", str(memory[least]), "--keep-rewrites"]
    options += ["--stores", ""]

    # The command, with a budget only the smaller one fits at the first site.
    result = invoke("two.py:factory", *options, "--diff", "--check")
    assert result.exit_code == 1, result.output
    assert program.read_text() == source
    tables = result.stderr
    assert f"two.py:{SITE_A} (scan, written unroll={written_a}): pick k={least} (fastest within the memory budget)" in tables
    assert "lax.scan at every site" in tables and "whole program" in tables
    site_a_table = tables.split(f"two.py:{SITE_A} (")[1].split(f"two.py:{SITE_B} (")[0]
    assert f"| k={written_a} (written) |" in site_a_table
    assert "| over budget |" in site_a_table.split(f"| k={written_a} (written) |")[1].splitlines()[0]
    heading = r"two\.py:(\d+) \(scan, written unroll=\d\): pick k=(\d+)"
    picks = {int(line): int(k) for line, k in re.findall(heading, tables)}
    assert picks.keys() == {SITE_A, SITE_B} and picks[SITE_A] == least and picks[SITE_B] == 1
    written = {SITE_A: written_a, SITE_B: 1}

    # The diff sets exactly the picks that differ from what is written, and applies with git.
    diff = result.stdout
    changed = {line: k for line, k in picks.items() if k != written[line]}
    assert SITE_A in changed
    assert diff.startswith("--- a/two.py\n+++ b/two.py\n")
    assert diff.count("\n-    h, ") == len(changed) == diff.count("\n+    h, ")
    for line, k in changed.items():
        old = source.splitlines()[line - 1]
        assert f"\n-{old}\n" in diff and f"\n+{old.replace(f'unroll={written[line]}', f'unroll={k}')}\n" in diff
    (project / "copy").mkdir()
    (project / "copy" / "two.py").write_text(source)
    subprocess.run(["git", "apply", "--directory=copy", "-"], input=diff.encode(), cwd=project, check=True)

    # --write writes what the diff showed; the written file computes the same numbers.
    result = invoke("two.py:factory", *options, "--write")
    assert result.exit_code == 0, result.output
    after = program.read_text()
    assert after == (project / "copy" / "two.py").read_text() != source
    fn_after, args_after = load(program, "two_after").factory()
    expected = jax.jit(fn)(*args)
    assert assert_trees_close(jax.jit(fn_after)(*args_after), expected, rtol=2e-5, atol=2e-5) == 3
    assert assert_trees_close(fn_after(*args_after), fn(*args), rtol=2e-5, atol=2e-5) == 3
    # A deliberately wrong program (the second scan not reversed) is told apart.
    wrong = load(write(project, "wrong.py", after.replace("ws[::-1]", "ws")), "two_wrong").factory()
    with pytest.raises(AssertionError):
        assert_trees_close(jax.jit(wrong[0])(*wrong[1]), expected, rtol=2e-5, atol=2e-5)


def test_a_candidate_that_fails_to_compile_is_reported_in_its_row(project: Path):
    write(project, "fails.py", FAILS_AT_K8)
    # -v: a line per step (for a log) instead of the bar, each with the seconds since the start.
    args = ["fails.py:factory", "--ks", "1,8", "--repeats", "1", "--keep-rewrites", "-v"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 2
    assert "| k=8 | failed to compile: ValueError: too many steps traced at once |" in result.stdout
    assert re.search(r"\| k=1 \(written\) \| [0-9.]+ \|.*\| pick \|", result.stdout)
    lines = result.stderr.splitlines()
    steps = [line for line in lines if re.match(r"(tuning|whole program) \d+/\d+: ", line)]
    assert len(steps) > 3 and lines[: len(steps)] == steps
    # A stage per total: the candidates, then the picks measured together.
    tuning = [line for line in steps if line.startswith("tuning ")]
    for done, line in enumerate(tuning, 1):
        assert re.fullmatch(rf"tuning {done}/{len(tuning)}: .+ \(\d+ s\)", line), line
    assert re.fullmatch(r"whole program 1/1: timing every site at its pick \(\d+ s\)", steps[-1])
    assert steps[0].startswith("tuning 1/") and ": lax.scan at every site (" in steps[0]
    assert any(": fails.py:13 k=8 (" in line for line in steps)
    assert lines[len(steps) :] == [
        "error: fails.py:13: k=8: failed to compile: ValueError: too many steps traced at once",
        "1 site tuned, 0 with a pick other than what is written",
    ]


def test_the_patch_for_a_factory_outside_the_current_folder_applies_from_the_root(
    project: Path, tmp_path_factory: pytest.TempPathFactory
):
    # Written `unroll=True`, which is no candidate (k=1 and the original scan are): the pick
    # changes the call.
    outside = tmp_path_factory.mktemp("elsewhere") / "whole.py"
    source = FAILS_AT_K8.replace("xs, unroll=1)[0]", "xs, unroll=True)[0]")
    outside.write_text(source)
    result = invoke(f"{outside}:factory", "--ks", "1", "--repeats", "1", "--warmup", "0", "--diff")
    name = outside.resolve().as_posix().lstrip("/")
    assert result.stdout.startswith(f"--- a/{name}\n+++ b/{name}\n@@ "), result.stdout
    subprocess.run(["git", "apply", "-"], input=result.stdout.encode(), cwd="/", check=True, capture_output=True)
    after = outside.read_text()
    assert "jax.lax.scan(step, 1.0, xs, unroll=True)" in after or "runtime.scan(step, 1.0, xs, unroll=1)" in after


@pytest.mark.parametrize(
    ("files", "target", "message"),
    [
        pytest.param({}, "missing.py:factory", "error: missing.py: no such file", id="missing-file"),
        pytest.param(
            {"p.py": "x = (\n"}, "p.py:factory", "error: p.py:1: cannot import: SyntaxError: ", id="syntax-error"
        ),
        pytest.param(
            {"p.py": "import os\nraise RuntimeError('no data')\n"}, "p.py:factory",
            "error: p.py:2: cannot import: RuntimeError: no data", id="import-raises",
        ),
        pytest.param({"p.py": "x = 1\n"}, "p.py:factory", "error: p.py: no 'factory' in the file", id="no-factory"),
        pytest.param(
            {"p.py": "factory = 3\n"}, "p.py:factory", "error: p.py: 'factory' is not a function", id="not-callable"
        ),
        pytest.param(
            {"p.py": "def factory():\n    return 1\n"}, "p.py:factory",
            "error: p.py: factory() must return (fn, args) or (fn, args, kwargs), got int", id="wrong-shape",
        ),
        pytest.param(
            {"p.py": "def factory():\n    return print, 3\n"}, "p.py:factory",
            "error: p.py: factory() must return (fn, args) or (fn, args, kwargs): args is int, not a tuple",
            id="args-not-tuple",
        ),
        pytest.param(
            {"p.py": "def factory():\n    return len, ()\n"}, "p.py:factory",
            "error: the function fails when traced: TypeError: ", id="fn-fails-when-traced",
        ),
        pytest.param(
            {"p.py": "def factory():\n    raise KeyError('w')\n"}, "p.py:factory",
            "error: p.py:2: factory() failed: KeyError: 'w'", id="factory-raises",
        ),
        pytest.param(
            {"p.py": "import jax.numpy as jnp\n\ndef factory():\n    return jnp.sin, (jnp.ones(3),)\n"}, "p.py:factory",
            "error: the function traces no rewritten call", id="no-site",
        ),
        pytest.param({"p.py": "x = 1\n"}, "p.py", "error: expected FILE.py:FACTORY, got 'p.py'", id="no-factory-named"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(project: Path, files, target, message):
    for name, text in files.items():
        write(project, name, text)
    result = invoke(target)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(message), result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--ks", "0,2"], "positive ints", id="bad-ks"),
        pytest.param(["--memory-budget", "lots"], "memory budget", id="bad-budget"),
        pytest.param(["--policies", "dots"], "unknown checkpoint mode", id="bad-policy"),
        pytest.param(["--write", "--check"], "cannot be used together", id="write-and-check"),
        pytest.param(["-v"], "--quiet and --verbose cannot be used together", id="quiet-and-verbose"),
    ],
)
def test_bad_options_exit_2(project: Path, args, message):
    result = invoke("p.py:factory", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_an_eqxi_scan_site_is_tried_without_checkpoint_modes():
    def step(h, x):
        return jnp.sin(h) * x, h

    def fn(xs):
        return scanrewrite.runtime.eqxi_scan(step, jnp.ones(3), xs, kind="checkpointed", unroll=1)[0]  # eqxi site

    report = scanrewrite.tune.tune(fn, (jnp.ones((6, 3)),), ks=[2], checkpoints="none", repeats=1, warmup=0)
    (site,) = report.sites
    assert site.kind == "eqxi_scan" and site.site.line == line_of_marker("eqxi site")
    assert [row.label for row in site.rows] == ["k=2", "k=1 (written)", "original equinox.internal.scan"]
    assert report.picks == {site.site: site.pick} and site.pick in (Candidate(1), Candidate(2), ORIGINAL_SCAN)
    assert report.unroll_picks == {site.site: None if site.pick.original else site.pick.unroll}
    picked = "original equinox.internal.scan" if site.pick.original else site.pick
    assert f"{site.site} (eqxi_scan, written unroll=1): pick {picked}" in str(report)
    assert [row.label for row in report.whole][0] == "equinox.internal.scan at every site"


def test_fori_loop_and_map_sites_are_tuned_with_checkpoint_modes():
    def fn(h, xs):
        h = scanrewrite.runtime.fori_loop(0, 6, lambda i, h: jnp.sin(h) * i, h, unroll=1)  # fori site
        return jnp.sum(scanrewrite.runtime.map(jnp.tanh, xs * h, unroll=1))  # map site

    report = scanrewrite.tune.tune(fn, (jnp.ones(3), jnp.ones((6, 3))), ks=[2], checkpoints="none", repeats=1, warmup=0)
    assert [(site.kind, site.site.line) for site in report.sites] == [
        ("fori_loop", line_of_marker("fori site")),
        ("map", line_of_marker("map site")),
    ]
    for site in report.sites:
        assert [row.label for row in site.rows] == [
            "k=2", "k=1 (written)", "k=2, checkpoint=False", "k=1, checkpoint=False", f"original jax.lax.{site.kind}"
        ]
        assert site.pick is not None and all(row.error is None for row in site.rows)


def line_of_marker(marker: str) -> int:
    with open(__file__) as file:
        return next(i for i, text in enumerate(file, 1) if text.rstrip().endswith(f"# {marker}"))


PRAGMA = '''\
import jax.numpy as jnp
import scanrewrite.runtime


def fn(xs):
    return scanrewrite.runtime.scan(lambda h, x: (h * x, h), 1.0, xs, unroll=2)[0]  # scanrewrite: unroll=2


def factory():
    return fn, (jnp.linspace(0.5, 1.5, 6),)
'''


def test_a_pragma_wins_over_the_pick_and_is_reported(project: Path):
    write(project, "pragma.py", PRAGMA)
    result = invoke("pragma.py:factory", "--ks", "1", "--repeats", "1", "--warmup", "0", "--check", "--diff")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert (project / "pragma.py").read_text() == PRAGMA
    assert "pragma.py:6: not written: " in result.stderr
    assert "pragma" in result.stderr.split("pragma.py:6: not written: ")[1].splitlines()[0]


#: A scan bound with `functools.partial`, as samplers write their loop (blackjax's
#: `jax.jit(partial(lax.scan, one_step))(state, keys)`) and as a name called later, rewritten.
PARTIALS = '''\
from functools import partial

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def step(h, w):
    return 0.5 * h + jnp.tanh(h[0] @ w), jnp.sum(h)


def mix(h, w):
    return jnp.tanh(h @ w), jnp.sum(h)


def loss(ws, h):
    h, a = jax.jit(partial(scanrewrite.runtime.scan, step, unroll=1))(h, ws)
    integrate = partial(scanrewrite.runtime.scan, mix, unroll=1)
    h, b = integrate(h, ws[::-1])
    return jnp.sum(h) + jnp.sum(a) + jnp.sum(b)


def factory():
    ws = jnp.stack([jnp.eye(8) * (0.5 + 0.1 * i) + 0.01 * i for i in range(4)])
    return jax.value_and_grad(loss, argnums=(0, 1)), (ws, jnp.ones((8, 8)))


# Tiny steps, whose memory the CPU would weigh as negligible (one step per chunk at every k):
# weighed as a large step's, so that k decides the memory, as the test needs.
scanrewrite.runtime._chunks.NEGLIGIBLE_BYTES = 0
scanrewrite.runtime._chunks.NEGLIGIBLE_SAVING = 0  # and checkpointed, whatever it saves
'''
#: The jitted partial's line; the line that calls the bound one (the partial is the line above).
JITTED, BOUND = 17, 19


@pytest.mark.main_only(
    "the command in a subprocess, on each release: the sites by test_override.py::"
    "test_a_scan_bound_with_partial_is_sited_at_the_user_line_that_applies_it, the write-back by "
    "test_codemod_writeback_settings.py::test_write_picks_reaches_a_partial_by_the_line_that_applies_it"
)
def test_a_scan_bound_with_partial_is_tuned_and_written_back_in_a_subprocess(project: Path):
    program = write(project, "sampler.py", PARTIALS)
    fn, args = load(program, "sampler_first").factory()
    # As in the two-site test: the first site's memory by k, so that a budget makes the pick.
    first = scanrewrite.tune.tune(fn, args, ks=[1, 4], repeats=1, warmup=0, keep_rewrites=True)
    path = str(program.resolve())
    assert [site.site for site in first.sites] == [Site(path, JITTED), Site(path, BOUND)]
    memory = {row.candidate.unroll: row.memory_bytes for row in first.sites[0].rows}
    assert set(memory) == {1, 4} and memory[1] != memory[4]
    least = min(memory, key=memory.get)
    written = 4 if least == 1 else 1
    source = PARTIALS.replace("step, unroll=1", f"step, unroll={written}")
    program.write_text(source)

    # No stored steps: a budget would otherwise spend on them, and one repeat picks by noise.
    options = ["--ks", "1,4", "--repeats", "1", "--warmup", "0", "--memory-budget", str(memory[least]), "--stores", ""]
    command = [sys.executable, "-m", "scanrewrite.tune", "sampler.py:factory", "-q", *options, "--keep-rewrites", "--write"]
    result = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "wrote the picks into sampler.py",
        "2 sites tuned, 1 with a pick other than what is written; 1 file written",
    ]
    after = program.read_text()
    assert after == source.replace(f"step, unroll={written}", f"step, unroll={least}")

    # The written file computes what the original lax.scan computes, jitted and not.
    original = load(write(project, "original.py", after.replace("scanrewrite.runtime.scan", "jax.lax.scan")), "o")
    expected = jax.jit(original.factory()[0])(*args)
    fn_after, args_after = load(program, "sampler_after").factory()
    assert assert_trees_close(jax.jit(fn_after)(*args_after), expected, rtol=2e-5, atol=2e-5) == 3
    assert assert_trees_close(fn_after(*args_after), expected, rtol=2e-5, atol=2e-5) == 3
    wrong = load(write(project, "wrong.py", after.replace("ws[::-1]", "ws")), "sampler_wrong").factory()
    with pytest.raises(AssertionError):
        assert_trees_close(jax.jit(wrong[0])(*wrong[1]), expected, rtol=2e-5, atol=2e-5)
