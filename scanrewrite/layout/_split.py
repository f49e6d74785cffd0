"""How black (and ruff format, which follows it) splits one logical line that is too long.

A port of the parts of black's `linegen` (black 26.10.1) that lay out a statement with
no comments, no multi-line strings and no preview features: the right-hand split at
the last bracket pair (with its optional parentheses and the trailers it may glue on),
the split at the delimiters of highest priority, and the second opinion that keeps
the optional parentheses. Names follow black's (`right_hand_split`, `delimiter_split`,
`can_omit_invisible_parens`, ...), so that a difference can be looked up there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from scanrewrite.layout._lines import (
    CLOSING,
    COMMA_PRIORITY,
    DOT_PRIORITY,
    OPENING,
    CannotLayOut,
    Leaf,
    Line,
    one_sequence_between,
    width,
)

__all__ = ["lay_out"]


class _CannotSplit(Exception):
    pass


def _short_enough(line: Line, line_length: int) -> bool:
    return width(str(line)) <= line_length


def lay_out(leaves: list[Leaf], depth: int, line_length: int) -> list[str]:
    """The lines (with their indentation, without line breaks) black prints for the
    statement made of `leaves` at indentation level `depth`. Raises `CannotLayOut`."""
    line = Line(depth)
    for leaf in leaves:
        line.append(leaf)
    return [str(result) for result in _transform(line, line_length, force_parens=False)]


def _transform(line: Line, line_length: int, force_parens: bool) -> list[Line]:
    """black's `transform_line`."""
    line_str = str(line)
    if not line.should_split_rhs and not line.magic_trailing_comma and width(line_str) <= line_length:
        return [line]
    transformers = [_delimiter_split, _rhs] if line.inside_brackets else [_rhs]
    for transform in transformers:
        try:
            return _run(line, transform, line_length, line_str, force_parens)
        except _CannotSplit:
            continue
    return [line]


def _run(line: Line, transform, line_length: int, line_str: str, force_parens: bool) -> list[Line]:
    """black's `run_transformer`, with its second opinion that keeps optional parentheses."""
    optional = [bracket for bracket in line.tracker.invisible if bracket.depth == 0]
    result: list[Line] = []
    for transformed in transform(line, line_length, force_parens):
        if str(transformed) == line_str:
            raise _CannotSplit("unchanged")
        result.extend(_transform(transformed, line_length, force_parens))
    if (
        force_parens
        or transform is not _rhs
        or not line.tracker.invisible
        or any(bracket.value for bracket in optional)
        or _short_enough(result[0], line_length)
    ):
        return result
    copy = Line(line.depth, line.inside_brackets, should_split_rhs=line.should_split_rhs)
    for leaf in line.leaves:
        copy.append(leaf.copy())
    second = _run(copy, transform, line_length, line_str, True)
    return second if all(_short_enough(other, line_length) for other in second) else result


def _delimiter_split(line: Line, line_length: int, force_parens: bool) -> Iterator[Line]:
    """black's `delimiter_split`: one line per delimiter of the highest priority."""
    last = line.leaves[-1]
    tracker = line.tracker
    try:
        priority = tracker.max_priority(exclude={id(last)})
    except ValueError:
        raise _CannotSplit("no delimiters") from None
    if priority == DOT_PRIORITY and tracker.count(priority) == 1:
        raise _CannotSplit("a single attribute")
    if priority == COMMA_PRIORITY and any(leaf.role == "vararg" and leaf.depth == 0 for leaf in line.leaves):
        # Whether black adds a trailing comma after `*args` depends on the Python
        # versions it infers for the whole file.
        raise CannotLayOut("a split after *args or **kwargs")
    current = Line(line.depth, line.inside_brackets)
    for leaf in line.leaves:
        current.append(leaf, preformatted=True)
        if tracker.delimiters.get(id(leaf)) == priority:
            yield _first_prefix_cleared(current)
            current = Line(line.depth, line.inside_brackets)
    if current.leaves:
        if priority == COMMA_PRIORITY and current.leaves[-1].kind != ",":
            current.append(Leaf(",", ","))
        yield _first_prefix_cleared(current)


def _first_prefix_cleared(line: Line) -> Line:
    line.leaves[0].prefix = ""
    return line


@dataclass
class _RHS:
    head: Line
    body: Line
    tail: Line
    opening: Leaf
    closing: Leaf


