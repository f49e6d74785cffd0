"""Laying out a changed statement as black and ruff format would.

`relayout(original, updated, ...)` is the entry point: when `original` is laid out
exactly as the formatters lay it out at the given line length, `updated` (the same
statement after an edit, such as a rewritten call) is laid out the same way: kept on
one line while it fits, split as `_format_split` says when it does not. Otherwise
`updated` comes back as it is, so a file that was not formatted is never reformatted.
`KeepLayout` is a transformer to build an edit on: it tracks each statement's
indentation and lays out again every statement in which the subclass calls `edited()`.

A statement is read into the formatter's tokens here, through libcst's own code
generation (so every token knows the nodes it belongs to), with black's optional
parentheses around the right-hand side of an assignment and a `return` value. What
the port does not cover (a comment inside the statement or a pragma comment at its end,
multi-line strings, backslashes, compound statements, indentation other than four
spaces) leaves the statement as it is; so does a layout whose code is not the same
syntax tree as the statement's.
"""

from __future__ import annotations

import ast
import itertools
import re

import libcst as cst
from libcst._nodes.internal import CodegenState

from scanrewrite.codemod._format_lines import CannotLayOut, Leaf
from scanrewrite.codemod._format_split import lay_out

__all__ = ["KeepLayout", "may_relayout", "relayout"]

#: Comments ruff leaves out of a line's width and black does not (or the reverse).
_PRAGMA = re.compile(r"#\s*(?:[nN][oO][qQ][aA]|nosec|(?:isort|type|pyright|pylint|flake8|ruff)\s*:)")
_FMT_OFF = re.compile(r"#\s*(?:fmt:\s*(?:off|skip)|yapf:\s*disable)")
_WHITESPACE = (cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline, cst.EmptyLine)
_COMPARATORS = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
_TWO_WORDS = (cst.NotIn, cst.IsNot)
_BRACKETS = {
    cst.LeftParen: "(", cst.RightParen: ")", cst.LeftSquareBracket: "[",
    cst.RightSquareBracket: "]", cst.LeftCurlyBrace: "{", cst.RightCurlyBrace: "}",
}  # fmt: skip


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
        before, text = _leaves(original, indent, module)
        if not _spaced(before) or "\n".join(lay_out(before, depth, line_length)) != text:
            return updated
        after, text = _leaves(updated, indent, module)
        lines = lay_out(after, depth, line_length)
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


class _Tokens(CodegenState):
    """Code generation that keeps each token with the nodes it is generated inside."""

    def __init__(self, module: cst.Module, indent: str) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.indent_tokens = [indent]
        self.stack: list[cst.CSTNode] = []
        self.events: list[tuple[str, tuple[cst.CSTNode, ...]]] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.stack.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.stack.pop()

    def add_token(self, value: str) -> None:
        super().add_token(value)
        self.events.append((value, tuple(self.stack)))


