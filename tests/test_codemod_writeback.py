"""The write-back (`set_unroll`, `read_unroll`): before/after pairs, no-op cases, pragmas
and skips, bytes, and a round trip through the rewrite."""

from __future__ import annotations

import textwrap

import pytest

from scanrewrite.codemod import Skipped, SourceError, read_unroll, rewrite, set_unroll


def _src(text: str) -> bytes:
    return textwrap.dedent(text).encode()


SET = [
    pytest.param(
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        {2: 2},
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=2)
        """,
        id="keyword value replaced",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs)
        """,
        {2: 3},
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=3)
        """,
        id="added when absent",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, None, False, 4)
        """,
        {2: 8},
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, None, False, 8)
        """,
        id="positional unroll replaced",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        h, ys = scanrewrite.runtime.scan(
            step,  # the body
            h0,
            xs,
            unroll=4,  # picked by scanrewrite-tune
            checkpoint=False,
        )
        """,
        {2: 6},
        """\
        import scanrewrite.runtime
        h, ys = scanrewrite.runtime.scan(
            step,  # the body
            h0,
            xs,
            unroll=6,  # picked by scanrewrite-tune
            checkpoint=False,
        )
        """,
        id="one per line, comments stay",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        h, ys = scanrewrite.runtime.scan(
            step,
            h0,
            xs,
        )
        """,
        {2: 2},
        """\
        import scanrewrite.runtime
        h, ys = scanrewrite.runtime.scan(
            step,
            h0,
            xs,
            unroll=2,
        )
        """,
        id="added in the call's layout",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="checkpointed", unroll=4)
        z = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax")
        """,
        {2: 1, 3: 2},
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="checkpointed", unroll=1)
        z = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=2)
        """,
        id="eqxi_scan",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.fori_loop(0, n, body, y, unroll=4)
        z = scanrewrite.runtime.map(f, xs, batch_size=8)
        """,
        {2: 2, 3: 3},
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.fori_loop(0, n, body, y, unroll=2)
        z = scanrewrite.runtime.map(f, xs, batch_size=8, unroll=3)
        """,
        id="fori_loop and map",
    ),
    pytest.param(
        """\
        from scanrewrite.runtime import scan as rscan
        y = rscan(f, c, xs, unroll=4)
        """,
        {2: 2},
        """\
        from scanrewrite.runtime import scan as rscan
        y = rscan(f, c, xs, unroll=2)
        """,
        id="imported by name",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        def outer(c, xs):
            def inner(c, x):
                return scanrewrite.runtime.scan(g, c, x, unroll=4)
            return scanrewrite.runtime.scan(inner, c, xs, unroll=4)
        """,
        {5: 2, 6: 3},
        """\
        import scanrewrite.runtime

        def outer(c, xs):
            def inner(c, x):
                return scanrewrite.runtime.scan(g, c, x, unroll=2)
            return scanrewrite.runtime.scan(inner, c, xs, unroll=3)
        """,
        id="nested sites, each its own pick",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, scanrewrite.runtime.scan(g, c, xs, unroll=4)[0], xs, unroll=4)
        """,
        {2: 2},
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, scanrewrite.runtime.scan(g, c, xs, unroll=2)[0], xs, unroll=2)
        """,
        id="calls sharing a first line are one site",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        a = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        b = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        {3: 1},
        """\
        import scanrewrite.runtime
        a = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        b = scanrewrite.runtime.scan(f, c, xs, unroll=1)
        """,
        id="only the picked lines",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from functools import partial
        y = jax.jit(partial(scanrewrite.runtime.scan, f, unroll=4))(c, xs)
        """,
        {3: 2},
        """\
        import scanrewrite.runtime
        from functools import partial
        y = jax.jit(partial(scanrewrite.runtime.scan, f, unroll=2))(c, xs)
        """,
        id="a partial, applied on its own line",
    ),
    pytest.param(
        """\
        import functools
        import scanrewrite.runtime
        run = functools.partial(scanrewrite.runtime.scan, f)
        jitted = jax.jit(run)
        y = jitted(
            c, xs
        )
        """,
        {5: 3},
        """\
        import functools
        import scanrewrite.runtime
        run = functools.partial(scanrewrite.runtime.scan, f, unroll=3)
        jitted = jax.jit(run)
        y = jitted(
            c, xs
        )
        """,
        id="a partial, at the line of the call that applies it through names",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from functools import partial
        y = jax.jit(
            partial(scanrewrite.runtime.scan, f, c, None, 3, False, 4)
        )()
        """,
        {3: 8},
        """\
        import scanrewrite.runtime
        from functools import partial
        y = jax.jit(
            partial(scanrewrite.runtime.scan, f, c, None, 3, False, 8)
        )()
        """,
        id="a partial's positional unroll, at the line of the call that applies it",
    ),
]


