"""A changed call laid out as `ruff format` and black lay it out, so that a formatted file
stays formatted when a transform makes a call longer or shorter.

The formatters put a statement on one line when it fits. When it does not, and the call
is where they split it (the statement's value, followed at most by simple trailers such as
``[0]``), its arguments go on one indented line of their own (the "hug"), or, when they do
not fit there either, one per line with a trailing comma, which keeps them so from then on
(the "magic trailing comma"). `fit_call` applies that to one call. Layouts it does not
recognise (comments among the arguments, a user's own line breaks, a call nested in another
one) are left as they are: the formatter then has the last word, as it would anyway.

Widths are counted in characters, with four spaces per level of the formatters' indentation.
"""

from __future__ import annotations

import libcst as cst

__all__ = ["FitsCalls", "fit_call"]

_INDENT = "    "


def fit_call(statement: cst.SimpleStatementLine, call: cst.Call, indent: str, line_length: int) -> cst.SimpleStatementLine:
    """`statement` with `call` (a node in it) laid out as the formatters would, where the
    statement's first line is indented by `indent`."""
    layout = _layout(call)
    if layout is None:
        return statement
    flat = statement
    if layout == "hugged":
        flat = statement.deep_replace(call, _joined(call))
        assert isinstance(flat, cst.SimpleStatementLine)
    lines = _lines(flat)
    if len(lines) == 1 and len(indent) + len(lines[0]) <= line_length:
        return flat
    if not _splits_at(statement, call):
        return statement
    hugged = statement.deep_replace(call, _hugged(call))
    assert isinstance(hugged, cst.SimpleStatementLine)
    head, body, *tail = _lines(hugged)
    if len(indent) + len(head) > line_length or any(len(indent) + len(line) > line_length for line in tail):
        return statement
    if len(indent) + len(body) <= line_length:
        return hugged
    exploded = statement.deep_replace(call, _exploded(call))
    assert isinstance(exploded, cst.SimpleStatementLine)
    return exploded


def _layout(call: cst.Call) -> str | None:
    """``"flat"`` (on one line), ``"hugged"`` (the arguments on one line of their own), or
    None for every other layout (no arguments, one per line, comments, the user's own)."""
    args = call.args
    if not args or isinstance(args[-1].comma, cst.Comma):
        return None
    joined = _code(_joined(call))
    if "\n" in joined or "\r" in joined:
        return None
    before, after = call.whitespace_before_args, args[-1].whitespace_after_arg
    if isinstance(before, cst.SimpleWhitespace) and isinstance(after, cst.SimpleWhitespace):
        return "flat"
    if _bare_break(before) and _bare_break(after):
        return "hugged"
    return None


def _bare_break(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    return (
        isinstance(whitespace, cst.ParenthesizedWhitespace)
        and whitespace.first_line.comment is None
        and not whitespace.empty_lines
    )


def _splits_at(statement: cst.SimpleStatementLine, call: cst.Call) -> bool:
    """Whether the formatters split `statement` at `call`'s brackets: the call is the
    statement's value, followed at most by attributes and subscripts without brackets."""
    if len(statement.body) != 1:
        return False
    small = statement.body[0]
    if not isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return, cst.Expr)):
        return False
    value = small.value
    while isinstance(value, (cst.Attribute, cst.Subscript)) and not value.lpar:
        if isinstance(value, cst.Subscript) and any(b in _code(element) for element in value.slice for b in "([{"):
            return False
        value = value.value
    return value is call and not call.lpar


def _joined(call: cst.Call) -> cst.Call:
    last = call.args[-1].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(whitespace_before_args=cst.SimpleWhitespace(""), args=[*call.args[:-1], last])


def _break(extra: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace(extra))


def _hugged(call: cst.Call) -> cst.Call:
    last = call.args[-1].with_changes(whitespace_after_arg=_break(""))
    return call.with_changes(whitespace_before_args=_break(_INDENT), args=[*call.args[:-1], last])


def _exploded(call: cst.Call) -> cst.Call:
    args = [arg.with_changes(comma=cst.Comma(whitespace_after=_break(_INDENT))) for arg in call.args[:-1]]
    last = call.args[-1].with_changes(
        comma=cst.Comma(whitespace_after=_break("")), whitespace_after_arg=cst.SimpleWhitespace("")
    )
    return call.with_changes(whitespace_before_args=_break(_INDENT), args=[*args, last])


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _lines(statement: cst.SimpleStatementLine) -> list[str]:
    """The statement's lines, without its leading lines and line breaks, relative to its
    indentation."""
    return _code(statement.with_changes(leading_lines=())).splitlines()


class FitsCalls(cst.CSTTransformer):
    """A transformer base that lays out the calls it changed (`fit_call`) in the statements
    that hold them: a subclass hands each new call to `changed` as it returns it.

    Only where the statement was laid out as the formatters lay it out before the change: a
    line that was already too long, or a call the formatters would have joined, says the
    file is not formatted, and its layout is the user's."""

    def __init__(self, default_indent: str, line_length: int) -> None:
        super().__init__()
        self._default_indent = default_indent
        self._line_length = line_length
        self._indents: list[str] = []
        self._changed: list[tuple[cst.Call, cst.Call]] = []

    def changed(self, original: cst.Call, call: cst.Call) -> cst.Call:
        """`call`, the new `original`, noted to be laid out with its statement."""
        self._changed.append((original, call))
        return call

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._indents.append(self._default_indent if node.indent is None else node.indent)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        self._indents.pop()
        return updated_node

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        changed, self._changed = self._changed, []
        indent = "".join(self._indents)
        before = _code(original_node)
        for original, _ in changed:
            if _code(fit_call(original_node, original, indent, self._line_length)) != before:
                return updated_node
        for _, call in changed:
            updated_node = fit_call(updated_node, call, indent, self._line_length)
        return updated_node

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.BaseCompoundStatement):
            # A call in a compound statement's header is not laid out (its line is not a
            # simple statement); it must not be taken for one in the block's first line.
            self._changed = []
        return super().on_visit(node)
