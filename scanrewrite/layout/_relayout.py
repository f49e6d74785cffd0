"""Laying out a changed statement as black and ruff format would.

`relayout(original, updated, ...)` is the entry point: when `original` is laid out
exactly as the formatters lay it out at the given line length, `updated` (the same
statement after an edit, such as a rewritten call) is laid out the same way: kept on
one line while it fits, split as `_split` says when it does not. Otherwise
`updated` comes back as it is, so a file that was not formatted is never reformatted.
`KeepLayout` is a transformer to build an edit on: it tracks each statement's
indentation and lays out again every statement in which the subclass calls `edited()`.

What the formatters wrote themselves in `original` goes where the edit lets a split
fit again: a trailing comma they would have written anyway (a user's magic trailing
comma, which holds a bracket open that would fit, stays), and the parentheses they put
around a returned or assigned tuple they split. So the revert joins what the rewrite
split, and a write-back that shortens a call joins it too.

A statement is read into the formatter's tokens by `_tokens`. What the port
does not cover (see there; also compound statements and indentation other than four
spaces) leaves the statement as it is; so does a layout whose code is not the same
syntax tree as the statement's.
"""

from __future__ import annotations

import ast
import itertools
import re

import libcst as cst

from scanrewrite.layout._lines import CLOSING, CannotLayOut, Leaf
from scanrewrite.layout._split import lay_out
from scanrewrite.layout._tokens import parenthesized_tuple, spaced, statement_leaves

__all__ = ["KeepLayout", "may_relayout", "relayout"]

_FMT_OFF = re.compile(r"#\s*(?:fmt:\s*(?:off|skip)|yapf:\s*disable)")


def may_relayout(code: str) -> bool:
    """Whether a module may have statements laid out at all: not where the formatters
    are told to keep the user's layout (`# fmt: off`, `# fmt: skip`)."""
    return _FMT_OFF.search(code) is None


def relayout(
    original: cst.SimpleStatementLine,
    updated: cst.SimpleStatementLine,
    indent: str,
    line_length: int,
    module: cst.Module,
) -> cst.SimpleStatementLine:
    """`updated` laid out as the formatters would at `line_length`, if `original` is
    laid out as they would; else `updated` itself. `indent` is the statement's
    indentation in `module`."""
    if indent.strip(" ") or len(indent) % 4 or module.default_indent != "    ":
        return updated
    depth = len(indent) // 4
    try:
        # Parentheses around a tuple are the formatters' own where they put them there
        # anyway (splitting at them); if so, the edited statement is laid out without.
        for bare in (True, False) if parenthesized_tuple(original) else (False,):
            before, text = statement_leaves(original, indent, module, bare)
            redundant = _redundant_commas(before, depth, line_length, text) if spaced(before) else None
            if redundant is not None:
                break
        else:
            return updated
        after, text = statement_leaves(updated, indent, module, bare)
        if len(_trailing_commas(after)) != len(_trailing_commas(before)):
            redundant = set()  # the edit took brackets away or added some: no telling which is which
        lines = lay_out(_without_commas(after, redundant), depth, line_length)
    except CannotLayOut:
        return updated
    if "\n".join(lines) == text:
        return updated
    comment = updated.trailing_whitespace.comment
    if comment is not None and not lines[-1].endswith(comment.value):
        return updated  # the comment would move inside the brackets
    newline = module.default_newline
    code = newline.join(line[len(indent) :] for line in lines) + newline
    try:
        statement = cst.parse_statement(code, config=module.config_for_parsing)
    except cst.ParserSyntaxError:
        return updated
    if not isinstance(statement, cst.SimpleStatementLine) or not _same_tree(statement, updated, module):
        return updated
    return statement.with_changes(leading_lines=updated.leading_lines)


def _trailing_commas(leaves: list[Leaf]) -> list[int]:
    """The indices of the commas right before a closing bracket (the magic trailing
    commas among them keep their brackets exploded)."""
    return [
        index
        for index, (leaf, closing) in enumerate(itertools.pairwise(leaves))
        if leaf.kind == "," and closing.kind in CLOSING and not leaf.comment
    ]


def _without_commas(leaves: list[Leaf], dropped: set[int]) -> list[Leaf]:
    """Copies of `leaves` (to lay out: `lay_out` changes those it is given) without the
    `dropped` trailing commas, numbered in the order of `_trailing_commas`."""
    commas = _trailing_commas(leaves)
    gone = {commas[number] for number in dropped}
    kept = []
    for index, leaf in enumerate(leaves):
        if index in gone:
            continue
        kept.append(leaf.copy())
        if index - 1 in gone:
            kept[-1].flat = kept[-1].prefix = ""
    return kept


def _redundant_commas(leaves: list[Leaf], depth: int, line_length: int, text: str) -> set[int] | None:
    """None if the formatters do not lay out `leaves` as `text`; else the trailing commas
    (numbered as `_without_commas` takes them) that they would write anyway, as they
    explode a bracket too long for its line: without them the layout is `text` still.
    Those are not the user's magic trailing commas, and go where an edit lets their
    brackets fit again; so the revert undoes the layout the rewrite gave a call that
    became too long."""

    def same(dropped: set[int]) -> bool:
        try:
            return "\n".join(lay_out(_without_commas(leaves, dropped), depth, line_length)) == text
        except CannotLayOut:
            return False

    numbers = range(len(_trailing_commas(leaves)))
    if not same(set()):
        return None
    if not numbers or same(set(numbers)):
        return set(numbers)
    redundant: set[int] = set()
    for number in numbers:
        if same(redundant | {number}):
            redundant.add(number)
    return redundant


def _same_tree(laid_out: cst.SimpleStatementLine, updated: cst.SimpleStatementLine, module: cst.Module) -> bool:
    """Whether the two statements are the same code to Python (only layout differs)."""
    trees = []
    for statement in (laid_out, updated):
        code = module.code_for_node(statement.with_changes(leading_lines=()))
        try:
            trees.append(ast.dump(ast.parse(code)))
        except SyntaxError:
            return False
    return trees[0] == trees[1]


class KeepLayout(cst.CSTTransformer):
    """A transformer whose edited statements keep the formatters' layout.

    A subclass calls `edited()` while it changes something inside a statement; on
    leaving a simple statement that was edited, it is laid out again by `relayout`
    (with `module`'s indentation and newline). `line_length` None leaves every
    statement as the subclass made it, and so does a module with `# fmt: off` (`code`
    is `module.code`, when the caller has it already).
    """

    def __init__(self, module: cst.Module, line_length: int | None, code: str | None = None) -> None:
        super().__init__()
        self._module = module
        if line_length is not None and not may_relayout(module.code if code is None else code):
            line_length = None
        self._line_length = line_length
        self._indents: list[str] = []
        self._edit_count = 0
        self._edit_count_before: list[int] = []

    def edited(self) -> None:
        """Note that the statement being visited changes."""
        self._edit_count += 1

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._indents.append(self._module.default_indent if node.indent is None else node.indent)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        self._indents.pop()
        return updated_node

    def visit_Match(self, node: cst.Match) -> None:
        # The `case` lines are indented in the `match` itself, not in a block.
        self._indents.append(self._module.default_indent if node.indent is None else node.indent)

    def leave_Match(self, original_node: cst.Match, updated_node: cst.Match) -> cst.Match:
        self._indents.pop()
        return updated_node

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._edit_count_before.append(self._edit_count)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if self._edit_count_before.pop() == self._edit_count or self._line_length is None:
            return updated_node
        return relayout(original_node, updated_node, "".join(self._indents), self._line_length, self._module)
