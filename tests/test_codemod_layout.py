"""The codemod and layout packages' shape: parts in layers, no import cycles, files of a readable size."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import scanrewrite.codemod
import scanrewrite.layout

LAYOUT = Path(scanrewrite.layout.__file__).parent
PACKAGE = Path(scanrewrite.codemod.__file__).parent
#: Each part of the layout engine may import only the parts before it, and nothing of the codemod.
LAYOUT_LAYERS = ("_lines", "_split", "_tokens", "_relayout", "__init__")
#: Each part of the codemod may import only the parts before it, and the layout engine as a whole.
LAYERS = (
    "_splice",
    "_parsing",
    "_scopes",
    "_arguments",
    "_discovery",
    "_checkpoints",
    "_applied",
    "_import_order",
    "_kept_imports",
    "_import_edits",
    "_string_names",
    "_import_uses",
    "_import_removal",
    "_imports",
    "_rewrite",
    "_writeback",
    "_spelling",
    "_revert",
    "_command",
    "__init__",
)
MAX_LINES = 400
#: What the codemod stands on: the tables of known APIs and the layout engine.
BELOW_THE_CODEMOD = {"scanrewrite.targets", "scanrewrite.options", "scanrewrite.wrappers", "scanrewrite.pragmas", "scanrewrite.layout"}


def _scanrewrite_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scanrewrite."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("scanrewrite."))
    return found


def test_every_part_has_a_layer():
    assert {path.stem for path in PACKAGE.glob("*.py")} == set(LAYERS)
    assert {path.stem for path in LAYOUT.glob("*.py")} == set(LAYOUT_LAYERS)


@pytest.mark.parametrize("part", LAYERS)
def test_parts_import_only_earlier_layers(part):
    earlier = {f"scanrewrite.codemod.{name}" for name in LAYERS[: LAYERS.index(part)]}
    assert _scanrewrite_imports(PACKAGE / f"{part}.py") <= earlier | BELOW_THE_CODEMOD


@pytest.mark.parametrize("part", LAYOUT_LAYERS)
def test_layout_parts_import_only_earlier_layout_parts(part):
    earlier = {f"scanrewrite.layout.{name}" for name in LAYOUT_LAYERS[: LAYOUT_LAYERS.index(part)]}
    assert _scanrewrite_imports(LAYOUT / f"{part}.py") <= earlier


@pytest.mark.parametrize("path", [*(PACKAGE / f"{p}.py" for p in LAYERS), *(LAYOUT / f"{p}.py" for p in LAYOUT_LAYERS)])
def test_parts_stay_small(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_public_names_are_exported():
    for name in scanrewrite.codemod.__all__:
        assert getattr(scanrewrite.codemod, name).__module__.startswith("scanrewrite.codemod")
