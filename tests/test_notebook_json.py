"""Notebooks come back byte for byte, as each editor saved them, except the changed cells' sources.

Each case writes one notebook in one editor's layout (indentation, separators, key order,
escaping, source as lines or as one string), rewrites it, and compares the bytes with the
same notebook written in the same layout with the new sources: so indentation, key order,
trailing newline, escaping, outputs and metadata must all be exactly as they were.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scanrewrite.notebook import rewrite_notebook

IMPORTS = "import jax\nfrom jax import lax"
IMPORTS_AFTER = "import jax\nimport scanrewrite.runtime"
CALL = "def f(c, x):\n    return c + x, c\n\n\nc, ys = lax.scan(f, 0.0, None, length=3)\nc"
CALL_AFTER = (
    "def f(c, x):\n    return c + x, c\n\n\nc, ys = scanrewrite.runtime.scan(f, 0.0, None, length=3, unroll=4)\nc"
)
MARKDOWN = '# Título — naïve café ☕\n\nNon-ASCII text in markdown, "quotes", tabs\tand a backslash \\ here.'


def code(source: str, **extra) -> dict:
    return {
        "cell_type": "code",
        "execution_count": 3,
        "id": "7c2e0b7a",
        "metadata": {"tags": ["démo"], "scrolled": True},
        "outputs": [
            {"name": "stdout", "output_type": "stream", "text": ["résultat: 6.0\n", "lax.scan done\n"]},
            {
                "data": {"text/plain": ["Array(6., dtype=float32)"], "image/png": "iVBORw0KGgo=\n"},
                "execution_count": 3,
                "metadata": {},
                "output_type": "execute_result",
            },
        ],
        "source": source,
        **extra,
    }


def notebook(imports: str, call: str, *, as_string: bool = False, minor: int = 5) -> dict:
    cells = [
        {"cell_type": "markdown", "id": "a1", "metadata": {}, "source": MARKDOWN},
        code(imports, id="b2"),
        {"cell_type": "raw", "id": "c3", "metadata": {}, "source": "lax.scan(f, 0.0, None, length=3)"},
        code(call, id="d4"),
    ]
    for cell in cells:
        if minor < 5:
            del cell["id"]
        if not as_string:
            cell["source"] = cell["source"].splitlines(keepends=True)
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": "3.11.7"},
        },
        "nbformat": 4,
        "nbformat_minor": minor,
    }


def reorder(value, order):
    """`value` with every object's keys in `order(keys)`."""
    if isinstance(value, dict):
        return {key: reorder(value[key], order) for key in order(list(value))}
    if isinstance(value, list):
        return [reorder(item, order) for item in value]
    return value


def nbformat_first(keys):
    # Colab writes the notebook's version first and the cells last; cells as ids first.
    first = [key for key in ("nbformat", "nbformat_minor", "metadata", "id", "cell_type") if key in keys]
    return first + [key for key in keys if key not in first]


LAYOUTS = [
    pytest.param(dict(indent=1, sort_keys=True, ensure_ascii=False), "\n", {}, id="jupyter-1-space"),
    pytest.param(dict(indent=2, ensure_ascii=False), "", {"order": nbformat_first}, id="colab-2-spaces"),
    pytest.param(dict(ensure_ascii=False), "", {"order": nbformat_first}, id="colab-no-indent"),
    pytest.param(dict(separators=(",", ":"), ensure_ascii=False), "", {}, id="compact-separators"),
    pytest.param(dict(indent=1, sort_keys=True, ensure_ascii=True), "\n", {}, id="ascii-escaped"),
    pytest.param(
        dict(indent=4, ensure_ascii=False),
        "\n",
        {"order": lambda keys: sorted(keys, reverse=True)},
        id="4-spaces-reversed-keys",
    ),
    pytest.param(dict(indent="\t", sort_keys=True, ensure_ascii=False), "\n", {}, id="tabs"),
    pytest.param(
        dict(indent=1, sort_keys=True, ensure_ascii=False), "\n", {"as_string": True}, id="source-as-one-string"
    ),
    pytest.param(
        dict(indent=2, ensure_ascii=True), "", {"as_string": True, "minor": 4}, id="one-string-ascii-nbformat-4.4"
    ),
    pytest.param(dict(indent=1, sort_keys=True, ensure_ascii=False), "\r\n", {}, id="crlf-after-json"),
]


def dump(document: dict, style: dict, end: str, order=None) -> bytes:
    if order is not None:
        document = reorder(document, order)
    return (json.dumps(document, **style) + end).encode("utf-8")


