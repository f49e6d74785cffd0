"""Which imports the rewrite removes: those libcst's `RemoveImportsVisitor` would remove after
the edit (read off the scopes before it, `imports._unused`), so the cases where a name stays in
use without being read as code: `__all__`, string annotations, a policy written in its place."""

from __future__ import annotations

import textwrap

import pytest

from scanrewrite.codemod import rewrite
from scanrewrite.codemod.imports._unused import _may_name

CASES = [
    pytest.param(
        """\
        from jax import lax

        __all__ = ["lax"]

        y = lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        from jax import lax

        __all__ = ["lax"]

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        {},
        id="exported in __all__",
    ),
    pytest.param(
        """\
        from jax import lax


        def g(x: "lax.Foo"):
            return lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        from jax import lax


        def g(x: "lax.Foo"):
            return scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        {},
        id="named in a string annotation",
    ),
    pytest.param(
        """\
        from typing import TypeVar

        from jax import lax

        T = TypeVar("T", bound="lax.Foo")
        y = lax.scan(f, c, xs)
        """,
        """\
        from typing import TypeVar

        import scanrewrite.runtime
        from jax import lax

        T = TypeVar("T", bound="lax.Foo")
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        {},
        id="named in a TypeVar bound",
    ),
    pytest.param(
        """\
        import jax
        from jax import lax

        y = lax.scan(f, c, xs)
        z = print("lax")
        """,
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        z = print("lax")
        """,
        {},
        id="a string that only mentions it",
    ),
    pytest.param(
        """\
        import jax

        y = jax.lax.scan(f, c, xs)
        """,
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=jax.checkpoint_policies.dots_saveable)
        """,
        {"checkpoint": "dots_saveable"},
        id="read again by the policy",
    ),
    pytest.param(
        """\
        import jax

        y = jax.lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=False)
        """,
        {"checkpoint": "none"},
        id="no policy reads it",
    ),
]


@pytest.mark.parametrize(("before", "after", "options"), CASES)
def test_imports_in_use_after_the_rewrite_stay(before: str, after: str, options: dict) -> None:
    result = rewrite(textwrap.dedent(before).encode(), line_length=None, **options)
    assert result.code.decode() == textwrap.dedent(after)


@pytest.mark.parametrize(
    ("code", "named"),
    [
        ('def f(x: "scan"): pass\n', True),
        ('def f(x) -> "List[scan]": pass\n', True),
        ('__all__ = ["scan"]\n', True),
        ('__all__ += ("scan",)\n', True),
        ('x: int = cast("scan", y)\n', True),
        ('class A:\n    def f(self, *, k: "scan" = 1): pass\n', True),
        ('def f(x="scan"): pass\n', False),  # a default is no annotation
        ('"""scan"""\nx = 1\n', False),  # nor a docstring
        ('def f():\n    """scan"""\n', False),
        ("x = 1  # scan\n", False),
        ("x = (\n", True),  # Python's parser cannot read it: any string may
    ],
)
def test_strings_that_may_name(code, named):
    assert _may_name(code, {"scan"}) is named
