"""What the rewritten code needs at run time, and whether the project already depends on it.

A rewritten call imports `scanrewrite.runtime`, which needs jax (the `runtime` extra of the
`scanrewrite` distribution) and, for Flax's scans, Flax (the `flax` extra): each target names
its extras (`Target.extras`). A project that ships rewritten code must depend on
`scanrewrite[runtime]` (or `scanrewrite[runtime,flax]`), or its first install elsewhere fails
at import. The command says so once (and, where the project names `scanrewrite` without
them, which extras are missing), unless the project's `pyproject.toml` already names the
extras, in any of:

- PEP 621's `[project] dependencies` and `[project.optional-dependencies]`;
- Poetry's `[tool.poetry.dependencies]` (a version string, a table with `extras`, or a list
  of such tables).

Where the project's `[project] dependencies` name none of jax, Flax and equinox, but some of its
`[project.optional-dependencies]` do (a framework whose Flax or torch support is an extra), the
line names those extras instead: the rewritten code runs only where they are installed, and a
requirement added to the dependencies would bring jax to every install.

Requirement strings are read as PEP 508 reads their name and extras (`scanrewrite[runtime]>=0.1`,
`scanrewrite [flax] @ https://...`, names compared normalized, as PEP 503 and 685 do), never
searched as text: `scanrewrite-plugins` does not name `scanrewrite`. A project that is
`scanrewrite` itself needs nothing. A `pyproject.toml` that cannot be read names nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from scanrewrite.files import display_path, load_toml
from scanrewrite.targets import TARGETS

#: The distribution whose extras the rewritten code needs.
DISTRIBUTION = "scanrewrite"

# PEP 508: a name (and an extra) starts and ends with a letter or digit, with `.`, `-`, `_`
# between; after the name and extras come a version, `@ url`, or `; markers`, or nothing.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REQUIREMENT = re.compile(rf"\s*(?P<name>{_NAME})\s*(?:\[(?P<extras>[^\]]*)\]\s*)?(?P<rest>.*)", re.DOTALL)
_EXTRA = re.compile(rf"\s*{_NAME}\s*")


def normalize(name: str) -> str:
    """`name` as PEP 503 (distributions) and PEP 685 (extras) compare it: lower case, each run
    of `-`, `_` and `.` one `-`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(text: str) -> tuple[str, frozenset[str]] | None:
    """The normalized distribution name and extras of the PEP 508 requirement `text`
    (`"scanrewrite[runtime]>=0.1; python_version >= '3.10'"` gives `("scanrewrite",
    {"runtime"})`), or None if `text` does not start as a requirement does. Only the name and
    extras are read: the version, URL or markers after them are not checked."""
    match = _REQUIREMENT.fullmatch(text)
    if match is None:
        return None
    rest = match["rest"]
    if rest and rest[0] not in "<>=!~(@;":
        return None
    extras = match["extras"]
    names = extras.split(",") if extras is not None and extras.strip() else []
    if not all(_EXTRA.fullmatch(name) for name in names):
        return None
    return normalize(match["name"]), frozenset(normalize(name.strip()) for name in names)


def needed_extras(apis: Iterable[str]) -> tuple[str, ...]:
    """The extras of `scanrewrite` that code calling the replacements of `apis` (qualified
    names of targets) needs, in the order the targets name them."""
    wanted = set(apis)
    extras = (extra for target in TARGETS if target.qualified_name in wanted for extra in target.extras)
    return tuple(dict.fromkeys(extras))


def runtime_modules(apis: Iterable[str]) -> tuple[str, ...]:
    """The modules the rewritten calls of `apis` import (`scanrewrite.runtime`)."""
    wanted = set(apis)
    return tuple(
        dict.fromkeys(target.replacement.rpartition(".")[0] for target in TARGETS if target.qualified_name in wanted)
    )


def _declared(document: dict) -> Iterator[tuple[str, frozenset[str]]]:
    """(normalized name, extras) of every dependency that `document` (a `pyproject.toml`)
    declares in the places the module docstring lists."""
    project = document.get("project")
    if isinstance(project, dict):
        lists = [project.get("dependencies")]
        optional = project.get("optional-dependencies")
        if isinstance(optional, dict):
            lists.extend(optional.values())
        for entries in lists:
            for entry in entries if isinstance(entries, list) else ():
                parsed = requirement(entry) if isinstance(entry, str) else None
                if parsed is not None:
                    yield parsed
    tool = document.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    table = poetry.get("dependencies") if isinstance(poetry, dict) else None
    for name, spec in table.items() if isinstance(table, dict) else ():
        for constraint in spec if isinstance(spec, list) else [spec]:
            extras = constraint.get("extras", []) if isinstance(constraint, dict) else []
            if isinstance(extras, list):
                yield normalize(name), frozenset(normalize(extra) for extra in extras if isinstance(extra, str))


