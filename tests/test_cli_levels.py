"""`--levels N|auto` and the `levels` key of `[tool.scanrewrite]`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scanrewrite.codemod import rewrite
from tests.test_cli import SCAN, invoke, write

EQXI = """\
import equinox.internal as eqxi


def step(carry, x):
    return carry + x, carry


out = eqxi.scan(step, 0, None, length=3, kind="lax")
"""


@pytest.mark.parametrize(("args", "levels"), [(["--levels", "2"], 2), (["--levels", "auto"], "auto")])
def test_levels_option(project: Path, args: list[str], levels: int | str) -> None:
    write(project, {"a.py": SCAN})
    assert invoke(*args, "a.py").exit_code == 0
    assert (project / "a.py").read_bytes() == rewrite(SCAN.encode(), levels=levels).code
    assert f"levels={levels!r}".replace("'", '"').encode() in (project / "a.py").read_bytes()


@pytest.mark.parametrize("value", ["0", "-1", "many", "Auto"])
def test_bad_levels_exit_2(project: Path, value: str) -> None:
    write(project, {"a.py": SCAN})
    result = invoke("--levels", value, "a.py")
    assert result.exit_code == 2
    assert "Invalid value for '--levels'" in result.stderr
    assert (project / "a.py").read_text() == SCAN


@pytest.mark.parametrize(("setting", "levels"), [("levels = 3", 3), ("levels = 'auto'", "auto")])
def test_levels_from_config_and_the_command_line_wins(project: Path, setting: str, levels: int | str) -> None:
    write(project, {"pyproject.toml": f"[tool.scanrewrite]\n{setting}\n", "a.py": SCAN})
    assert invoke("a.py").exit_code == 0
    assert (project / "a.py").read_bytes() == rewrite(SCAN.encode(), levels=levels).code
    write(project, {"a.py": SCAN})
    assert invoke("--levels", "2", "a.py").exit_code == 0
    assert (project / "a.py").read_bytes() == rewrite(SCAN.encode(), levels=2).code


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("levels = 0", "error: pyproject.toml: [tool.scanrewrite] levels: must be a positive integer or 'auto'"),
        ("levels = true", "error: pyproject.toml: [tool.scanrewrite] levels: expected a value, not true/false"),
    ],
)
def test_bad_levels_in_config_exit_2(project: Path, setting: str, message: str) -> None:
    write(project, {"pyproject.toml": f"[tool.scanrewrite]\n{setting}\n", "a.py": SCAN})
    result = invoke("a.py")
    assert result.exit_code == 2
    assert message in result.stderr
    assert (project / "a.py").read_text() == SCAN


def test_verbose_says_an_eqxi_call_gets_no_levels(project: Path) -> None:
    write(project, {"a.py": SCAN, "b.py": EQXI})
    result = invoke("-v", "--levels", "2", "--check", ".")
    lines = result.stderr.splitlines()
    assert "a.py:8: would rewrite" in lines
    assert "b.py:8: would rewrite (levels not written: equinox.internal.scan takes none)" in lines
    quiet = invoke("--levels", "2", "--check", ".")
    assert "levels" not in quiet.stderr


def test_help_lists_levels() -> None:
    result = invoke("--help")
    assert "--levels N|auto" in result.stdout


def test_documented_option_table_matches_help() -> None:
    help_text = invoke("--help").stdout
    page = (Path(__file__).resolve().parents[1] / "docs" / "command-line.md").read_text()
    table = page.split("\n## Options\n", 1)[1].strip().split("\n\n", 1)[0]
    option = re.compile(r"(?<![\w-])(--[a-z][a-z-]+)")
    in_help = set(option.findall(help_text.split("Options:", 1)[1]))
    in_docs = set(option.findall("\n".join(line.split("|")[1] for line in table.splitlines())))
    assert in_help == in_docs | {"--help"}