def _rhs(line: Line, line_length: int, force_parens: bool) -> Iterator[Line]:
    """black's `right_hand_split_with_omits`: split at the last bracket pair, or at an
    earlier one when the trailers after it fit on the closing line."""
    prefix_lengths: dict[int, int] = {}
    length = 4 * line.depth
    for leaf in line.leaves:
        prefix_lengths[id(leaf)] = length
        length += len(leaf.prefix) + len(leaf.value)
    first_lines: list[Line] | None = None
    for omit in _trailers_to_omit(line, line_length):
        if omit:
            target = next((leaf.opening for leaf in reversed(line.leaves) if leaf.kind in CLOSING and id(leaf) not in omit), None)
            if target is not None and target.value and prefix_lengths.get(id(target), 0) > line_length:
                continue
        lines = list(_right_hand_split(line, line_length, force_parens, omit))
        if first_lines is None and not omit:
            first_lines = lines
        if _short_enough(lines[0], line_length):
            yield from lines
            return
    yield from first_lines if first_lines is not None else _right_hand_split(line, line_length, force_parens, set())


def _right_hand_split(line: Line, line_length: int, force_parens: bool, omit: set[int]) -> Iterator[Line]:
    rhs = _first_right_hand_split(line, omit)
    yield from _maybe_split_omitting_optional_parens(rhs, line, line_length, force_parens, omit)


def _first_right_hand_split(line: Line, omit: set[int]) -> _RHS:
    tail: list[Leaf] = []
    body: list[Leaf] = []
    head: list[Leaf] = []
    current = tail
    opening = closing = None
    for leaf in reversed(line.leaves):
        if current is body and leaf is opening:
            current = head if body else tail
        current.append(leaf)
        if current is tail and leaf.kind in CLOSING and id(leaf) not in omit:
            opening, closing = leaf.opening, leaf
            current = body
    if not (opening and closing and head):
        raise _CannotSplit("no brackets")
    tail.reverse()
    body.reverse()
    head.reverse()
    result = _RHS(
        _build_line(head, line, opening, "head"),
        _build_line(body, line, opening, "body"),
        _build_line(tail, line, opening, "tail"),
        opening,
        closing,
    )
    tail_length = len(str(result.tail).strip())
    if not result.body.leaves and (tail_length == 0 or tail_length < 3):
        raise _CannotSplit("not worth it")
    return result


def _build_line(leaves: list[Leaf], original: Line, opening: Leaf, component: str) -> Line:
    """black's `bracket_split_build_line`."""
    result = Line(original.depth)
    if component == "body":
        result.inside_brackets = True
        result.depth += 1
    tracked = _inside_matching_brackets(leaves) if component == "head" else set()
    for leaf in leaves:
        result.append(leaf, preformatted=True, track=id(leaf) in tracked)
    if component == "body" and _should_split_line(result, opening):
        result.should_split_rhs = True
    return result


def _inside_matching_brackets(leaves: list[Leaf]) -> set[int]:
    ids: set[int] = set()
    stack: list[tuple[str, list[int]]] = []
    started = False
    for leaf in leaves:
        if leaf.kind in OPENING:
            started = True
            stack.append((OPENING[leaf.kind], [id(leaf)]))
        elif not started:
            continue
        elif leaf.kind in CLOSING:
            if not (stack and leaf.kind == stack[-1][0]):
                break
            _, level = stack.pop()
            level.append(id(leaf))
            ids.update(level)
        elif stack:
            stack[-1][1].append(id(leaf))
    return ids


def _should_split_line(line: Line, opening: Leaf) -> bool:
    """Whether a body must be exploded one item per line (a collection, or a magic comma)."""
    exclude = set()
    trailing_comma = False
    if line.leaves and line.leaves[-1].kind == ",":
        trailing_comma = True
        exclude.add(id(line.leaves[-1]))
    try:
        priority = line.tracker.max_priority(exclude)
    except ValueError:
        return False
    return priority == COMMA_PRIORITY and (trailing_comma or opening.role == "atom")


def _maybe_split_omitting_optional_parens(
    rhs: _RHS, line: Line, line_length: int, force_parens: bool, omit: set[int]
) -> Iterator[Line]:
    if (
        not force_parens
        and rhs.opening.kind == "("
        and not rhs.opening.value
        and rhs.closing.kind == ")"
        and not rhs.closing.value
        and _can_omit_invisible_parens(rhs, line_length)
    ):
        omit = {id(rhs.closing), *omit}
        try:
            rhs_oop = _first_right_hand_split(line, omit)
            if _prefer_split_rhs_oop(rhs_oop, rhs, line_length):
                yield from _maybe_split_omitting_optional_parens(rhs_oop, line, line_length, force_parens, omit)
                return
        except _CannotSplit as error:
            if line.is_chained_assignment:
                pass
            elif not _can_be_split(rhs.body) and not _short_enough(rhs.body, line_length):
                raise _CannotSplit("still too long") from error
    rhs.opening.value = rhs.opening.value or "("
    rhs.closing.value = rhs.closing.value or ")"
    for result in (rhs.head, rhs.body, rhs.tail):
        if result.leaves:
            yield result


