"""How fast the rewrite goes, against parsing the same code with libcst.

Two parts, each a Markdown table on stdout (progress on stderr):

- Generated files (`_generated.py`: imports, functions, classes, `lax.scan` in several
  spellings) of `--lines` lines with 1 and 10 scan calls per 100 lines: `rewrite()`,
  `revert()` (of the rewritten file) and `scanrewrite --check -j1` on the file, each in a
  fresh process, as ratios of its CPU time and peak memory (`ru_maxrss` of the process) to
  a process that parses the same file with `libcst.parse_module` (run interleaved: parse,
  rewrite, revert, check, parse, ...; the median of `--repeat`); `--check -j1` also against
  a whole process that only imports libcst and parses the file (start-up included in both). Then a tree of `--tree`
  such files of 1,000 lines, `scanrewrite --check` with `-j1` and `-j2`, against one
  process parsing them all (CPU time of the whole process tree, and wall time).
- The real tree (`--packages`, by default jax, numpy and libcst: about 1,700 files):
  `scanrewrite --check` with its default `-j` against parsing every file in one process.

    python benchmarks/rewrite_throughput.py [--lines 1000 10000 50000] [--tree 300]
        [--packages jax numpy libcst] [--repeat 3] [--skip-real]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import libcst

from scanrewrite.files import Discovery, find_project_root

sys.path.insert(0, str(Path(__file__).parent))
from _generated import generated_file  # noqa: E402

#: What a child process does to a file (`--child OP PATH`), timed around the operation alone.
_OPS = ("parse", "rewrite", "revert")
#: A process that only imports libcst and parses the file named by its argument.
_PARSE_PROCESS = "import sys, libcst; libcst.parse_module(open(sys.argv[1], 'rb').read())"


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


def child(op: str, path: str) -> None:
    """Run `op` on the file at `path` in this process and print its CPU seconds."""
    from scanrewrite.codemod import revert, rewrite

    source = Path(path).read_bytes()
    if op == "revert":
        source = rewrite(source).code
    start = time.process_time()
    if op == "parse":
        libcst.parse_module(source)
    elif op == "rewrite":
        rewrite(source)
    else:
        revert(source)
    print(time.process_time() - start)


def measure(op: str, path: Path) -> tuple[float, int]:
    """CPU seconds and peak KiB of `op` on `path` in a fresh process (`check`: the command;
    `parse process`: the whole of a process that imports libcst and parses the file)."""
    if op == "check":
        cpu, _, peak, _ = _run([sys.executable, "-m", "scanrewrite", "--check", "-j1", "-q", str(path)])
        return cpu, peak
    if op == "parse process":
        cpu, _, peak, _ = _run([sys.executable, "-c", _PARSE_PROCESS, str(path)])
        return cpu, peak
    _, _, peak, out = _run([sys.executable, __file__, "--child", op, str(path)])
    return float(out.split()[0]), peak


def _run(args: list[str]) -> tuple[float, float, int, str]:
    """(CPU seconds of the process and of the children it waited for, wall seconds, peak
    memory in KiB, its output) of a process running `args` (forked by hand: `subprocess`
    reaps the child before its usage can be read)."""
    start = time.perf_counter()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(write, 1)
        os.dup2(write, 2)
        os.close(read)
        os.execv(args[0], args)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    out = b"".join(chunks).decode()
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"error: {' '.join(args)} failed:\n{out}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss, out


def generated(args: argparse.Namespace) -> None:
    """The tables for generated files and a generated tree."""
    from _common import (
        Progress,  # it imports jax: not in the children, whose memory counts
    )

    folder = Path(tempfile.mkdtemp(prefix="scanrewrite-bench-"))
    cases = [(lines, density) for lines in args.lines for density in (1, 10)]
    ops = ("parse", "rewrite", "revert", "check", "parse process")
    progress = Progress(len(cases) * len(ops) * args.repeat + (3 * args.repeat if args.tree else 0))
    rows = []
    for lines, density in cases:
        path = folder / f"g{lines}_{density}.py"
        path.write_text(generated_file(lines, density))
        cpu: dict[str, list[float]] = {op: [] for op in ops}
        peak: dict[str, list[int]] = {op: [] for op in ops}
        for _ in range(args.repeat):
            for op in ops:  # interleaved, so that the machine's load falls on all alike
                seconds, kib = measure(op, path)
                cpu[op].append(seconds)
                peak[op].append(kib)
                progress.step(f"{lines} lines, {density}/100: {op}")
        parse = statistics.median(cpu["parse"])
        parse_peak = statistics.median(peak["parse"])
        text = path.read_text()
        row = [f"{len(text.splitlines()):,}", str(text.count("scan(")), f"{parse:.2f}"]
        for op in ("rewrite", "revert", "check"):
            row.append(f"{statistics.median(cpu[op]) / parse:.1f}x")
        row.append(f"{statistics.median(cpu['check']) / statistics.median(cpu['parse process']):.2f}x")
        for op in ("rewrite", "revert", "check"):
            row.append(f"{statistics.median(peak[op]) / parse_peak:.2f}x")
        rows.append(row)
    print(
        "| lines | scan calls | parse CPU s | rewrite | revert | --check -j1 | --check -j1 vs parse process "
        "| rewrite memory | revert memory | --check memory |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.tree:
        tree = folder / "tree"
        tree.mkdir()
        for index in range(args.tree):
            (tree / f"module_{index}.py").write_text(generated_file(1000, (1, 10)[index % 2], seed=index))
        runs: dict[str, list[tuple[float, float]]] = {"parse": [], "-j1": [], "-j2": []}
        for _ in range(args.repeat):
            cpu_s, wall, _, _ = _run([sys.executable, __file__, "--parse-tree", str(tree)])
            runs["parse"].append((cpu_s, wall))
            progress.step("tree: parse")
            for jobs in ("-j1", "-j2"):
                cpu_s, wall, _, _ = _run([sys.executable, "-m", "scanrewrite", "--check", jobs, "-q", str(tree)])
                runs[jobs].append((cpu_s, wall))
                progress.step(f"tree: --check {jobs}")
        parse_cpu = statistics.median(c for c, _ in runs["parse"])
        parse_wall = statistics.median(w for _, w in runs["parse"])
        print()
        print(f"| tree of {args.tree} files of 1,000 lines | CPU s | CPU vs parse | wall s | wall vs parse |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, label in (("parse", "libcst parse, one process"), ("-j1", "`scanrewrite --check -j1`"), ("-j2", "`scanrewrite --check -j2`")):
            c = statistics.median(c for c, _ in runs[name])
            w = statistics.median(w for _, w in runs[name])
            print(f"| {label} | {c:.1f} | {c / parse_cpu:.1f}x | {w:.1f} | {w / parse_wall:.1f}x |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="+", default=["jax", "numpy", "libcst"])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the median is shown")
    parser.add_argument("--jobs", type=int, help="-j for the command on the real tree (default: its own, the CPU count)")
    parser.add_argument("--lines", type=int, nargs="*", default=[1000, 10000, 50000], help="sizes of the generated files")
    parser.add_argument("--tree", type=int, default=300, help="files in the generated tree (0: none)")
    parser.add_argument("--skip-real", action="store_true", help="leave out the real tree")
    parser.add_argument("--child", nargs=2, metavar=("OP", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--parse-tree", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    if args.parse_tree:
        parse_all(sorted(Path(args.parse_tree).glob("*.py")))
        return None
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start; "
          f"median of {args.repeat}")
    print()
    generated(args)
    if args.skip_real:
        return None
    real(args)
    return None


def real(args: argparse.Namespace) -> None:
    """The table for the installed sources of `args.packages`."""
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

    counted = sum(int(count) for count in re.findall(r"(\d+) (?:files? )?(?:would be rewritten|would be left unchanged|files? failed)", summary))
    print(f"{len(paths)} files ({', '.join(args.packages)}), {with_scan} containing `scan`")
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
