"""A statement read into the tokens black (and ruff format) lay out: `statement_leaves`.

Through libcst's own code generation, so that every token knows the nodes it belongs
to (black reads a token's role from its parent node), with black's optional (invisible)
parentheses around the right-hand side of an assignment and a `return` value. What the
port does not cover (a comment inside the statement or a pragma comment at its end,
multi-line strings, backslashes, statements other than an assignment, `return` or
expression) raises `CannotLayOut`.
"""

from __future__ import annotations

import itertools
import re

import libcst as cst
from libcst._nodes.internal import CodegenState

from scanrewrite.layout._lines import CannotLayOut, Leaf

__all__ = ["parenthesized_tuple", "spaced", "statement_leaves"]

#: Comments ruff leaves out of a line's width and black does not (or the reverse).
_PRAGMA = re.compile(r"#\s*(?:[nN][oO][qQ][aA]|nosec|(?:isort|type|pyright|pylint|flake8|ruff)\s*:)")
_WHITESPACE = (cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline, cst.EmptyLine)
_COMPARATORS = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
_TWO_WORDS = (cst.NotIn, cst.IsNot)
_BRACKETS = {
    cst.LeftParen: "(", cst.RightParen: ")", cst.LeftSquareBracket: "[",
    cst.RightSquareBracket: "]", cst.LeftCurlyBrace: "{", cst.RightCurlyBrace: "}",
}  # fmt: skip


class _Tokens(CodegenState):
    """Code generation that keeps each token with the nodes it is generated inside, the
    outermost f-string among them, and those of them that are in `wrapped` or are
    conditional expressions (what may take black's invisible parentheses)."""

    def __init__(self, module: cst.Module, indent: str, wrapped: set[cst.CSTNode]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.indent_tokens = [indent]
        self.stack: list[cst.CSTNode] = []
        self._wrapped = wrapped
        # Kept beside the stack, as a token is added for each few nodes generated: looking
        # them up in the stack for each token costs as much as generating the code.
        self._strings: list[cst.CSTNode] = []
        self._candidates: list[cst.CSTNode] = []
        self.events: list[tuple[str, tuple[cst.CSTNode, ...], cst.CSTNode | None, tuple[cst.CSTNode, ...]]] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.stack.append(node)
        if type(node) is cst.FormattedString:
            self._strings.append(node)
        if type(node) is cst.IfExp or node in self._wrapped:
            self._candidates.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.stack.pop()
        if self._strings and self._strings[-1] is node:
            self._strings.pop()
        if self._candidates and self._candidates[-1] is node:
            self._candidates.pop()

    def add_token(self, value: str) -> None:
        super().add_token(value)
        outer = self._strings[0] if self._strings else None
        self.events.append((value, tuple(self.stack), outer, tuple(self._candidates)))


def statement_leaves(
    statement: cst.SimpleStatementLine, indent: str, module: cst.Module, bare_tuple: bool = False
) -> tuple[list[Leaf], str]:
    """The formatter's tokens of `statement` and its text as it stands (indented, with
    `\\n` line breaks and none at the end); with `bare_tuple`, the parentheses of a
    `parenthesized_tuple` as the formatters' invisible ones. Raises `CannotLayOut`."""
    comment = statement.trailing_whitespace.comment
    if len(statement.body) != 1 or comment is not None and _PRAGMA.match(comment.value):
        raise CannotLayOut("several statements on a line, or a comment that ruff and black measure apart")
    small = statement.body[0]
    if not isinstance(small.semicolon, cst.MaybeSentinel):
        raise CannotLayOut("a semicolon")
    wrapped, visible = _optional_parentheses(small, bare_tuple)
    state = _Tokens(module, indent, wrapped)
    statement.with_changes(leading_lines=())._codegen(state)
    text = re.sub(r"\r\n?", "\n", "".join(state.tokens)).rstrip("\n")
    leaves: list[Leaf] = []
    owners: list[tuple[cst.CSTNode, ...]] = []
    whitespace, broken = "", False
    string: tuple[cst.CSTNode, Leaf] | None = None
    for value, stack, outer, candidates in state.events:
        top = stack[-1]
        if len(stack) > 1 and stack[1] is statement.trailing_whitespace:
            continue
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
        owners.append(tuple(node for node in candidates if node in wrapped or _wraps_itself(node, stack)))
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


def spaced(leaves: list[Leaf]) -> bool:
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


def parenthesized_tuple(statement: cst.SimpleStatementLine) -> bool:
    """Whether the value of a `return` or an assignment is a non-empty tuple in one pair
    of parentheses (which black keeps, as it keeps any it finds around a tuple)."""
    value = getattr(statement.body[0], "value", None) if len(statement.body) == 1 else None
    return isinstance(value, cst.Tuple) and len(value.lpar) == 1 and bool(value.elements)


def _optional_parentheses(
    small: cst.BaseSmallStatement, bare_tuple: bool = False
) -> tuple[set[cst.CSTNode], set[cst.CSTNode]]:
    """The children black wraps in invisible parentheses, and the parentheses already
    written around such a child that black treats as those invisible ones (around a
    tuple, only with `bare_tuple`)."""
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
        elif len(child.lpar) == 1 and (
            not isinstance(child, (cst.Tuple, cst.GeneratorExp, cst.Yield)) or bare_tuple and child is small.value
        ):
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
