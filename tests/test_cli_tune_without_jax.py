"""`scanrewrite-tune` where jax is not installed (the base install puts the command on the PATH):
`--help` works, and a run says in one line what to install, exit 2.

Run by a real interpreter that cannot find jax: in CI's command-line environments, the
interpreter itself; elsewhere, this one with `-S` (no site-packages) and a path that holds
only the packages the command line needs.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What `scanrewrite-tune` imports besides scanrewrite (tomli only before Python 3.11).
NEEDED = ("click", "pathspec", "tomli")
#: What the console script runs.
COMMAND = "from scanrewrite.tune._command import main; sys.argv[0] = 'scanrewrite-tune'; main()"


@pytest.fixture
def python(tmp_path: Path) -> list[str]:
    """A command that runs the Python code given after it (then its arguments) in an
    interpreter that cannot import jax."""
    if importlib.util.find_spec("jax") is None:
        return [sys.executable, "-c", "import sys; exec(sys.argv.pop(1))"]
    site = tmp_path / "site"
    site.mkdir()
    for name in NEEDED:
        spec = importlib.util.find_spec(name)
        if spec is not None:
            origin = Path(spec.origin)
            source = origin.parent if origin.name == "__init__.py" else origin
            (site / source.name).symlink_to(source)
    (site / "scanrewrite").symlink_to(ROOT / "scanrewrite")
    return [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = [{str(site)!r}]; exec(sys.argv.pop(1))"]


def run(python: list[str], code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*python, code, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_jax_cannot_be_imported(python: list[str], tmp_path: Path) -> None:
    result = run(python, "import jax", cwd=tmp_path)
    assert "ModuleNotFoundError: No module named 'jax'" in result.stderr


def test_help_works(python: list[str], tmp_path: Path) -> None:
    result = run(python, COMMAND, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: scanrewrite-tune [OPTIONS] FILE.py:FACTORY")


def test_a_run_names_the_extra_to_install(python: list[str], tmp_path: Path) -> None:
    (tmp_path / "step.py").write_text("def factory():\n    raise AssertionError('never called')\n")
    result = run(python, COMMAND, "step.py:factory", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "error: scanrewrite-tune runs your program with jax, and jax is not installed: "
        "pip install 'scanrewrite[runtime]'\n"
    )