#: Distributions that bring in jax (equinox and Flax depend on it).
_JAX = frozenset({"jax", "jaxlib", "flax", "equinox"})


def _jax_extras(document: dict) -> tuple[str, ...]:
    """The `[project.optional-dependencies]` groups of `document` that name jax, Flax or
    equinox, where its `[project] dependencies` name none of them (else nothing)."""
    project = document.get("project")
    dynamic = project.get("dynamic") if isinstance(project, dict) else None
    if not isinstance(project, dict) or (isinstance(dynamic, list) and "dependencies" in dynamic):
        return ()

    def names_jax(entries: object) -> bool:
        parsed = (requirement(entry) for entry in entries if isinstance(entry, str)) if isinstance(entries, list) else ()
        return any(item is not None and item[0] in _JAX for item in parsed)

    optional = project.get("optional-dependencies")
    if names_jax(project.get("dependencies")) or not isinstance(optional, dict):
        return ()
    return tuple(group for group, entries in optional.items() if names_jax(entries))


def _is_itself(document: dict) -> bool:
    """Whether the project is `scanrewrite` itself (PEP 621's or Poetry's name)."""
    tool = document.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    for table in (document.get("project"), poetry):
        name = table.get("name") if isinstance(table, dict) else None
        if isinstance(name, str) and normalize(name) == DISTRIBUTION:
            return True
    return False


def _lists_dependencies(document: dict) -> bool:
    """Whether `document` is where the project lists its dependencies: a `[project]` table
    whose dependencies are not `dynamic` (written by a build script), or Poetry's table."""
    project = document.get("project")
    if isinstance(project, dict):
        dynamic = project.get("dynamic")
        return not (isinstance(dynamic, list) and "dependencies" in dynamic)
    tool = document.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    return isinstance(poetry, dict) and isinstance(poetry.get("dependencies"), dict)


def named_extras(document: dict | None) -> frozenset[str] | None:
    """The extras of `scanrewrite` that a project's `pyproject.toml`, read as `document`,
    names (together, in the places the module docstring lists), or None where it does not
    name `scanrewrite` at all (or there is no document)."""
    if document is None:
        return None
    if _is_itself(document):
        # Its own extras are its own dependencies.
        return frozenset(extra for target in TARGETS for extra in target.extras)
    requirements = [extras for name, extras in _declared(document) if name == DISTRIBUTION]
    return frozenset().union(*requirements) if requirements else None


def dependency_note(apis: Iterable[str], pyproject: Path | None, *, would: bool = False) -> str | None:
    """The one line that says what code rewritten from `apis` imports and which requirement
    the project must add, e.g. `note: the rewritten code imports scanrewrite.runtime: add
    scanrewrite[runtime] to the dependencies in pyproject.toml` ("would import" when nothing
    was written), or to the optional dependencies that bring in jax where only those name it
    (`... to the optional dependencies that bring in jax (flax, all) in pyproject.toml`), with
    the extras missing where the project names `scanrewrite` without them; None when the project's `pyproject` (None: it has none) names every extra needed."""
    apis = set(apis)
    document = load_toml(pyproject) if pyproject is not None else None
    extras = needed_extras(apis)
    named = named_extras(document)
    missing = [extra for extra in extras if named is None or extra not in named]
    if not missing:
        return None
    groups = _jax_extras(document) if document is not None else ()
    if groups:
        where = f"the optional dependencies that bring in jax ({', '.join(groups)}) in {display_path(pyproject)}"
    elif document is not None and _lists_dependencies(document):
        where = f"the dependencies in {display_path(pyproject)}"
    else:
        where = "the project's dependencies"
    if named is not None:
        where += f" (the {' and '.join(missing)} extra{'s are' if len(missing) > 1 else ' is'} missing)"
    verb = "would import" if would else "imports"
    modules = " and ".join(runtime_modules(apis))
    return f"note: the rewritten code {verb} {modules}: add {DISTRIBUTION}[{','.join(extras)}] to {where}"
