"""The rewrite-revert round trip over real code: every Python file of the installed packages.

`round_trip(x, options)` checks one source (see `tests/test_codemod_roundtrip.py` for the
properties); `corpus_files` finds the installed files whose scans the rewrite changes. Run as a
script, it checks every such file (and that `revert` leaves every other file alone), then
asks ruff whether the reverted files import anything unused, and prints the numbers::

    python tests/revert_corpus.py              # every site-packages folder of this interpreter
    python tests/revert_corpus.py PATH ...     # or these folders
    python tests/revert_corpus.py --targets lax.scan,eqxi.scan,lax.fori_loop,lax.map

The tests run it on a bounded sample only (`test_codemod_roundtrip.py`). It never imports jax.
"""

from __future__ import annotations

import argparse
import ast
import collections
import difflib
import functools
import importlib.util
import os
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from scanrewrite.codemod import SourceError, may_rewrite, revert, rewrite
from scanrewrite.files import find_project_root, formatter_line_length
from scanrewrite.targets import DEFAULT_TARGETS

if __package__ in (None, ""):  # run as a script, whose folder is on the path, not the repository
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import program_facts as facts  # noqa: E402


@dataclass
class Outcome:
    """How one source fared: `kind` sorts it, `problems` are the properties it broke."""

    kind: str
    problems: list[str] = field(default_factory=list)
    calls: int = 0
    reverted: bytes = b""


class _Normalize(ast.NodeTransformer):
    """The program without its imports, without the ``pass`` left where a block's only import
    was removed (``if TYPE_CHECKING: pass``, as ruff's F401 fix leaves it too), and without the
    runtime calls' int ``unroll=``."""

    def visit_Import(self, node: ast.AST) -> None:
        return None

    visit_ImportFrom = visit_Pass = visit_Import

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        if ast.unparse(node.func).startswith("scanrewrite.runtime."):
            node.keywords = [
                k for k in node.keywords
                if not (k.arg == "unroll" and isinstance(k.value, ast.Constant) and type(k.value.value) is int)
            ]
        return node


def _without_blank_lines(code: bytes) -> list[bytes]:
    return [line for line in code.splitlines() if line.strip()]


