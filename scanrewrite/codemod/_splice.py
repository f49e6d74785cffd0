"""Rendering by splicing: the bytes of a transformed module, generated only where it changed.

libcst's code generation of a whole module costs about a quarter of its parse, and the rewrite
needed two (the check that the parsed module reproduces the input, and the render of the
result). A top-level statement's code is whole lines of the input, so once the byte offset
where each starts is known (`statement_bounds`, from the lines Python's parser gives), the
result is the input's bytes for every statement the transform left as it was (the same
object) and generated code only for the statements it replaced or added (`splice`). The
check that libcst reproduces the input then only has to hold where code is generated: the
code of each original statement that was replaced or removed must be its bytes in the input.
"""

from __future__ import annotations

import ast
import codecs
import re
from collections.abc import Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

__all__ = ["statement_bounds", "statement_groups", "statement_start", "splice"]

#: Line breaks as Python's tokenizer has them (a form feed is none).
_BREAK = re.compile(rb"\r\n|\r|\n")


def statement_groups(module: cst.Module, tree: ast.Module) -> list[tuple[cst.CSTNode, list[ast.stmt]]] | None:
    """Each top-level statement of `module` with the statements Python's parser reads there
    (several for a line of ``;``-joined statements); None where they do not pair up."""
    groups = []
    index = 0
    for statement in module.body:
        count = len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        groups.append((statement, tree.body[index : index + count]))
        index += count
    return groups if index == len(tree.body) and all(group for _, group in groups) else None


def statement_start(statement: cst.CSTNode, group: list[ast.stmt]) -> int:
    """The line the code of `statement` (whose statements Python's parser reads as `group`)
    starts on: its first token's, less its leading lines (and its first decorator's)."""
    decorators = getattr(statement, "decorators", ())
    first = min([node.lineno for node in group] + [node.lineno for node in getattr(group[0], "decorator_list", ())])
    above = len(getattr(statement, "leading_lines", ())) + (len(decorators[0].leading_lines) if decorators else 0)
    return first - above


def statement_bounds(module: cst.Module, text: bytes, tree: ast.Module | None) -> list[int] | None:
    """The byte offset in `text` (the bytes `module` was parsed from, `tree` as Python's parser
    reads them) where the code of each of `module`'s top-level statements starts, then where
    its footer starts; None where that is not known for sure (no tree, no statement, or a
    header or footer whose code is not the bytes found for it)."""
    if tree is None or not module.body:
        return None
    groups = statement_groups(module, tree)
    if groups is None:
        return None
    bom = _bom_length(text, module.encoding)
    starts = [bom, *(match.end() for match in _BREAK.finditer(text))]  # of lines 1, 2, ...
    lines = len(starts) - (starts[-1] == len(text))
    firsts = [statement_start(statement, group) for statement, group in groups] + [lines - len(module.footer) + 1]
    if firsts[0] < 1 or any(a >= b for a, b in zip(firsts, firsts[1:])) or firsts[-1] > len(starts) + 1:
        return None
    bounds = [starts[line - 1] if line <= len(starts) else len(text) for line in firsts]
    encode = encoder(module.encoding)
    if encode(_code(module, module.header)) != text[bom : bounds[0]]:
        return None
    if encode(_code(module, module.footer, last=True)) != text[bounds[-1] :]:
        return None
    return bounds


def encoder(encoding: str):
    """A function that encodes a piece of code in `encoding`, without the BOM (which only the
    start of the file carries)."""
    name = "utf-8" if _is_utf8_sig(encoding) else encoding
    return lambda code: code.encode(name)


def _bom_length(text: bytes, encoding: str) -> int:
    """The length of the BOM `text` starts with, which is no part of the module's code."""
    return len(codecs.BOM_UTF8) if text.startswith(codecs.BOM_UTF8) and _is_utf8_sig(encoding) else 0


def _is_utf8_sig(encoding: str) -> bool:
    return codecs.lookup(encoding).name == "utf-8-sig"


def _code(module: cst.Module, nodes: Sequence[cst.CSTNode], last: bool = False) -> str:
    """The code of `nodes` in `module` (as the end of the file, without the newline the file
    lacks, where `last`)."""
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    for node in nodes:
        node._codegen(state)
    if last and not module.has_trailing_newline:
        state.pop_trailing_newline()
    return "".join(state.tokens)


def splice(original: cst.Module, module: cst.Module, text: bytes, bounds: list[int]) -> bytes | None:
    """The bytes of `module`, a transformed `original` (parsed from `text`, whose statements
    start at `bounds`): `text`'s bytes for each statement it kept (the same object), code
    generated for the rest. None where that may not be what rendering all of `module` gives:
    the code of an original statement it replaced or removed is not that statement's bytes,
    or it keeps statements out of their order."""
    encode = encoder(module.encoding)
    body = original.body
    index = {id(statement): position for position, statement in enumerate(body)}
    kept: list[int | None] = [index.get(id(statement)) for statement in module.body]
    found = [position for position in kept if position is not None]
    if any(a >= b for a, b in zip(found, found[1:])):
        return None
    if bool(module.footer) != bool(original.footer) or module.has_trailing_newline != original.has_trailing_newline:
        return None
    if not module.body or module.encoding != original.encoding:
        return None
    last = len(body) - 1
    for position in sorted(set(range(len(body))) - set(found)):
        code = _code(original, [body[position]], last=position == last and not original.footer)
        if encode(code) != text[bounds[position] : bounds[position + 1]]:
            return None
    if module.header == original.header:
        pieces = [text[: bounds[0]]]
    else:  # (`statement_bounds` found the original's code in its place)
        pieces = [text[: _bom_length(text, module.encoding)], encode(_code(module, module.header))]
    new: list[cst.CSTNode] = []  # statements to generate code for, in a row
    for statement, position in zip(module.body, kept):
        if position is None:
            new.append(statement)
            continue
        if new:
            pieces.append(encode(_code(module, new)))
            new = []
        pieces.append(text[bounds[position] : bounds[position + 1]])
    end = not module.footer and not module.has_trailing_newline  # the file's last statement lacks its newline
    if new:
        pieces.append(encode(_code(module, new, last=end)))
    elif end and kept[-1] != last:
        # A statement that was not the last one ends the file now: without its newline.
        pieces[-1] = encode(_code(module, [module.body[-1]], last=True))
    if module.footer == original.footer:
        pieces.append(text[bounds[-1] :])
    else:  # (as the header: a transform that visits the module makes its lines anew)
        pieces.append(encode(_code(module, module.footer, last=True)))
    return b"".join(pieces)
