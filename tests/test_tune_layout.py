"""The tuner's shape: a pipeline of stage modules whose names say what each does, short
functions, no closure that changes the state of the function it is defined in, and only the
runtime's public face imported, never its private parts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import scanrewrite.tune

PACKAGE = Path(scanrewrite.tune.__file__).parent
TUNE = PACKAGE
MODULES = sorted(PACKAGE.glob("*.py"))
MAX_FUNCTION_LINES = 60
MAX_LINES = 400
#: The stages `tune()` runs, in order, each a module of the package.
STAGES = (
    "_sites", "_candidates", "_reference", "_round", "_compile", "_predict", "_measure", "_verify", "_rows", "_choose",
    "_whole", "_writeback",
)  # fmt: skip
#: Methods that change the container they are called on.
MUTATORS = {"append", "extend", "update", "add", "pop", "setdefault", "insert", "remove", "clear", "discard", "popitem"}


def long_functions(source: str) -> list[str]:
    """The functions of `source` longer than `MAX_FUNCTION_LINES`, docstring included."""
    return [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def _bound(function: ast.AST) -> set[str]:
    """The names a function binds itself: its parameters and what it assigns."""
    names = {arg.arg for arg in ast.walk(function) if isinstance(arg, ast.arg)}
    return names | {node.id for node in ast.walk(function) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


def mutating_closures(source: str) -> list[str]:
    """Each function or lambda defined inside another that rebinds (`nonlocal`) or changes in
    place (a mutating method, an item or attribute assigned) a name its enclosing function binds."""
    found = []
    for outer in ast.walk(ast.parse(source)):
        if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(outer):
            if inner is outer or not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            enclosing = _bound(outer) - _bound(inner)
            for node in ast.walk(inner):
                changed = None
                if isinstance(node, ast.Nonlocal):
                    changed = node.names[0]
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                    changed = getattr(node.func.value, "id", None)
                elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
                    changed = getattr(node.value, "id", None)
                if changed in enclosing or (isinstance(node, ast.Nonlocal)):
                    found.append(f"{getattr(inner, 'name', 'lambda')} in {outer.name} changes {changed}")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_functions_are_short_and_no_closure_changes_its_enclosing_state(path: Path) -> None:
    source = path.read_text()
    assert long_functions(source) == []
    assert mutating_closures(source) == []
    assert len(source.splitlines()) <= MAX_LINES


def test_the_checks_fail_where_they_must() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [f"f: {MAX_FUNCTION_LINES + 1} lines"]
    # The shape `tune` had: a round's closure appending to and assigning into the run's state.
    assert mutating_closures("def tune():\n    picks, rows = {}, []\n    def site():\n        picks[1] = 2\n        rows.append(3)\n") == [
        "site in tune changes picks",
        "site in tune changes rows",
    ]  # fmt: skip
    assert mutating_closures("def f():\n    n = 0\n    def g():\n        nonlocal n\n        n += 1\n")
    # A closure that changes only its own values is not one.
    assert mutating_closures("def f():\n    rows = []\n    def g():\n        rows = []\n        rows.append(1)\n") == []


def test_the_stages_are_modules_and_tune_names_them() -> None:
    names = {path.stem for path in MODULES}
    assert set(STAGES) <= names
    pipeline = ast.get_docstring(ast.parse((PACKAGE / "_tune.py").read_text()))
    assert [stage for stage in STAGES if f"`{stage}`" not in pipeline] == []


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
