"""`--targets` and the `targets` key of `[tool.scanrewrite]`."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanrewrite.codemod import rewrite
from tests.test_cli import invoke, write
from tests.test_notebook import make, sources

LOOPS = """\
import jax
from jax import lax


def rollout(x):
    x = lax.fori_loop(0, 8, lambda i, x: x * 0.5 + i, x)
    return jax.lax.map(jax.numpy.sin, x)
"""


def test_the_default_leaves_fori_loop_and_map_alone(project: Path) -> None:
    write(project, {"a.py": LOOPS})
    result = invoke("a.py")
    assert result.exit_code == 0
    assert (project / "a.py").read_text() == LOOPS


@pytest.mark.parametrize(
    ("args", "targets"),
    [
        (["--targets", "lax.fori_loop"], ("lax.fori_loop",)),
        (["--targets", "lax.scan, lax.map,lax.fori_loop"], ("lax.scan", "lax.map", "lax.fori_loop")),
    ],
)
def test_targets_option(project: Path, args: list[str], targets: tuple[str, ...]) -> None:
    write(project, {"a.py": LOOPS})
    result = invoke(*args, "a.py")
    assert result.exit_code == 0, result.output
    assert (project / "a.py").read_bytes() == rewrite(LOOPS.encode(), targets=targets).code != LOOPS.encode()


@pytest.mark.parametrize("setting", ['targets = "lax.map,lax.fori_loop"', 'targets = ["lax.map", "lax.fori_loop"]'])
def test_targets_from_config_and_the_command_line_wins(project: Path, setting: str) -> None:
    write(project, {"pyproject.toml": f"[tool.scanrewrite]\n{setting}\n", "a.py": LOOPS})
    assert invoke("a.py").exit_code == 0
    assert (project / "a.py").read_bytes() == rewrite(LOOPS.encode(), targets=("lax.map", "lax.fori_loop")).code
    write(project, {"a.py": LOOPS})
    assert invoke("--targets", "lax.map", "a.py").exit_code == 0
    assert (project / "a.py").read_bytes() == rewrite(LOOPS.encode(), targets=("lax.map",)).code


def test_a_file_without_scan_is_read_when_fori_loop_is_asked_for(project: Path) -> None:
    write(project, {"a.py": LOOPS, "b.py": "import jax\nprint(jax.lax.fori_loop)\n"})
    result = invoke("-v", "--check", "--targets", "lax.fori_loop", ".")
    assert result.exit_code == 1
    assert "b.py:2: would skip (reference to jax.lax.fori_loop that is not a call)" in result.stderr.splitlines()


def test_notebooks_get_the_targets_too(project: Path) -> None:
    cells = ["import jax\nfrom jax import lax", "y = lax.fori_loop(0, 5, body, y0)\nzs = lax.map(f, xs)"]
    write(project, {"demo.ipynb": make(*cells)})
    assert invoke("demo.ipynb").exit_code == 0
    assert sources((project / "demo.ipynb").read_bytes()) == cells
    assert invoke("--targets", "lax.fori_loop,lax.map", "demo.ipynb").exit_code == 0
    assert sources((project / "demo.ipynb").read_bytes()) == [
        "import jax\nimport scanrewrite.runtime",
        "y = scanrewrite.runtime.fori_loop(0, 5, body, y0, unroll=4)\nzs = scanrewrite.runtime.map(f, xs, unroll=4)",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--targets", "lax.fori"], "unknown target 'lax.fori' (did you mean 'lax.fori_loop'?); the targets are"),
        (["--targets", "fori_loop,lax.map"], "unknown target 'fori_loop' (did you mean 'lax.fori_loop'?)"),
        (["--targets", ""], "no targets given"),
    ],
)
def test_bad_targets_exit_2(project: Path, args: list[str], message: str) -> None:
    write(project, {"a.py": LOOPS})
    result = invoke(*args, "a.py")
    assert result.exit_code == 2
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert message in error
    assert (project / "a.py").read_text() == LOOPS


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('targets = "lax.mapp"', "error: pyproject.toml: [tool.scanrewrite] targets: unknown target 'lax.mapp' "
         "(did you mean 'lax.map'?); the targets are lax.scan, eqxi.scan, lax.fori_loop, lax.map, nnx.scan, linen.scan"),
        ("targets = 3", "error: pyproject.toml: [tool.scanrewrite] targets: expected names separated by commas, got 3"),
    ],
)
def test_bad_targets_in_config_exit_2(project: Path, setting: str, message: str) -> None:
    write(project, {"pyproject.toml": f"[tool.scanrewrite]\n{setting}\n", "a.py": LOOPS})
    result = invoke("a.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [message]


def test_help_lists_the_targets() -> None:
    help_text = " ".join(invoke("--help").stdout.split())
    assert "--targets NAMES" in help_text
    assert "lax.scan, eqxi.scan, lax.fori_loop, lax.map" in help_text
    assert "[default: lax.scan,eqxi.scan]" in help_text
