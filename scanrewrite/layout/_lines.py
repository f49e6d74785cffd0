"""The lines black (and ruff format, which follows it) splits a statement into: their
tokens, brackets and delimiters.

A port of black's `Line` and `BracketTracker` (black 26.10.1), for `_split`:
the depth of each token inside the line's brackets, the delimiters at depth 0 with
their priorities (a comma before an operator before a `.`), and the magic trailing
comma that keeps a bracket exploded. Names follow black's, so that a difference can
be looked up there. A token's place in the syntax tree, which black reads from its
parent node, is its `role` here (see `_relayout`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["CannotLayOut", "Leaf", "Line", "width"]

OPENING = {"(": ")", "[": "]", "{": "}"}
CLOSING = {")": "(", "]": "[", "}": "{"}
COMPREHENSION_PRIORITY, COMMA_PRIORITY, TERNARY_PRIORITY, LOGIC_PRIORITY = 20, 18, 16, 14
STRING_PRIORITY, COMPARATOR_PRIORITY, DOT_PRIORITY = 12, 10, 1
MATH_PRIORITIES = {
    "|": 9, "^": 8, "&": 7, "<<": 6, ">>": 6, "+": 5, "-": 5,
    "*": 4, "/": 4, "//": 4, "%": 4, "@": 4, "~": 3, "**": 2,
}  # fmt: skip


class CannotLayOut(Exception):
    """The statement uses something this port does not cover."""


@dataclass(eq=False)
class Leaf:
    """One token. `kind` is the bracket, `,`, `.`, `=` or `:` itself, or `name`, `number`,
    `string`, `op`; `role` what black reads from the token's parent (see `_relayout`)."""

    kind: str
    value: str
    #: The whitespace before the token when the statement is on one line.
    flat: str = ""
    role: str = ""
    opening: Leaf | None = field(default=None, repr=False)
    depth: int = 0
    #: A comment that follows it to the end of whatever line it lands on, with the
    #: whitespace before the comment.
    comment: str = ""
    #: The whitespace before it on its line (`flat`, or none at the start of a line).
    prefix: str = field(init=False)

    def __post_init__(self) -> None:
        self.prefix = self.flat

    def copy(self) -> Leaf:
        return Leaf(self.kind, self.value, self.flat, self.role, comment=self.comment)


def width(text: str) -> int:
    """The width black and ruff give `text`: wide East Asian characters count twice."""
    if text.isascii():
        return len(text)
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


class Tracker:
    """black's `BracketTracker`: bracket depths and the delimiters at depth 0."""

    def __init__(self) -> None:
        self.depth = 0
        self.match: dict[tuple[int, str], Leaf] = {}
        self.delimiters: dict[int, int] = {}
        self.previous: Leaf | None = None
        self.for_depths: list[int] = []
        self.lambda_depths: list[int] = []
        self.invisible: list[Leaf] = []

    def mark(self, leaf: Leaf) -> None:
        if self.depth == 0 and leaf.kind in CLOSING and (0, leaf.kind) not in self.match:
            return
        if self.for_depths and self.for_depths[-1] == self.depth and leaf.value == "in" and leaf.kind == "name":
            self.depth -= 1
            self.for_depths.pop()
        if self.lambda_depths and self.lambda_depths[-1] == self.depth and leaf.kind == ":":
            self.depth -= 1
            self.lambda_depths.pop()
        if leaf.kind in CLOSING:
            self.depth -= 1
            leaf.opening = self.match.pop((self.depth, leaf.kind))
            if not leaf.value:
                self.invisible.append(leaf)
        leaf.depth = self.depth
        if self.depth == 0:
            priority = split_before(leaf, self.previous)
            if priority and self.previous is not None:
                self.delimiters[id(self.previous)] = priority
            elif leaf.kind == "," and leaf.role != "for-target":
                self.delimiters[id(leaf)] = COMMA_PRIORITY
        if leaf.kind in OPENING:
            self.match[self.depth, OPENING[leaf.kind]] = leaf
            self.depth += 1
            if not leaf.value:
                self.invisible.append(leaf)
        self.previous = leaf
        if leaf.kind == "name" and leaf.value == "lambda":
            self.depth += 1
            self.lambda_depths.append(self.depth)
        if leaf.kind == "name" and leaf.value == "for":
            self.depth += 1
            self.for_depths.append(self.depth)

    def max_priority(self, exclude: set[int] = frozenset()) -> int:
        return max(priority for key, priority in self.delimiters.items() if key not in exclude)

    def count(self, priority: int) -> int:
        return sum(1 for value in self.delimiters.values() if value == priority)


