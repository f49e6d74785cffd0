"""The codemod package's layout: parts in layers, no import cycles, files of a readable size."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import scanrewrite.codemod

PACKAGE = Path(scanrewrite.codemod.__file__).parent
#: Each part may import only the parts before it.
LAYERS = (
    "_parsing",
    "_scopes",
    "_matchers",
    "_arguments",
    "_format_lines",
    "_format_split",
    "_format_tokens",
    "_layout",
    "_discovery",
    "_checkpoints",
    "_applied",
    "_import_order",
    "_kept_imports",
    "_import_uses",
    "_imports",
    "_rewrite",
    "_writeback",
    "_spelling",
    "_revert",
    "_command",
    "__init__",
)
MAX_LINES = 400


def _internal_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scanrewrite.codemod."):
            found.add(node.module.rpartition(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.rpartition(".")[2] for a in node.names if a.name.startswith("scanrewrite.codemod."))
    return found


def test_every_part_has_a_layer():
    assert {path.stem for path in PACKAGE.glob("*.py")} == set(LAYERS)


@pytest.mark.parametrize("part", LAYERS)
def test_parts_import_only_earlier_layers(part):
    earlier = set(LAYERS[: LAYERS.index(part)])
    assert _internal_imports(PACKAGE / f"{part}.py") <= earlier


@pytest.mark.parametrize("part", LAYERS)
def test_parts_stay_small(part):
    assert len((PACKAGE / f"{part}.py").read_text().splitlines()) <= MAX_LINES


def test_public_names_are_exported():
    for name in scanrewrite.codemod.__all__:
        assert getattr(scanrewrite.codemod, name).__module__.startswith("scanrewrite.codemod")
