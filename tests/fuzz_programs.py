"""Generated programs with real scan calls, and the properties every rewrite of them has.

`programs()` is a hypothesis strategy of (source, rewrite options): programs that compile,
with `jax.lax.scan` and `equinox.internal.scan` calls spelled every way an import can spell
them (`jax.lax.scan`, `lax.scan`, `L.scan`, `from jax.lax import scan as s`, `eqxi.scan` with
its `kind=`), imported at the top, in a function, under ``if TYPE_CHECKING:`` or in a ``try``,
called at module level, in functions, methods, lambdas, comprehensions, decorators and other
calls' arguments, laid out on one line or several, with comments, pragmas, shadowed names,
``__all__``, CRLF line endings, tabs and a byte order mark.

`problems(source, options)` names the properties a program breaks (none: it holds them all;
`check` gives the rewrite's result too):

- the rewrite raises nothing but `SourceError` (what it documents; for a program that
  compiles, only where libcst cannot parse it), and its output compiles;
- the rewrite is idempotent: rewriting its output changes nothing and reports no call;
- the command line's path (`screen`, then `rewrite_bytes`, under ``--check``) agrees with it:
  it would change the file exactly when the rewrite does, into the same bytes;
- the revert keeps what its documentation promises (`tests.revert_corpus.round_trip`): its
  output parses, imports nothing unused it did not, is idempotent, rewrites to the same
  program, and is the original byte for byte where the rewrite kept the import the call used.

`tests/test_codemod_property.py` runs a few hundred in CI; `benchmarks/fuzz_rewrite.py` many more.
"""

from __future__ import annotations

import ast

from hypothesis import strategies as st

from scanrewrite.codemod import RewriteResult, SourceError, rewrite
from scanrewrite.per_file import rewrite_bytes, screen
from scanrewrite.mode import Mode, WriteBack
from scanrewrite.options import Options
from scanrewrite.report import Changed
from tests.revert_corpus import round_trip

#: (import line, callee, keyword arguments the API needs, another use of the name it binds).
SPELLINGS = [
    ("import jax", "jax.lax.scan", "", "jax.jit"),
    ("import jax.lax", "jax.lax.scan", "", "jax.lax.cond"),
    ("from jax import lax", "lax.scan", "", "lax.cond"),
    ("from jax import lax as L", "L.scan", "", "L.cond"),
    ("import jax.lax as L", "L.scan", "", "L.cond"),
    ("from jax.lax import scan", "scan", "", "scan"),
    ("from jax.lax import scan as s", "s", "", "s"),
    ("from jax.lax import scan as scan", "scan", "", "scan"),
    ("from jax import lax  # noqa: F401", "lax.scan", "", "lax.cond"),
    ("import equinox.internal as eqxi", "eqxi.scan", 'kind="lax"', "eqxi.while_loop"),
    ("import equinox.internal as eqxi", "eqxi.scan", 'kind="checkpointed"', "eqxi.while_loop"),
    ("from equinox import internal as eqxi", "eqxi.scan", 'kind="checkpointed", checkpoints=2', "eqxi.while_loop"),
    ("from equinox.internal import scan as escan", "escan", 'kind="lax"', "escan"),
]

#: The arguments of a call, before the API's own keywords.
ARGUMENTS = [
    ["f", "c", "xs"],
    ["f", "c", "xs", "length=n"],
    ["f", "c", "None", "length=3"],
    ["f", "init=c", "xs=xs"],
    ["f", "c", "xs", "reverse=True"],
    ["f", "c", "xs", "unroll=2"],
    ["lambda c, x: (c + x, x)", "c", "xs"],
    ["*args"],
    ["f", "c", "**kwargs"],
]

#: What may end the line of a call's statement.
PRAGMAS = ["", "", "", "  # scanrewrite: skip", "  # scanrewrite: unroll=8", "  # scanrewrite: levels=2",
           "  # noqa: E501", "  # noqa: E501  # scanrewrite: skip", "  # scanrewrite: unrol=3", "  # a comment"]

