"""Byte-exact parsing: source bytes to a libcst module and back, and line numbers.

The rewrite must hand back every byte it does not change. libcst round-trips nearly
every file; `Parsed` covers the layouts it does not, and turns anything else that would
not come back exactly into a `SourceError` instead of a silent change.
"""

from __future__ import annotations

import ast
import functools
import gc
import re
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState

from scanrewrite.codemod._splice import splice, statement_bounds
from scanrewrite.codemod._walk import read_only_visits
from scanrewrite.errors import InputError

__all__ = ["Parsed", "SourceError", "no_collection", "node_lines", "python_nodes", "python_tree", "top_level_indices"]


class SourceError(InputError):
    """Source that cannot be decoded or parsed, or that libcst cannot reproduce exactly: its
    `message` is one line, its `line` the 1-based line of the problem where known."""



def no_collection(function: Callable) -> Callable:
    """`function`, run with Python's cyclic garbage collector off (as it was found after) and
    libcst's walks of visitors read-only (`read_only_visits`: they build no node), and
    forgetting the tree `python_tree` kept, once it returns.

    A parsed module is a million objects that live as long as the rewrite of it; each of
    the collector's full passes walks them all and frees none of them: a fifth of the time
    of a rewrite. What a rewrite leaves for the collector is a few tens of thousands of
    objects, collected once it returns."""

    @functools.wraps(function)
    def without_collection(*args: object, **kwargs: object) -> object:
        try:
            with _collector_off(), read_only_visits():
                return function(*args, **kwargs)
        finally:
            _LAST[:] = [None, None]  # (its tree would outlive the rewrite: memory)

    return without_collection


@contextmanager
def _collector_off() -> Iterator[None]:
    """Python's cyclic garbage collector off inside, as it was found after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_BLANK_TAIL = re.compile(rb"^(?:[ \t\f]*\r?\n)*[ \t\f]*\Z", re.MULTILINE)
_PARSER_PREFIX = re.compile(r"^(?:parser|tokenizer) error: (?:error at \d+:\d+: )?")
_COOKIE = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t\f]*#.*?coding[:=]", re.MULTILINE)


@dataclass(frozen=True)
class Parsed:
    """A module parsed so that rendering it reproduces the input bytes exactly.

    libcst round-trips nearly every file; two layouts it does not, handled here:
    files whose only line break is a bare CR (parsed with LF, turned back on render),
    and files that end in blank lines after a whitespace-only line (the blank tail is
    cut off before parsing and put back on render). Rendering anything else that would
    not round-trip is a `SourceError` rather than a silent change; a file that is not
    rendered (nothing to rewrite) is fine as it is.

    The render copies the input's bytes for every top-level statement the transform kept
    and generates code only for the others (`_splice`), so the module's own code is only
    generated whole where that cannot be done (the blank tail, code Python's parser does
    not read): `exact` is None until a render finds out.
    """

    module: cst.Module
    tail: bytes
    bare_cr: bool
    exact: bool | None
    #: The module's code: the input decoded (`module.code` where the whole was generated).
    text: str | None = field(default=None, repr=False, compare=False)
    #: The bytes `module` was parsed from, and the input they were made from (for Python's parser).
    source: bytes = field(default=b"", repr=False, compare=False)
    original: bytes = field(default=b"", repr=False, compare=False)

    @property
    def code(self) -> str:
        """The module's code: `text`, else `module.code` (generated whole)."""
        return self.module.code if self.text is None else self.text

    @property
    def tree(self) -> ast.Module | None:
        """The input as Python's parser reads it (`python_tree`), where it does."""
        return python_tree(self.original)

    @classmethod
    def from_bytes(cls, source: bytes) -> Parsed:
        """Parse `source`; raises `SourceError` if it cannot be decoded or parsed."""
        bare_cr = b"\r" in source and b"\n" not in source
        text = source.replace(b"\r", b"\n") if bare_cr else source
        module = _parse(text)
        tail = _BLANK_TAIL.search(text)
        if tail is None or tail.start() == 0 or _SPACE.search(text, tail.start()) is None:
            # libcst reproduces a tail of bare line breaks: whether it reproduces the rest
            # is checked where code is generated (`render`).
            decoded = text.decode(module.encoding)
            return cls(module, b"", bare_cr, exact=None, text=decoded, source=text, original=source)
        code = module.code
        if code.encode(module.encoding) == text:
            return cls(module, b"", bare_cr, exact=True, text=code)
        if tail.start() > 0:
            head = text[: tail.start()]
            head_module = _parse(head)
            head_code = head_module.code
            if head_code.encode(head_module.encoding) == head:
                return cls(head_module, text[tail.start() :], bare_cr, exact=True, text=head_code)
        return cls(module, b"", bare_cr, exact=False, text=code)

    def render(self, module: cst.Module) -> bytes:
        """The bytes of `module`, a transformed `self.module`, in the input's layout."""
        code = None
        if self.exact is None:
            bounds = statement_bounds(self.module, self.source, self.tree)
            if bounds is not None:
                code = splice(self.module, module, self.source, bounds)
            if code is None and self.module.code.encode(self.module.encoding) != self.source:
                raise SourceError(_INEXACT)
        elif not self.exact:
            raise SourceError(_INEXACT)
        code = (module.bytes if code is None else code) + self.tail
        return code.replace(b"\n", b"\r") if self.bare_cr else code


