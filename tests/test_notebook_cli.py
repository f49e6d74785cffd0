"""The command line on Jupyter notebooks: discovery, modes, stdin, messages, errors, safety."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scanrewrite.report import Changed, FileResult, Report
from tests.test_cli import NOTE, PLAIN, SCAN, WOULD_NOTE, invoke, rewritten, write
from tests.test_notebook import make, sources


STEP = "def step(c, x):\n    return c + x, c"
NOTEBOOK = make(
    ("markdown", "# Demo"),
    "import jax\nfrom jax import lax",
    STEP,
    "%%time\nc = lax.scan(step, 0, None, length=3)\nkey = jax.random.PRNGKey(0)",
)
AFTER = make(
    ("markdown", "# Demo"),
    "import jax\nimport scanrewrite.runtime",
    STEP,
    "%%time\nc = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)\nkey = jax.random.PRNGKey(0)",
)
# What --diff prints: a patch of the file's JSON text, which `git apply` takes.
DIFF = r"""--- a/nb/demo.ipynb
+++ b/nb/demo.ipynb
@@ -16,7 +16,7 @@
    "outputs": [],
    "source": [
     "import jax\n",
-    "from jax import lax"
+    "import scanrewrite.runtime"
    ]
   },
   {
@@ -38,7 +38,7 @@
    "outputs": [],
    "source": [
     "%%time\n",
-    "c = lax.scan(step, 0, None, length=3)\n",
+    "c = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)\n",
     "key = jax.random.PRNGKey(0)"
    ]
   }
"""
# What --cell-diff prints: one diff per changed cell, as ruff and black show a notebook.
CELL_DIFF = (
    "--- nb/demo.ipynb:cell 1\n"
    "+++ nb/demo.ipynb:cell 1\n"
    "@@ -1,2 +1,2 @@\n"
    " import jax\n"
    "-from jax import lax\n"
    "+import scanrewrite.runtime\n"
    "--- nb/demo.ipynb:cell 3\n"
    "+++ nb/demo.ipynb:cell 3\n"
    "@@ -1,3 +1,3 @@\n"
    " %%time\n"
    "-c = lax.scan(step, 0, None, length=3)\n"
    "+c = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)\n"
    " key = jax.random.PRNGKey(0)\n"
)
BROKEN_CELL = make(
    "import jax", "x = (\n", STEP + "\nc = jax.lax.scan(step, 0, None, length=3)\nkey = jax.random.PRNGKey(0)"
)


def test_folders_are_searched_for_notebooks_with_the_same_excludes(project: Path) -> None:
    write(
        project,
        {
            "nb/demo.ipynb": NOTEBOOK,
            "build/gen.ipynb": NOTEBOOK,
            "old/x.ipynb": NOTEBOOK,
            "a.py": SCAN,
            "notes.txt": "jax.lax.scan",
        },
    )
    (project / ".gitignore").write_text("old/\n")
    result = invoke(".")
    assert result.exit_code == 0, result.stderr
    assert (project / "nb/demo.ipynb").read_bytes() == AFTER
    assert (project / "a.py").read_bytes() == rewritten(SCAN)
    assert (project / "build/gen.ipynb").read_bytes() == NOTEBOOK
    assert (project / "old/x.ipynb").read_bytes() == NOTEBOOK
    assert result.stderr.splitlines() == [
        "rewritten a.py",
        "rewritten nb/demo.ipynb",
        NOTE,
        "2 files rewritten (2 scan calls)",
    ]


def test_force_exclude_applies_to_named_notebooks(project: Path) -> None:
    write(project, {"build/gen.ipynb": NOTEBOOK})
    assert invoke("--force-exclude", "build/gen.ipynb").exit_code == 0
    assert (project / "build/gen.ipynb").read_bytes() == NOTEBOOK
    assert invoke("build/gen.ipynb").exit_code == 0
    assert (project / "build/gen.ipynb").read_bytes() == AFTER


@pytest.mark.parametrize(
    ("args", "code", "stdout"),
    [
        (["--check"], 1, ""),
        (["--diff"], 0, DIFF),
        (["--check", "--diff"], 1, DIFF),
        (["--cell-diff"], 0, CELL_DIFF),
        (["--check", "--cell-diff"], 1, CELL_DIFF),
    ],
)
def test_check_and_diff_write_nothing(project: Path, args: list[str], code: int, stdout: str) -> None:
    write(project, {"nb/demo.ipynb": NOTEBOOK})
    result = invoke(*args, ".")
    assert result.exit_code == code
    assert (project / "nb/demo.ipynb").read_bytes() == NOTEBOOK
    assert result.stdout == stdout
    assert result.stderr.splitlines() == ["would rewrite nb/demo.ipynb", WOULD_NOTE, "1 file would be rewritten (1 scan call)"]


@pytest.mark.parametrize("args", [[], ["--check"], ["--cell-diff"], ["--revert"], ["--revert", "--diff"]])
def test_verbose_names_cell_and_line(project: Path, args: list[str]) -> None:
    write(project, {"nb/demo.ipynb": AFTER if "--revert" in args else NOTEBOOK, "nb/plain.ipynb": make("x = 1")})
    result = invoke("-v", *args, "nb")
    done = {(): "rewritten", ("--revert",): "reverted", ("--revert", "--diff"): "would revert"}.get(tuple(args), "would rewrite")
    assert f"nb/demo.ipynb:cell 3:line 2: {done}" in result.stderr.splitlines()
    assert "plain.ipynb" not in result.stderr  # a file left unchanged is named with -vv only
    assert "nb/plain.ipynb: " in invoke("-vv", *args, "nb").stderr


def test_verbose_names_the_imports_by_cell_and_line(project: Path) -> None:
    """Located as calls are, IPython lines and all; and, once, the import a revert would not
    give back (it spells the call `jax.lax.scan` through the cell's `import jax`)."""
    write(project, {"nb/demo.ipynb": NOTEBOOK})
    lines = invoke("-v", "nb").stderr.splitlines()
    assert lines[1:5] == [
        "nb/demo.ipynb:cell 3:line 2: rewritten",
        "nb/demo.ipynb:cell 1:line 2: removed 'from jax import lax'",
        "nb/demo.ipynb:cell 1:line 2: added 'import scanrewrite.runtime'",
        "nb/demo.ipynb: --revert and scanrewrite-tune's write-back of the original will not restore 'from jax import lax'",
    ]
    lines = invoke("-v", "--revert", "nb").stderr.splitlines()
    assert lines[1:3] == [
        "nb/demo.ipynb:cell 3:line 2: reverted",
        "nb/demo.ipynb:cell 1:line 2: removed 'import scanrewrite.runtime'",
    ]
    assert "jax.lax.scan(step, 0, None, length=3)" in (project / "nb/demo.ipynb").read_text()


@pytest.mark.parametrize(
    ("args", "stdout"),
    [([], AFTER.decode()), (["--diff"], DIFF), (["--cell-diff"], CELL_DIFF), (["--check"], "")],
    ids=["in-place", "diff", "cell-diff", "check"],
)
def test_stdin(project: Path, args: list[str], stdout: str) -> None:
    result = invoke(*args, "--stdin-filename", "nb/demo.ipynb", "-", input=NOTEBOOK)
    assert result.stdout == stdout
    assert result.exit_code == (1 if "--check" in args else 0)


def test_unparsable_cell_is_reported_and_the_rest_written(project: Path) -> None:
    write(project, {"nb/broken.ipynb": BROKEN_CELL})
    result = invoke("nb/broken.ipynb")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: nb/broken.ipynb:cell 2:line 1: cannot parse: '(' was never closed (cell left as it is)",
        "rewritten nb/broken.ipynb",
        NOTE,
        "1 file rewritten (1 scan call), 1 file failed",
    ]
    assert sources((project / "nb/broken.ipynb").read_bytes())[:2] == [
        "import jax\nimport scanrewrite.runtime",
        "x = (\n",
    ]
    # On stdin the result still comes out: an editor must never get an empty notebook back.
    piped = invoke("--stdin-filename", "x.ipynb", "-", input=BROKEN_CELL)
    assert piped.exit_code == 2 and piped.stdout_bytes == (project / "nb/broken.ipynb").read_bytes()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(
            b'{"cells": [\n  "lax.scan"\n',
            "error: bad.ipynb:3: not a notebook: invalid JSON (Expecting ',' delimiter)",
            id="bad-json",
        ),
        pytest.param(
            b'{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"input": "lax.scan"}]}]}',
            "error: bad.ipynb: not an nbformat 4 notebook (nbformat 3); convert it with `jupyter nbconvert --to notebook`",
            id="nbformat-3",
        ),
    ],
)
def test_bad_notebook_is_one_line_exit_2_nothing_written(project: Path, content: bytes, message: str) -> None:
    write(project, {"bad.ipynb": content, "nb/demo.ipynb": NOTEBOOK})
    result = invoke(".")
    assert result.exit_code == 2
    assert message in result.stderr.splitlines()
    assert "Traceback" not in result.stderr
    assert (project / "bad.ipynb").read_bytes() == content
    assert (project / "nb/demo.ipynb").read_bytes() == AFTER
    stdin = invoke("--stdin-filename", "bad.ipynb", "-", input=content)
    assert (stdin.exit_code, stdin.stdout) == (2, "")


