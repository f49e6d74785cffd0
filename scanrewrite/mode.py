"""What one run of the command does: the rewrite options and what happens to the result.

The command line turns its flags into these two values at once, so nothing past
`cli.py` looks at a flag.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from scanrewrite.options import Options


@dataclass(frozen=True)
class Mode:
    """The transform a run applies to each file: `scanrewrite.codemod.rewrite` with
    `options`, or `revert`.

    Frozen and hashable, so it travels to worker processes as it is.
    """

    #: What the rewrite writes, and how it lays it out (see `scanrewrite.options`).
    options: Options = Options()
    #: Undo the rewrite instead (`--revert`): of `options`, only those that `revert` reads
    #: (`Option.reverts`: the line length and the first-party names) then apply.
    revert: bool = False
    #: `-v`: each file's result also says which imports the transform removed and added, and,
    #: for a rewrite that removed one, which of the file's imports a revert would not restore
    #: (a parse of each changed file, and a revert of those).
    imports: bool = False


class WriteBack(enum.Enum):
    """What happens to a file whose rewrite differs from it."""

    #: Write the file in place (the default).
    YES = "yes"
    #: Print a unified diff (a patch that `git apply` takes) to stdout; write nothing.
    DIFF = "diff"
    #: Write nothing; exit 1 if anything would change.
    CHECK = "check"
    #: `--check --diff`: print the diff and exit 1 if anything would change.
    CHECK_DIFF = "check-diff"
    #: `--cell-diff`: as `DIFF`, but a notebook's change is shown cell by cell.
    CELL_DIFF = "cell-diff"
    #: `--check --cell-diff`.
    CHECK_CELL_DIFF = "check-cell-diff"

    @classmethod
    def from_configuration(cls, *, check: bool, diff: bool, cell_diff: bool = False) -> WriteBack:
        """The mode that `--check`, `--diff` and `--cell-diff` select, alone or together
        (`--cell-diff` implies `--diff`)."""
        if cell_diff:
            return cls.CHECK_CELL_DIFF if check else cls.CELL_DIFF
        if check and diff:
            return cls.CHECK_DIFF
        if check:
            return cls.CHECK
        if diff:
            return cls.DIFF
        return cls.YES

    @property
    def writes(self) -> bool:
        """Whether changed files are written."""
        return self is WriteBack.YES

    @property
    def shows_diff(self) -> bool:
        """Whether a diff of each changed file goes to stdout."""
        return self in (WriteBack.DIFF, WriteBack.CHECK_DIFF, WriteBack.CELL_DIFF, WriteBack.CHECK_CELL_DIFF)

    @property
    def diffs_cells(self) -> bool:
        """Whether a notebook's diff is one per changed cell (readable, as ruff and black show
        it) instead of a patch of the file's JSON text (which `git apply` takes)."""
        return self in (WriteBack.CELL_DIFF, WriteBack.CHECK_CELL_DIFF)

    @property
    def fails_on_change(self) -> bool:
        """Whether a file that would change makes the exit code 1."""
        return self in (WriteBack.CHECK, WriteBack.CHECK_DIFF, WriteBack.CHECK_CELL_DIFF)