OPTIONS = [{}, {"unroll": 2}, {"checkpoint": "none"}, {"checkpoint": "dots_saveable"}, {"levels": 2},
           {"levels": "auto"}, {"line_length": 60}]


@st.composite
def _call(draw: st.DrawFn, callee: str, needs: str, depth: int = 0) -> str:
    """A call of `callee`, laid out one of the ways users and formatters lay calls out."""
    args = list(draw(st.sampled_from(ARGUMENTS)))
    if depth == 0 and draw(st.integers(0, 5)) == 0:
        # A scan in the scanned function: `lax.scan(lambda c, x: lax.scan(...), c, xs)`.
        args[0] = "lambda c, x: " + draw(_call(callee, needs, depth + 1))
    if needs and not args[0].startswith("*"):
        args.append(needs)
    layout = draw(st.sampled_from(["one line", "one line", "exploded", "hugged", "commented"]))
    if layout == "one line" or depth:
        return f"{callee}({', '.join(args)})"
    if layout == "exploded":
        return f"{callee}(\n" + "".join(f"    {arg},\n" for arg in args) + ")"
    if layout == "hugged":
        return f"{callee}(\n    {', '.join(args)}\n)"
    return f"{callee}(  # the loop\n    " + ",  # é\n    ".join(args) + "\n)"


def _indented(text: str, indent: str) -> str:
    return "\n".join(indent + line if line else line for line in text.split("\n"))


@st.composite
def _block(draw: st.DrawFn) -> tuple[list[str], list[str], str]:
    """(top-level import lines, other top-level lines, the block of code): one call in one place."""
    import_line, callee, needs, other = draw(st.sampled_from(SPELLINGS))
    root = callee.partition(".")[0]
    call = draw(_call(callee, needs))
    pragma = draw(st.sampled_from(PRAGMAS))
    where = draw(st.sampled_from(["top", "top", "top", "function", "type checking", "try"]))
    context = draw(
        st.sampled_from(["module", "function", "method", "lambda", "comprehension", "decorator", "argument",
                         "branch", "shadowed parameter", "shadowed local"])
    )
    imports, top = [], []
    if where == "top":
        imports.append(import_line)
        # Another use of the import, which then stays; always where the call does not use it
        # (an import that nothing uses may spell the reverted call: see `round_trip`).
        if context.startswith("shadowed") or draw(st.integers(0, 3)) == 0:
            top.append(f"z = {other}")
    elif where == "type checking":
        imports.append("from typing import TYPE_CHECKING")
        top.append(f"if TYPE_CHECKING:\n    {import_line}")
        # Only bound for the type checker: the program binds the name itself, or uses jax.
        if draw(st.booleans()):
            imports.append("import jax")
    elif where == "try":
        top.append(f"try:\n    {import_line}\nexcept ImportError:\n    {root} = None")
    local_import = f"{import_line}\n" if where == "function" else ""
    if context in ("module", "lambda", "comprehension", "decorator", "argument") and where == "function":
        context = "function"
    if context == "module":
        code = f"y = {call}{pragma}"
    elif context == "function":
        code = "def run(f, c, xs, n, *args, **kwargs):\n" + _indented(f"{local_import}return {call}{pragma}", "    ")
    elif context == "method":
        body = _indented(f"{local_import}return {call}{pragma}", "    ")
        code = f"class Model:\n    @staticmethod\n    def __call__(f, c, xs, n=3, *args, **kwargs):\n{_indented(body, '    ')}"
    elif context == "lambda":
        code = f"run = lambda f, c, xs, n=3, *args, **kwargs: {call}{pragma}"
    elif context == "comprehension":
        code = f"ys = [\n    {call}{pragma}\n    for xs in batches\n]" if "\n" not in call else f"ys = [{call} for xs in batches]{pragma}"
    elif context == "decorator":
        code = f"@functools.lru_cache(maxsize=len({call})){pragma}\ndef g():\n    pass"
        imports.append("import functools")
    elif context == "argument":
        code = f"print(len({call})){pragma}"
    elif context == "branch":
        code = "def run(f, c, xs, n):\n    for _ in range(2):\n        if n:\n" + _indented(
            f"{local_import}return {call}{pragma}", "            "
        )
    elif context == "shadowed parameter":
        code = f"def run({root}, f, c, xs, n, *args, **kwargs):\n    return {call}{pragma}"
    else:
        code = f"def run(f, c, xs, n, *args, **kwargs):\n    {root} = make_{root}()\n    return {call}{pragma}"
    return imports, top, code


