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

Where the project pins jax, equinox or Flax (a version or an upper bound: `jax==0.6.2`,
`jax<0.7`, Poetry's `"0.6.2"` or `"^0.6"`), the line says the requirement is compatible with
those pins, or, where a pin is below the release the runtime needs (`FLOORS`), says that pin
must rise first instead: nothing it suggests ever raises the project's own pins (a resolver
would have to move them, or fail).

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


#: The oldest release of each distribution an extra of `scanrewrite` brings in that the runtime
#: supports: the lower bounds of those extras in its `pyproject.toml` (a test checks they agree).
FLOORS = {"runtime": {"jax": "0.4.31", "equinox": "0.11.5"}, "flax": {"flax": "0.10.0"}}

# A version clause of PEP 440 (`==0.4.*`, `~=0.4.20`, `<0.5rc1`) or Poetry (`0.4.35`, `^0.4`): the
# operator, the release, a `.*`, and what follows the release (`rc1`, `.post1`, `+local`).
_CLAUSE = re.compile(r"\s*(===|==|~=|<=|<|>=|>|!=|\^|~)?\s*v?(\d+(?:\.\d+)*)(\.\*)?([0-9A-Za-z.+!_-]*)\s*")
#: What makes a version a pre- or dev-release, below its release (`0.5rc1`, `0.5.dev0`).
_BEFORE = re.compile(r"[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview|dev)", re.IGNORECASE)


