"""Argument editing: what a call's arguments bind, and adding or changing keyword arguments
in the call's own layout (line breaks, trailing comma, comments stay as they were)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import libcst as cst

from scanrewrite.targets import RUNTIME_POLICIES, Target

__all__ = ["ArgShape", "append_args", "checkpoint_value", "keyword_arg", "remove_args"]


@dataclass(frozen=True)
class ArgShape:
    """What a call's arguments say about which parameters they bind."""

    target: Target
    positional: int  # plain positional arguments before the first `*args`
    star: bool
    double_star: bool
    keywords: frozenset[str]

    @classmethod
    def of(cls, args: tuple[cst.Arg, ...] | list[cst.Arg], target: Target) -> ArgShape:
        positional = 0
        star = double_star = False
        keywords = set()
        for arg in args:
            if arg.star == "*":
                star = True
            elif arg.star == "**":
                double_star = True
            elif arg.keyword is not None:
                keywords.add(arg.keyword.value)
            elif not star:
                positional += 1
        return cls(target, positional, star, double_star, frozenset(keywords))

    def passes(self, name: str) -> bool:
        """Whether the call certainly passes parameter `name`."""
        if name in self.keywords:
            return True
        params = self.target.params
        return name in params and params.index(name) < self.positional

    def star_may_reach(self, name: str) -> bool:
        """Whether a `*args` could fill parameter `name` positionally."""
        return self.star and name in self.target.params


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def checkpoint_value(mode: str, module: str | None) -> cst.BaseExpression | None:
    """The value a checkpoint mode is written as: ``False`` for ``"none"``, a runtime policy as
    an attribute of `module` (how the call names the runtime), another policy as
    ``jax.checkpoint_policies.NAME``; None for ``"checkpoint"``, the default (no argument)."""
    if mode == "checkpoint":
        return None
    if mode == "none":
        return cst.Name("False")
    return cst.parse_expression(f"{module}.{mode}" if mode in RUNTIME_POLICIES else f"jax.checkpoint_policies.{mode}")


def levels_value(levels: int | str) -> cst.BaseExpression:
    """The value a `levels` setting is written as: ``"auto"`` or an integer."""
    return cst.SimpleString('"auto"') if levels == "auto" else cst.Integer(str(levels))


def append_args(call: cst.Call, new: list[cst.Arg]) -> tuple[cst.Arg, ...]:
    """`call`'s arguments with `new` appended in the call's own layout.

    One argument per line (the space after the previous comma is a line break): each
    new argument goes on its own line at the same indentation. Otherwise they follow
    the last argument on its line. A trailing comma stays trailing; comments stay on
    the lines they were on.
    """
    args = tuple(call.args)
    if not new:
        return args
    if not args:
        return tuple(_with_comma(arg, cst.SimpleWhitespace(" ")) for arg in new[:-1]) + (new[-1],)
    last = args[-1]
    if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
        separator = args[-2].comma.whitespace_after
    elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        separator = call.whitespace_before_args
    else:
        separator = cst.SimpleWhitespace(" ")
    trailing_comma = last.comma if isinstance(last.comma, cst.Comma) else None
    tail = trailing_comma.whitespace_after if trailing_comma is not None else last.whitespace_after_arg
    comma_before = (
        trailing_comma.whitespace_before if trailing_comma is not None else cst.SimpleWhitespace("")
    )

    if isinstance(separator, cst.ParenthesizedWhitespace):
        between = _line_break(separator)
        if isinstance(tail, cst.ParenthesizedWhitespace):
            # Whatever followed the last argument on its line (a comment, blank lines)
            # stays after it; the closing bracket keeps its own indentation.
            after_last = tail.with_changes(indent=separator.indent, last_line=separator.last_line)
            closing: cst.BaseParenthesizableWhitespace = _line_break(tail)
        else:
            after_last, closing = between, tail
    else:
        between = after_last = separator
        closing = tail

    result = list(args[:-1])
    result.append(
        last.with_changes(
            comma=cst.Comma(whitespace_before=comma_before, whitespace_after=after_last),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
    )
    result.extend(_with_comma(arg, between) for arg in new[:-1])
    if trailing_comma is not None:
        result.append(
            new[-1].with_changes(
                comma=cst.Comma(whitespace_after=closing),
                whitespace_after_arg=last.whitespace_after_arg,
            )
        )
    else:
        result.append(new[-1].with_changes(whitespace_after_arg=closing))
    return tuple(result)


def _line_break(like: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
    """A bare line break to the indentation of `like` (without its comment or blank lines)."""
    return cst.ParenthesizedWhitespace(indent=like.indent, last_line=like.last_line)


def _with_comma(arg: cst.Arg, whitespace_after: cst.BaseParenthesizableWhitespace) -> cst.Arg:
    return arg.with_changes(comma=cst.Comma(whitespace_after=whitespace_after))


def remove_args(call: cst.Call, names: Collection[str]) -> tuple[cst.Arg, ...]:
    """`call`'s arguments without its keyword arguments named in `names`, in the call's own
    layout: the inverse of `append_args` (removing what it appended gives back the call it
    was given, byte for byte).

    A removed argument takes its comma and the whitespace after it along; when the last one
    goes, the one before it takes over the call's closing layout (its trailing comma, or the
    line break before the bracket), and keeps the comment that followed it.
    """
    args = list(call.args)
    for index in reversed(range(len(args))):
        arg = args[index]
        if arg.keyword is None or arg.keyword.value not in names:
            continue
        if index < len(args) - 1 or index == 0:
            del args[index]
            continue
        previous = args[index - 1]
        assert isinstance(previous.comma, cst.Comma)
        if isinstance(arg.comma, cst.Comma):
            comma = previous.comma.with_changes(
                whitespace_after=_closing(previous.comma.whitespace_after, arg.comma.whitespace_after)
            )
            args[index - 1] = previous.with_changes(comma=comma, whitespace_after_arg=arg.whitespace_after_arg)
        else:
            closing = _closing(previous.comma.whitespace_after, arg.whitespace_after_arg)
            args[index - 1] = previous.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=closing)
        del args[index]
    return tuple(args)


def _closing(
    after: cst.BaseParenthesizableWhitespace, closing: cst.BaseParenthesizableWhitespace
) -> cst.BaseParenthesizableWhitespace:
    """What follows a new last argument, `after` whatever followed it: the closing layout,
    keeping a comment (or blank lines) that followed the new last one on its own line. The
    comment after an argument removed from a line of its own goes with it; one after an
    argument on the new last one's line stays on that line."""
    if isinstance(after, cst.ParenthesizedWhitespace) and isinstance(closing, cst.ParenthesizedWhitespace):
        closing = closing.with_changes(first_line=cst.TrailingWhitespace(newline=closing.first_line.newline))
    if isinstance(after, cst.ParenthesizedWhitespace) and (after.first_line.comment is not None or after.empty_lines):
        if isinstance(closing, cst.ParenthesizedWhitespace):
            return after.with_changes(indent=closing.indent, last_line=closing.last_line)
        return after
    return closing
