"""Which files a run processes: folders searched, excludes and `.gitignore` files applied."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scanrewrite.files._io import FileError, Source, display_path

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

#: Folders never entered unless `--exclude` replaces this pattern.
DEFAULT_EXCLUDES = (
    r"/(\.git|\.hg|\.venv|venv|build|dist|__pycache__|\.mypy_cache|\.pytest_cache"
    r"|\.tox|\.nox|\.eggs|node_modules)/"
)
#: What a folder is searched for: Python files and Jupyter notebooks.
SUFFIXES = (".py", ".pyi", ".ipynb")


def is_notebook(path: str) -> bool:
    """Whether the file named `path` is read as a Jupyter notebook (by its suffix)."""
    return path.endswith(".ipynb")


@dataclass(frozen=True)
class Excludes:
    """Which paths discovery leaves out. Patterns are searched in the root-relative path,
    written with a leading `/` (and a trailing `/` for a folder)."""

    exclude: re.Pattern[str] = re.compile(DEFAULT_EXCLUDES)
    extend_exclude: re.Pattern[str] | None = None


@dataclass
class Discovery:
    """Finds the files to process under one project root.

    Folders are searched for `.py`, `.pyi` and `.ipynb` files, leaving out what `excludes` or a
    `.gitignore` (the root's and every folder's on the way down) name. Files named
    explicitly are taken as they are, unless `force_exclude` applies the same rules to
    them, and a folder named explicitly is searched even if the rules leave it out (see
    `_folder`). A symbolic link that leads out of the root is never followed; one that
    stays inside is not needed, since what it leads to is found directly.
    """

    root: Path
    excludes: Excludes = Excludes()
    force_exclude: bool = False
    #: Called with (display path, why) for each path left out that a folder holds.
    on_ignored: Callable[[str, str], None] | None = None
    #: Called with (display path, FileError) for a folder or `.gitignore` that cannot be read.
    on_error: Callable[[str, FileError], None] | None = None
    #: Called with (display path, why) for a path named explicitly that is left out; None
    #: calls `on_ignored` for it too.
    on_named_ignored: Callable[[str, str], None] | None = None
    _gitignores: dict[str, GitIgnoreSpec | None] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._root_real = self.root.resolve()

    def collect(self, paths: Iterable[str]) -> list[Source]:
        """The files that `paths` (files or folders) name, each once (whatever links lead to
        it), in order."""
        seen: set[object] = set()
        sources = []
        for source in self._collect(paths):
            try:
                status = os.stat(source.path)
                identity: object = (status.st_dev, status.st_ino)  # hard links are one file
            except OSError:
                identity = source.path
            if identity not in seen:
                seen.add(identity)
                sources.append(source)
        return sources

    def excluded(self, path: str) -> str | None:
        """Why `--force-exclude` leaves out the file at `path` (named explicitly, or given as
        `--stdin-filename`), or None if it does not."""
        if not self.force_exclude:
            return None
        relative = self._relative(path)
        if relative is None:
            return None
        return self._exclusion(relative, is_dir=False)

    def _collect(self, paths: Iterable[str]) -> Iterator[Source]:
        for path in paths:
            if os.path.isdir(path) and not self._leaves_root(path):
                yield from self._folder(path)
                continue
            if self._leaves_root(path):
                self._named_ignored(path, "symbolic link out of the project root")
                continue
            why = self.excluded(path)
            if why:
                self._named_ignored(path, why)
                continue
            yield Source(Path(os.path.realpath(path)), display_path(path))

    def _folder(self, path: str) -> Iterator[Source]:
        """The files in a folder named explicitly.

        A named folder is taken as it is, like a named file: if the rules leave it out
        itself (it is gitignored, or lies in `build/`, say), then inside it they apply as
        if it were the project root, and only `--force-exclude` leaves it out.
        """
        relative = self._relative(path) or ""
        why = self._exclusion(relative, is_dir=True) if relative else None
        if why is None:
            yield from self._walk(Path(path), relative)
        elif self.force_exclude:
            self._named_ignored(path, why)
        else:
            inner = Discovery(Path(path), self.excludes, False, self.on_ignored, self.on_error, self.on_named_ignored)
            yield from inner._walk(Path(path), "")

    def _walk(self, directory: Path, relative: str) -> Iterator[Source]:
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as exc:
            self._error(directory, FileError(f"cannot list: {exc.strerror}"))
            return
        for entry in entries:
            child = f"{relative}/{entry.name}" if relative else entry.name
            try:
                kind = self._kind(entry)
            except OSError as exc:
                # A symbolic link loop, a dangling link, an entry that cannot be looked at.
                why = self._exclusion(child, is_dir=False)
                if why:
                    self._ignored(entry.path, why)
                elif entry.name.endswith(SUFFIXES) or exc.errno == errno.ELOOP:
                    # A loop is a broken tree whatever its name (`loop -> loop` could be
                    # a folder of Python files), and an error when named on the command line.
                    self._error(entry.path, FileError(f"cannot read: {exc.strerror}"))
                else:  # a dangling link not named as a Python file, as ruff sees it: no error
                    self._ignored(entry.path, f"cannot follow: {exc.strerror}")
                continue
            if kind is None:
                continue
            why = self._exclusion(child, is_dir=kind == "dir")
            if why:
                self._ignored(entry.path, why)
            elif kind == "dir":
                yield from self._walk(Path(entry.path), child)
            else:
                yield Source(Path(os.path.realpath(entry.path)), display_path(entry.path))

    def _kind(self, entry: os.DirEntry[str]) -> str | None:
        """"dir" for a folder to search, "file" for a file to process, None for anything else.

        Raises `OSError` for a symbolic link that cannot be followed (a loop, a dangling
        link) and for an entry that cannot be looked at.
        """
        python = entry.name.endswith(SUFFIXES)
        if not entry.is_symlink():
            if entry.is_dir(follow_symlinks=False):
                return "dir"
            return "file" if python and entry.is_file(follow_symlinks=False) else None
        if self._leaves_root(entry.path):
            self._ignored(entry.path, "symbolic link out of the project root")
            return None
        target = os.stat(entry.path).st_mode
        # A link that stays inside the root leads to a folder that is searched directly.
        return "file" if python and stat.S_ISREG(target) else None

    def _exclusion(self, relative: str, *, is_dir: bool) -> str | None:
        """Why the root-relative path `relative` is left out, or None."""
        slashed = f"/{relative}/" if is_dir else f"/{relative}"
        if self.excludes.exclude.search(slashed):
            return "matches --exclude"
        if self.excludes.extend_exclude and self.excludes.extend_exclude.search(slashed):
            return "matches --extend-exclude"
        parts = relative.split("/")
        for depth in range(len(parts)):
            spec = self._gitignore("/".join(parts[:depth]))
            if spec is not None and spec.match_file("/".join(parts[depth:]) + ("/" if is_dir else "")):
                return "matches .gitignore"
        return None

    def _gitignore(self, relative_dir: str) -> GitIgnoreSpec | None:
        """The rules of the `.gitignore` in the root-relative folder, read once."""
        if relative_dir not in self._gitignores:
            path = self.root / relative_dir / ".gitignore"
            spec = None
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
                # Imported only where there is a `.gitignore`: pathspec imports asyncio
                # (about 25 ms, a twentieth of a one-file run).
                from pathspec import GitIgnoreSpec

                spec = GitIgnoreSpec.from_lines(lines)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                pass  # none here (git ignores a folder of that name too)
            except OSError as exc:
                self._error(path, FileError(f"cannot read: {exc.strerror}"))
            except (UnicodeDecodeError, ValueError) as exc:
                self._error(path, FileError(f"cannot use: {exc}"))
            self._gitignores[relative_dir] = spec
        return self._gitignores[relative_dir]

    def _relative(self, path: str) -> str | None:
        """`path` relative to the root, with forward slashes; None if it lies outside."""
        relative = os.path.relpath(os.path.abspath(path), self.root)
        if relative == ".":
            return ""
        if relative.startswith(".."):
            return None
        return Path(relative).as_posix()

    def _leaves_root(self, path: str) -> bool:
        """Whether `path`, its links followed, ends outside the root."""
        real = Path(os.path.realpath(path))
        return real != self._root_real and self._root_real not in real.parents

    def _ignored(self, path: str | os.PathLike[str], why: str) -> None:
        if self.on_ignored is not None:
            self.on_ignored(display_path(path), why)

    def _named_ignored(self, path: str, why: str) -> None:
        if self.on_named_ignored is None:
            self._ignored(path, why)
        else:
            self.on_named_ignored(display_path(path), why)

    def _error(self, path: str | os.PathLike[str], error: FileError) -> None:
        if self.on_error is not None:
            self.on_error(display_path(path), error)
