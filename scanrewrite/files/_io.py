"""Reading and writing one file, byte for byte, and naming it in messages."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

from scanrewrite.errors import InputError


class FileError(InputError):
    """A file that cannot be used: read, decoded or written. One line, with the line where known."""


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


def write_file(path: Path, new: bytes, original: bytes) -> None:
    """Replace the contents of the file at `path` with `new`, if it still holds `original`.

    The bytes go to a temporary file in the same folder, which is flushed to disk, given
    the file's mode bits (and owner, where allowed), and renamed over the file: a reader,
    or a crash, sees the old file or the new one, never a mix. A file with more than one
    hard link is written through instead, in place, as black and ruff write every file, so
    that all its links keep sharing it. A read-only file (no write permission, or no write
    bit for anyone, which even root respects here) and a file that no longer holds
    `original` (another program wrote it since it was read) are left alone. Raises
    `FileError` when nothing was written.
    """
    try:
        status = os.stat(path)
    except OSError as exc:
        raise FileError(f"cannot write: {exc.strerror}") from None
    if not status.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise FileError("cannot write: the file is read-only; left as it is")
    if status.st_nlink > 1:
        _write_through(path, new, original)
        return
    try:
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
            raise FileError(_CHANGED)
        os.replace(temporary, path)
    except OSError as exc:
        _remove(temporary)
        raise FileError(f"cannot write: {exc.strerror}") from None
    except BaseException:
        _remove(temporary)
        raise
    _fsync_directory(path.parent)


_CHANGED = "changed on disk since it was read; not overwritten"


def _write_through(path: Path, new: bytes, original: bytes) -> None:
    """Overwrite the file at `path` in place (its inode, so every hard link, kept)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError as exc:
        raise FileError(f"cannot write: {exc.strerror}") from None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        if b"".join(chunks) != original:
            raise FileError(_CHANGED)
        try:
            _overwrite(fd, new)
        except OSError:
            # E.g. the disk filled up past the old size: the old bytes fit where they were.
            with contextlib.suppress(OSError):
                _overwrite(fd, original)
            raise
    except OSError as exc:
        raise FileError(f"cannot write: {exc.strerror}") from None
    finally:
        os.close(fd)


def _overwrite(fd: int, data: bytes) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.ftruncate(fd, len(data))
    os.fsync(fd)


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
