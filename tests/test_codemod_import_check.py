"""The import check that lets `rewrite` skip files (Python's parser, before libcst's
metadata): every import that can make a name resolve to a target keeps the file in."""

import warnings

import pytest

from scanrewrite.codemod import Rewritten, Skipped, rewrite


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import jax._src.lax", "jax.lax.scan"),  # binds `jax`, so jax.lax is jax's
        ("import numpy, jax.numpy", "jax.lax.scan"),
        ("import jax . lax as L", "L.scan"),
        ("from jax import (\n    numpy,\n    lax,\n)", "lax.scan"),
        ("from jax . lax import scan as s", "s"),
        ("from equinox import internal", "internal.scan"),
        ("if True:\n    from equinox.internal import scan", "scan"),
    ],
)
def test_imports_that_reach_a_target_are_rewritten(imports, call):
    source = f"{imports}\ny = {call}(f, c, xs)\n".encode()
    result = rewrite(source)
    assert [r.api for r in result.rewritten] in (["jax.lax.scan"], ["equinox.internal.scan"])
    assert result.rewritten[0].line == imports.count("\n") + 2


@pytest.mark.parametrize(
    "imports",
    ["from jax._src import lax", "from . import lax", "from .jax import lax", "import lax"],
)
def test_imports_that_cannot_reach_a_target_leave_the_file(imports):
    source = f"import numpy as jax\n{imports}\ny = lax.scan(f, c, xs)\n".encode()
    result = rewrite(source)
    assert (result.code, result.rewritten, result.skipped) == (source, (), ())


def test_pragmas_are_reported_without_a_target_import():
    source = b"from jax._src import lax\ny = lax.scan(f, c, xs)  # scanrewrite: unroll=x\n"
    assert rewrite(source).skipped == (Skipped(2, "malformed pragma 'unroll=x' (ignored)"),)


def test_the_check_warns_about_nothing_in_the_source():
    source = b'import jax\npattern = "\\d+"\ny = jax.lax.scan(f, c, xs)\n'
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # Python's parser warns about the invalid escape "\d"
        assert rewrite(source).rewritten == (Rewritten(3, "jax.lax.scan"),)
    assert caught == []
