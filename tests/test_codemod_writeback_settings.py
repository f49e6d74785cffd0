"""The full write-back (`set_settings`, `write_picks`): checkpoint modes and levels written or
left out as defaults, the sites the original won reverted, the layout of calls that grow or
shrink, and what is left alone, and why."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scanrewrite.codemod import Settings, Skipped, set_settings, write_picks


def _src(text: str) -> bytes:
    return textwrap.dedent(text).encode()


SETTINGS = [
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        {4: Settings(2, "dots_saveable", 2)},
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=2, checkpoint=jax.checkpoint_policies.dots_saveable, levels=2)
        """,
        120,
        id="policy and levels appended",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        {3: Settings(4, "nothing_saveable")},
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=jax.checkpoint_policies.nothing_saveable)
        """,
        120,
        id="a policy where nothing binds jax: import jax added",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=True, levels=2)
        """,
        {3: Settings(3, False, "auto")},
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=3, checkpoint=False, levels="auto")
        """,
        88,
        id="values replaced",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=False, levels=2)
        """,
        {3: Settings(4, True, 1)},
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        88,
        id="defaults left out",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime


        def f(step_function, initial_state, inputs):
            return scanrewrite.runtime.scan(step_function, initial_state, inputs, unroll=4)
        """,
        {5: Settings(4, False, 2)},
        """\
        import scanrewrite.runtime


        def f(step_function, initial_state, inputs):
            return scanrewrite.runtime.scan(
                step_function, initial_state, inputs, unroll=4, checkpoint=False, levels=2
            )
        """,
        88,
        id="too long for its line: hugged",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime


        def f(step_function, initial_state, inputs):
            return scanrewrite.runtime.scan(
                step_function, initial_state, inputs, unroll=4, checkpoint=False, levels=2
            )
        """,
        {5: Settings(4, True, 1)},
        """\
        import scanrewrite.runtime


        def f(step_function, initial_state, inputs):
            return scanrewrite.runtime.scan(step_function, initial_state, inputs, unroll=4)
        """,
        88,
        id="short enough again: joined",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        {3: Settings(1, store=4)},
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=1, store=4)
        """,
        88,
        id="stored steps appended",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=1, store=4)
        """,
        {3: Settings(2, store=0)},
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=2)
        """,
        88,
        id="no stored steps: left out",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        {3: Settings(16, False)},
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=16, checkpoint=False)
        """,
        88,
        id="the for-loop's program",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=jax.checkpoint_policies.dots_saveable)
        """,
        {3: Settings(1, "reductions_saveable")},
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=1, checkpoint=scanrewrite.runtime.reductions_saveable)
        """,
        120,
        id="a runtime policy: no import jax, the runtime is bound already",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime as sr

        y = sr.scan(f, c, xs, unroll=4, checkpoint=sr.reductions_saveable)
        """,
        {3: Settings(4, "dots_and_reductions_saveable")},
        """\
        import scanrewrite.runtime as sr

        y = sr.scan(f, c, xs, unroll=4, checkpoint=sr.dots_and_reductions_saveable)
        """,
        120,
        id="a runtime policy named as the call names the runtime, replaced",
    ),
    pytest.param(
        """\
        import functools
        import scanrewrite.runtime

        run = functools.partial(scanrewrite.runtime.scan, f, unroll=4)
        """,
        {4: Settings(4, "dots_with_no_batch_dims_and_reductions_saveable")},
        """\
        import functools
        import scanrewrite.runtime

        run = functools.partial(
            scanrewrite.runtime.scan,
            f,
            unroll=4,
            checkpoint=scanrewrite.runtime.dots_with_no_batch_dims_and_reductions_saveable,
        )
        """,
        120,
        id="a runtime policy in a partial",
    ),
]


@pytest.mark.parametrize(("before", "picks", "after", "line_length"), SETTINGS)
def test_set_settings(before: str, picks: dict[int, Settings], after: str, line_length: int) -> None:
    result = set_settings(_src(before), picks, line_length)
    assert result.code.decode() == textwrap.dedent(after)
    assert result.updated == tuple(sorted(picks)) and result.skipped == ()
    again = set_settings(result.code, picks, line_length)
    assert again.code == result.code and not again.changed, "not idempotent"


@pytest.mark.parametrize(
    ("source", "settings", "reason"),
    [
        pytest.param(
            "y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=policy)\n",
            Settings(4, False),
            "checkpoint is written as an expression (`policy`), not a value: set it by hand",
            id="checkpoint expression",
        ),
        pytest.param(
            "y = scanrewrite.runtime.scan(f, c, xs, unroll=4, levels=depth)\n",
            Settings(2),
            None,
            id="levels expression kept as written when the pick leaves it",
        ),
        pytest.param(
            "y = scanrewrite.runtime.scan(f, c, xs, unroll=4, **options)\n",
            Settings(4, None, 2),
            "levels may come from **kwargs",
            id="kwargs",
        ),
        pytest.param(
            "y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind='lax', unroll=4)\n",
            Settings(4, False),
            "equinox.internal.scan takes no checkpoint",
            id="eqxi_scan takes no checkpoint",
        ),
        pytest.param(
            "def g(jax):\n    return scanrewrite.runtime.scan(f, c, xs, unroll=4)\n",
            Settings(4, "dots_saveable"),
            "checkpoint policy needs `jax`, which is bound to something else here",
            id="jax shadowed",
        ),
        pytest.param(
            "from scanrewrite.runtime import scan\ny = scan(f, c, xs, unroll=4)\n",
            Settings(4, "reductions_saveable"),
            "the call names the runtime by a bare name: write checkpoint=scanrewrite.runtime.reductions_saveable by hand",
            id="runtime policy, runtime by a bare name",
        ),
    ],
)
def test_what_cannot_be_written_leaves_the_whole_site(source: str, settings: Settings, reason: str | None) -> None:
    source = b"import scanrewrite.runtime\n" + source.encode()
    line = source.count(b"\n")
    result = set_settings(source, {line: settings})
    if reason is None:
        assert result.skipped == () and b"levels=depth" in result.code
    else:
        assert result.code == source
        assert result.skipped == (Skipped(line, reason),)


def test_write_picks_reverts_where_the_original_won_and_sets_the_rest() -> None:
    source = _src(
        """\
        import jax.numpy as jnp
        import scanrewrite.runtime

        a = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        b = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        c = scanrewrite.runtime.scan(f, c, xs, unroll=4)  # scanrewrite: unroll=4
        d = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """
    )
    result = write_picks(source, {4: None, 5: Settings(2, "dots_saveable"), 6: None, 7: Settings(1)}, line_length=120)
    assert result.code.decode() == textwrap.dedent(
        """\
        import jax
        import jax.numpy as jnp
        import scanrewrite.runtime

        a = jax.lax.scan(f, c, xs)
        b = scanrewrite.runtime.scan(f, c, xs, unroll=2, checkpoint=jax.checkpoint_policies.dots_saveable)
        c = scanrewrite.runtime.scan(f, c, xs, unroll=4)  # scanrewrite: unroll=4
        d = scanrewrite.runtime.scan(f, c, xs, unroll=1)
        """
    )
    assert result.updated == (4, 5, 7)
    assert result.skipped == (Skipped(6, "a pragma pins this call's settings"),)
    everything = write_picks(source.replace(b"  # scanrewrite: unroll=4", b""), dict.fromkeys([4, 5, 6, 7]))
    assert b"scanrewrite" not in everything.code and everything.updated == (4, 5, 6, 7)


def test_write_picks_reaches_a_partial_by_the_line_that_applies_it() -> None:
    """The runtime names a bound scan's site by the line of the call that runs it; the write-back
    sets, or reverts, the partial it applies."""
    source = _src(
        """\
        from functools import partial

        import scanrewrite.runtime


        def run(init, xs):
            integrate = partial(scanrewrite.runtime.scan, step, unroll=4)
            return integrate(init, xs)


        def jitted(init, xs):
            return jax.jit(partial(scanrewrite.runtime.scan, step, unroll=4))(init, xs)
        """
    )
    result = write_picks(source, {8: Settings(2, False), 12: None, 9: Settings(1)})
    assert result.code.decode() == textwrap.dedent(
        """\
        from functools import partial

        import jax
        import scanrewrite.runtime


        def run(init, xs):
            integrate = partial(scanrewrite.runtime.scan, step, unroll=2, checkpoint=False)
            return integrate(init, xs)


        def jitted(init, xs):
            return jax.jit(partial(jax.lax.scan, step))(init, xs)
        """
    )
    assert result.updated == (8, 12)
    assert result.skipped == (Skipped(9, "no scanrewrite.runtime call starts on this line"),)


def test_formatted_stays_formatted(tmp_path: Path) -> None:
    """Before/after cases with formatted sources: ruff format leaves the results as they are."""
    pytest.importorskip("ruff", reason="ruff is in the test extras")
    for param in SETTINGS:
        before, picks, _, line_length = param.values
        folder = tmp_path / str(line_length)
        folder.mkdir(exist_ok=True)
        (folder / f"{len(list(folder.iterdir()))}.py").write_bytes(set_settings(_src(before), picks, line_length).code)
    for folder in tmp_path.iterdir():
        formatted = subprocess.run(
            [sys.executable, "-m", "ruff", "format", "--isolated", "--check", "--line-length", folder.name, "."],
            cwd=folder, capture_output=True, text=True, timeout=120,
        )
        assert formatted.returncode == 0, formatted.stdout + formatted.stderr
