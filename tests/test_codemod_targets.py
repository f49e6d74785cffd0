"""Selecting targets: `jax.lax.fori_loop` and `jax.lax.map` are rewritten only on request.

Before/after pairs for every spelling of both, no-op cases (the default selection, and names
that only look like them), and the selection's own errors.
"""

import textwrap

import pytest

from scanrewrite.codemod import Skipped, may_rewrite, rewrite
from scanrewrite.targets import DEFAULT_TARGETS, TARGET_NAMES, TARGETS, select

ALL = ",".join(TARGET_NAMES)


def _src(text):
    return textwrap.dedent(text).encode()


REWRITES = [
    pytest.param(
        """\
        import jax
        y = jax.lax.fori_loop(0, 10, body, y0)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.fori_loop(0, 10, body, y0, unroll=4)
        """,
        id="jax.lax.fori_loop",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.fori_loop(0, n, body, y0)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.fori_loop(0, n, body, y0, unroll=4)
        """,
        id="lax.fori_loop",
    ),
    pytest.param(
        """\
        from jax.lax import fori_loop
        y = fori_loop(0, n, body, y0)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.fori_loop(0, n, body, y0, unroll=4)
        """,
        id="from jax.lax import fori_loop",
    ),
    pytest.param(
        """\
        import jax.lax as jl
        from jax.lax import fori_loop as loop
        y = jl.fori_loop(0, n, body, loop(0, 3, body, y0))
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.fori_loop(0, n, body, scanrewrite.runtime.fori_loop(0, 3, body, y0, unroll=4), unroll=4)
        """,
        id="aliases, nested",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.fori_loop(lower=0, upper=n, body_fun=body, init_val=y0)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.fori_loop(lower=0, upper=n, body_fun=body, init_val=y0, unroll=4)
        """,
        id="keywords",
    ),
    pytest.param(
        """\
        from jax import lax
        a = lax.fori_loop(0, n, body, y0, unroll=2)
        b = lax.fori_loop(0, n, body, y0, unroll=True)
        """,
        """\
        import scanrewrite.runtime
        a = scanrewrite.runtime.fori_loop(0, n, body, y0, unroll=2)
        b = scanrewrite.runtime.fori_loop(0, n, body, y0, unroll=True)
        """,
        id="unroll already given",
    ),
    pytest.param(
        """\
        from jax import lax
        state = lax.fori_loop(
            0,
            n_steps,
            step,  # the integrator
            (x, v),
        )
        """,
        """\
        import scanrewrite.runtime
        state = scanrewrite.runtime.fori_loop(
            0,
            n_steps,
            step,  # the integrator
            (x, v),
            unroll=4,
        )
        """,
        id="one argument per line",
    ),
    pytest.param(
        """\
        from jax import lax
        a = lax.fori_loop(*bounds, body, y0)
        b = lax.fori_loop(0, n, body, y0, unroll=2, **options)
        """,
        """\
        import scanrewrite.runtime
        a = scanrewrite.runtime.fori_loop(*bounds, body, y0, unroll=4)
        b = scanrewrite.runtime.fori_loop(0, n, body, y0, unroll=2, **options)
        """,
        id="star args cannot reach a keyword-only unroll",
    ),
    pytest.param(
        """\
        import jax
        ys = jax.lax.map(f, xs)
        """,
        """\
        import scanrewrite.runtime
        ys = scanrewrite.runtime.map(f, xs, unroll=4)
        """,
        id="jax.lax.map",
    ),
    pytest.param(
        """\
        from jax import lax
        ys = lax.map(f, xs, batch_size=16)
        zs = lax.map(f=f, xs=xs)
        """,
        """\
        import scanrewrite.runtime
        ys = scanrewrite.runtime.map(f, xs, batch_size=16, unroll=4)
        zs = scanrewrite.runtime.map(f=f, xs=xs, unroll=4)
        """,
        id="lax.map, batch_size and keywords",
    ),
    pytest.param(
        """\
        from jax.lax import map
        ys = map(f, xs)
        """,
        """\
        import scanrewrite.runtime
        ys = scanrewrite.runtime.map(f, xs, unroll=4)
        """,
        id="from jax.lax import map",
    ),
    pytest.param(
        """\
        from jax.lax import map as lmap
        ys = lmap(f, xs, **options)
        zs = list(map(abs, xs))
        """,
        """\
        import scanrewrite.runtime
        ys = scanrewrite.runtime.map(f, xs, **options, unroll=4)
        zs = list(map(abs, xs))
        """,
        id="alias; jax's map takes no unroll, so **kwargs cannot carry one; the builtin stays",
    ),
    pytest.param(
        """\
        import jax
        from jax import lax
        y = lax.fori_loop(0, n, body, lax.scan(f, c, xs)[0])
        zs = jax.lax.map(f, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.fori_loop(0, n, body, scanrewrite.runtime.scan(f, c, xs, unroll=4)[0], unroll=4)
        zs = scanrewrite.runtime.map(f, xs, unroll=4)
        """,
        id="beside a scan",
    ),
]


