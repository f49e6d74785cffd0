"""The picks written back into the source: per file, the codemod's `set_unroll`, a diff, a write.

The transform itself is the codemod's (pure bytes to bytes, pragmas respected); this module
only groups the picks by file and reads, diffs and writes with the command's own I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from scanrewrite.files import FileError, display_path, read_source, write_atomic
from scanrewrite.output import unified_diff
from scanrewrite.runtime._override import Site


@dataclass
class FileChange:
    """What writing the picks back does to one file."""

    path: Path
    display: str
    before: bytes = b""
    after: bytes = b""
    #: (line, message) for each site whose pick is not written (a pragma wins, say).
    notes: list[tuple[int, str]] = field(default_factory=list)
    #: (line or None, one-line message) when the file cannot be read, parsed or written.
    error: tuple[int | None, str] | None = None

    @property
    def changed(self) -> bool:
        return self.error is None and self.after != self.before

    def diff(self) -> bytes:
        return unified_diff(self.before, self.after, self.display)

    def write(self) -> None:
        """Write the new bytes atomically, unless the file changed on disk since it was read."""
        try:
            write_atomic(self.path, self.after, self.before)
        except FileError as exc:
            self.error = (exc.line, exc.message)


def plan(picks: Mapping[Site, int]) -> list[FileChange]:
    """For each file holding a picked site (in order of first site), the file with every
    picked site's `unroll=` set to its pick."""
    from scanrewrite.codemod import SourceError, set_unroll

    by_file: dict[str, dict[int, int]] = {}
    for site, unroll in picks.items():
        by_file.setdefault(site.path, {})[site.line] = unroll
    changes = []
    for path, lines in by_file.items():
        change = FileChange(Path(path), display_path(path))
        try:
            change.before = read_source(change.path)
            result = set_unroll(change.before, lines)
        except FileError as exc:
            change.error = (exc.line, exc.message)
        except SourceError as exc:
            change.error = (exc.line, exc.message)
        else:
            change.after = result.code
            change.notes = [(skipped.line, skipped.reason) for skipped in result.skipped]
        changes.append(change)
    return changes
