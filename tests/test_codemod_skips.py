"""Pragmas, skip reasons (with their lines) and the checkpoint option."""

import textwrap

import pytest

from scanrewrite.codemod import Skipped, rewrite


def _src(text):
    return textwrap.dedent(text).encode()


def _assert_rewrites(before, after, **options):
    result = rewrite(_src(before), **options)
    assert result.code.decode() == textwrap.dedent(after)
    again = rewrite(result.code, **options)
    assert again.code == result.code, "not idempotent"
    return result


SKIPS = [
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs, **options)
        """,
        2,
        "unroll may come from **kwargs",
        id="double star",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, *xs_and_more)
        """,
        2,
        "unroll may come from *args",
        id="star args before unroll",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs, None, False, *rest)
        """,
        2,
        "unroll may come from *args",
        id="star args right at unroll",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(*args)
        """,
        2,
        "unroll may come from *args",
        id="only star args",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(step(x) for x in xs)
        """,
        2,
        "a bare generator argument cannot be followed by unroll",
        id="bare generator argument",
    ),
    pytest.param(
        """\
        from jax import lax
        scan_fn = lax.scan
        """,
        2,
        "reference to jax.lax.scan that is not a call",
        id="assigned reference",
    ),
    pytest.param(
        """\
        from jax import lax
        scan_fn = lax.scan  # scanrewrite: skip
        """,
        2,
        "skip pragma",
        id="skip pragma silences a reference",
    ),
    pytest.param(
        """\
        from jax import lax
        scan_fn = lax.scan  # scanrewrite: skp
        """,
        2,
        "malformed pragma 'skp'",
        id="malformed pragma on a reference",
    ),
    pytest.param(
        """\
        import jax
        step = bind(jax.lax.scan, f)
        """,
        2,
        "reference to jax.lax.scan that is not a call",
        id="passed to a function other than functools.partial",
    ),
    pytest.param(
        """\
        import equinox.internal as eqxi
        run = jax.jit(eqxi.scan, static_argnames="kind")
        """,
        2,
        "reference to equinox.internal.scan that is not a call",
        id="eqxi reference",
    ),
    pytest.param(
        """\
        try:
            from jax.lax import scan
        except ImportError:
            def scan(f, init, xs):
                return init, xs
        y = scan(f, c, xs)
        """,
        6,
        "callee may be something other than jax.lax.scan",
        id="conditional definition",
    ),
    pytest.param(
        """\
        from jax import lax
        def g(scanrewrite):
            return lax.scan(f, c, xs)
        """,
        3,
        "the name `scanrewrite` is bound to something else here",
        id="scanrewrite name shadowed",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs)  # scanrewrite: skip
        """,
        2,
        "skip pragma",
        id="skip pragma",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(  # scanrewrite: skip
            f, c, xs
        )
        """,
        2,
        "skip pragma",
        id="skip pragma on the first line of a broken call",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(
            f, c, xs
        )  # scanrewrite: skip
        """,
        2,
        "skip pragma",
        id="skip pragma on the last line of a broken call",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs)  # noqa: E501  # scanrewrite: skip
        """,
        2,
        "skip pragma",
        id="skip pragma after another comment",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs)  # scanrewrite: skip  # traced twice otherwise
        """,
        2,
        "skip pragma",
        id="skip pragma with an explanation",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs)  # scanrewrite: unroll=abc
        """,
        2,
        "malformed pragma 'unroll=abc'",
        id="unroll not a number",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs)  # scanrewrite: unroll=0
        """,
        2,
        "malformed pragma 'unroll=0'",
        id="unroll zero",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs)  # scanrewrite: skipp
        """,
        2,
        "malformed pragma 'skipp'",
        id="unknown directive",
    ),
    pytest.param(
        """\
        from jax import lax
        def g():
            return lax.scan(f, c, xs)  # scanrewrite: skip-file
        """,
        3,
        "skip-file pragma is not at top level",
        id="skip-file inside a function",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs)  # scanrewrite: skip-file
        """,
        2,
        "skip-file pragma",
        id="skip-file on a call line at top level",
    ),
]


@pytest.mark.parametrize(("source", "line", "reason"), SKIPS)
def test_skip_leaves_code_and_says_why(source, line, reason):
    result = rewrite(_src(source))
    assert result.code == _src(source)
    assert result.skipped == (Skipped(line, reason),)
    assert not result.changed


