"""The one shape of the errors that make one file fail: a file that cannot be read or written
(`scanrewrite.files.FileError`), source that cannot be parsed or rewritten
(`scanrewrite.codemod.SourceError`), and a notebook that cannot be read
(`scanrewrite.notebook.NotebookError`)."""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(Exception):
    """Why one file fails: a one-line message, and the 1-based line of the problem where known.

    Caught for one file, it becomes that file's `entry` in the report (`error: path:line:
    message` on stderr), and the other files go on.
    """

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message, line)
        #: One line, e.g. ``"cannot parse: expected one of ), *, **, NAME"``.
        self.message = message
        #: 1-based line of the problem (in a notebook, of its JSON text), when known.
        self.line = line

    def __str__(self) -> str:
        return self.message if self.line is None else f"line {self.line}: {self.message}"

    @property
    def entry(self) -> tuple[int | None, str]:
        """(line or None, message): the file's error as `scanrewrite.report.FileResult.error`
        holds it."""
        return self.line, self.message