_INEXACT = "cannot reproduce this file byte for byte (libcst round-trip)"
_SPACE = re.compile(rb"[ \t\f]")


def _parse(source: bytes) -> cst.Module:
    """`source` parsed with the newline of its first line as the default for new lines."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        python = _python_syntax_error(source)
        if python is not None:
            # Python's own parser names the place and cause as Python reports them (an
            # unclosed bracket where it opens); libcst's names where it gave up.
            line, message = python
            raise SourceError(message, line) from None
        message = _PARSER_PREFIX.sub("", error.message.splitlines()[0] if error.message else "")
        raise SourceError(f"cannot parse: {message or 'invalid syntax'}", error.raw_line) from None
    except UnicodeDecodeError as error:
        line = source[: error.start].count(b"\n") + 1
        byte = error.object[error.start : error.start + 1].hex()
        raise SourceError(f"cannot decode as {error.encoding}: byte 0x{byte}", line) from None
    except SyntaxError as error:
        cookie = _COOKIE.search(source, 0, _end_of_second_line(source))
        line = source[: cookie.start()].count(b"\n") + 1 if cookie is not None else None
        raise SourceError(f"cannot decode: {error.msg}", line) from None
    newline = _first_newline(source)
    if module.default_newline != newline:
        # libcst takes the first CR or LF anywhere (even inside a string) as the file's
        # newline; new lines (the added import) must use the first line's instead.
        module = module.visit(_ExplicitNewlines(module.default_newline)).with_changes(
            default_newline=newline
        )
    return module


def python_tree(code: str | bytes) -> ast.Module | None:
    """`code` as Python's own parser reads it, or None where it cannot (a syntax error, a null
    byte, nesting too deep for it). The last answer is kept until a `no_collection` function
    returns: the command line's `may_rewrite` and several parts of one rewrite ask about the
    same object."""
    if _LAST[0] is code:
        return _LAST[1]
    try:
        with _collector_off(), warnings.catch_warnings():  # (collector: see `no_collection`)
            warnings.simplefilter("ignore")  # e.g. invalid escapes: not ours to report
            tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    _LAST[:] = [code, tree]
    return tree


#: The object `python_tree` last read, and its tree.
_LAST: list = [None, None]


def python_nodes(nodes: Iterable[ast.AST], bodies: bool = True) -> Iterator[ast.AST]:
    """The nodes of the trees `nodes` (Python's parser's), as `ast.walk` gives them but in
    no particular order and without the expression contexts (`ast.Load`, `ast.Store`, ...,
    which a `Name`'s `ctx` tells): about twice as fast, for walks where order is no matter.
    Without `bodies`, not into the body of a def, a class or a lambda (a scope of its own)."""
    stack: list = list(nodes)
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node = pop()
        if not isinstance(node, ast.AST):
            continue  # (a list may hold names, or None: `Global.names`, `Dict.keys`)
        yield node
        kind = type(node)
        fields = _CHILD_FIELDS.get(kind)
        if fields is None:
            fields = _CHILD_FIELDS[kind] = tuple(name for name in kind._fields if name != "ctx")
        if not bodies and kind in _SCOPES:
            fields = tuple(name for name in fields if name != "body")
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                extend(value)
            elif isinstance(value, ast.AST):
                push(value)


#: The fields of each node type that `python_nodes` descends into.
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_SCOPES = frozenset([ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda])


def _python_syntax_error(source: bytes) -> tuple[int | None, str] | None:
    """The line and message of the `SyntaxError` that `compile()` raises for `source`, or
    None if it compiles (libcst may not know syntax newer than its grammar)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escapes: not ours to report
            compile(source, "<file>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return error.lineno, f"cannot parse: {error.msg}"
    except (ValueError, RecursionError, MemoryError):
        return None
    return None


def _first_newline(source: bytes) -> str:
    end = source.find(b"\n")
    if end == -1:
        return "\r" if b"\r" in source else "\n"
    return "\r\n" if source[end - 1 : end] == b"\r" else "\n"


def _end_of_second_line(source: bytes) -> int:
    first = source.find(b"\n")
    second = source.find(b"\n", first + 1) if first != -1 else -1
    return len(source) if second == -1 else second


class _ExplicitNewlines(cst.CSTTransformer):
    """Spell out newlines that were implicit (the module default) before changing it."""

    def __init__(self, newline: str) -> None:
        super().__init__()
        self._newline = newline

    def leave_Newline(self, original_node: cst.Newline, updated_node: cst.Newline) -> cst.Newline:
        if updated_node.value is None:
            return updated_node.with_changes(value=self._newline)
        return updated_node


_NEWLINE = re.compile(r"\r\n?|\n")


def node_lines(
    module: cst.Module,
    nodes: set[cst.CSTNode],
    top_level: Mapping[cst.CSTNode, cst.CSTNode] | None = None,
    starts: Mapping[cst.CSTNode, int] | None = None,
) -> dict[cst.CSTNode, tuple[int, int]]:
    """The first and last line that `PositionProvider` gives each of `nodes`.

    One codegen pass, as `PositionProvider`'s own, that renders nothing and notes only
    these nodes: the provider's positions for every node cost several times a render.
    Where every node's top-level statement is known (`top_level`) and the line that
    statement starts on (`starts`), only those statements are passed over.
    """
    if not nodes:
        return {}
    statements = {top_level.get(node) for node in nodes} if top_level is not None and starts else {None}
    if None in statements or not statements <= starts.keys():
        state = _LineCounter(module.default_indent, module.default_newline, nodes)
        module._codegen(state)
        return state.lines
    lines: dict[cst.CSTNode, tuple[int, int]] = {}
    for statement in statements:
        state = _LineCounter(module.default_indent, module.default_newline, nodes)
        state.line = starts[statement]
        statement._codegen(state)
        lines.update(state.lines)
    return lines


class _LineCounter(CodegenState):
    """A codegen state that counts lines (as `PositionProvidingCodegenState` does) and
    keeps no tokens."""

    def __init__(self, default_indent: str, default_newline: str, nodes: set[cst.CSTNode]) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.line = 1
        self.lines: dict[cst.CSTNode, tuple[int, int]] = {}
        self._nodes = nodes
        self._starts: dict[cst.CSTNode, int] = {}

    def add_indent_tokens(self) -> None:
        pass  # indentation holds no line break

    def add_token(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            self.line += len(_NEWLINE.findall(value))

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node in self._nodes:
            self._starts[node] = self.line

    def after_codegen(self, node: cst.CSTNode) -> None:
        if node in self._nodes:
            self.lines.setdefault(node, (self._starts.pop(node), self.line))

    @contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> Iterator[None]:
        # The syntactic position leaves out parentheses and leading lines. `start_node`
        # and `end_node` come only with statements, which are never asked for.
        start = self.line
        yield
        if node in self._nodes:
            self.lines[node] = (start, self.line)


def top_level_indices(module: cst.Module, nodes: Collection[cst.CSTNode]) -> dict[cst.CSTNode, int]:
    """The index in `module`'s body of the top-level statement that holds each of `nodes`."""
    finder = _TopLevelIndices(module, set(nodes))
    module.visit(finder)
    return finder.found


class _TopLevelIndices(cst.CSTVisitor):
    def __init__(self, module: cst.Module, nodes: set[cst.CSTNode]) -> None:
        super().__init__()
        self._top_level = {statement: index for index, statement in enumerate(module.body)}
        self._nodes = nodes
        self._current = 0
        self.found: dict[cst.CSTNode, int] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node in self._top_level:
            self._current = self._top_level[node]
        if node in self._nodes:
            self.found[node] = self._current
        return len(self.found) < len(self._nodes)