def _prefer_split_rhs_oop(rhs_oop: _RHS, rhs: _RHS, line_length: int) -> bool:
    """black's `_prefer_split_rhs_oop_over_rhs`."""
    if not (len(rhs.head.leaves) >= 2 and rhs.head.leaves[-2].kind == "="):
        return True
    if not any(leaf.kind in OPENING or leaf.kind in CLOSING for leaf in rhs.head.leaves[:-1]):
        return True
    if not _short_enough(rhs.head, line_length - 1):
        return True
    if rhs.head.magic_trailing_comma is not None:
        return True
    head_equals = sum(1 for leaf in rhs.head.leaves if leaf.kind == "=")
    oop_equals = sum(1 for leaf in rhs_oop.head.leaves if leaf.kind == "=")
    if head_equals > 1 and head_equals > oop_equals:
        return False
    for leaf in reversed(rhs_oop.head.leaves):
        if leaf.kind == "=":
            break
        if leaf.kind in CLOSING:
            return True
    return any(leaf.kind == "=" for leaf in rhs_oop.head.leaves) and _short_enough(rhs_oop.head, line_length)


def _can_omit_invisible_parens(rhs: _RHS, line_length: int) -> bool:
    """black's `can_omit_invisible_parens`: whether the body splits well without them."""
    line = rhs.body
    tracker = line.tracker
    if not tracker.delimiters:
        return True
    priority = tracker.max_priority()
    count = tracker.count(priority)
    if count > 1:
        return False
    if priority == DOT_PRIORITY:
        return True
    first, second = line.leaves[0], line.leaves[1]
    if first.kind in OPENING and second.kind not in CLOSING and _can_omit_opening_paren(line, first, line_length):
        return True
    penultimate, last = line.leaves[-2], line.leaves[-1]
    if last.kind in (")", "}") or (last.kind == "]" and last.role != "subscript"):
        if penultimate.kind in OPENING:
            return False
        if _can_omit_closing_paren(line, last, line_length):
            return True
    return False


def _can_omit_opening_paren(line: Line, first: Leaf, line_length: int) -> bool:
    remainder = False
    length = 4 * line.depth
    index = -1
    for index, leaf, leaf_length in line.lengths():
        if leaf.kind in CLOSING and leaf.opening is first:
            remainder = True
        if remainder:
            length += leaf_length
            if length > line_length:
                return False
            if leaf.kind in OPENING:
                remainder = False
    return len(line.leaves) == index + 1


def _can_omit_closing_paren(line: Line, last: Leaf, line_length: int) -> bool:
    length = 4 * line.depth
    seen_other_brackets = False
    for _, leaf, leaf_length in line.lengths():
        length += leaf_length
        if leaf is last.opening:
            if seen_other_brackets or length <= line_length:
                return True
        elif leaf.kind in OPENING:
            seen_other_brackets = True
    return False


def _can_be_split(line: Line) -> bool:
    """black's `can_be_split` (its string-method case cannot occur here)."""
    leaves = line.leaves
    if len(leaves) < 2:
        return False
    if leaves[0].kind == "string" and leaves[1].kind == ".":
        raise CannotLayOut("a method call on a string literal")
    return True


def _trailers_to_omit(line: Line, line_length: int) -> Iterator[set[int]]:
    """black's `generate_trailers_to_omit`: growing sets of closing brackets to glue
    onto the last line instead of splitting at them."""
    omit: set[int] = set()
    if not line.magic_trailing_comma:
        yield set(omit)
    length = 4 * line.depth
    opening = closing = None
    inner: set[int] = set()
    for index, leaf, leaf_length in line.lengths(reverse=True):
        length += leaf_length
        if length > line_length or leaf.comment:
            break
        previous = line.leaves[index - 1] if index > 0 else None
        if opening is not None:
            if leaf is opening:
                opening = None
            elif leaf.kind in CLOSING:
                if _after_trailing_comma(leaf, previous, line):
                    break
                inner.add(id(leaf))
        elif leaf.kind in CLOSING:
            if previous is not None and previous.kind in OPENING:
                inner.add(id(leaf))
                continue
            if closing is not None:
                omit.add(id(closing))
                omit.update(inner)
                inner.clear()
                yield set(omit)
            if _after_trailing_comma(leaf, previous, line):
                break
            if leaf.value:
                opening, closing = leaf.opening, leaf


def _after_trailing_comma(closing: Leaf, previous: Leaf | None, line: Line) -> bool:
    """Whether `closing` follows a trailing comma that is not a one-tuple's."""
    return (
        previous is not None
        and previous.kind == ","
        and closing.opening is not None
        and not one_sequence_between(closing.opening, closing, line.leaves, "(")
    )
