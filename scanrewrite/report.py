"""Counting what a run did, the messages on stderr, the closing summary and the exit code."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from scanrewrite.codemod import ImportChanges


class Changed(enum.Enum):
    """Whether the rewrite of one file differs from the file."""

    NO = 0
    YES = 1


@dataclass(frozen=True)
class FileResult:
    """What happened to one file; plain data, so a worker process can send it back."""

    #: The file as messages name it.
    display: str
    changed: Changed = Changed.NO
    #: Lines of the calls rewritten (or that would be); in a notebook, "cell N:line L".
    rewritten: tuple[int | str, ...] = ()
    #: (line, reason) of each call left as it was.
    skipped: tuple[tuple[int | str, str], ...] = ()
    #: The unified diff, when the mode shows one and the file changes.
    diff: bytes | None = None
    #: Why the file failed, as (line or None, one-line message); None if it did not.
    error: tuple[int | None, str] | None = None
    #: (line, note) of rewritten calls that did not get everything asked for, or whose
    #: per-step checkpoint the runtime takes over.
    notes: tuple[tuple[int | str, str], ...] = ()
    #: Lines of the rewritten calls whose per-step checkpoint the runtime takes over.
    absorbed: tuple[int | str, ...] = ()
    #: (where, one-line message) of each notebook cell left alone because it cannot be
    #: parsed; the other cells are still rewritten, and the file counts as failed too.
    cell_errors: tuple[tuple[str, str], ...] = ()
    #: The qualified names of the APIs whose calls were rewritten (`Target.qualified_name`),
    #: each once: what the rewritten code needs at run time follows from them.
    apis: tuple[str, ...] = ()
    #: The imports the transform removed and added (`-v` only).
    imports: ImportChanges | None = None
    #: Of a rewrite's file, the imports a revert would not restore (`removed`) and what it
    #: would write instead (`added`); None where it restores them (or without `-v`).
    unrestored: ImportChanges | None = None


_REVERT_VERBS = {"rewritten": "reverted", "would rewrite": "would revert", "would be rewritten": "would be reverted"}


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


@dataclass
class Report:
    """Counts files and calls, and writes the per-file and per-call messages to stderr.

    Errors are printed whatever the verbosity; `quiet` silences everything else. By default
    each changed file is named; `verbose` (`-v`, 1 or True) adds one line per call rewritten
    or skipped, and `verbose=2` (`-vv`) also each file left unchanged and each path that
    discovery left out. When nothing is written (`--diff`, `--check`), every message says
    "would".
    """

    #: `--check`: nothing is written, and a file that would change makes the exit code 1.
    check: bool = False
    #: `--diff` (or `--cell-diff`): nothing is written.
    diff: bool = False
    #: 0: changed files only; 1 (`-v`): every call too; 2 (`-vv`): every file and path too.
    verbose: int = 0
    quiet: bool = False
    #: Colour on or off; None leaves it to click (on when stderr is a terminal).
    color: bool | None = None
    #: Whether the run reverts (`--revert`): the messages say "reverted" for "rewritten".
    reverting: bool = False
    #: Files whose rewrite differs from them (written, or that would be).
    change_count: int = 0
    #: Files read and found to need no change.
    same_count: int = 0
    #: Files that could not be read, decoded, parsed or written.
    failure_count: int = 0
    #: Scan calls rewritten (or that would be), all in changed files.
    rewritten_calls: int = 0
    #: Scan calls recognised but left as they were (a pragma, or a shape never guessed at).
    skipped_calls: int = 0
    #: Rewritten calls whose per-step checkpoint the runtime takes over.
    absorbed_calls: int = 0
    #: The APIs whose calls were rewritten (or would be), by qualified name.
    apis: set[str] = field(default_factory=set)

    def _verb(self, done: str, would: str) -> str:
        """`done` (``"rewritten"``) or `would` (``"would rewrite"``), reworded for a revert."""
        verb = would if self.check or self.diff else done
        return _REVERT_VERBS.get(verb, verb) if self.reverting else verb

    def _err(self, message: str, **style: object) -> None:
        click.echo(click.style(message, **style) if style else message, err=True, color=self.color)

    def done(self, path: str, changed: Changed) -> None:
        """Count one file that was processed without error."""
        if changed is Changed.YES:
            self.change_count += 1
            if not self.quiet:
                self._err(f"{self._verb('rewritten', 'would rewrite')} {path}")
        else:
            self.same_count += 1
            if self.verbose >= 2:
                self._err(f"{path}: {self._verb('left unchanged', 'would be left unchanged')}")

    def rewritten(self, path: str, line: int | str, note: str | None = None, absorbed: bool = False) -> None:
        """Count one call rewritten at `path:line` (`note`: what it did not get, or what
        became of its per-step checkpoint; `absorbed`: the runtime takes that over)."""
        self.rewritten_calls += 1
        self.absorbed_calls += absorbed
        if self.verbose:
            self._err(f"{path}:{line}: {self._verb('rewritten', 'would rewrite')}" + (f" ({note})" if note else ""))

    def skipped(self, path: str, line: int | str, reason: str) -> None:
        """Count one call at `path:line` that was left as it was, and why."""
        self.skipped_calls += 1
        if self.verbose:
            self._err(f"{path}:{line}: {self._verb('skipped', 'would skip')} ({reason})")

    def imports(self, path: str, changes: ImportChanges, unrestored: ImportChanges | None = None) -> None:
        """With `verbose`, say each import of `path` the transform removed and added, and, once,
        those of its imports a revert would not restore (`unrestored.removed`)."""
        if not self.verbose:
            return
        for line, statement in changes.removed:
            self._err(f"{path}:{line}: {self._verb('removed', 'would remove')} {statement!r}")
        for line, statement in changes.added:
            self._err(f"{path}:{line}: {self._verb('added', 'would add')} {statement!r}")
        if unrestored is not None and unrestored.removed:
            lost = ", ".join(repr(statement) for _, statement in unrestored.removed)
            instead = ", ".join(repr(statement) for _, statement in unrestored.added)
            self._err(
                f"{path}: --revert and scanrewrite-tune's write-back of the original will not restore {lost}"
                + (f"; they write {instead} instead" if instead else "")
            )

    def failed(self, path: str, message: str, line: int | str | None = None) -> None:
        """Count one file that failed; print `error: path:line: message` on stderr."""
        self.failure_count += 1
        where = path if line is None else f"{path}:{line}"
        self._err(f"error: {where}: {message}", fg="red")

    def record(self, result: FileResult) -> None:
        """Count one file's result, calls first, then the file itself."""
        notes = dict(result.notes)
        self.apis.update(result.apis)
        for line in result.rewritten:
            self.rewritten(result.display, line, notes.get(line), line in result.absorbed)
        for line, reason in result.skipped:
            self.skipped(result.display, line, reason)
        if result.imports is not None:
            self.imports(result.display, result.imports, result.unrestored)
        for where, message in result.cell_errors:
            self._err(f"error: {result.display}:{where}: {message}", fg="red")
        if result.cell_errors:
            self.failure_count += 1
        if result.error is None:
            self.done(result.display, result.changed)
        else:
            line, message = result.error
            self.failed(result.display, message, line)

    def ignored(self, path: str, why: str, *, named: bool = False) -> None:
        """Note a path that discovery left out (not counted): shown with `-vv` only, or, for
        a path named on the command line (`named`), unless quiet."""
        if self.verbose >= 2 or (named and not self.quiet):
            self._err(f"{path}: ignored ({why})")

    def dependencies(self, pyproject: Path | None) -> None:
        """Say, in one line unless quiet, what the rewritten code imports and which of
        scanrewrite's extras the project must depend on for it, unless the project's
        `pyproject` (None: it has none) already names them (see `scanrewrite.dependencies`).
        Nothing is said after a run that rewrote nothing, or reverted."""
        if self.quiet or self.reverting or not self.rewritten_calls:
            return
        from scanrewrite.dependencies import dependency_note

        note = dependency_note(self.apis, pyproject, would=self.check or self.diff)
        if note is not None:
            self._err(note)

    def summary(self) -> None:
        """Print the closing summary line on stderr, unless quiet."""
        if not self.quiet:
            self._err(str(self), bold=True)

    @property
    def return_code(self) -> int:
        """The exit code of the run.

        - 0: nothing to do, or every changed file was written (or diffed, without `--check`);
        - 1: under `--check`, at least one file would change and none failed;
        - 2: at least one file failed (could not be read, decoded, parsed or written, or
          is a notebook with a cell that could not be parsed).
          Bad options exit 2 too, through click, before any file is read.
        """
        if self.failure_count:
            return 2
        if self.change_count and self.check:
            return 1
        return 0

    def __str__(self) -> str:
        """The summary, e.g. `2 files rewritten (5 scan calls, 1 per-step checkpoint
        absorbed), 40 left unchanged, 3 calls skipped, 1 file failed`; when nothing is
        written, `2 files would be rewritten (...), 40 would be left unchanged, 3 calls
        would be skipped, 1 file failed`, as black says it.
        """
        parts = []
        if self.change_count:
            verb = self._verb("rewritten", "would be rewritten")
            calls = _plural(self.rewritten_calls, "scan call")
            if self.absorbed_calls:
                calls += f", {_plural(self.absorbed_calls, 'per-step checkpoint')} absorbed"
            parts.append(f"{_plural(self.change_count, 'file')} {verb} ({calls})")
        if self.same_count:
            # Once a count of files leads the line, "40 left unchanged" reads as files.
            count = str(self.same_count) if parts else _plural(self.same_count, "file")
            parts.append(f"{count} {self._verb('left unchanged', 'would be left unchanged')}")
        if self.skipped_calls:
            parts.append(f"{_plural(self.skipped_calls, 'call')} {self._verb('skipped', 'would be skipped')}")
        if self.failure_count:
            parts.append(f"{_plural(self.failure_count, 'file')} failed")
        return ", ".join(parts) if parts else "no Python files found"