def split_before(leaf: Leaf, previous: Leaf | None) -> int:
    """black's `is_split_before_delimiter`, with the parent tests read from `role`."""
    if leaf.role == "vararg":
        return 0
    if leaf.kind == "." and (previous is None or previous.kind in CLOSING):
        return DOT_PRIORITY
    if leaf.role == "math":
        return MATH_PRIORITIES[leaf.value]
    if leaf.role == "comparator":
        return COMPARATOR_PRIORITY
    if leaf.kind == "string" and previous is not None and previous.kind == "string":
        return STRING_PRIORITY
    if leaf.role == "comprehension":
        return COMPREHENSION_PRIORITY
    if leaf.role == "ternary":
        return TERNARY_PRIORITY
    if leaf.role == "logic":
        return LOGIC_PRIORITY
    return 0


@dataclass(eq=False)
class Line:
    depth: int
    inside_brackets: bool = False
    leaves: list[Leaf] = field(default_factory=list)
    tracker: Tracker = field(default_factory=Tracker)
    should_split_rhs: bool = False
    magic_trailing_comma: Leaf | None = None

    def append(self, leaf: Leaf, preformatted: bool = False, track: bool = False) -> None:
        if self.inside_brackets or not preformatted or track:
            self.tracker.mark(leaf)
            if self._has_magic_trailing_comma(leaf):
                self.magic_trailing_comma = leaf
        self.leaves.append(leaf)

    def _has_magic_trailing_comma(self, closing: Leaf) -> bool:
        if not (closing.kind in CLOSING and self.leaves and self.leaves[-1].kind == ","):
            return False
        if closing.kind == "}":
            return True
        if closing.kind == "]":
            return not (closing.role == "subscript" and one_sequence_between(closing.opening, closing, self.leaves, "["))
        return closing.opening is not None and not one_sequence_between(closing.opening, closing, self.leaves, "(")

    def __str__(self) -> str:
        if not self.leaves:
            return ""
        first, *rest = self.leaves
        code = "    " * self.depth + first.value + "".join(leaf.prefix + leaf.value for leaf in rest)
        return code + "".join(leaf.comment for leaf in self.leaves)

    def lengths(self, reverse: bool = False) -> Iterator[tuple[int, Leaf, int]]:
        """black's `enumerate_with_length`."""
        indexed = list(enumerate(self.leaves))
        for index, leaf in reversed(indexed) if reverse else indexed:
            yield index, leaf, len(leaf.prefix) + len(leaf.value) + len(leaf.comment)

    @property
    def is_chained_assignment(self) -> bool:
        return sum(1 for leaf in self.leaves if leaf.kind == "=") > 1


def one_sequence_between(opening: Leaf | None, closing: Leaf, leaves: list[Leaf], bracket: str) -> bool:
    """black's `is_one_sequence_between`: a one-tuple (or one-element subscript)."""
    if opening is None or opening.kind != bracket or closing.kind != OPENING[bracket]:
        return False
    depth = closing.depth + 1
    try:
        start = next(index for index, leaf in enumerate(leaves) if leaf is opening) + 1
    except StopIteration:
        return False
    commas = 0
    for leaf in leaves[start:]:
        if leaf is closing:
            break
        if leaf.depth == depth and leaf.kind == ",":
            commas += 1
            if leaf.role == "argument":
                commas += 1
                break
    return commas < 2