def test_skipped_call_keeps_its_imports_next_to_a_rewritten_one():
    result = _assert_rewrites(
        """\
        from jax import lax
        a = lax.scan(f, c, xs)
        b = lax.scan(f, c, xs, **options)
        """,
        """\
        import scanrewrite.runtime
        from jax import lax
        a = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        b = lax.scan(f, c, xs, **options)
        """,
    )
    assert [r.line for r in result.rewritten] == [2]
    assert result.skipped == (Skipped(3, "unroll may come from **kwargs"),)


def test_pragma_on_an_argument_line_does_not_reach_the_outer_call():
    result = _assert_rewrites(
        """\
        from jax import lax
        y = lax.scan(
            f,
            lax.scan(g, c, xs)[0],  # scanrewrite: skip
            xs,
        )
        """,
        """\
        import scanrewrite.runtime
        from jax import lax
        y = scanrewrite.runtime.scan(
            f,
            lax.scan(g, c, xs)[0],  # scanrewrite: skip
            xs,
            unroll=4,
        )
        """,
    )
    assert [r.line for r in result.rewritten] == [2]
    assert result.skipped == (Skipped(4, "skip pragma"),)


def test_pragma_on_a_shared_line_reaches_every_call_there():
    source = _src(
        """\
        from jax import lax
        y = lax.scan(lambda c, x: lax.scan(g, c, x), c, xs)  # scanrewrite: skip
        """
    )
    result = rewrite(source)
    assert result.code == source
    assert result.skipped == (Skipped(2, "skip pragma"), Skipped(2, "skip pragma"))


UNROLL_PRAGMAS = [
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs)  # scanrewrite: unroll=8\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=8)  # scanrewrite: unroll=8\n",
        id="unroll pragma",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs)  #scanrewrite:unroll = 8\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=8)  #scanrewrite:unroll = 8\n",
        id="unroll pragma without spaces",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs, unroll=2)  # scanrewrite: unroll=8\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=2)  # scanrewrite: unroll=8\n",
        id="explicit argument wins over the pragma",
    ),
    pytest.param(
        """\
        import equinox.internal as eqxi
        y = eqxi.scan(
            f, c, xs, kind="checkpointed"
        )  # scanrewrite: unroll=3
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.eqxi_scan(
            f, c, xs, kind="checkpointed", unroll=3
        )  # scanrewrite: unroll=3
        """,
        id="unroll pragma on the closing line",
    ),
]


@pytest.mark.parametrize(("before", "after"), UNROLL_PRAGMAS)
def test_unroll_pragma(before, after):
    result = _assert_rewrites(before, after)
    assert result.skipped == ()


def test_skip_file_pragma_leaves_everything():
    source = _src(
        """\
        '''Module.'''
        from jax import lax
        # scanrewrite: skip-file
        y = lax.scan(f, c, xs)
        z = lax.scan
        """
    )
    result = rewrite(source)
    assert result.code == source
    assert result.rewritten == ()
    assert result.skipped == (Skipped(3, "skip-file pragma"),)


@pytest.mark.parametrize(
    ("source", "line"),
    [
        pytest.param("def g():  # scanrewrite: skip-file\n    return 1\n", 1, id="after a def header"),
        pytest.param("def g():\n    return 1\n# scanrewrite: skip-file\n", 3, id="after a block at the end"),
        pytest.param("x = [\n# scanrewrite: skip-file\n]\n", 2, id="inside a top-level bracket"),
    ],
)
def test_skip_file_pragma_anywhere_at_top_level(source, line):
    full = _src("from jax import lax\ny = lax.scan(f, c, xs)\n") + source.encode()
    result = rewrite(full)
    assert result.code == full
    assert result.skipped == (Skipped(line + 2, "skip-file pragma"),)


