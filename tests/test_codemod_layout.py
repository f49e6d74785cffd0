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
#: Each part of the codemod's import bookkeeping may import only the parts before it, and the
#: codemod's parts before it (`_parsing`); its `__init__` only re-exports.
IMPORTS = PACKAGE / "imports"
IMPORTS_LAYERS = (
    "_changes",
    "_placement",
    "_kept",
    "_edits",
    "_string_names",
    "_unused",
    "_schedule",
    "_removal",
    "_apply",
    "__init__",
)
#: Each part of the codemod may import only the parts before it (a subpackage as a whole), and
#: the layout engine as a whole.
LAYERS = (
    "_walk",
    "_splice",
    "_parsing",
    "_scopes",
    "_arguments",
    "_discovery",
    "_checkpoints",
    "_applied",
    "imports",
    "_rewrite",
    "_writeback",
    "_spelling",
    "_revert",
    "_command",
    "__init__",
)
MAX_LINES = 400
#: What the codemod stands on: the tables of known APIs and options, a site's settings, the
#: layout engine and the shape of errors.
BELOW_THE_CODEMOD = {
    "scanrewrite.targets",
    "scanrewrite.options",
    "scanrewrite.settings",
    "scanrewrite.wrappers",
    "scanrewrite.pragmas",
    "scanrewrite.layout",
    "scanrewrite.errors",
}


def _scanrewrite_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scanrewrite."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("scanrewrite."))
    return found


def _files(part: str) -> list[Path]:
    """The files of the codemod's part `part`: a module, or every module of a subpackage."""
    return sorted((PACKAGE / part).glob("*.py")) if (PACKAGE / part).is_dir() else [PACKAGE / f"{part}.py"]


def _imports_from_outside(part: str) -> set[str]:
    """What the codemod's part `part` imports, less its own modules."""
    found = set().union(*(_scanrewrite_imports(path) for path in _files(part)))
    return {name for name in found if not name.startswith(f"scanrewrite.codemod.{part}.")}


def test_every_part_has_a_layer():
    subpackages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert {path.stem for path in PACKAGE.glob("*.py")} | subpackages == set(LAYERS)
    assert {path.stem for path in LAYOUT.glob("*.py")} == set(LAYOUT_LAYERS)
    assert {path.stem for path in IMPORTS.glob("*.py")} == set(IMPORTS_LAYERS)


@pytest.mark.parametrize("part", LAYERS)
def test_parts_import_only_earlier_layers(part):
    earlier = {f"scanrewrite.codemod.{name}" for name in LAYERS[: LAYERS.index(part)]}
    assert _imports_from_outside(part) <= earlier | BELOW_THE_CODEMOD


@pytest.mark.parametrize("part", IMPORTS_LAYERS)
def test_import_bookkeeping_imports_only_earlier_layers(part):
    below = {f"scanrewrite.codemod.{name}" for name in LAYERS[: LAYERS.index("imports")]}
    earlier = {f"scanrewrite.codemod.imports.{name}" for name in IMPORTS_LAYERS[: IMPORTS_LAYERS.index(part)]}
    assert _scanrewrite_imports(IMPORTS / f"{part}.py") <= earlier | below | BELOW_THE_CODEMOD


@pytest.mark.parametrize("part", LAYOUT_LAYERS)
def test_layout_parts_import_only_earlier_layout_parts(part):
    earlier = {f"scanrewrite.layout.{name}" for name in LAYOUT_LAYERS[: LAYOUT_LAYERS.index(part)]}
    assert _scanrewrite_imports(LAYOUT / f"{part}.py") <= earlier


@pytest.mark.parametrize(
    "path",
    [
        *(path for p in LAYERS for path in _files(p)),
        *(LAYOUT / f"{p}.py" for p in LAYOUT_LAYERS),
    ],
)
def test_parts_stay_small(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


#: Public names of the codemod defined below it (the settings the runtime and the tuner share).
REEXPORTED = {"Settings": "scanrewrite.settings"}


def test_public_names_are_exported():
    for name in scanrewrite.codemod.__all__:
        module = getattr(scanrewrite.codemod, name).__module__
        assert module == REEXPORTED[name] if name in REEXPORTED else module.startswith("scanrewrite.codemod")