def _bound_names(source: str) -> set[str]:
    """The names `source` binds at its top level: its imports, functions, classes and assignments."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return names


@st.composite
def programs(draw: st.DrawFn) -> tuple[bytes, dict[str, object]]:
    """A program that compiles (its source bytes) and the options to rewrite it with."""
    blocks = draw(st.lists(_block(), min_size=1, max_size=3))
    head = []
    if draw(st.booleans()):
        head.append('"""A module with scans."""')
    if draw(st.integers(0, 3)) == 0:
        head.append("from __future__ import annotations")
    imports = list(dict.fromkeys(line for block_imports, _, _ in blocks for line in block_imports))
    # In the sorters' order (standard library first, `import` lines before `from` lines): the
    # rewrite places its import in the order it finds.
    imports.sort(key=lambda line: (" jax" in line or " equinox" in line, line.startswith("from"), line))
    top = [line for _, block_top, _ in blocks for line in block_top]
    parts = ["\n".join(head), "\n".join(imports), "\n".join(top)]
    codes = [code for _, _, code in blocks]
    # Only names the module binds: an `__all__` naming an unbound `jax` cannot be told from a
    # re-export of the `import jax` a rewrite adds, which the revert then keeps.
    bound = sorted(_bound_names("\n".join([*imports, *top, *codes])))
    if bound and draw(st.integers(0, 4)) == 0:
        parts.append(f"__all__ = {sorted(set(draw(st.lists(st.sampled_from(bound), max_size=3))))!r}")
    parts += codes
    source = "\n\n\n".join(part for part in parts if part) + "\n"
    if draw(st.integers(0, 19)) == 0:
        source = "# scanrewrite: skip-file\n" + source
    if draw(st.integers(0, 4)) == 0:
        source = source.replace("    ", "\t")
    if draw(st.booleans()):
        source = source.replace("\n", "\r\n")
    encoded = source.encode()
    if draw(st.integers(0, 9)) == 0:
        encoded = b"\xef\xbb\xbf" + encoded
    return encoded, dict(draw(st.sampled_from(OPTIONS)))


def problems(source: bytes, options: dict[str, object]) -> list[str]:
    """The properties (see the module's docstring) that the rewrite of `source` breaks."""
    return check(source, options)[1]


def check(source: bytes, options: dict[str, object]) -> tuple[RewriteResult | None, list[str]]:
    """The rewrite of `source` (None if it raised `SourceError`) and the properties it breaks."""
    compile(source, "<generated>", "exec")  # the generator's own promise
    try:
        result = rewrite(source, **options)
    except SourceError:
        return None, []
    found = []
    try:
        compile(result.code, "<rewritten>", "exec")
    except SyntaxError as exc:
        return result, [f"the rewrite does not compile: {exc}"]
    again = rewrite(result.code, **options)
    if again.code != result.code or again.rewritten:
        found.append("the rewrite is not idempotent")
    # The command line's path, in the mode that writes nothing but says what would change.
    screened = screen(source, "generated.py", Mode(Options(**options)))
    cli, code = (screened, source) if screened is not None else rewrite_bytes(
        source, "generated.py", Mode(Options(**options)), WriteBack.CHECK
    )
    if (cli.changed is Changed.YES) != result.changed or code != result.code:
        found.append("the command line (--check) does not agree with the rewrite")
    line_length = int(options.get("line_length", 88))
    rewrite_options = {key: value for key, value in options.items() if key != "line_length"}
    found += round_trip(source, rewrite_options, result.code, line_length).problems
    return result, found