@pytest.mark.parametrize(("before", "picks", "after"), SET)
def test_set_unroll(before: str, picks: dict[int, int], after: str) -> None:
    result = set_unroll(_src(before), picks)
    assert result.code.decode() == textwrap.dedent(after)
    assert result.changed
    assert result.updated == tuple(sorted(picks))
    assert result.skipped == ()
    again = set_unroll(result.code, picks)
    assert again.code == result.code, "not idempotent"
    assert not again.changed
    assert again.unchanged == tuple(sorted(picks))
    for line, unroll in picks.items():
        assert read_unroll(result.code)[line] == unroll


NOOP = [
    pytest.param("", {1: 2}, [Skipped(1, "no scanrewrite.runtime call starts on this line")], id="empty"),
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs)\n",
        {2: 2},
        [Skipped(2, "no scanrewrite.runtime call starts on this line")],
        id="not rewritten",
    ),
    pytest.param(
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(\n    f, c, xs, unroll=4)\n",
        {3: 2},
        [Skipped(3, "no scanrewrite.runtime call starts on this line")],
        id="a line inside the call is not its site",
    ),
    pytest.param(
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)  # scanrewrite: skip\n",
        {2: 2},
        [Skipped(2, "skip pragma")],
        id="skip pragma",
    ),
    pytest.param(
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=8)  # scanrewrite: unroll=8\n",
        {2: 2},
        [Skipped(2, "unroll pragma wins (unroll=8)")],
        id="unroll pragma wins",
    ),
    pytest.param(
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=K)\n",
        {2: 2},
        [Skipped(2, "unroll is written as an expression (`K`), not a number: set it by hand")],
        id="an unroll written as a name is the user's choice",
    ),
    pytest.param(
        "import scanrewrite.runtime\n"
        "y = scanrewrite.runtime.scan(\n    f, c, xs, unroll=8\n)  # scanrewrite: unroll=8\n",
        {2: 2},
        [Skipped(2, "unroll pragma wins (unroll=8)")],
        id="unroll pragma on the closing line",
    ),
    pytest.param(
        "# scanrewrite: skip-file\nimport scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\n",
        {3: 2},
        [Skipped(3, "skip-file pragma")],
        id="skip-file pragma",
    ),
    pytest.param(
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)  # scanrewrite: unrol=2\n",
        {2: 2},
        [Skipped(2, "malformed pragma 'unrol=2'")],
        id="malformed pragma",
    ),
    pytest.param(
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, **options)\n",
        {2: 2},
        [Skipped(2, "unroll may come from **kwargs")],
        id="double star",
    ),
    pytest.param(
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, *rest)\n",
        {2: 2},
        [Skipped(2, "unroll may come from *args")],
        id="star args",
    ),
    pytest.param(
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=2)\n",
        {2: 2},
        [],
        id="already the pick",
    ),
    pytest.param(
        "import scanrewrite.runtime\ndef f(scanrewrite):\n    return scanrewrite.runtime.scan(f, c, xs, unroll=4)\n",
        {3: 2},
        [Skipped(3, "the name `scanrewrite` is bound to something else here")],
        id="a parameter named scanrewrite is not the runtime",
    ),
]


