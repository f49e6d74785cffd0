"""Files: the project root, its configuration, which files to process, and reading and writing them.

Sources stay bytes from the disk to the disk: the rewrite works on bytes, so a file's
encoding, byte-order mark, newlines and tabs come back exactly as they were.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import sys
import tempfile
import tokenize
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pathspec import GitIgnoreSpec

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

#: Folders never entered unless `--exclude` replaces this pattern.
DEFAULT_EXCLUDES = (
    r"/(\.git|\.hg|\.venv|venv|build|dist|__pycache__|\.mypy_cache|\.pytest_cache"
    r"|\.tox|\.nox|\.eggs|node_modules)/"
)
#: What a folder is searched for: Python files and Jupyter notebooks.
SUFFIXES = (".py", ".pyi", ".ipynb")
#: What marks the top of a project, nearest first.
ROOT_MARKERS = (".git", ".hg", "pyproject.toml")


class FileError(Exception):
    """A file that cannot be used: read, decoded or written. One line, with the line where known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class Source:
    """A file to process."""

    #: The file itself, symbolic links resolved: what is read and replaced.
    path: Path
    #: How messages and diffs name it: relative to the current folder where it lies
    #: inside it, else absolute; always with forward slashes.
    display: str


def display_path(path: str | os.PathLike[str]) -> str:
    """`path` relative to the current folder if it lies inside it, else absolute."""
    absolute = os.path.abspath(path)
    cwd = os.getcwd()
    if os.path.commonpath([absolute, cwd]) == cwd:
        absolute = os.path.relpath(absolute, cwd)
    return Path(absolute).as_posix()


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
        if any((directory / marker).exists() for marker in ROOT_MARKERS):
            return directory
    return common


def find_pyproject(root: Path) -> Path | None:
    """The project's `pyproject.toml`: the one in `root`, if any."""
    candidate = root / "pyproject.toml"
    return candidate if candidate.is_file() else None


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
    #: Called with (display path, why) for each path left out.
    on_ignored: Callable[[str, str], None] | None = None
    #: Called with (display path, FileError) for a folder or `.gitignore` that cannot be read.
    on_error: Callable[[str, FileError], None] | None = None
    _gitignores: dict[str, GitIgnoreSpec | None] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._root_real = self.root.resolve()

    def collect(self, paths: Iterable[str]) -> list[Source]:
        """The files that `paths` (files or folders) name, each once, in order."""
        seen: set[Path] = set()
        sources = []
        for source in self._collect(paths):
            if source.path not in seen:
                seen.add(source.path)
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
                self._ignored(path, "symbolic link out of the project root")
                continue
            why = self.excluded(path)
            if why:
                self._ignored(path, why)
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
            self._ignored(path, why)
        else:
            inner = Discovery(Path(path), self.excludes, False, self.on_ignored, self.on_error)
            yield from inner._walk(Path(path), "")

    def _walk(self, directory: Path, relative: str) -> Iterator[Source]:
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as exc:
            self._error(directory, FileError(f"cannot list: {exc.strerror}"))
            return
        for entry in entries:
            child = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_symlink():
                if self._leaves_root(entry.path):
                    self._ignored(entry.path, "symbolic link out of the project root")
                    continue
                if entry.is_dir():
                    continue
            is_dir = entry.is_dir()
            if not is_dir and not (entry.name.endswith(SUFFIXES) and entry.is_file()):
                continue
            why = self._exclusion(child, is_dir=is_dir)
            if why:
                self._ignored(entry.path, why)
            elif is_dir:
                yield from self._walk(Path(entry.path), child)
            else:
                yield Source(Path(os.path.realpath(entry.path)), display_path(entry.path))

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
            if path.is_file():
                try:
                    spec = GitIgnoreSpec.from_lines(path.read_text(encoding="utf-8").splitlines())
                except (OSError, UnicodeDecodeError, ValueError) as exc:
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

    def _error(self, path: str | os.PathLike[str], error: FileError) -> None:
        if self.on_error is not None:
            self.on_error(display_path(path), error)


def read_source(path: Path) -> bytes:
    """The bytes of the regular file at `path`. Raises `FileError` if it cannot be read."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; on a regular file it does nothing.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise FileError(f"cannot read: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileError("cannot read: not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise FileError(f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)


def check_decodable(source: bytes) -> None:
    """Raise `FileError` unless `source` decodes in the encoding Python would read it in
    (its byte-order mark or coding cookie, else UTF-8)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError as exc:
        # A line before any cookie that is not UTF-8: the decode below says where.
        if "invalid or missing encoding declaration" not in exc.msg:
            raise FileError(f"cannot decode: {exc.msg}") from None
        encoding = "utf-8"
    try:
        source.decode(encoding)
    except UnicodeDecodeError as exc:
        line = source.count(b"\n", 0, exc.start) + 1
        hint = " (no coding cookie)" if encoding == "utf-8" else ""
        raise FileError(
            f"cannot decode as {encoding}{hint}: {exc.reason} at byte {source[exc.start]:#04x}", line
        ) from None


def write_atomic(path: Path, new: bytes, original: bytes) -> None:
    """Replace the contents of the file at `path` with `new`, if it still holds `original`.

    The bytes go to a temporary file in the same folder, which is flushed to disk, given
    the file's mode bits (and owner, where allowed), and renamed over the file: a reader,
    or a crash, sees the old file or the new one, never a mix. If the file no longer holds
    `original` (another program wrote it since it was read), it is left alone. Raises
    `FileError` when nothing was written.
    """
    try:
        status = os.stat(path)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".scanrewrite")
    except OSError as exc:
        raise FileError(f"cannot write: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(new)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, stat.S_IMODE(status.st_mode))
        with contextlib.suppress(PermissionError):
            # Only a privileged user may hand a file to another owner; others keep theirs.
            os.chown(temporary, status.st_uid, status.st_gid)
        if read_source(path) != original:
            raise FileError("changed on disk since it was read; not overwritten")
        os.replace(temporary, path)
    except OSError as exc:
        _remove(temporary)
        raise FileError(f"cannot write: {exc.strerror}") from None
    except BaseException:
        _remove(temporary)
        raise
    _fsync_directory(path.parent)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable; not every system can open a folder, which is harmless."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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


def formatter_line_length(root: Path) -> int:
    """The line length ruff format or black use in the project at `root`: `line-length` in
    `[tool.ruff]`, else in `[tool.black]` (or `[tool.pyink]`, Google's black), of its
    `pyproject.toml`; 88, their default, if none sets one (or the file cannot be read)."""
    pyproject = find_pyproject(root)
    if pyproject is None:
        return 88
    try:
        with open(pyproject, "rb") as file:
            tools = tomllib.load(file).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError):
        return 88
    for tool in ("ruff", "black", "pyink"):
        length = tools.get(tool, {}).get("line-length") if isinstance(tools.get(tool), dict) else None
        if isinstance(length, int) and not isinstance(length, bool) and length > 0:
            return length
    return 88
