"""The notebook's JSON text, kept byte for byte: where each cell's `source` lies, and
writing new sources into exactly those places.

A notebook is parsed by `json` for its values, and scanned here once more for the
positions of the parts the rewrite may change: the `cell_type` and `source` of every
cell. Writing back replaces only the `source` values of the cells that change, in the
file's own style (indentation, separators, escaping of non-ASCII text), so outputs,
metadata, key order and everything else come back as they were.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_BOM = "\ufeff"
_SPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
# A \u escape of a character past ASCII: the writer escaped non-ASCII text (ensure_ascii).
_ESCAPED_NON_ASCII = re.compile(r"(?<!\\)(?:\\\\)*\\u(?!00[0-7])[0-9a-fA-F]{4}")
_scanstring = json.decoder.scanstring


class JSONLayoutError(ValueError):
    """JSON the scanner cannot follow; `json` accepted it, so this is a bug to report."""


@dataclass(frozen=True)
class _Node:
    """A JSON value and where it lies in the text (`end` is exclusive)."""

    start: int
    end: int
    #: A decoded str for strings; a list of nodes for arrays; a list of (key, node, where
    #: the key starts) for objects; None for numbers, true, false and null.
    value: object


def _value(text: str, pos: int) -> _Node:
    pos = _SPACE.match(text, pos).end()
    char = text[pos : pos + 1]
    if char == '"':
        string, end = _scanstring(text, pos + 1)
        return _Node(pos, end, string)
    if char == "[":
        items: list[_Node] = []
        at = _SPACE.match(text, pos + 1).end()
        if text[at : at + 1] == "]":
            return _Node(pos, at + 1, items)
        while True:
            item = _value(text, at)
            items.append(item)
            at = _SPACE.match(text, item.end).end()
            if text[at : at + 1] == "]":
                return _Node(pos, at + 1, items)
            if text[at : at + 1] != ",":
                raise JSONLayoutError(f"expected ',' or ']' at {at}")
            at += 1
    if char == "{":
        members: list[tuple[str, _Node, int]] = []
        at = _SPACE.match(text, pos + 1).end()
        if text[at : at + 1] == "}":
            return _Node(pos, at + 1, members)
        while True:
            key = _value(text, at)
            at = _SPACE.match(text, key.end).end()
            if text[at : at + 1] != ":" or not isinstance(key.value, str):
                raise JSONLayoutError(f"expected a key and ':' at {at}")
            member = _value(text, at + 1)
            members.append((key.value, member, key.start))
            at = _SPACE.match(text, member.end).end()
            if text[at : at + 1] == "}":
                return _Node(pos, at + 1, members)
            if text[at : at + 1] != ",":
                raise JSONLayoutError(f"expected ',' or '}}' at {at}")
            at += 1
    match = _SCALAR.match(text, pos)
    if match is None:
        raise JSONLayoutError(f"unexpected character at {pos}")
    return _Node(pos, match.end(), None)


def _member(node: _Node, key: str) -> _Node | None:
    found = None
    for name, member, _ in node.value if isinstance(node.value, list) else ():
        if name == key:
            found = member  # as json: the last of repeated keys wins
    return found


@dataclass(frozen=True)
class Cell:
    """One cell of the notebook, as the rewrite sees it."""

    #: 0-based position among all cells.
    index: int
    #: "code", "markdown" or "raw".
    cell_type: str
    #: The cell's source text, lines joined.
    source: str
    #: Where the `source` value lies: a string or an array of strings.
    node: _Node | None


@dataclass(frozen=True)
class NotebookText:
    """A notebook's text, its cells, and how its writer spelled JSON."""

    text: str
    #: A UTF-8 byte-order mark the file starts with ("" if none).
    bom: str
    cells: tuple[Cell, ...]
    #: Whether non-ASCII text is written as \\u escapes (Python's `ensure_ascii`).
    ensure_ascii: bool
    #: What follows a comma between values on one line, when the writer did not indent ("" or " ").
    inline_space: str

    @classmethod
    def parse(cls, text: str) -> NotebookText:
        """Locate the cells of `text`, a notebook that `json.loads` accepts."""
        bom = _BOM if text.startswith(_BOM) else ""
        body = text[len(bom) :]
        root = _value(body, 0)
        cells_node = _member(root, "cells")
        cells = []
        for index, node in enumerate(cells_node.value if cells_node and isinstance(cells_node.value, list) else ()):
            kind = _member(node, "cell_type")
            source = _member(node, "source")
            if source is not None and isinstance(source.value, list):
                joined = "".join(item.value for item in source.value if isinstance(item.value, str))
            else:
                joined = source.value if source is not None and isinstance(source.value, str) else ""
            cells.append(Cell(index, kind.value if kind and isinstance(kind.value, str) else "", joined, source))
        non_ascii = not body.isascii()
        members = root.value if isinstance(root.value, list) else []
        # Between the first two members of the notebook: ",\n " when indented, else "," or ", ".
        gap = body[members[0][1].end : members[1][2]] if len(members) > 1 else ", "
        return cls(
            body,
            bom,
            tuple(cells),
            ensure_ascii=not non_ascii and _ESCAPED_NON_ASCII.search(body) is not None,
            inline_space=" " if "\n" in gap else gap[gap.find(",") + 1 :],
        )

    def _string(self, value: str) -> str:
        return json.dumps(value, ensure_ascii=self.ensure_ascii)

    def with_sources(self, sources: dict[int, str]) -> str:
        """The text with the `source` of each cell index in `sources` replaced, and nothing else."""
        pieces = []
        at = 0
        for index in sorted(sources):
            node = self.cells[index].node
            if node is None:
                raise JSONLayoutError(f"cell {index} has no source")
            pieces.append(self.text[at : node.start])
            pieces.append(self._source(node, sources[index]))
            at = node.end
        pieces.append(self.text[at:])
        return self.bom + "".join(pieces)

    def _source(self, node: _Node, new: str) -> str:
        if isinstance(node.value, str):
            return self._string(new)
        items: list[_Node] = node.value  # type: ignore[assignment]
        # Lines that did not change keep their own spelling (escapes included).
        spelled = {}
        for item in items:
            spelled.setdefault(item.value, self.text[item.start : item.end])
        lines = _split(new, [item.value for item in items])
        strings = [spelled.get(line) or self._string(line) for line in lines]
        if not items:
            return "[" + ("," + self.inline_space).join(strings) + "]"
        before = self.text[node.start + 1 : items[0].start]
        after = self.text[items[-1].end : node.end - 1]
        if len(items) > 1:
            separator = self.text[items[0].end : items[1].start]
        elif "\n" in before:
            separator = "," + before
        else:
            separator = "," + self.inline_space
        return "[" + before + separator.join(strings) + after + "]"


def _split(text: str, like: list[str]) -> list[str]:
    """`text` split into the lines a source array holds, as the writer of `like` split.

    Jupyter splits after each `\\n`, as `like` usually shows; a writer that split
    otherwise gets Python's `splitlines`, as nbformat does.
    """
    after_newline = all(line.endswith("\n") for line in like[:-1]) and all("\n" not in line[:-1] for line in like)
    if after_newline:
        lines = re.findall(r"[^\n]*\n|[^\n]+$", text)
    else:
        lines = text.splitlines(keepends=True)
    return lines
