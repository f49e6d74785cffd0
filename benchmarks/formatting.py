"""How many files that ruff format and black leave alone stay so once rewritten, on real projects.

For each project folder: every Python file the rewrite changes (`--unroll 3`, at the line
length the command reads from the project's configuration) and that the formatter leaves
as it is, run in the project folder so that its own configuration applies. Does the
formatter still leave the rewritten file alone? With `--preformat`, every file with a scan
call is first laid out by the formatter itself (at that line length, `--isolated`), which
gives many more statements than a project keeps formatted; `--line-length N` overrides the
project's. With `--before`, the rewrite keeps each call's own layout (`line_length=None`),
as it did before it laid out calls as the formatters do.

    python benchmarks/formatting.py PROJECT... [--formatter ruff black] [--preformat] [--before]

Prints a markdown table: project, formatter, line length, files the formatter left alone
before the rewrite (with their rewritten calls), and how many it still leaves alone after.
Needs black (the test-cli extra) and ruff.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _common import Progress

from scanrewrite.codemod import SourceError, may_rewrite, rewrite
from scanrewrite.files import formatter_line_length


def formatted(formatter: str, sources: list[bytes], names: list[str], root: Path, isolated_length: int | None) -> list:
    """Each source as the formatter lays it out (None where it fails), run in `root` with the
    project's configuration, or isolated at `isolated_length`."""
    out = []
    for source, name in zip(sources, names):
        if formatter == "ruff":
            command = [sys.executable, "-m", "ruff", "format", "--stdin-filename", name]
            if isolated_length is not None:
                command += ["--isolated", f"--line-length={isolated_length}"]
        else:
            command = [sys.executable, "-m", "black", "-q", "--stdin-filename", name]
            if isolated_length is not None:
                command += ["--config", "/dev/null", f"--line-length={isolated_length}"]
        done = subprocess.run([*command, "-"], input=source, capture_output=True, cwd=root, check=False)
        out.append(done.stdout if done.returncode == 0 else None)
    return out


def measure(root: Path, formatter: str, args: argparse.Namespace, progress: Progress) -> tuple[int, int, int, int]:
    """(line length, files left alone before, their rewritten calls, files left alone after)."""
    line_length = args.line_length or formatter_line_length(root)
    paths = [path for path in sorted(root.rglob("*.py")) if b"scan" in path.read_bytes()]
    sources = [path.read_bytes() for path in paths]
    names = [str(path.relative_to(root)) for path in paths]
    isolated = line_length if args.preformat else None
    if args.preformat:
        sources = [code for code in formatted(formatter, sources, names, root, isolated) if code is not None]
    before, after, calls = 0, 0, 0
    for source, name in zip(sources, names):
        progress.step(f"{root.name}/{name}")
        if not may_rewrite(source):
            continue
        try:
            result = rewrite(source, unroll=3, line_length=None if args.before else line_length)
        except SourceError:
            continue
        if not result.changed or formatted(formatter, [source], [name], root, isolated)[0] != source:
            continue
        before += 1
        calls += len(result.rewritten)
        after += formatted(formatter, [result.code], [name], root, isolated)[0] == result.code
    return line_length, before, calls, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="+", type=Path)
    parser.add_argument("--formatter", nargs="+", choices=("ruff", "black"), default=["ruff", "black"])
    parser.add_argument("--preformat", action="store_true", help="lay every file out with the formatter first")
    parser.add_argument("--line-length", type=int, help="instead of the project's")
    parser.add_argument("--before", action="store_true", help="keep each call's own layout (line_length=None)")
    args = parser.parse_args()
    total = sum(1 for root in args.projects for path in root.rglob("*.py") if b"scan" in path.read_bytes())
    progress = Progress(max(1, total * len(args.formatter)))
    rows = [
        (root.name, formatter, *measure(root, formatter, args, progress))
        for formatter in args.formatter
        for root in args.projects
    ]
    print("| project | formatter | line length | files formatted before (calls rewritten) | stay formatted |")
    print("| --- | --- | --- | --- | --- |")
    for name, formatter, line_length, before, calls, after in rows:
        print(f"| {name} | {formatter} | {line_length} | {before} ({calls}) | {after} |")
    for formatter in args.formatter:
        mine = [row for row in rows if row[1] == formatter]
        print(f"| all | {formatter} | | {sum(r[3] for r in mine)} ({sum(r[4] for r in mine)}) | {sum(r[5] for r in mine)} |")


if __name__ == "__main__":
    main()