@pytest.mark.parametrize("before, after", REWRITES)
def test_rewrites(before, after):
    result = rewrite(_src(before), targets=ALL)
    assert result.code.decode() == textwrap.dedent(after)
    again = rewrite(result.code, targets=ALL)
    assert (again.code, again.changed) == (result.code, False), "not idempotent"


NOOPS = [
    pytest.param("import jax\nys = list(map(f, xs))\nzs = jax.tree.map(f, xs)\n", id="builtin and jax.tree.map"),
    pytest.param("import jax\nzs = jax.tree_util.tree_map(f, xs)\nws = pool.map(f, xs)\n", id="other maps"),
    pytest.param("import jax\ndef fori_loop(a, b, f, x):\n    return x\ny = fori_loop(0, 3, f, 1)\n", id="local"),
    pytest.param(
        "import scanrewrite.runtime\ny = scanrewrite.runtime.fori_loop(0, n, body, y0, unroll=4)\n", id="rewritten"
    ),
]


@pytest.mark.parametrize("source", NOOPS)
def test_noop(source):
    result = rewrite(source.encode(), targets=ALL)
    assert (result.code, result.rewritten, result.skipped) == (source.encode(), (), ())


def test_the_default_selection_leaves_fori_loop_and_map_alone():
    source = b"from jax import lax\ny = lax.fori_loop(0, n, body, y0)\nys = lax.map(f, xs)\n"
    assert DEFAULT_TARGETS == ("lax.scan", "eqxi.scan")
    assert rewrite(source).code == source
    assert not may_rewrite(source)
    assert may_rewrite(source, ("lax.map",)) and may_rewrite(source, "lax.fori_loop")


def test_only_the_selected_targets_are_rewritten_and_reported():
    source = _src(
        """\
        from jax import lax
        y = lax.fori_loop(0, n, body, y0)
        ys = lax.map(f, xs)
        fn = functools.partial(lax.map, f)
        """
    )
    result = rewrite(source, targets=["lax.map"])
    assert [(call.line, call.api) for call in result.rewritten] == [(3, "jax.lax.map")]
    assert result.skipped == (Skipped(4, "reference to jax.lax.map that is not a call"),)
    assert b"lax.fori_loop(0, n, body, y0)\n" in result.code


@pytest.mark.parametrize(
    "options, written",
    [
        pytest.param(dict(levels=2, checkpoint="none"), ", unroll=8, checkpoint=False, levels=2)", id="options"),
        pytest.param(dict(checkpoint="dots_saveable"), ", unroll=8, checkpoint=jax.checkpoint_policies.dots_saveable)", id="policy"),
    ],
)
def test_options_and_pragmas_apply_to_both(options, written):
    source = "import jax\ny = jax.lax.fori_loop(0, n, body, y0)  # scanrewrite: unroll=8\nys = jax.lax.map(f, xs)  # scanrewrite: unroll=8\n"
    code = rewrite(source.encode(), targets=ALL, **options).code.decode()
    assert code.count(written) == 2
    skipped = rewrite(b"import jax\ny = jax.lax.fori_loop(0, n, body, y0)  # scanrewrite: skip\n", targets=ALL)
    assert skipped.skipped == (Skipped(2, "skip pragma"),)


def test_unroll_from_kwargs_is_not_guessed():
    result = rewrite(b"from jax import lax\ny = lax.fori_loop(0, n, body, y0, **options)\n", targets=ALL)
    assert result.skipped == (Skipped(2, "unroll may come from **kwargs"),) and not result.changed


@pytest.mark.parametrize(
    "targets, message",
    [
        pytest.param("lax.fori", r"unknown target 'lax.fori' \(did you mean 'lax.fori_loop'\?\); the targets are", id="typo"),
        pytest.param(["jax.lax.map"], r"unknown target 'jax.lax.map' \(did you mean 'lax.map'\?\)", id="qualified"),
        pytest.param("while_loop", r"unknown target 'while_loop'; the targets are lax.scan, eqxi.scan", id="unknown"),
        pytest.param(" , ", "no targets given", id="empty"),
    ],
)
def test_a_bad_selection_is_a_one_line_value_error(targets, message):
    with pytest.raises(ValueError, match=message) as raised:
        rewrite(b"x = 1\n", targets=targets)
    assert "\n" not in str(raised.value)


def test_select_keeps_the_tables_order_and_drops_repeats():
    assert [target.name for target in select(" lax.map,lax.scan,lax.map ")] == ["lax.scan", "lax.map"]
    assert select(TARGET_NAMES) == TARGETS
