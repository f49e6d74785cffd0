"""`scanrewrite --revert` through click's `CliRunner`: every mode of the command, undoing the rewrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli import BROKEN, PLAIN, SCAN, TWO_SCANS, invoke, rewritten, write
from tests.test_notebook import make, sources
from tests.test_notebook_cli import AFTER, STEP


def test_in_place_reverts_what_the_rewrite_wrote(project: Path) -> None:
    write(project, {"src/a.py": rewritten(TWO_SCANS), "src/b.py": PLAIN, "src/c.py": SCAN})
    result = invoke("--revert", "src")
    assert result.exit_code == 0, result.output
    assert (project / "src/a.py").read_text() == TWO_SCANS
    assert result.stdout == ""
    assert result.stderr.splitlines() == ["reverted src/a.py", "1 file reverted (2 scan calls), 2 left unchanged"]
    again = invoke("--revert", "src")
    assert (again.exit_code, again.stderr) == (0, "3 files left unchanged\n")


@pytest.mark.parametrize(("args", "code"), [(["--check"], 1), (["--diff"], 0), (["--check", "--diff"], 1)])
def test_check_and_diff_write_nothing(project: Path, args: list[str], code: int) -> None:
    write(project, {"a.py": rewritten(SCAN), "b.py": PLAIN})
    result = invoke("--revert", *args, ".")
    assert result.exit_code == code
    assert (project / "a.py").read_bytes() == rewritten(SCAN)
    # Nothing is said of a dependency: the reverted code no longer imports scanrewrite.runtime.
    assert result.stderr.splitlines() == [
        "would revert a.py",
        "1 file would be reverted (1 scan call), 1 would be left unchanged",
    ]
    assert ("+out = jax.lax.scan(step, 0, None, length=3)\n" in result.stdout) == ("--diff" in args)


def test_stdin(project: Path) -> None:
    result = invoke("--revert", "-", input=rewritten(SCAN))
    assert result.exit_code == 0
    assert result.stdout == SCAN
    diff = invoke("--revert", "--diff", "--stdin-filename", "m.py", "-", input=rewritten(SCAN))
    assert diff.stdout.startswith("--- a/m.py\n+++ b/m.py\n")


def test_a_syntax_error_among_good_files_exits_2(project: Path) -> None:
    write(project, {"a.py": rewritten(SCAN), "bad.py": "import scanrewrite.runtime\n" + BROKEN})
    result = invoke("--revert", ".")
    assert result.exit_code == 2
    assert (project / "a.py").read_text() == SCAN
    assert any(line.startswith("error: bad.py:") for line in result.stderr.splitlines())


def test_verbose_names_each_call_and_what_dropping_its_settings_does(project: Path) -> None:
    write(project, {"a.py": rewritten(SCAN, checkpoint="dots_saveable")})
    result = invoke("--revert", "-v", "a.py")
    assert result.exit_code == 0
    assert "a.py:9: reverted (dropped checkpoint=jax.checkpoint_policies.dots_saveable: memory as jax.lax.scan's again)" in result.stderr.splitlines()
    assert (project / "a.py").read_text() == SCAN
    skipped = "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs)  # scanrewrite: skip\n"
    write(project, {"s.py": skipped})
    result = invoke("--revert", "-v", "s.py")
    assert "s.py:2: skipped (skip pragma)" in result.stderr.splitlines()


@pytest.mark.parametrize("args", [["--check"], ["--diff"]])
def test_verbose_says_would_when_nothing_is_written(project: Path, args: list[str]) -> None:
    skipped = "y = scanrewrite.runtime.scan(f, c, xs)  # scanrewrite: skip\n"
    write(project, {"a.py": rewritten(SCAN, checkpoint="dots_saveable"), "s.py": "import scanrewrite.runtime\n" + skipped})
    result = invoke("--revert", "-v", *args, ".")
    assert result.stderr.splitlines() == [
        "project root: .; configuration: none",
        "a.py:9: would revert (dropped checkpoint=jax.checkpoint_policies.dots_saveable: memory as jax.lax.scan's again)",
        "a.py:2: would remove 'import scanrewrite.runtime'",
        "would revert a.py",
        "s.py:2: would skip (skip pragma)",
        "1 file would be reverted (1 scan call), 1 would be left unchanged, 1 call would be skipped",
    ]


@pytest.mark.parametrize("option", ["--unroll=3", "--no-checkpoint", "--policy=dots_saveable", "--levels=2"])
def test_rewrite_options_are_refused(project: Path, option: str) -> None:
    result = invoke("--revert", option, ".")
    assert result.exit_code == 2
    assert "cannot be used together" in result.stderr


def test_rewrite_options_from_the_configuration_do_not_apply(project: Path) -> None:
    write(project, {"pyproject.toml": "[tool.scanrewrite]\nunroll = 3\nlevels = 2\n", "a.py": rewritten(SCAN)})
    result = invoke("--revert", "a.py")
    assert result.exit_code == 0
    assert (project / "a.py").read_text() == SCAN


#: As the formatters lay it out at 88 and at 100 columns (but not at 60, where it is left
#: as it is): reverted, it fits on one line at both.
HUGGED = """\
import jax
import scanrewrite.runtime


def f(step_function, initial_state, inputs):
    return scanrewrite.runtime.scan(
        step_function, initial_state, inputs, length=12, reverse=True, unroll=4
    )
"""


@pytest.mark.parametrize(
    ("config", "joined"),
    [
        ("", True),
        ("[tool.ruff]\nline-length = 60\n", False),
        ("[tool.black]\nline-length = 60\n", False),
        ("[tool.pyink]\nline-length = 60\n", False),
        # black formats; ruff's setting may be its linter's only.
        ("[tool.black]\nline-length = 100\n[tool.ruff]\nline-length = 60\n", True),
        ("[tool.black]\nline-length = 100\n[tool.ruff]\nline-length = 60\n[tool.ruff.format]\n", False),
    ],
)
def test_the_line_length_comes_from_the_formatters_configuration(project: Path, config: str, joined: bool) -> None:
    write(project, {"pyproject.toml": config, "a.py": HUGGED})
    assert invoke("--revert", "a.py").exit_code == 0
    one_line = "    return jax.lax.scan(step_function, initial_state, inputs, length=12, reverse=True)\n"
    assert (one_line in (project / "a.py").read_text()) == joined


def test_notebooks(project: Path) -> None:
    write(project, {"nb/demo.ipynb": AFTER})
    result = invoke("--revert", "nb")
    assert result.exit_code == 0, result.output
    assert sources((project / "nb/demo.ipynb").read_bytes()) == sources(
        make(
            ("markdown", "# Demo"),
            "import jax",
            STEP,
            "%%time\nc = jax.lax.scan(step, 0, None, length=3)\nkey = jax.random.PRNGKey(0)",
        )
    )
    assert result.stderr.splitlines()[-1] == "1 file reverted (1 scan call)"
