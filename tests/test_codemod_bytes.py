"""Bytes in, bytes out: encodings, BOM, line endings and tabs survive exactly; bad source
is a `SourceError` with a line, never a libcst traceback."""

import pytest

from scanrewrite.codemod import SourceError, rewrite

REWRITES = [
    pytest.param(
        b"from jax import lax\r\ny = lax.scan(\r\n    f,\r\n    c,\r\n)\r\n",
        b"import scanrewrite.runtime\r\ny = scanrewrite.runtime.scan(\r\n    f,\r\n    c,\r\n    unroll=4,\r\n)\r\n",
        id="crlf",
    ),
    pytest.param(
        b"\xef\xbb\xbffrom jax import lax\r\ny = lax.scan(f, c, xs)\r\n",
        b"\xef\xbb\xbfimport scanrewrite.runtime\r\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\r\n",
        id="bom and crlf",
    ),
    pytest.param(
        b'# -*- coding: latin-1 -*-\nfrom jax import lax\ns = "caf\xe9"\ny = lax.scan(f, c, xs)  # \xe9t\xe9\n',
        b'# -*- coding: latin-1 -*-\nimport scanrewrite.runtime\ns = "caf\xe9"\n'
        b"y = scanrewrite.runtime.scan(f, c, xs, unroll=4)  # \xe9t\xe9\n",
        id="latin-1 cookie",
    ),
    pytest.param(
        "from jax import lax\ns = 'é✓'\ny = lax.scan(f, c, xs)\n".encode(),
        "import scanrewrite.runtime\ns = 'é✓'\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\n".encode(),
        id="utf-8 without cookie",
    ),
    pytest.param(
        b"from jax import lax\nclass M:\n\tdef f(self):\n\t\treturn lax.scan(\n\t\t\tf,\n\t\t\tc,\n\t\t)\n",
        b"import scanrewrite.runtime\nclass M:\n\tdef f(self):\n\t\treturn scanrewrite.runtime.scan(\n"
        b"\t\t\tf,\n\t\t\tc,\n\t\t\tunroll=4,\n\t\t)\n",
        id="tabs",
    ),
    pytest.param(
        b"from jax import lax\ry = lax.scan(f, c, xs)\r",
        b"import scanrewrite.runtime\ry = scanrewrite.runtime.scan(f, c, xs, unroll=4)\r",
        id="bare cr line endings",
    ),
    pytest.param(
        b"from jax import lax\ny = lax.scan(f, c, xs)",
        b"import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)",
        id="no final newline",
    ),
    pytest.param(
        b"from jax import lax\ny = lax.scan(f, c, xs)\n  # trailing\n\n   \n",
        b"import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\n  # trailing\n\n   \n",
        id="blank tail libcst would drop",
    ),
    pytest.param(
        b"s = '''a\rb'''\nfrom jax import lax\ny = lax.scan(f, c, xs)\n",
        b"s = '''a\rb'''\nimport scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\n",
        id="cr inside a string does not set the newline",
    ),
    pytest.param(
        b"from jax import lax\ny = lax.scan(f, c, xs)\r\nz = 1\n",
        b"import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\r\nz = 1\n",
        id="mixed line endings",
    ),
    pytest.param(
        b"from jax import lax\ny = lax.scan(f, c, \\\n    xs)\n",
        b"import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, \\\n    xs, \\\n    unroll=4)\n",
        id="backslash continuation",
    ),
]


@pytest.mark.parametrize(("before", "after"), REWRITES)
def test_bytes_survive(before, after):
    result = rewrite(before)
    assert result.code == after
    assert rewrite(result.code).code == result.code


NOOP = [
    pytest.param(b"", id="empty"),
    pytest.param(b"\xef\xbb\xbf", id="bom only"),
    pytest.param(b"x = 1\n\n\n   \n", id="blank tail"),
    pytest.param(b"x = 1\n  # c\n\n   \n", id="blank tail after a comment"),
    pytest.param(b"x = 1\ry = 2\r", id="bare cr"),
    pytest.param(b"# coding: latin-1\nx = '\xe9'\n", id="latin-1"),
    pytest.param(b"\x0cx = 1\n", id="layout libcst cannot reproduce, but nothing to rewrite"),
]


@pytest.mark.parametrize("source", NOOP)
def test_noop_bytes(source):
    result = rewrite(source)
    assert result.code == source
    assert not result.changed


ERRORS = [
    pytest.param(b"x = 1\ny = = 2\n", 2, "cannot parse: ", id="syntax error"),
    pytest.param(b"x = 1\n  y = 2\n", 2, "cannot parse: ", id="bad indentation"),
    pytest.param(b'x = 1\ny = "\xff"\n', 2, "cannot decode as utf-8: byte 0xff", id="invalid utf-8"),
    pytest.param(
        b"# coding: ascii\nx = 1\ny = '\xc3\xa9'\n", 3, "cannot decode as ascii: byte 0xc3", id="cookie mismatch"
    ),
    pytest.param(b"#!/usr/bin/env python\n# coding: foobar\n", 2, "cannot decode: unknown encoding: foobar", id="unknown cookie"),
    pytest.param(b"\xef\xbb\xbf# coding: latin-1\n", 1, "cannot decode: encoding problem: utf-8", id="bom and cookie disagree"),
    pytest.param(b"from jax import lax\ny = lax.scan(f, c\n", 2, "cannot parse: '(' was never closed", id="unclosed call"),
    # Where and why as compile() says it (libcst names where it gave up: lines 6 and 4 here).
    pytest.param(
        b"import jax\n\n\nx = foo(\n    1,\n    jax.lax.scan(f, 0, None, length=3)\n\ny = 2\n",
        4,
        "cannot parse: '(' was never closed",
        id="unclosed bracket where it opens",
    ),
    pytest.param(b"import jax\nif x\n    jax.lax.scan(f, 0, None)\n", 2, "cannot parse: expected ':'", id="missing colon"),
    pytest.param(
        b"from jax import lax\n\x0cy = lax.scan(f, c, xs)\n",
        None,
        "cannot reproduce this file byte for byte",
        id="form feed before code that libcst drops",
    ),
]


@pytest.mark.parametrize(("source", "line", "message"), ERRORS)
def test_source_error(source, line, message):
    with pytest.raises(SourceError) as info:
        rewrite(source)
    error = info.value
    assert error.line == line
    assert error.message.startswith(message)
    assert "\n" not in error.message
    assert str(error) == (error.message if line is None else f"line {line}: {error.message}")
    # No libcst exception chained on: the user sees one line, not libcst's traceback.
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
