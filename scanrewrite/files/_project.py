"""The project: its root, its `[tool.scanrewrite]` table, its formatter's line length and its
first-party names."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from scanrewrite.files._io import FileError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

#: What marks the top of a project, nearest first.
ROOT_MARKERS = (".git", ".hg", "pyproject.toml")


def find_project_root(paths: Sequence[str]) -> Path:
    """The nearest folder, walking up from the common parent of `paths`, holding `.git`, `.hg`
    or `pyproject.toml`; the common parent itself if none does.

    `paths` may name files or folders, existing or not; none means the current folder.
    """
    parents = [
        absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        for absolute in map(os.path.abspath, paths or ["."])
    ]
    common = Path(os.path.commonpath(parents))
    for directory in (common, *common.parents):
        if any(os.path.exists(directory / marker) for marker in ROOT_MARKERS):
            return directory
    return common


def find_pyproject(root: Path) -> Path | None:
    """The project's `pyproject.toml`: the one in `root`, if any."""
    candidate = root / "pyproject.toml"
    return candidate if os.path.isfile(candidate) else None


def read_config(path: Path) -> dict[str, object]:
    """The `[tool.scanrewrite]` table of the TOML file at `path` (empty if it has none).

    Raises `FileError` if the file cannot be read or is not valid TOML.
    """
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as exc:
        raise FileError(f"cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)$", str(exc))
        message = str(exc)[: match.start()].rstrip() if match else str(exc)
        raise FileError(f"invalid TOML: {message}", int(match.group(1)) if match else None) from None
    table = document.get("tool", {}).get("scanrewrite", {})
    if not isinstance(table, dict):
        raise FileError("[tool.scanrewrite] must be a table")
    return table


#: The line length ruff format and black use when the project sets none.
DEFAULT_LINE_LENGTH = 88


def formatter_line_length(root: Path) -> int:
    """The line length of the project's formatter, read from its files in `root`.

    ruff reads `.ruff.toml`, else `ruff.toml`, else `[tool.ruff]` in `pyproject.toml`;
    black reads `[tool.black]` (pyink, Google's black, `[tool.pyink]`). A ruff `[format]`
    table says ruff is the formatter; otherwise black's setting wins over a ruff one
    (which may be there for the linter only). A file that cannot be read counts as
    absent: this only lays out lines.
    """
    ruff_file = next((load_toml(root / name) for name in (".ruff.toml", "ruff.toml") if os.path.isfile(root / name)), None)
    tool = (load_toml(root / "pyproject.toml") or {}).get("tool", {})
    ruff = ruff_file if ruff_file is not None else tool.get("ruff", {})
    black = tool.get("black") or tool.get("pyink") or {}
    ruff_length, black_length = _length(ruff), _length(black)
    if isinstance(ruff.get("format"), dict) or black_length is None:
        return ruff_length or DEFAULT_LINE_LENGTH
    return black_length


def load_toml(path: Path) -> dict | None:
    """The TOML document at `path`, or None where it cannot be read or is not valid TOML."""
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError):
        return None


def _length(table: object) -> int | None:
    length = table.get("line-length", table.get("line_length")) if isinstance(table, dict) else None
    return length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None


def first_party_names(root: Path) -> frozenset[str]:
    """The top-level names ruff and isort call first-party by default in the project at
    `root`: the folders and `.py` modules in it and in its `src` folder."""
    names = set()
    for folder in (root, root / "src"):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name[:-3] if entry.name.endswith(".py") else entry.name
            with contextlib.suppress(OSError):
                if name.isidentifier() and (entry.is_dir() or name != entry.name):
                    names.add(name)
    return frozenset(names)