@pytest.mark.parametrize(("style", "end", "options"), LAYOUTS)
def test_layout_round_trips_byte_for_byte(style, end, options):
    order = options.get("order")
    shape = {key: value for key, value in options.items() if key != "order"}
    before = dump(notebook(IMPORTS, CALL, **shape), style, end, order)
    expected = dump(notebook(IMPORTS_AFTER, CALL_AFTER, **shape), style, end, order)
    result = rewrite_notebook(before, unroll=4)
    assert result.code == expected
    assert [(change.cell, change.after) for change in result.changes] == [(1, IMPORTS_AFTER), (2, CALL_AFTER)]
    assert rewrite_notebook(result.code, unroll=4).code == result.code


@pytest.mark.parametrize(("style", "end", "options"), LAYOUTS)
def test_unchanged_notebook_is_the_same_object_of_bytes(style, end, options):
    shape = {key: value for key, value in options.items() if key != "order"}
    before = dump(notebook("import jax", "x = jax.numpy.ones(3)", **shape), style, end, options.get("order"))
    result = rewrite_notebook(before, unroll=4)
    assert result.code == before
    assert not result.changed


CELL_LAYOUTS = [
    # (cell sources before, after): each must come back as the same layout with the new text.
    pytest.param(
        "import jax\r\nfrom jax import lax\r\n",
        "import jax\r\nimport scanrewrite.runtime\r\n",
        id="crlf-inside-sources",
    ),
    pytest.param("from jax import lax", "import scanrewrite.runtime", id="one-line-cell"),
    pytest.param(
        "import jax\nfrom jax import lax\n", "import jax\nimport scanrewrite.runtime\n", id="trailing-newline"
    ),
]


@pytest.mark.parametrize(("imports", "imports_after"), CELL_LAYOUTS)
@pytest.mark.parametrize("indent", [1, None])
def test_cell_line_breaks_are_kept(imports, imports_after, indent):
    call = CALL.replace("\n", "\r\n") if "\r\n" in imports else CALL
    call_after = CALL_AFTER.replace("\n", "\r\n") if "\r\n" in imports else CALL_AFTER
    style = dict(indent=indent, sort_keys=True, ensure_ascii=False)
    before = dump(notebook(imports, call), style, "\n")
    result = rewrite_notebook(before, unroll=4)
    assert result.code == dump(notebook(imports_after, call_after), style, "\n")


def test_lines_that_do_not_change_keep_their_own_escapes():
    # A writer that escaped "/" and one non-ASCII character but not another: untouched lines keep it.
    before = dump(
        notebook(IMPORTS, CALL + "\nprint('a/b é')"), dict(indent=1, sort_keys=True, ensure_ascii=False), "\n"
    )
    before = before.replace(b"print('a/b \xc3\xa9')", b"print('a\\/b \\u00e9')")
    result = rewrite_notebook(before, unroll=4)
    assert b"print('a\\/b \\u00e9')" in result.code
    assert b"scanrewrite.runtime.scan(f, 0.0, None, length=3, unroll=4)" in result.code
    assert (
        result.code.replace(
            b"scanrewrite.runtime.scan(f, 0.0, None, length=3, unroll=4)", b"lax.scan(f, 0.0, None, length=3)"
        ).replace(b'"import jax\\n",\n    "import scanrewrite.runtime"', b'"import jax\\n",\n    "from jax import lax"')
        == before
    )


def test_byte_order_mark_is_kept():
    style = dict(indent=1, sort_keys=True, ensure_ascii=False)
    before = b"\xef\xbb\xbf" + dump(notebook(IMPORTS, CALL), style, "\n")
    result = rewrite_notebook(before, unroll=4)
    assert result.code == b"\xef\xbb\xbf" + dump(notebook(IMPORTS_AFTER, CALL_AFTER), style, "\n")


# Any text in markdown, outputs and string literals, in any of the layouts above.
_STYLES = [
    dict(indent=1, sort_keys=True, ensure_ascii=False),
    dict(indent=2, ensure_ascii=True),
    dict(ensure_ascii=False),
    dict(separators=(",", ":"), ensure_ascii=True),
]


@given(
    text=st.text(max_size=40),
    style=st.sampled_from(_STYLES),
    end=st.sampled_from(["", "\n"]),
    as_string=st.booleans(),
)
def test_any_text_round_trips(text, style, end, as_string):
    def document(imports, call):
        built = notebook(imports, f"{call}\ns = {text!r}", as_string=as_string)
        built["cells"][0]["source"] = text
        built["cells"][1]["outputs"][0]["text"] = text
        return built

    result = rewrite_notebook(dump(document(IMPORTS, CALL), style, end), unroll=4)
    assert result.code == dump(document(IMPORTS_AFTER, CALL_AFTER), style, end)