def _leaves(statement: cst.SimpleStatementLine, indent: str, module: cst.Module) -> tuple[list[Leaf], str]:
    """The formatter's tokens of `statement` and its text as it stands (indented, with
    `\\n` line breaks and none at the end). Raises `CannotLayOut`."""
    comment = statement.trailing_whitespace.comment
    if len(statement.body) != 1 or comment is not None and _PRAGMA.match(comment.value):
        raise CannotLayOut("several statements on a line, or a comment that ruff and black measure apart")
    small = statement.body[0]
    if not isinstance(small.semicolon, cst.MaybeSentinel):
        raise CannotLayOut("a semicolon")
    wrapped, visible = _optional_parentheses(small)
    state = _Tokens(module, indent)
    statement.with_changes(leading_lines=())._codegen(state)
    text = re.sub(r"\r\n?", "\n", "".join(state.tokens)).rstrip("\n")
    leaves: list[Leaf] = []
    owners: list[tuple[cst.CSTNode, ...]] = []
    whitespace, broken = "", False
    string: tuple[cst.CSTNode, Leaf] | None = None
    for value, stack in state.events:
        top = stack[-1]
        if len(stack) > 1 and stack[1] is statement.trailing_whitespace:
            continue
        outer = next((node for node in stack if isinstance(node, cst.FormattedString)), None)
        if outer is not None and string is not None and string[0] is outer:
            string[1].value += value
            continue
        if not value:
            continue
        if isinstance(top, cst.Comment):
            raise CannotLayOut("a comment")
        if isinstance(top, _WHITESPACE):
            if "\\" in value:
                raise CannotLayOut("a backslash continuation")
            whitespace += value
            broken = broken or "\n" in value or "\r" in value
            continue
        default_comma = value == ", "  # libcst's comma after an element built without one
        if default_comma:
            kind, role, value = ",", "argument" if isinstance(top, cst.Arg) else "", ","
        else:
            kind, role = _classify(value, stack)
        leaf = Leaf(kind, value, _flat(whitespace, broken, leaves, kind), role)
        if kind in "()" and top in visible:
            leaf.value, leaf.role = "", "atom"
        leaves.append(leaf)
        owners.append(tuple(node for node in stack if node in wrapped or _wraps_itself(node, stack)))
        whitespace, broken = (" " if default_comma else ""), False
        string = (outer, leaf) if outer is not None else None
    if any("\n" in leaf.value or "\r" in leaf.value for leaf in leaves):
        raise CannotLayOut("a multi-line string")
    _mark_two_word_operators(leaves)
    leaves = _wrap(leaves, owners)
    if comment is not None:
        # black's `Line.append_comment`: on the last token, but not on an invisible
        # parenthesis around a single token.
        around_one = len(leaves) > 2 and not leaves[-1].value and leaves[-1].kind == ")" and not leaves[-3].value
        last = leaves[-2] if around_one else leaves[-1]
        last.comment = statement.trailing_whitespace.whitespace.value + comment.value
    return leaves, text


def _wrap(leaves: list[Leaf], owners: list[tuple[cst.CSTNode, ...]]) -> list[Leaf]:
    """`leaves` with invisible parentheses around the leaves of each wrapped node (the
    nodes each leaf lies in, outermost first); the whitespace before a node goes before
    its parenthesis."""
    result: list[Leaf] = []
    for index, (leaf, owner) in enumerate(zip(leaves, owners)):
        before = owners[index - 1] if index else ()
        after = owners[index + 1] if index + 1 < len(leaves) else ()
        for node in owner:
            if node not in before:
                result.append(Leaf("(", "", leaf.flat, "atom"))
                leaf.flat = leaf.prefix = ""
        result.append(leaf)
        result.extend(Leaf(")", "", "", "atom") for node in owner if node not in after)
    return result


def _wraps_itself(node: cst.CSTNode, stack: tuple[cst.CSTNode, ...]) -> bool:
    """Whether black puts invisible parentheses around a conditional expression: unless
    it is parenthesized already, or the sole argument of a call."""
    if not isinstance(node, cst.IfExp) or node.lpar:
        return False
    parent = stack[stack.index(node) - 1]
    if isinstance(parent, cst.Arg) and not parent.keyword and not parent.star:
        call = stack[stack.index(node) - 2]
        return not (isinstance(call, cst.Call) and len(call.args) == 1 and not isinstance(parent.comma, cst.Comma))
    return True


def _spaced(leaves: list[Leaf]) -> bool:
    """Whether the spaces between tokens are the formatters' where they are plain to
    see: at most one, none inside brackets or before a comma or a `.`."""
    for previous, leaf in itertools.pairwise(leaves):
        if len(leaf.flat) > 1 or leaf.flat and (previous.kind in "([{" or leaf.kind in ")]},."):
            return False
    return True


def _flat(whitespace: str, broken: bool, leaves: list[Leaf], kind: str) -> str:
    """The whitespace before a token on the joined line: as written on one line, and
    as the formatters join a line they split (nothing inside brackets, before a
    closing bracket or a `.`, else one space)."""
    if not broken:
        return whitespace
    if not leaves or leaves[-1].kind in "([{" or kind in ")]}.":
        return ""
    return " "


