"""The tuner's shape: it stands on the runtime's public face, never on its private parts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUNE = ROOT / "scanrewrite" / "tune"


def _runtime_imports(path: Path) -> list[tuple[int, str]]:
    """Each `scanrewrite.runtime` module `path` imports, or imports a name from, with its line
    (`from scanrewrite.runtime import _x` names the module `scanrewrite.runtime._x`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module == "scanrewrite.runtime":
                found += [(node.lineno, f"scanrewrite.runtime.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[:2] == ["scanrewrite", "runtime"]]


def _private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split(".")[2:])


@pytest.mark.parametrize("path", sorted(TUNE.glob("*.py")), ids=lambda path: path.name)
def test_the_tuner_imports_only_what_the_runtime_exports(path):
    private = [f"{path.name}:{line}: {name}" for line, name in _runtime_imports(path) if _private(name)]
    assert private == [], "export it from scanrewrite.runtime instead"


def test_the_check_finds_a_private_import(tmp_path):
    """The check above can fail: each spelling of a private import is found."""
    module = tmp_path / "m.py"
    module.write_text(
        "import scanrewrite.runtime._plan\n"
        "from scanrewrite.runtime._override import Sites\n"
        "from scanrewrite.runtime import _staging, Site\n"
        "def f():\n    from scanrewrite.runtime._compat import sub_jaxprs\n"
    )
    found = [name for _, name in _runtime_imports(module) if _private(name)]
    assert found == [
        "scanrewrite.runtime._plan", "scanrewrite.runtime._override", "scanrewrite.runtime._staging",
        "scanrewrite.runtime._compat",
    ]  # fmt: skip