@pytest.mark.parametrize(("source", "picks", "skipped"), NOOP)
def test_set_unroll_noop(source: str, picks: dict[int, int], skipped: list[Skipped]) -> None:
    result = set_unroll(source.encode(), picks)
    assert result.code == source.encode()
    assert not result.changed
    assert list(result.skipped) == skipped


def test_skips_one_site_and_writes_the_others() -> None:
    source = _src(
        """\
        import scanrewrite.runtime
        a = scanrewrite.runtime.scan(f, c, xs, unroll=4)  # scanrewrite: skip
        b = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """
    )
    result = set_unroll(source, {2: 2, 3: 2, 9: 2})
    assert result.code == source.replace(b"xs, unroll=4)\n", b"xs, unroll=2)\n")
    assert result.updated == (3,)
    assert result.skipped == (
        Skipped(2, "skip pragma"),
        Skipped(9, "no scanrewrite.runtime call starts on this line"),
    )


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            b"\xef\xbb\xbfimport scanrewrite.runtime\r\ny = scanrewrite.runtime.scan(f, c, xs)\r\n", id="bom crlf"
        ),
        pytest.param(b"import scanrewrite.runtime\ry = scanrewrite.runtime.scan(f, c, xs)\r", id="bare cr"),
        pytest.param(
            b"# -*- coding: latin-1 -*-\nimport scanrewrite.runtime\n"
            b"s = 'caf\xe9'\ny = scanrewrite.runtime.scan(f, c, xs)",
            id="latin-1 cookie, no final newline",
        ),
    ],
)
def test_bytes_survive(source: bytes) -> None:
    line = 2 if b"coding" not in source else 4
    result = set_unroll(source, {line: 5})
    assert result.code == source.replace(b"xs)", b"xs, unroll=5)")


def test_read_unroll() -> None:
    source = _src(
        """\
        import scanrewrite.runtime
        a = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        b = scanrewrite.runtime.scan(f, c, xs)
        c = scanrewrite.runtime.scan(f, c, xs, None, False, 3)
        d = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=k)
        e = scanrewrite.runtime.scan(f, c, xs, unroll=True)
        from jax import lax
        f = lax.scan(f, c, xs, unroll=4)
        """
    )
    assert read_unroll(source) == {2: 4, 3: None, 4: 3, 5: None, 6: None}
    assert read_unroll(b"x = 1\n") == {}
    partials = _src(
        """\
        from functools import partial
        import scanrewrite.runtime
        run = partial(scanrewrite.runtime.scan, f, unroll=4)
        y = run(c, xs)
        z = jax.jit(partial(scanrewrite.runtime.scan, f))(c, xs)
        w = partial(len, f)(c)
        """
    )
    # A partial by its own line and by the line of the call that applies it.
    assert read_unroll(partials) == {3: 4, 4: 4, 5: None}


def test_round_trip_with_the_rewrite() -> None:
    original = _src(
        """\
        import jax


        def run(c, xs):
            a, _ = jax.lax.scan(f, c, xs)
            return jax.lax.scan(
                f,
                a,
                xs,
            )
        """
    )
    rewritten = rewrite(original, unroll=4)
    lines = [site.line for site in rewritten.rewritten]
    assert lines == [5, 6]
    assert read_unroll(rewritten.code) == {5: 4, 6: 4}
    tuned = set_unroll(rewritten.code, {5: 1, 6: 8})
    assert read_unroll(tuned.code) == {5: 1, 6: 8}
    assert tuned.code == rewritten.code.replace(b"xs, unroll=4)", b"xs, unroll=1)").replace(
        b"    unroll=4,", b"    unroll=8,"
    )


@pytest.mark.parametrize("picks", [{0: 2}, {2: 0}, {2: True}, {2: 2.0}, {"2": 2}])
def test_bad_picks_raise_value_error(picks: dict) -> None:
    with pytest.raises(ValueError, match="must be a positive integer"):
        set_unroll(b"import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs)\n", picks)


def test_source_error() -> None:
    with pytest.raises(SourceError):
        set_unroll(b"def broken(:\n", {1: 2})
