"""The render by splicing (`_splice`) gives what rendering the whole module gives.

Each input is rewritten (or reverted) twice: as the command does it, copying the input's
bytes for the top-level statements the transform kept, and with the splice turned off, so
that the whole module is generated as before it; the two must agree byte for byte, as must
what was reported. The odd layouts must also really be spliced (not fall back to the whole).
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from scanrewrite.codemod import _parsing, revert, rewrite
from scanrewrite.codemod import _splice
from scanrewrite.codemod._splice import statement_bounds
from scanrewrite.codemod._parsing import SourceError, python_tree
from test_codemod import IMPORTS, LAYOUT, PLACES, SPELLINGS
from test_codemod_bytes import REWRITES
from test_codemod_format import LAYOUTS
from test_codemod_imports import KEPT, PLACEMENT
from test_codemod_revert import REVERT
from update_goldens import FIXTURE_DIR, fixture_names, golden_options

#: Layouts the splice must find each statement's bytes in, and splice.
ODD = [
    pytest.param(b"import jax\r\n\r\n\r\ndef f():\r\n    return jax.lax.scan(g, 0, xs)\r\n\r\n\r\nx = 1\r\n", id="crlf"),
    pytest.param(b"from jax import lax\ry = lax.scan(f, c, xs)\rz = 2\r", id="bare cr"),
    pytest.param(b"import jax\nx = 1\ry = jax.lax.scan(f, c, xs)\r\nz = 2\n", id="mixed line breaks"),
    pytest.param(b"import jax\n\x0c\ndef f():\n    return jax.lax.scan(g, 0, xs)\n\x0c\nx = 1\n", id="form feed lines"),
    pytest.param(b"\xef\xbb\xbfimport jax\ny = jax.lax.scan(f, c, xs)\n", id="bom"),
    pytest.param(b"\xef\xbb\xbf# c\n\nfrom jax import lax\ny = lax.scan(f, c, xs)\n", id="bom, header, import replaced"),
    pytest.param(b"import jax\ny = jax.lax.scan(f, c, xs)", id="no final newline, last rewritten"),
    pytest.param(b"import jax\ny = jax.lax.scan(f, c, xs)\nz = 1", id="no final newline, last kept"),
    pytest.param(b"import jax\ny = jax.lax.scan(f, c, xs)\n# end", id="no final newline after a comment"),
    pytest.param(b"from jax import lax\ny = lax.scan(f, c, xs)\nfrom jax import lax", id="no final newline, last removed"),
    pytest.param(b"import jax\nif True:\n\tdef f():\n\t\treturn jax.lax.scan(g, 0, xs)\n", id="tabs"),
    pytest.param(b"def f():\n    import jax\n    return jax.lax.scan(g, 0, xs)\nx = 1\n", id="first statement rewritten"),
    pytest.param(b"import jax\nx = 1\ny = jax.lax.scan(f, c, xs)\n", id="last statement rewritten"),
    pytest.param(
        b"import jax\n# one\n\n# two\ny = jax.lax.scan(f, c, xs)  # tail\n# three\nz = 1\n\n# footer\n",
        id="comments between statements",
    ),
    pytest.param(b"import jax; y = jax.lax.scan(f, c, xs); z = 2\n", id="semicolons"),
    pytest.param(b"x = 1; import jax\ny = jax.lax.scan(f, c, xs); w = 3\nv = 4\n", id="semicolons around"),
    pytest.param(
        b"import jax\n\n# lead\n@jax.jit\n# between\n@deco\ndef f(c, xs):\n    return jax.lax.scan(g, c, xs)\n",
        id="decorators with comments",
    ),
    pytest.param(b"# -*- coding: latin-1 -*-\nimport jax\ns = '\xe9'\ny = jax.lax.scan(f, c, xs)  # \xe9\n", id="latin-1"),
    pytest.param(b"import jax\ny = jax.lax.scan(f, c, \\\n    xs)\nz = \\\n  1\n", id="backslash continuations"),
    pytest.param(b'import jax\ns = """a\n\nb"""\ny = jax.lax.scan(f, c, xs)\nt = """\n"""\n', id="multi-line strings"),
    pytest.param(
        b"import jax\ndef f():\n    return jax.lax.scan(g, 0, xs)\n    # deep\n# top\nx = 1\n", id="a block's own comments"
    ),
    pytest.param(b"import jax\ny = jax.lax.scan(f, c, xs)\n\n\n", id="blank lines at the end"),
    pytest.param(
        b'#!/usr/bin/env python\n"""Doc."""\nfrom __future__ import annotations\n\nfrom jax import lax\n\ny = lax.scan(f, c, xs)\n',
        id="header, docstring, future import",
    ),
    pytest.param(b"import jax\nclass A:\n    def f(self):\n        return jax.lax.scan(g, 0, xs)\n", id="in a class"),
]


def _source(param) -> bytes:
    value = param.values[0]
    return textwrap.dedent(value).encode() if isinstance(value, str) else value


REWRITTEN = [
    *(pytest.param(_source(p), id=f"{table}-{p.id}") for table, params in (
        ("spellings", SPELLINGS), ("places", PLACES), ("layout", LAYOUT), ("imports", IMPORTS),
        ("bytes", REWRITES), ("format", LAYOUTS), ("placement", PLACEMENT), ("kept", KEPT),
    ) for p in params),
    *(pytest.param((FIXTURE_DIR / f"{name}.py").read_bytes(), id=f"fixture-{name}", marks=[]) for name in fixture_names()),
]


def _run(function, source: bytes, **options):
    try:
        result = function(source, **options)
    except SourceError as error:
        return error.line, error.message
    return result.code, result.rewritten, result.skipped


def _both(monkeypatch, function, source: bytes, **options):
    """(spliced result, whole result, how many renders were spliced)."""
    spliced = []
    real = _splice.splice

    def counting(*args):
        code = real(*args)
        spliced.append(code is not None)
        return code

    monkeypatch.setattr(_parsing, "splice", counting)
    first = _run(function, source, **options)
    monkeypatch.setattr(_parsing, "splice", lambda *args: None)
    second = _run(function, source, **options)
    return first, second, spliced


@pytest.mark.parametrize("source", REWRITTEN)
def test_splice_is_the_whole_render(monkeypatch, source):
    name = next((n for n in fixture_names() if (FIXTURE_DIR / f"{n}.py").read_bytes() == source), None)
    options = golden_options(name) if name is not None else {}
    spliced, whole, _ = _both(monkeypatch, rewrite, source, **options)
    assert spliced == whole


@pytest.mark.parametrize("source", [pytest.param(_source(p), id=p.id) for p in REVERT])
def test_splice_is_the_whole_render_of_a_revert(monkeypatch, source):
    spliced, whole, _ = _both(monkeypatch, revert, source)
    assert spliced == whole


@pytest.mark.parametrize("source", ODD)
def test_odd_layouts_are_spliced(monkeypatch, source):
    spliced, whole, used = _both(monkeypatch, rewrite, source)
    assert spliced == whole
    code = spliced[0]
    assert code != source and used == [True]
    # The rewrite is its own fixed point, and the revert splices back what it changed.
    assert rewrite(code).code == code
    reverted, reverted_whole, used = _both(monkeypatch, revert, code)
    assert reverted == reverted_whole and used == [True]


@pytest.mark.parametrize("source", ODD)
def test_bounds_are_each_statements_code(source):
    parsed = _parsing.Parsed.from_bytes(source)
    module = parsed.module
    bounds = statement_bounds(module, parsed.source, python_tree(source))
    assert bounds is not None
    pieces = [parsed.source[a:b] for a, b in zip(bounds, bounds[1:])]
    encoding = "utf-8" if module.encoding == "utf-8-sig" else module.encoding
    for index, (statement, piece) in enumerate(zip(module.body, pieces)):
        code = module.code_for_node(statement)
        if index == len(module.body) - 1 and not module.has_trailing_newline and not module.footer:
            code = code[: -len(module.default_newline)]
        assert piece == code.encode(encoding)


def test_code_libcst_does_not_reproduce_is_an_error_where_it_is_generated(monkeypatch):
    # libcst drops a form feed before a statement; copied, that statement is fine as it is.
    kept = b"from jax import lax\n\x0cz = 1\ny = lax.scan(f, c, xs)\n"
    spliced, _, used = _both(monkeypatch, rewrite, kept)
    assert spliced[0] == b"import scanrewrite.runtime\n\x0cz = 1\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\n"
    assert used == [True]
    with pytest.raises(SourceError, match="cannot reproduce"):
        rewrite(b"from jax import lax\n\x0cy = lax.scan(f, c, xs)\n")


def test_a_statement_out_of_order_falls_back_to_the_whole_render():
    parsed = _parsing.Parsed.from_bytes(b"import jax\nx = 1\ny = 2\n")
    module = parsed.module
    swapped = module.with_changes(body=[module.body[0], module.body[2], module.body[1]])
    assert parsed.render(swapped) == b"import jax\ny = 2\nx = 1\n"
    bounds = statement_bounds(module, parsed.source, python_tree(parsed.original))
    assert _splice.splice(module, swapped, parsed.source, bounds) is None
    assert _splice.splice(module, module.with_changes(body=[*module.body, cst.parse_statement("z = 3\n")]), parsed.source, bounds) == b"import jax\nx = 1\ny = 2\nz = 3\n"
