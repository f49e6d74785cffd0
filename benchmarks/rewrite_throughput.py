"""How fast `scanrewrite --check` goes over a large real tree, against parsing it with libcst.

The tree is the installed sources of some packages (by default jax, numpy and libcst:
about 1,700 files). The command runs as users run it, a subprocess with its default
`-j` (the CPU count); the baseline parses every file with `libcst.parse_module` in one
process, which is what a tool without the byte check and the pool would at least do.
Both handle the same files: the command's own discovery (default excludes) picks them.

    python benchmarks/rewrite_throughput.py [--packages jax numpy libcst] [--repeat 3]

Prints a markdown table: files, seconds (median of the repeats), files/s, and each time
as a ratio to the libcst parse.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import libcst

from scanrewrite.files import Discovery, find_project_root


def package_folder(name: str) -> str:
    """Where the installed package `name` lies, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"error: {name} is not an installed package")
    return spec.submodule_search_locations[0]


def run_command(folders: list[str], jobs: int | None) -> tuple[float, str]:
    """Seconds of one `scanrewrite --check` over `folders`, and its summary line."""
    args = [sys.executable, "-m", "scanrewrite", "--check", *folders] + ([f"-j{jobs}"] if jobs else [])
    start = time.perf_counter()
    result = subprocess.run(args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode not in (0, 1, 2) or not result.stderr:
        raise SystemExit(f"error: the command failed ({result.returncode}):\n{result.stderr}")
    return seconds, result.stderr.splitlines()[-1]


def parse_all(paths: list[Path]) -> tuple[float, int]:
    """Seconds to read and parse every file with libcst in this process, and how many failed."""
    failures = 0
    start = time.perf_counter()
    for path in paths:
        try:
            libcst.parse_module(path.read_bytes())
        except Exception:  # noqa: BLE001 - a file libcst cannot parse still took its time
            failures += 1
    return time.perf_counter() - start, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="+", default=["jax", "numpy", "libcst"])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the median is shown")
    parser.add_argument("--jobs", type=int, help="-j for the command (default: its own, the CPU count)")
    args = parser.parse_args()

    folders = [package_folder(name) for name in args.packages]
    root = find_project_root(folders)
    paths = [source.path for source in Discovery(root).collect(folders)]
    with_scan = sum(b"scan" in path.read_bytes() for path in paths)

    command_runs, parse_runs = [], []
    summary, failures = "", 0
    for _ in range(args.repeat):
        # Interleaved, so that a change in the machine's load hits both alike.
        seconds, summary = run_command(folders, args.jobs)
        command_runs.append(seconds)
        seconds, failures = parse_all(paths)
        parse_runs.append(seconds)
    command, parse = statistics.median(command_runs), statistics.median(parse_runs)

    counted = sum(int(count) for count in re.findall(r"(\d+) (?:files? )?(?:would be rewritten|left unchanged|files? failed)", summary))
    print(f"{len(paths)} files ({', '.join(args.packages)}), {with_scan} containing `scan`; "
          f"{os.cpu_count()} CPUs; median of {args.repeat}")
    print(f"command summary: {summary}")
    if counted != len(paths):
        print(f"note: the command counted {counted} files, the baseline {len(paths)}")
    if failures:
        print(f"note: libcst could not parse {failures} files")
    print()
    print("| what | files | seconds | files/s | time vs libcst parse |")
    print("| --- | ---: | ---: | ---: | ---: |")
    jobs = f"-j{args.jobs}" if args.jobs else "default -j"
    for what, seconds in ((f"`scanrewrite --check` ({jobs}, whole process)", command), ("libcst parse of every file, one process", parse)):
        print(f"| {what} | {len(paths)} | {seconds:.2f} | {len(paths) / seconds:.0f} | {seconds / parse:.2f}x |")


if __name__ == "__main__":
    main()