def test_malformed_pragma_away_from_calls_is_reported_and_ignored():
    result = _assert_rewrites(
        """\
        # scanrewrite: skipfile
        from jax import lax
        y = lax.scan(f, c, xs)
        """,
        """\
        # scanrewrite: skipfile
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
    )
    assert result.skipped == (Skipped(1, "malformed pragma 'skipfile' (ignored)"),)


def test_pragma_text_in_a_string_is_not_a_pragma():
    _assert_rewrites(
        """\
        from jax import lax
        y = lax.scan(f, "# scanrewrite: skip", xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, "# scanrewrite: skip", xs, unroll=4)
        """,
    )


CHECKPOINT = [
    pytest.param(
        "none",
        """\
        from jax import lax
        y = lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=False)
        """,
        id="none",
    ),
    pytest.param(
        "dots_saveable",
        """\
        import jax
        y = jax.lax.scan(f, c, xs)
        """,
        """\
        import jax
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f, c, xs, unroll=4, checkpoint=jax.checkpoint_policies.dots_saveable
        )
        """,
        id="policy keeps import jax in use",
    ),
    pytest.param(
        "nothing_saveable",
        '''\
        """Doc."""
        from jax import lax
        import jax.numpy as jnp
        y = lax.scan(f, jnp.zeros(2), xs)
        ''',
        '''\
        """Doc."""
        import jax
        import jax.numpy as jnp
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f, jnp.zeros(2), xs, unroll=4, checkpoint=jax.checkpoint_policies.nothing_saveable
        )
        ''',
        id="policy adds import jax",
    ),
    pytest.param(
        "everything_saveable",
        """\
        import jax.numpy
        from jax import lax
        y = lax.scan(f, c, xs)
        """,
        """\
        import jax.numpy
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f, c, xs, unroll=4, checkpoint=jax.checkpoint_policies.everything_saveable
        )
        """,
        id="import jax.numpy binds jax",
    ),
    pytest.param(
        "none",
        """\
        from jax import lax
        y = lax.scan(
            f,
            c,
            xs,
        )
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f,
            c,
            xs,
            unroll=4,
            checkpoint=False,
        )
        """,
        id="one per line",
    ),
    pytest.param(
        "none",
        "from jax import lax\ny = lax.scan(f, c, xs, unroll=2)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=2, checkpoint=False)\n",
        id="explicit unroll",
    ),
    pytest.param(
        "none",
        "import equinox.internal as eqxi\ny = eqxi.scan(f, c, xs, kind='lax')\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.eqxi_scan(f, c, xs, kind='lax', unroll=4)\n",
        id="eqxi_scan takes no checkpoint",
    ),
    pytest.param(
        "reductions_saveable",
        """\
        from jax import lax
        y = lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f, c, xs, unroll=4, checkpoint=scanrewrite.runtime.reductions_saveable
        )
        """,
        id="runtime policy needs no import jax",
    ),
    pytest.param(
        "dots_with_no_batch_dims_and_reductions_saveable",
        """\
        import jax
        y = jax.lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f,
            c,
            xs,
            unroll=4,
            checkpoint=scanrewrite.runtime.dots_with_no_batch_dims_and_reductions_saveable,
        )
        """,
        id="runtime policy leaves import jax unused",
    ),
]


@pytest.mark.parametrize(("checkpoint", "before", "after"), CHECKPOINT)
def test_checkpoint_option(checkpoint, before, after):
    _assert_rewrites(before, after, checkpoint=checkpoint)


def test_checkpoint_needs_jax_not_shadowed():
    source = _src(
        """\
        from jax import lax
        def g(jax):
            return lax.scan(f, c, xs)
        """
    )
    result = rewrite(source, checkpoint="dots_saveable")
    assert result.code == source
    assert result.skipped == (Skipped(3, "checkpoint policy needs `jax`, which is bound to something else here"),)
    # Without a policy of jax's the name jax is not needed, so the call is rewritten.
    assert rewrite(source, checkpoint="none").changed
    assert b"checkpoint=scanrewrite.runtime.reductions_saveable" in rewrite(source, checkpoint="reductions_saveable").code


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unroll": 0}, "`unroll` must be a positive integer"),
        ({"unroll": True}, "`unroll` must be a positive integer"),
        ({"unroll": "4"}, "`unroll` must be a positive integer"),
        ({"checkpoint": "save_only_these_names"}, "`checkpoint` must be 'none' or one of"),
        ({"checkpoint": "None"}, "`checkpoint` must be 'none' or one of"),
    ],
)
def test_bad_options_raise_value_error(options, message):
    with pytest.raises(ValueError, match=message):
        rewrite(b"x = 1\n", **options)