def specifier(text: str) -> str:
    """The version specifier of the PEP 508 requirement `text` (`"jax[cpu] (==0.4.35) ; os_name
    == 'posix'"` gives `"==0.4.35"`); empty where it has none or is no requirement."""
    match = _REQUIREMENT.fullmatch(text)
    rest = match["rest"].partition(";")[0].strip() if match is not None else ""
    return "" if rest.startswith("@") else rest.strip("()").strip()


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _compared(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """-1, 0 or 1 as release `a` is below, equal to or above `b` (``0.5`` equals ``0.5.0``)."""
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (a > b) - (a < b)


def _bumped(release: tuple[int, ...], index: int) -> tuple[int, ...]:
    """The lowest release above all those that start as `release` up to `index` (``1.3`` for
    ``1.2.3`` at 1)."""
    return (*release[:index], release[index] + 1)


def admits(spec: str, floor: str) -> bool | None:
    """Whether each clause of the version specifier `spec`, PEP 440's (comma-separated) or
    Poetry's (`0.4.35`, `^0.4`, `~0.4.35`), admits a release at or above `floor`; None where no
    clause bounds the version from above (`spec` pins nothing). A clause read as neither
    bounds nothing."""
    low = _release(floor)
    bounded = False
    for clause in spec.split(","):
        match = _CLAUSE.fullmatch(clause)
        if match is None or match[1] in (">=", ">", "!="):
            continue
        operator, release, wildcard = match[1], _release(match[2]), match[3]
        bounded = True
        if operator in (None, "==", "===", "<=") and not wildcard:
            # A pre-release (`0.4.31rc1`) comes before its release.
            fits = _compared(release, low) > (0 if _BEFORE.match(match[4]) else -1)
        else:
            # The lowest release the clause excludes from above.
            if operator == "<":
                upper = release
            elif operator == "^":
                upper = _bumped(release, next((i for i, part in enumerate(release) if part), len(release) - 1))
            elif operator == "~=":
                upper = _bumped(release, max(len(release) - 2, 0))
            elif operator == "~":
                upper = _bumped(release, min(len(release) - 1, 1))
            else:  # `==0.4.*`
                upper = _bumped(release, len(release) - 1)
            fits = _compared(upper, low) > 0
        if not fits:
            return False
    return True if bounded else None


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


def _declared(document: dict) -> Iterator[tuple[str, frozenset[str], str]]:
    """(normalized name, extras, version specifier) of every dependency that `document` (a
    `pyproject.toml`) declares in the places the module docstring lists (Poetry's specifier
    as Poetry writes it: `"^0.4"`)."""
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
                    yield (*parsed, specifier(entry))
    tool = document.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    table = poetry.get("dependencies") if isinstance(poetry, dict) else None
    for name, spec in table.items() if isinstance(table, dict) else ():
        for constraint in spec if isinstance(spec, list) else [spec]:
            extras = constraint.get("extras", []) if isinstance(constraint, dict) else []
            version = constraint.get("version", "") if isinstance(constraint, dict) else constraint
            if isinstance(extras, list):
                extras = frozenset(normalize(extra) for extra in extras if isinstance(extra, str))
                yield normalize(name), extras, version if isinstance(version, str) else ""


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
    requirements = [extras for name, extras, _ in _declared(document) if name == DISTRIBUTION]
    return frozenset().union(*requirements) if requirements else None


def _floors(extras: Iterable[str]) -> dict[str, str]:
    """Each distribution `extras` bring in, and the oldest release of it the runtime supports."""
    return {name: floor for extra in extras for name, floor in FLOORS.get(extra, {}).items()}


def _pins(document: dict | None, extras: Iterable[str]) -> tuple[list[str], list[str]]:
    """The pins of `document` (a `pyproject.toml`, or None) on what `extras` bring in, as it
    writes them (`jax==0.6.2`, `flax = "^0.10"`): those that admit the release the runtime needs
    (`FLOORS`), and those below it."""
    floors = _floors(extras)
    fit: list[str] = []
    below: list[str] = []
    for name, _, spec in _declared(document) if document is not None else ():
        fits = admits(spec, floors[name]) if name in floors else None
        if fits is not None:
            pep440 = spec.startswith(("<", ">", "=", "!", "~="))
            shown = f"{name}{''.join(spec.split())}" if pep440 else f'{name} = "{spec}"'
            (fit if fits else below).append(shown)
    return list(dict.fromkeys(fit)), list(dict.fromkeys(below))


def dependency_note(apis: Iterable[str], pyproject: Path | None, *, would: bool = False) -> str | None:
    """The one line that says what code rewritten from `apis` imports and which requirement
    the project must add, e.g. `note: the rewritten code imports scanrewrite.runtime: add
    scanrewrite[runtime] to the dependencies in pyproject.toml` ("would import" when nothing
    was written), or to the optional dependencies that bring in jax where only those name it
    (`... to the optional dependencies that bring in jax (flax, all) in pyproject.toml`), with
    the extras missing where the project names `scanrewrite` without them, and the project's
    pins on jax, equinox and Flax that the requirement is compatible with (`compatible with its
    jax==0.6.2`). Where a pin is below what the runtime needs, the line says that pin must rise
    instead (`... which needs jax>=0.4.31: pyproject.toml pins jax==0.4.30; raise that pin, then
    add scanrewrite[runtime]`), named extras or not. None when the project's `pyproject` (None:
    it has none) names every extra needed."""
    apis = set(apis)
    document = load_toml(pyproject) if pyproject is not None else None
    extras = needed_extras(apis)
    verb = "would import" if would else "imports"
    modules = " and ".join(runtime_modules(apis))
    wanted = f"{DISTRIBUTION}[{','.join(extras)}]"
    fit, below = _pins(document, extras)
    if below:
        assert pyproject is not None
        floors = ", ".join(f"{name}>={floor}" for name, floor in _floors(extras).items())
        pins = f"{display_path(pyproject)} pins {' and '.join(below)}"
        needs = f"the rewritten code {verb} {modules}, which needs {floors}"
        raise_them = "raise that pin" if len(below) == 1 else "raise those pins"
        return f"note: {needs}: {pins}; {raise_them}, then add {wanted}"
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
    asides = []
    if named is not None:
        asides.append(f"the {' and '.join(missing)} extra{'s are' if len(missing) > 1 else ' is'} missing")
    if fit:
        asides.append(f"compatible with its {' and '.join(fit)}")
    if asides:
        where += f" ({'; '.join(asides)})"
    return f"note: the rewritten code {verb} {modules}: add {wanted} to {where}"
