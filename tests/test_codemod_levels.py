"""The `levels` option and pragma: written into `jax.lax.scan` calls only, with the same
byte preservation; an `eqxi.scan` call gets none, and its report says so."""

from __future__ import annotations

import textwrap

import pytest

from scanrewrite.codemod import Rewritten, Skipped, rewrite
from scanrewrite.pragmas import Pragma


def _src(text: str) -> bytes:
    return textwrap.dedent(text).encode()


LEVELS = [
    pytest.param(
        2,
        "from jax import lax\ny = lax.scan(f, c, xs)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4, levels=2)\n",
        id="int",
    ),
    pytest.param(
        "auto",
        "from jax import lax\ny = lax.scan(f, c, xs)\n",
        'import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4, levels="auto")\n',
        id="auto",
    ),
    pytest.param(
        2,
        """\
        import jax
        h, ys = jax.lax.scan(
            step,
            h0,
            xs,
        )
        """,
        """\
        import scanrewrite.runtime
        h, ys = scanrewrite.runtime.scan(
            step,
            h0,
            xs,
            unroll=4,
            levels=2,
        )
        """,
        id="one per line",
    ),
    pytest.param(
        3,
        "from jax import lax\ny = lax.scan(f, c, xs, unroll=2, **options)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=2, **options, levels=3)\n",
        id="kwargs cannot carry levels, which lax.scan does not take",
    ),
    pytest.param(
        2,
        "from jax import lax\ny = lax.scan(f, c, xs)  # scanrewrite: levels=auto\n",
        "import scanrewrite.runtime\n"
        "y = scanrewrite.runtime.scan(\n"
        '    f, c, xs, unroll=4, levels="auto"\n'
        ")  # scanrewrite: levels=auto\n",
        id="pragma wins over the option",
    ),
    pytest.param(
        None,
        "from jax import lax\ny = lax.scan(f, c, xs)  # scanrewrite: levels=2\n",
        "import scanrewrite.runtime\n"
        "y = scanrewrite.runtime.scan(f, c, xs, unroll=4, levels=2)  # scanrewrite: levels=2\n",
        id="pragma without the option",
    ),
    pytest.param(
        None,
        "from jax import lax\ny = lax.scan(f, c, xs)  # scanrewrite: unroll=8  # scanrewrite: levels=2\n",
        "import scanrewrite.runtime\n"
        "y = scanrewrite.runtime.scan(\n"
        "    f, c, xs, unroll=8, levels=2\n"
        ")  # scanrewrite: unroll=8  # scanrewrite: levels=2\n",
        id="unroll and levels pragmas together",
    ),
]


@pytest.mark.parametrize(("levels", "before", "after"), LEVELS)
def test_levels(levels: int | str | None, before: str, after: str) -> None:
    result = rewrite(_src(before), levels=levels)
    assert result.code.decode() == textwrap.dedent(after)
    # No note about levels; a call passing its own unroll says it kept it.
    kept = "unroll=" in before.split("#")[0]
    assert [call.note for call in result.rewritten] == ["unroll kept as written" if kept else None]
    assert rewrite(result.code, levels=levels).code == result.code, "not idempotent"


def test_checkpoint_then_levels() -> None:
    result = rewrite(b"from jax import lax\ny = lax.scan(f, c, xs)\n", checkpoint="none", levels=2)
    assert b"scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=False, levels=2)" in result.code


def test_eqxi_scan_gets_no_levels_and_the_report_says_so() -> None:
    source = _src(
        """\
        import equinox.internal as eqxi
        from jax import lax
        a = eqxi.scan(f, c, xs, kind="checkpointed")  # scanrewrite: levels=2
        b = lax.scan(f, c, xs)
        """
    )
    result = rewrite(source, levels="auto")
    assert result.code.decode() == textwrap.dedent(
        """\
        import scanrewrite.runtime
        a = scanrewrite.runtime.eqxi_scan(
            f, c, xs, kind="checkpointed", unroll=4
        )  # scanrewrite: levels=2
        b = scanrewrite.runtime.scan(f, c, xs, unroll=4, levels="auto")
        """
    )
    assert result.rewritten == (
        Rewritten(3, "equinox.internal.scan", "levels not written: equinox.internal.scan takes none"),
        Rewritten(4, "jax.lax.scan"),
    )


NOOP = [
    pytest.param(None, "from jax import lax\ny = lax.scan(f, c, xs)\n", id="no levels asked for"),
    pytest.param(2, "from jax import lax\ny = lax.scan(f, c, xs)  # scanrewrite: skip\n", id="skip pragma"),
    pytest.param(2, "from jax import lax\ny = lax.scan(f, c, xs, levels=1)\n", id="explicit levels kept"),
]


@pytest.mark.parametrize(("levels", "source"), NOOP)
def test_levels_noop(levels: int | None, source: str) -> None:
    code = rewrite(source.encode(), levels=levels).code
    assert code.count(b"levels") == source.count("levels")


@pytest.mark.parametrize(
    ("comment", "pragma"),
    [
        ("# scanrewrite: levels=2", Pragma(levels=2)),
        ("# scanrewrite: levels = auto", Pragma(levels="auto")),
        ("# scanrewrite: levels=0", Pragma(error="malformed pragma 'levels=0'")),
        ("# scanrewrite: levels=many", Pragma(error="malformed pragma 'levels=many'")),
    ],
)
def test_levels_pragma_parses(comment: str, pragma: Pragma) -> None:
    assert Pragma.parse(comment, top_level=False) == pragma


def test_malformed_levels_pragma_skips_the_call() -> None:
    result = rewrite(b"from jax import lax\ny = lax.scan(f, c, xs)  # scanrewrite: levels=0\n", levels=2)
    assert not result.changed
    assert result.skipped == (Skipped(2, "malformed pragma 'levels=0'"),)


@pytest.mark.parametrize("levels", [0, -1, True, 1.5, "2", "Auto"])
def test_bad_levels_raise_value_error(levels: object) -> None:
    with pytest.raises(ValueError, match="`levels` must be a positive integer or 'auto'"):
        rewrite(b"from jax import lax\ny = lax.scan(f, c, xs)\n", levels=levels)
