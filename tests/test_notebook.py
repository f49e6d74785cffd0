"""`rewrite_notebook`: the code cells as one program, IPython syntax, cells left alone, bad notebooks.

Cases are (cells before, cells after) pairs: a str is a code cell, ("markdown", text) or
("raw", text) another kind; the notebook around them is written as Jupyter writes it.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scanrewrite.notebook import NotebookError, notebook_diff, rewrite_notebook
from scanrewrite.notebook._magics import mask, unmask
from scanrewrite.notebook._program import place_import

STEP = "def step(c, x):\n    return c + x, c"
# A use of `jax` besides the scan calls, so that `import jax` stays (an import that only the
# rewritten calls used is removed, as in a .py file).
USE = "key = jax.random.PRNGKey(0)"


def make(*cells, language: str = "python") -> bytes:
    built = []
    for index, cell in enumerate(cells):
        kind, source = ("code", cell) if isinstance(cell, str) else cell
        entry = {"cell_type": kind, "id": f"cell-{index}", "metadata": {}, "source": source.splitlines(keepends=True)}
        if kind == "code":
            entry.update(execution_count=None, outputs=[])
        built.append(entry)
    metadata = {"kernelspec": {"display_name": language, "language": language, "name": language}}
    document = {"cells": built, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
    return (json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def sources(code: bytes) -> list:
    cells = json.loads(code)["cells"]
    return [
        "".join(cell["source"]) if cell["cell_type"] == "code" else (cell["cell_type"], "".join(cell["source"]))
        for cell in cells
    ]


CASES = [
    pytest.param(
        ["import jax\nfrom jax import lax", STEP, "c, ys = lax.scan(step, 0, None, length=3)"],
        [
            "import jax\nimport scanrewrite.runtime",
            STEP,
            "c, ys = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)",
        ],
        id="call-in-one-cell-resolves-through-an-import-in-another",
    ),
    pytest.param(
        [
            ("markdown", "# Title"),
            "N = 3",
            ("markdown", "## Setup"),
            "import jax\nimport jax.numpy as jnp",
            STEP,
            "a = jax.lax.scan(step, 0, None, length=N)\nb = jax.lax.scan(step, 1, None, length=N)",
        ],
        [
            ("markdown", "# Title"),
            "N = 3",
            ("markdown", "## Setup"),
            "import jax.numpy as jnp\nimport scanrewrite.runtime",
            STEP,
            "a = scanrewrite.runtime.scan(step, 0, None, length=N, unroll=4)\nb = scanrewrite.runtime.scan(step, 1, None, length=N, unroll=4)",
        ],
        id="import-cell-after-markdown-and-a-settings-cell-gets-the-import-once",
    ),
    pytest.param(
        [
            "!pip install -q jax\n%matplotlib inline",
            "%load_ext autoreload\n%autoreload 2\nimport jax",
            STEP,
            "c = jax.lax.scan(step, 0, None, length=3)\n" + USE,
        ],
        [
            "!pip install -q jax\n%matplotlib inline",
            "%load_ext autoreload\n%autoreload 2\nimport jax\nimport scanrewrite.runtime",
            STEP,
            "c = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)\n" + USE,
        ],
        id="line-magics-and-shell-escapes-before-the-imports",
    ),
    pytest.param(
        [
            "import jax\nfrom jax import lax",
            STEP,
            "%%time\nc = lax.scan(step, 0, None, length=3)\n%timeit lax.scan(step, 0, None, length=3)",
        ],
        [
            "import jax\nimport scanrewrite.runtime\nfrom jax import lax",
            STEP,
            "%%time\nc = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)\n%timeit lax.scan(step, 0, None, length=3)",
        ],
        id="time-cell-body-is-rewritten-timeit-line-is-not-and-keeps-its-import",
    ),
    pytest.param(
        [
            "from jax import lax",
            STEP,
            "%%bash\necho lax.scan",
            "%%writefile model.py\nc = lax.scan(step, 0, None, length=3)",
            "c = lax.scan(step, 0, None, length=3)\nlax.scan?\n?lax.scan\nlax.scan??",
        ],
        [
            "import scanrewrite.runtime\nfrom jax import lax",
            STEP,
            "%%bash\necho lax.scan",
            "%%writefile model.py\nc = lax.scan(step, 0, None, length=3)",
            "c = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)\nlax.scan?\n?lax.scan\nlax.scan??",
        ],
        id="bash-and-writefile-cells-and-help-lines-are-left-alone",
    ),
    pytest.param(
        [
            "import jax",
            STEP,
            "files = !ls\nfor name in files:\n    !echo {name}\n/print 1\n,print a b\n;print a b\n!pip install \\\n    jax\n"
            "c = jax.lax.scan(step, 0, None, length=3)\ndoc = '''\n!not a shell line\n'''",
        ],
        # The shell line names `jax` (`!pip install jax`): its import stays.
        [
            "import jax\nimport scanrewrite.runtime",
            STEP,
            "files = !ls\nfor name in files:\n    !echo {name}\n/print 1\n,print a b\n;print a b\n!pip install \\\n    jax\n"
            "c = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)\ndoc = '''\n!not a shell line\n'''",
        ],
        id="shell-assignments-indented-escapes-auto-call-and-continuations",
    ),
    pytest.param(
        ["c = jax.lax.scan(step, 0, None, length=3)", "import jax"],
        ["c = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)", "import scanrewrite.runtime"],
        id="import-cell-after-the-call-still-gets-the-import",
    ),
    pytest.param(
        [
            "# %% jupytext-style marker\nimport jax",
            "# %% another\n" + STEP + "\nc = jax.lax.scan(step, 0, None, length=3)\n",
        ],
        [
            "# %% jupytext-style marker\nimport scanrewrite.runtime",
            "# %% another\n" + STEP + "\nc = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)\n",
        ],
        id="cells-that-hold-marker-like-comments",
    ),
    pytest.param(
        ["import jax", "x = (\n", STEP + "\nc = jax.lax.scan(step, 0, None, length=3)"],
        [
            "import scanrewrite.runtime",
            "x = (\n",
            STEP + "\nc = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)",
        ],
        id="a-cell-that-does-not-parse-is-left-alone-the-rest-rewritten",
    ),
]


@pytest.mark.parametrize(("before", "after"), CASES)
def test_rewrite(before, after):
    result = rewrite_notebook(make(*before), unroll=4)
    assert sources(result.code) == after
    assert result.code == make(*after)
    assert rewrite_notebook(result.code, unroll=4).code == result.code


NOOP = [
    pytest.param([("markdown", "Call `jax.lax.scan(f, 0, xs)` in a loop"), "import jax"], id="markdown-mentions-scan"),
    pytest.param(["import jax", ("raw", "jax.lax.scan(step, 0, None, length=3)")], id="raw-cell"),
    pytest.param(["from jax import lax", "%%bash\nlax.scan(step, 0, None, length=3)"], id="bash-cell"),
    pytest.param(["from jax import lax", "%timeit lax.scan(step, 0, None, length=3)"], id="scan-inside-a-line-magic"),
    pytest.param(
        ["from jax import lax", STEP, "c = lax.scan(step, 0, None, length=3)  # scanrewrite: skip"], id="skip-pragma"
    ),
    pytest.param(["import jax", "c = lax.scan(step, 0, None, length=3)"], id="lax-never-imported"),
    pytest.param([], id="no-cells"),
]


@pytest.mark.parametrize("cells", NOOP)
def test_noop(cells):
    source = make(*cells)
    result = rewrite_notebook(source, unroll=4)
    assert result.code == source
    assert not result.changed and result.changes == ()


def test_notebook_of_another_language_is_left_alone():
    source = make("library(jax)", "lax.scan(step, 0, None, length=3)", language="R")
    assert rewrite_notebook(source, unroll=4).code == source


def test_calls_skips_and_unparsed_cells_are_located_by_code_cell_and_line():
    source = make(
        ("markdown", "# Title"),
        "from jax import lax\nimport jax",
        "def broken(:\n    pass",
        STEP + "\nc = lax.scan(step, 0, None, length=3)\nd = lax.scan(step, 0, None, **options)",
        "%timeit lax.scan(step, 0, None, length=3)",
    )
    result = rewrite_notebook(source, unroll=4)
    assert result.rewritten == ((3, 3, "jax.lax.scan"),)
    assert result.skipped == (
        (3, 4, "unroll may come from **kwargs"),
        (4, 1, "reference to jax.lax.scan that is not a call"),
    )
    assert result.unparsed == ((2, 1, "cannot parse: invalid syntax"),)
    # The skipped call and the %timeit line still use `lax`: its import stays.
    assert sources(result.code)[1] == "from jax import lax\nimport jax\nimport scanrewrite.runtime"


def test_names_in_a_cell_that_does_not_parse_keep_their_imports():
    source = make("from jax import lax", STEP + "\nc = lax.scan(step, 0, None, length=3)", "lax.scan(step, 0,\n")
    result = rewrite_notebook(source, unroll=4)
    assert sources(result.code)[0] == "import scanrewrite.runtime\nfrom jax import lax"
    assert result.unparsed and result.unparsed[0][0] == 3


def test_diff_names_each_changed_cell():
    source = make(
        ("markdown", "# Title"), "from jax import lax", "x = 1", STEP + "\nc = lax.scan(step, 0, None, length=3)"
    )
    result = rewrite_notebook(source, unroll=4)
    assert notebook_diff(result.changes, "nb/demo.ipynb").decode() == (
        "--- nb/demo.ipynb:cell 1\n"
        "+++ nb/demo.ipynb:cell 1\n"
        "@@ -1 +1 @@\n"
        "-from jax import lax\n"
        "+import scanrewrite.runtime\n"
        "--- nb/demo.ipynb:cell 3\n"
        "+++ nb/demo.ipynb:cell 3\n"
        "@@ -1,3 +1,3 @@\n"
        " def step(c, x):\n"
        "     return c + x, c\n"
        "-c = lax.scan(step, 0, None, length=3)\n"
        "+c = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)\n"
    )


BAD = [
    pytest.param(
        b'{"cells": [\n  "x"\n', 3, "not a notebook: invalid JSON (Expecting ',' delimiter)", id="truncated-json"
    ),
    pytest.param(b"[1, 2]", None, "not an nbformat 4 notebook (no nbformat version)", id="json-list"),
    pytest.param(
        json.dumps({"metadata": {}, "nbformat": 3, "nbformat_minor": 0, "worksheets": []}).encode(),
        None,
        "not an nbformat 4 notebook (nbformat 3)",
        id="nbformat-3",
    ),
    pytest.param(
        json.dumps(
            {"cells": [{"cell_type": "code", "source": "x"}], "metadata": {}, "nbformat": 4, "nbformat_minor": 4}
        ).encode(),
        None,
        "not a valid nbformat 4 notebook: ",
        id="code-cell-without-outputs",
    ),
    pytest.param(
        b'{"cells": [], "nbformat": 4, "x": "\xff"}', 1, "not a notebook: cannot decode as utf-8", id="not-utf-8"
    ),
    # Shapes that nbformat's own validator fails on with a TypeError or KeyError.
    *(
        pytest.param(
            json.dumps({"metadata": {}, "nbformat": 4, "nbformat_minor": 5, **fields}).encode(),
            None,
            f"not a valid nbformat 4 notebook: {message}",
            id=name,
        )
        for name, fields, message in [
            ("cells-a-string", {"cells": "import jax"}, "cells: a string, not an array"),
            ("cell-a-list", {"cells": [["x = 1"]]}, "cells/0: an array, not an object"),
            ("id-a-list", {"cells": [{"id": ["a"], "cell_type": "raw", "source": ""}]}, "cells/0/id: an array, not a string"),
            ("minor-a-string", {"nbformat_minor": "5", "cells": []}, "nbformat_minor: a string, not an integer"),
            ("no-cells", {}, "'cells' is a required property"),
        ]
    ),
]


@pytest.mark.parametrize(("source", "line", "message"), BAD)
def test_bad_notebook_is_one_error(source, line, message):
    with pytest.raises(NotebookError) as raised:
        rewrite_notebook(source, unroll=4)
    assert raised.value.line == line
    assert raised.value.message.startswith(message)
    assert "\n" not in raised.value.message


MASKED = [
    pytest.param("%matplotlib inline\nx = 1", ["%matplotlib inline"], id="line-magic"),
    pytest.param("if True:\n    !ls\n", ["!ls"], id="indented-shell"),
    pytest.param("x = [\n    1,\n    2]\ny = (a\n     , b)", [], id="leading-comma-inside-brackets"),
    pytest.param('s = """\n%not magic\n!not shell\n"""', [], id="inside-a-string"),
    pytest.param("x = 1  # what?\nprint('why?')", [], id="question-marks-in-comments-and-strings"),
    pytest.param("obj?\n??obj\nout = %time f()", ["obj?", "??obj", "out = %time f()"], id="help-and-magic-assignment"),
]


@pytest.mark.parametrize(("cell", "ipython_lines"), MASKED)
def test_mask_finds_ipython_lines_and_unmask_restores_them(cell, ipython_lines):
    masked = mask(cell, "__ipython_t_")
    assert [text.strip() for _, text in masked.lines] == ipython_lines
    compile(masked.code, "<cell>", "exec")
    assert masked.code.count("\n") == cell.count("\n")
    assert unmask(masked.code, masked) == cell


def test_place_import_moves_an_import_the_rewrite_put_in_another_cell():
    before = {0: "x = 1", 2: "__ipython_t_0__()\nimport jax\n\ny = 2", 3: "c = f()"}
    after = {0: "import scanrewrite.runtime\nx = 1", 2: before[2], 3: "c = g()"}
    moved = place_import(before, after, 2, "__ipython_t_")
    assert moved == {0: "x = 1", 2: "__ipython_t_0__()\nimport jax\nimport scanrewrite.runtime\n\ny = 2", 3: "c = g()"}
    assert place_import(before, moved, 2, "__ipython_t_") == moved


_LINES = [
    "x = 1",
    "import jax",
    "c = jax.lax.scan(step, 0, None, length=3)",
    "# a comment?",
    "",
    "   ",
    "%timeit f(x)",
    "!pip install -q 'jax[cpu]'",
    "files = !ls *.py",
    "jax.lax.scan?",
    "??jax",
    "/print 1 2",
    ",print a b",
    "y = [1,\n     2]",
    's = """\n%not a magic\n!nor a shell line?\n"""',
    "for i in range(2):\n    !echo $i\n    %time f(i)",
    "!echo one \\\n  two",
]


@given(st.lists(st.sampled_from(_LINES), max_size=8), st.sampled_from(["\n", "\r\n"]))
def test_mask_always_parses_and_unmask_restores_byte_for_byte(lines, newline):
    cell = newline.join(line.replace("\n", newline) for line in lines)
    masked = mask(cell, "__ipython_t_")
    compile(masked.code, "<cell>", "exec")
    assert len(masked.code.splitlines()) == len(cell.splitlines())
    assert unmask(masked.code, masked) == cell
