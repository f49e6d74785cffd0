"""The picks written back into the source: per file, the codemod's `write_picks`, a diff, a write.

The transform itself is the codemod's (pure bytes to bytes, pragmas respected); this module
only groups the picks by file and reads, diffs and writes with the command's own I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scanrewrite.files import (
    FileError,
    display_path,
    find_project_root,
    first_party_names,
    formatter_line_length,
    read_source,
    write_file,
)
from scanrewrite.output import unified_diff
from scanrewrite.runtime import Site
from scanrewrite.tune._candidates import Candidate

if TYPE_CHECKING:
    from scanrewrite.codemod import ImportChanges


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
    #: The imports the write-back removes and adds (`import jax` for a scan written back as
    #: `jax.lax.scan`); None where the file does not change.
    imports: ImportChanges | None = None

    @property
    def changed(self) -> bool:
        return self.error is None and self.after != self.before

    def diff(self) -> bytes:
        return unified_diff(self.before, self.after, self.display)

    def write(self) -> None:
        """Write the new bytes (as `scanrewrite.files.write_file` does), unless the file changed on
        disk since it was read or is read-only."""
        try:
            write_file(self.path, self.after, self.before)
        except FileError as exc:
            self.error = exc.entry


def plan(picks: Mapping[Site, Candidate]) -> list[FileChange]:
    """For each file holding a picked site (in order of first site), the file with every
    picked site's settings written (`unroll=`, and the checkpoint mode, `levels` and `store`
    where the pick has them), and the sites where the original scan was picked reverted; laid out for
    the line length of the file's project (`[tool.ruff]`/`[tool.black]`, 88 by default), with the
    imports that changes."""
    from scanrewrite.codemod import SourceError, import_changes, write_picks

    by_file: dict[str, dict[int, Candidate | None]] = {}
    for site, pick in picks.items():
        by_file.setdefault(site.path, {})[site.line] = None if pick.original else pick
    changes = []
    for path, lines in by_file.items():
        change = FileChange(Path(path), display_path(path))
        root = find_project_root([path])
        try:
            change.before = read_source(change.path)
            result = write_picks(
                change.before, lines, line_length=formatter_line_length(root), first_party=first_party_names(root)
            )
        except (FileError, SourceError) as exc:
            change.error = exc.entry
        else:
            change.after = result.code
            change.notes = [(skipped.line, skipped.reason) for skipped in result.skipped]
            if change.changed:
                change.imports = import_changes(change.before, change.after)
        changes.append(change)
    return changes