def _optional_parentheses(small: cst.BaseSmallStatement) -> tuple[set[cst.CSTNode], set[cst.CSTNode]]:
    """The children black wraps in invisible parentheses, and the parentheses already
    written around such a child that black treats as those invisible ones."""
    children: list[cst.BaseExpression] = []
    if isinstance(small, cst.Return) and small.value is not None:
        children.append(small.value)
    elif isinstance(small, cst.Assign):
        first, *others = (target.target for target in small.targets)
        if isinstance(first, cst.Tuple) and not first.lpar:
            children.append(first)
        elif not isinstance(first, (cst.Name, cst.Attribute, cst.Subscript)) or first.lpar:
            raise CannotLayOut("an unusual assignment target")
        children.extend(others)
        children.append(small.value)
    elif isinstance(small, cst.AnnAssign):
        children.append(small.annotation.annotation)
        if small.value is not None:
            children.append(small.value)
    elif isinstance(small, cst.AugAssign):
        children.append(small.value)
    elif not isinstance(small, cst.Expr):
        raise CannotLayOut("a statement other than an assignment, return or expression")
    wrapped: set[cst.CSTNode] = set()
    visible: set[cst.CSTNode] = set()
    for child in children:
        if not child.lpar:
            wrapped.add(child)
        elif len(child.lpar) == 1 and not isinstance(child, (cst.Tuple, cst.GeneratorExp, cst.Yield)):
            visible.update((child.lpar[0], child.rpar[0]))
        elif len(child.lpar) > 1:
            raise CannotLayOut("nested parentheses")
    return wrapped, visible


def _classify(value: str, stack: tuple[cst.CSTNode, ...]) -> tuple[str, str]:
    """The kind and role of a token, read from the node that generates it and its parent."""
    top, parent = stack[-1], stack[-2] if len(stack) > 1 else None
    bracket = _BRACKETS.get(type(top))
    if bracket is not None:
        role = "subscript" if isinstance(parent, cst.Subscript) else "atom"
        return bracket, role
    if isinstance(top, cst.Call) and value in "()":
        return value, "call"
    if isinstance(top, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return "string", ""
    if isinstance(top, (cst.Integer, cst.Float, cst.Imaginary)):
        return "number", ""
    if isinstance(top, cst.Comma):
        return ",", "argument" if isinstance(parent, cst.Arg) else ""
    if isinstance(top, cst.Dot):
        return ".", ""
    if value == "=" and isinstance(top, (cst.AssignEqual, cst.AssignTarget, cst.AnnAssign)):
        return "=", ""
    if value == ":":
        return ":", ""
    if isinstance(top, (cst.Arg, cst.StarredElement, cst.StarredDictElement, cst.Param, cst.ParamStar)) and value in ("*", "**"):
        return "op", "vararg"
    if isinstance(top, cst.BaseBinaryOp):
        return "op", "math"
    if isinstance(top, cst.BaseBooleanOp):
        return "name", "logic"
    if isinstance(top, (*_COMPARATORS, cst.In, cst.Is, *_TWO_WORDS)):
        return ("op" if value[0] in "<>=!" else "name"), "comparator"
    if isinstance(top, cst.BaseUnaryOp):
        return ("name" if value == "not" else "op"), "unary"
    if isinstance(top, cst.IfExp) and value in ("if", "else"):
        return "name", "ternary"
    if isinstance(top, cst.CompFor) and value in ("for", "async") or isinstance(top, cst.CompIf) and value == "if":
        return "name", "comprehension"
    if isinstance(top, (cst.BaseAugOp, cst.NamedExpr)):
        return "op", ""
    if value.isidentifier() or value == "...":
        return "name", ""
    raise CannotLayOut(f"a token {value!r} in {type(top).__name__}")


def _mark_two_word_operators(leaves: list[Leaf]) -> None:
    """`not in` and `is not` are one delimiter, before their first word; `async for`
    is one, before `async`."""
    for previous, leaf in itertools.pairwise(leaves):
        if previous.role == "comparator" and previous.value in ("not", "is") and leaf.role == "comparator":
            leaf.role = ""
        if previous.value == "async" and previous.role == leaf.role == "comprehension":
            leaf.role = ""