def test_report_counts_a_notebook_with_a_bad_cell_as_changed_and_failed(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(check=True)
    report.record(
        FileResult("nb.ipynb", Changed.YES, ("cell 3:line 2",), cell_errors=(("cell 4:line 1", "cannot parse: x"),))
    )
    assert (report.change_count, report.failure_count, report.rewritten_calls, report.return_code) == (1, 1, 1, 2)
    assert capsys.readouterr().err.splitlines() == ["error: nb.ipynb:cell 4:line 1: cannot parse: x", "would rewrite nb.ipynb"]


CHECK_IMPORTS = """
import sys
from scanrewrite.cli import main
try:
    main(["-j1", "--check", *sys.argv[1:]])
except SystemExit:
    pass
print("nbformat" in sys.modules, "jax" in sys.modules, file=sys.stderr)
"""


@pytest.mark.parametrize(
    ("paths", "nbformat"), [(["a.py"], False), (["a.py", "demo.ipynb"], True)], ids=["python", "notebook"]
)
def test_nbformat_only_for_notebooks_and_never_jax(tmp_path: Path, paths: list[str], nbformat: bool) -> None:
    write(tmp_path, {"a.py": SCAN, "demo.ipynb": NOTEBOOK})
    done = subprocess.run(
        [sys.executable, "-c", CHECK_IMPORTS, *paths], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.stderr.splitlines()[-1] == f"{nbformat} False", done.stderr


def test_process_pool(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, {"a.ipynb": NOTEBOOK, "b.ipynb": NOTEBOOK, "c.ipynb": BROKEN_CELL, "d.py": PLAIN})
    done = subprocess.run(
        [sys.executable, "-m", "scanrewrite", "-j2", "."], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert (tmp_path / "a.ipynb").read_bytes() == (tmp_path / "b.ipynb").read_bytes() == AFTER
    assert done.stderr.splitlines()[-1] == "3 files rewritten (3 scan calls), 1 left unchanged, 1 file failed"
