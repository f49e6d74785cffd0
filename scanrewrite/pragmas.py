"""`# scanrewrite: ...` pragmas: parsing them, and finding them in a module."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

__all__ = ["Pragma", "pragma_comments"]

_PRAGMA = re.compile(r"#\s*scanrewrite\s*:\s*(?P<directive>[^#]*)")
_UNROLL = re.compile(r"unroll\s*=\s*(?P<value>\S*)")
_LEVELS = re.compile(r"levels\s*=\s*(?P<value>\S*)")


@dataclass(frozen=True)
class Pragma:
    """The `# scanrewrite: ...` directives on one line."""

    skip: bool = False
    skip_file: bool = False
    unroll: int | None = None
    #: A positive int or ``"auto"``.
    levels: int | str | None = None
    error: str | None = None

    @classmethod
    def parse(cls, comment: str, *, top_level: bool) -> Pragma | None:
        """The directives in one comment; None when it has none."""
        pragma = None
        for match in _PRAGMA.finditer(comment):
            directive = match.group("directive").strip()
            pragma = (pragma or cls()).merge(cls._one(directive, top_level=top_level))
        return pragma

    @classmethod
    def _one(cls, directive: str, *, top_level: bool) -> Pragma:
        if directive == "skip":
            return cls(skip=True)
        if directive == "skip-file":
            if top_level:
                return cls(skip_file=True)
            return cls(error="skip-file pragma is not at top level")
        unroll = _UNROLL.fullmatch(directive)
        if unroll is not None:
            value = unroll.group("value")
            if value.isdigit() and value.isascii() and int(value) >= 1:
                return cls(unroll=int(value))
        levels = _LEVELS.fullmatch(directive)
        if levels is not None:
            value = levels.group("value")
            if value == "auto":
                return cls(levels=value)
            if value.isdigit() and value.isascii() and int(value) >= 1:
                return cls(levels=int(value))
        return cls(error=f"malformed pragma {directive!r}")

    def merge(self, other: Pragma) -> Pragma:
        return Pragma(
            skip=self.skip or other.skip,
            skip_file=self.skip_file or other.skip_file,
            unroll=other.unroll if other.unroll is not None else self.unroll,
            levels=other.levels if other.levels is not None else self.levels,
            error=self.error or other.error,
        )


class _CommentCollector(cst.CSTVisitor):
    """Every comment in a module, and whether it sits outside all indented blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.comments: list[tuple[cst.Comment, bool]] = []
        self._depth = 0

    # The header (the rest of the `def ...:` line) is on a top-level line; the body and
    # footer are inside the block.
    def visit_IndentedBlock_body(self, node: cst.IndentedBlock) -> None:
        self._depth += 1

    def leave_IndentedBlock_body(self, node: cst.IndentedBlock) -> None:
        self._depth -= 1

    def visit_IndentedBlock_footer(self, node: cst.IndentedBlock) -> None:
        self._depth += 1

    def leave_IndentedBlock_footer(self, node: cst.IndentedBlock) -> None:
        self._depth -= 1

    def visit_Comment(self, node: cst.Comment) -> None:
        self.comments.append((node, self._depth == 0))


def pragma_comments(module: cst.Module, code: str | None = None) -> list[tuple[cst.Comment, Pragma]]:
    """The comments in `module` (whose code is `code`, where the caller has it) that hold
    pragmas, in file order."""
    if code is not None and _PRAGMA.search(code) is None:
        return []  # no comment in it can hold one: spare the walk over the whole tree
    collector = _CommentCollector()
    module.visit(collector)
    found = []
    for comment, top_level in collector.comments:
        pragma = Pragma.parse(comment.value, top_level=top_level)
        if pragma is not None:
            found.append((comment, pragma))
    return found
