"""IPython syntax in a cell, masked so that the cell parses as Python and restored after.

What IPython accepts and Python does not, at the start of a statement: line magics
(`%timeit f(x)`), shell escapes (`!pip install ...`), their assignments
(`files = !ls`, `t = %time f(x)`), help (`?obj`, `obj?`, `obj??`) and auto-call
(`/f x`, `,f a b`, `;f a b`). Each such line (with its backslash continuations) becomes
one line, at the same indentation, that calls a unique name with the names the line
mentions (`__ipython_<salt>_0__(lax.scan, f, xs)` for `%timeit lax.scan(f, 0, xs)`), so
the cell keeps its lines and blocks and the rewrite still sees what the line uses: it
keeps the imports the line needs, and reports a scan it cannot rewrite there as a
reference. `unmask` puts the original text back byte for byte. A cell magic
(`%%time`) on the first line is masked the same way when its body is Python; any other
cell magic (`%%bash`, `%%writefile`) makes the whole cell something else than Python.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

#: Cell magics whose body IPython runs as Python code in the notebook's own namespace.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})

_CELL_MAGIC = re.compile(r"%%(\w*)")
_PREFIXES = ("%", "!", "?", "/", ",", ";")
# `x = !ls`, `a, b = %sx ls`: an assignment whose value is a shell escape or a magic.
_ASSIGNED = re.compile(r"[\w.\[\]'\"]+(?:\s*,\s*[\w.\[\]'\"]+)*\s*=\s*[!%]")
_LINE = re.compile(r"[^\n]*\n|[^\n]+$")
_INDENT = re.compile(r"[ \t\f]*")
_DOTTED = re.compile(r"(?<![\w.$])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


@dataclass(frozen=True)
class Masked:
    """A cell with its IPython lines replaced by names."""

    #: The cell as Python: the same lines, each IPython line replaced.
    code: str
    #: Each masked line and the line it replaced, both with indentation, without line end.
    lines: tuple[tuple[str, str], ...]


def cell_magic(source: str) -> str | None:
    """The name of the cell magic (`%%name`) that starts `source`, else None."""
    match = _CELL_MAGIC.match(source.lstrip("\r\n"))
    return match.group(1) if match else None


def mask(source: str, prefix: str) -> Masked | None:
    """`source` with every IPython line replaced by a name starting with `prefix` (which must
    not occur in `source`); None if a cell magic makes it something other than Python."""
    magic = cell_magic(source)
    if magic is not None and magic not in PYTHON_CELL_MAGICS:
        return None
    replaced: list[tuple[str, str]] = []
    out = []
    first_statement = True
    lines = _LINE.findall(source)
    state = _Scanner()
    continued = False
    indent = ""
    for line in lines:
        body = line.rstrip("\r\n")
        end = line[len(body) :]
        # A continuation line is masked at the indentation of the line it continues.
        indent = indent if continued else _INDENT.match(body).group()
        stripped = body.lstrip(" \t\f")
        ipython = continued or (
            state.at_statement_start
            and bool(stripped)
            and ((first_statement and magic is not None and stripped.startswith("%%")) or _is_ipython(stripped))
        )
        if ipython:
            line_mask = indent + reference_call(f"{prefix}{len(replaced)}__", [stripped])
            replaced.append((line_mask, body))
            out.append(line_mask + end)
            continued = body.endswith("\\")
        else:
            out.append(line)
            state.feed(line)
        if stripped and not stripped.startswith("#"):
            first_statement = False
    return Masked("".join(out), tuple(replaced))


def unmask(code: str, masked: Masked) -> str:
    """`code` (`masked.code`, perhaps rewritten) with the IPython lines put back.

    Raises `ValueError` if a masked line is not in `code` exactly once.
    """
    for line_mask, text in masked.lines:
        if code.count(line_mask) != 1:
            raise ValueError(f"the masked IPython line {text!r} was lost")
        code = code.replace(line_mask, text)
    return code


def reference_call(name: str, texts: Iterable[str]) -> str:
    """A Python call of `name` with every (dotted) name that `texts` mention, once each."""
    found = []
    for text in texts:
        for match in _DOTTED.finditer(text):
            dotted = match.group()
            if not any(keyword.iskeyword(part) for part in dotted.split(".")) and dotted not in found:
                found.append(dotted)
    return f"{name}({', '.join(found)})"


def _is_ipython(stripped: str) -> bool:
    if stripped.startswith("#"):
        return False
    if stripped.startswith(_PREFIXES):
        return True
    if _ASSIGNED.match(stripped):
        return True
    # `obj?` / `obj??`: Python has no `?`, so a statement ending in one is IPython's help.
    return stripped.rstrip().endswith("?") and "#" not in stripped


class _Scanner:
    """Follows strings and brackets line by line, to tell where a statement starts."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""
        self.continued = False

    @property
    def at_statement_start(self) -> bool:
        return not (self.depth or self.quote or self.continued)

    def feed(self, line: str) -> None:
        self.continued = False
        chars: Iterator[tuple[int, str]] = iter(enumerate(line))
        for at, char in chars:
            if self.quote:
                if char == "\\":
                    next(chars, None)
                elif line.startswith(self.quote, at):
                    for _ in range(len(self.quote) - 1):
                        next(chars, None)
                    self.quote = ""
                elif char in "\r\n" and len(self.quote) == 1:
                    self.quote = ""  # an unterminated string: Python's error, not ours
                continue
            if char == "#":
                return
            if char in "\"'":
                triple = char * 3
                self.quote = triple if line.startswith(triple, at) else char
                for _ in range(len(self.quote) - 1):
                    next(chars, None)
            elif char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char == "\\" and line[at + 1 : at + 2] in ("\n", "\r", ""):
                self.continued = not self.quote
                return