def _call_lines(code: bytes) -> set[int]:
    """The lines of the imports of `code` and of its statements that hold a runtime call: a
    simple statement's lines, or a compound statement's header (its decorators to its body)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            lines.update(range(node.lineno, node.end_lineno + 1))
        if not isinstance(node, ast.stmt):
            continue
        own = [
            value
            for name, value in ast.iter_fields(node)
            if not (isinstance(value, list) and value and isinstance(value[0], (ast.stmt, ast.excepthandler, ast.match_case)))
        ]
        if any(
            isinstance(call, ast.Call) and ast.unparse(call.func).startswith("scanrewrite.runtime.")
            for part in own
            for root in (part if isinstance(part, list) else [part])
            if isinstance(root, ast.AST)
            for call in ast.walk(root)
        ):
            first = min([node.lineno, *(decorator.lineno for decorator in getattr(node, "decorator_list", ()))])
            body = getattr(node, "body", None)
            last = max(first, body[0].lineno - 1) if body else node.end_lineno
            lines.update(range(first, last + 1))
    return lines


def _differ_only_at_calls(y: bytes, again: bytes) -> bool:
    """Whether the lines of `y` and `again` that are not blank differ only in imports (one
    was removed) and statements that hold a runtime call (in both)."""
    numbered = [
        [(number, line) for number, line in enumerate(code.splitlines(), 1) if line.strip()] for code in (y, again)
    ]
    at_calls = [_call_lines(y), _call_lines(again)]
    matcher = difflib.SequenceMatcher(None, *[[line for _, line in lines] for lines in numbered], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal" and not (
            all(number in at_calls[0] for number, _ in numbered[0][i1:i2])
            and all(number in at_calls[1] for number, _ in numbered[1][j1:j2])
        ):
            return False
    return True


def _normalized(code: bytes) -> str:
    return ast.dump(_Normalize().visit(ast.parse(code)))


def round_trip(x: bytes, options: dict[str, object], y: bytes | None = None, line_length: int = 88) -> Outcome:
    """`y = rewrite(x, **options)` (unless given), `z = revert(y)`, and the properties they
    must have. Both lay out at `line_length`, as the command line does with the project's
    (a given `y` must have been written at it).

    Blank lines aside: where `x` does not have the blank lines the sorters put around an
    import block, the rewrite's new block gets them, and they stay.
    """
    runtime_code = b"scanrewrite.runtime" in x or b"from scanrewrite" in x
    options = {"line_length": line_length, **options}
    calls = 0
    if y is None:
        result = rewrite(x, **options)
        y, calls = result.code, len(result.rewritten)
    if y == x:
        if not runtime_code and revert(x).code != x:
            return Outcome("unchanged", ["revert changed a file without runtime calls"])
        return Outcome("unchanged")
    z = revert(y, line_length=line_length).code
    outcome = Outcome("", calls=calls, reverted=z)
    problems = outcome.problems
    try:
        z_tree = ast.parse(z)
    except SyntaxError as exc:
        return Outcome("broken", [f"the reverted code does not parse: {exc}"])
    # (Without a runtime call left, `revert` has nothing to do: it reads no further.)
    if (b"scanrewrite.runtime" in z or b"from scanrewrite" in z) and revert(z, line_length=line_length).code != z:
        problems.append("revert(revert(y)) != revert(y)")
    if b"scanrewrite.runtime" in z and b"scanrewrite.runtime" not in x and not any(
        isinstance(node, ast.Attribute) and ast.unparse(node).startswith("scanrewrite.runtime") for node in ast.walk(z_tree)
    ):
        problems.append("scanrewrite.runtime imported but unused")
    x_tree = ast.parse(x)
    user_unroll = facts.user_unroll(x_tree)
    kept = not (facts.imports(x_tree) - facts.imports(ast.parse(y))) and not facts.conditional_import(x_tree)
    again = rewrite(z, **options).code
    # (An `unroll=` int literal the user wrote is dropped with the rewrite's, and a call that
    # then passes `*args` is not rewritten again: `x` and `z` differ in it, by design.)
    if not user_unroll and _normalized(again) != _normalized(y):
        problems.append("the reverted program's calls differ from the original's")
    # The rewrite gives a new import block the blank lines the sorters put around one; where
    # `x` had others, only the blank lines can differ.
    same = _without_blank_lines(z) == _without_blank_lines(x)
    again_same = _without_blank_lines(again) == _without_blank_lines(y) or facts.unused_import(x_tree)
    mixed = facts.mixed_spelling(x_tree)
    # A call the revert spells anew (its import gone, or `mixed`), in a statement `x` does not lay
    # out as the formatters do, may come out laid out as they do (a shorter callee brings a long
    # line within the length), or the reverse; rewritten, it is then laid out as they would.
    # Only there and in the imports: every other line must come back as it was.
    anew = (not kept or mixed) and _normalized(again) == _normalized(y)
    again_same = again_same or (anew and _differ_only_at_calls(y, again))
    # A call the revert joined onto one line was not laid out as the formatters lay it out
    # (checked only where it matters: another revert costs as much as the first).
    joined = ((kept and not same) or not again_same) and z != revert(y, line_length=1).code
    if not runtime_code and not user_unroll and not joined:
        if not again_same:
            problems.append("rewrite(revert(y)) != y")
        if kept and not same and not mixed:
            problems.append("not byte-identical, although the rewrite kept the import")
    outcome.kind = (
        "runtime code" if runtime_code
        else "user unroll" if user_unroll
        else "identical" if z == x
        else "import removed" if not kept
        else "joined" if joined
        else "mixed spelling" if mixed and not same
        else "blank lines"
    )
    return outcome


def _site_folders() -> list[Path]:
    folders = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    return [Path(folder) for folder in dict.fromkeys(folders) if os.path.isdir(folder)]


def _python_files(folders: list[Path]) -> Iterator[Path]:
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    yield Path(dirpath, name)


def corpus_files(limit: int | None = None) -> list[tuple[Path, bytes]]:
    """The smallest `limit` files of the installed jax package whose scans the rewrite changes
    (found without importing jax); none if jax is not installed."""
    spec = importlib.util.find_spec("jax")
    if spec is None or not spec.submodule_search_locations:
        return []
    candidates = []
    for path in _python_files([Path(location) for location in spec.submodule_search_locations]):
        source = path.read_bytes()
        if b"scan(" in source and b"jax" in source and may_rewrite(source):
            candidates.append((len(source), path, source))
    found = []
    for _, path, source in sorted(candidates):
        try:
            if rewrite(source).changed:
                found.append((path, source))
        except SourceError:
            continue
        if limit is not None and len(found) >= limit:
            break
    return found


def _check(path: Path, targets: str = ",".join(DEFAULT_TARGETS)) -> tuple[str, Outcome | None, str | None]:
    try:
        source = path.read_bytes()
    except OSError as exc:
        return str(path), None, f"cannot read: {exc}"
    try:
        if not may_rewrite(source, targets):
            if b"scanrewrite" in source and revert(source).code != source:
                return str(path), Outcome("unchanged", ["revert changed a file without runtime calls"]), None
            return str(path), Outcome("unchanged"), None
        # The line length of the file's own project, as the command line reads it.
        line_length = formatter_line_length(find_project_root([str(path)]))
        return str(path), round_trip(source, {"unroll": 4, "targets": targets}, line_length=line_length), None
    except SourceError as exc:
        return str(path), None, str(exc)
    except RecursionError:
        # libcst's codegen of very deeply nested expressions; the command reports the same.
        return str(path), None, "RecursionError (nested too deeply for libcst)"


def _unused_imports(pairs: list[tuple[str, bytes, bytes]]) -> list[str]:
    """The files whose reverted rewrite has an unused import (ruff F401) that the file had not."""
    problems = []
    with tempfile.TemporaryDirectory() as folder:
        for index, (_, x, z) in enumerate(pairs):
            Path(folder, f"x{index}.py").write_bytes(x)
            Path(folder, f"z{index}.py").write_bytes(z)
        output = subprocess.run(
            [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F401", "--output-format", "concise", "."],
            cwd=folder, capture_output=True, text=True,
        ).stdout
    unused = collections.defaultdict(set)
    for line in output.splitlines():
        name, _, message = line.partition(":")
        if "`" in message:
            unused[Path(name).stem].add(message.split("`")[1])
    for index, (path, _, _) in enumerate(pairs):
        extra = unused[f"z{index}"] - unused[f"x{index}"]
        if extra:
            problems.append(f"{path}: unused after the round trip: {', '.join(sorted(extra))}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="folders to search (default: site-packages)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS), help="as scanrewrite's --targets")
    args = parser.parse_args(argv)
    files = list(_python_files(args.folders or _site_folders()))
    start = time.perf_counter()
    kinds: collections.Counter[str] = collections.Counter()
    calls = 0
    problems: list[str] = []
    errors: list[str] = []
    pairs = []
    with ProcessPoolExecutor(args.jobs) as pool:
        checks = pool.map(functools.partial(_check, targets=args.targets), files, chunksize=16)
        for done, (path, outcome, error) in enumerate(checks, 1):
            if done % 200 == 0 or done == len(files):
                print(f"\r{done}/{len(files)} files", end="", file=sys.stderr, flush=True)
            if error is not None:
                errors.append(f"{path}: {error}")
                continue
            kinds[outcome.kind] += 1
            calls += outcome.calls
            problems += [f"{path}: {problem}" for problem in outcome.problems]
            if outcome.kind != "unchanged":
                pairs.append((path, Path(path).read_bytes(), outcome.reverted))
    print(file=sys.stderr)
    problems += _unused_imports(pairs)
    seconds = time.perf_counter() - start
    print(f"{len(files)} files in {seconds:.0f} s; {len(files) - kinds['unchanged'] - len(errors)} rewritten "
          f"({calls} scan calls) and reverted; {len(errors)} the rewrite cannot read")
    for kind, count in sorted(kinds.items()):
        print(f"  {kind}: {count}")
    for line in problems:
        print(f"PROBLEM {line}")
    for line in errors[:20]:
        print(f"  not read: {line}")
    print(f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
