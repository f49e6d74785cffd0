"""Every number this project claims about an accelerator, from one command.

    python benchmarks/accelerator.py                   # on a GPU or TPU machine; under 16 minutes
    python benchmarks/accelerator.py --parts tests long_scan compile_time per_step_checkpoint
    python benchmarks/accelerator.py --parts memory_curve   # the same in two commands of under 10
    python benchmarks/accelerator.py --out DIR         # default: accelerator-results/
    python benchmarks/accelerator.py --smoke           # the same path at tiny sizes on the CPU (CI)
    python benchmarks/accelerator.py --parts long_scan # only some parts: tests, or benchmarks by name

Two parts, one after the other, each in one process of its own (one process at a time can hold
an accelerator, and each that opens it pays for that; this one never opens it):

1. the tests that execute the rewritten fixtures against the originals and compare the
   runtime's values and gradients with jax's, on the device (`DEVICE_TESTS`), in one pytest;
2. the benchmarks, each one's `main()` called in turn in one process: `memory_curve.py` (step
   time against compiled temp memory of `lax.scan`, `lax.scan(unroll=k)`, the checkpointed
   scans, the Python for-loop, hand-built stored points and the runtime's programs, at three
   shapes, with issue 41's checks; its origin shape is `ut_scan.py --gpu --batch 16`'s
   workload), the plain rewrite against its peers (`default_rewrite.py`), long scans, compile
   time on the straight-line layout, and the per-step checkpoint, at accelerator sizes.

Everything goes into `--out`: `summary.md` (each part's outcome and time), `environment.md`
(device, jax, jaxlib, the CUDA or libtpu version), `tests.md` (per file, and every failure),
and one Markdown file per benchmark with its tables, each written as soon as it is measured,
so a run cut short keeps what it finished. Progress goes to stderr. `--budget-s` bounds the
whole run: a part that would start past it is skipped, and one that overruns it is stopped.

Exits 0 when every part ran and agreed; 1 when a test failed or a benchmark's rewritten results
differ from the original's (beyond `_common.agreement_rtol()`); 2 when a part could not finish
(an error, the budget) and nothing differed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The tests run on the device: values and gradients of rewritten programs against the originals,
# compared on the same device in float32 (about 200 s of CPU time on XLA:CPU). Left out: what
# has no device in it (goldens, the codemod, the command line, reverted programs, which call
# `jax.lax.scan` again; trace counts and the staging
# cache, `test_runtime_traces.py` and `test_runtime_staging.py`), which CI runs; what compares in
# float64 (`enable_x64`, to 1e-10: a TPU has no float64 arithmetic of its own, and float64
# `jnp.linalg` raises there) or XLA:CPU's exact memory sizes (`test_runtime_memory.py`, the
# CPU layout's fitted chunk size; the levels' carry counts); and the CPU-only checks
# (`test_runtime_cpu_deadlock.py`, `test_runtime_devices.py` on simulated CPU devices).
DEVICE_TESTS = (
    "tests/test_fixtures.py::test_rewritten_fixture_computes_the_same",
    "tests/test_fixtures.py::test_comparison_rejects_a_flipped_reverse",
    "tests/test_fixtures.py::test_comparison_rejects_a_runtime_that_drops_the_remainder",
    "tests/test_runtime.py",
    "--deselect=tests/test_runtime.py::test_matches_lax_scan[float64]",
    "tests/test_runtime_eqxi.py",
    "tests/test_runtime_levels.py::test_vmap_and_jvp_eagerly",
    "tests/test_runtime_levels.py::test_levels_is_part_of_the_staging_key",
    "tests/test_runtime_levels.py::test_rewritten_program_with_levels_computes_the_same",
    # Stored steps and a policy per step, in float32 (their float64 matrix stays on the CPU).
    "tests/test_runtime_store.py::test_vmap_and_jvp",
    "tests/test_runtime_store.py::test_checker_rejects_the_wrong_steps_stored",
    "tests/test_runtime_store.py::test_eqxi_lax_fori_loop_and_map",
    "tests/test_runtime_store.py::test_a_policy_on_the_straight_line_layout_checkpoints_each_step_alone",
    # Also left to CI, which runs them all: what repeats a test above on this device. The
    # fixtures the rewrite leaves unchanged run the original twice; the rolled layout is the
    # CPU's (an accelerator never builds it), and the eager lengths test runs it once more per
    # case; the chunks' and checkpoints' structure is read off a jaxpr, and bad input raises
    # before anything runs, the same on every device.
    *(f"--deselect=tests/test_fixtures.py::test_rewritten_fixture_computes_the_same[{name}]"
      for name in ("hand_chunked_loop", "skip_pragma")),
    *(f"--deselect=tests/test_runtime.py::test_lengths_around_the_chunk_size_eagerly[{n}-{way}-rolled]"
      for n in ("empty", "shorter", "equal", "prime", "multiple") for way in ("forward", "reverse")),
    "--deselect=tests/test_runtime.py::test_chunking",
    "--deselect=tests/test_runtime.py::test_checkpoint_modes_wrap_chunk_and_remainder",
    "--deselect=tests/test_runtime.py::test_bad_input",
    "--deselect=tests/test_runtime_eqxi.py::test_bad_input",
)  # fmt: skip
# The same path in seconds (the main suite runs every test): a fixture run both ways, and a wrong
# runtime rejected.
SMOKE_TESTS = ("tests/test_fixtures.py::test_comparison_rejects_a_runtime_that_drops_the_remainder",)


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A benchmark script of this folder and the arguments its `main()` gets."""

    module: str
    argv: tuple[str, ...]
    what: str


def device_benchmarks(memory_bytes: int | None) -> tuple[Benchmark, ...]:
    """The accelerator's benchmarks. (`memory_bytes`, the device's memory, sized `ut_scan`'s batch
    when it ran here; `memory_curve`'s origin shape is its workload at batch 16 with more peers.)"""
    del memory_bytes
    # Most wanted first: where a slow compiler spends the budget, what is cut is the last.
    return (
        Benchmark("memory_curve", ("--compile-threads", "11", "--json", "{out}/memory_curve.json"),
                  "step time against memory, three shapes"),
        Benchmark("default_rewrite", ("--compile-threads", "11"), "the plain rewrite against its peers"),
        Benchmark("long_scan", ("--ns", "1024", "4096", "--ks", "1", "2", "4", "--carry", "65536"), "long scans"),
        Benchmark(
            "compile_time",
            ("--layout", "straight", "--quick", "--kinds", "jit-grad", "--repeats", "1", "--costs"),
            "compile time, straight-line layout",
        ),
        Benchmark(
            "per_step_checkpoint",
            ("--layout", "straight", "--n", "8", "--ks", "2", "4", "--batch", "8", "--seq", "512",
             "--width", "512", "--rounds", "1", "--repeats", "20"),
            "per-step checkpoints",
        ),
    )  # fmt: skip


SMOKE_BENCHMARKS = (
    Benchmark("memory_curve", ("--smoke", "--compile-threads", "2", "--json", "{out}/memory_curve.json"), ""),
    Benchmark("default_rewrite", ("--smoke", "--shapes", "origin"), ""),
    Benchmark("long_scan", ("--ns", "8", "--ks", "2", "--carry", "128", "--repeats", "2"), ""),
    Benchmark(
        "compile_time", ("--layout", "straight", "--ns", "3", "--ks", "2", "--kinds", "jit-grad", "--repeats", "1", "--costs"), ""
    ),
    Benchmark(
        "per_step_checkpoint",
        ("--layout", "straight", "--n", "3", "--ks", "2", "--batch", "1", "--seq", "8", "--width", "16",
         "--rounds", "1", "--repeats", "2"),
        "",
    ),  # fmt: skip
)

# Exit codes, as the module's docstring says.
PASSED, DIFFERS, INCOMPLETE = 0, 1, 2


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def child_env(smoke: bool) -> dict[str, str]:
    """The environment of both parts: this checkout's package first, and the CPU under `--smoke`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["HYPOTHESIS_PROFILE"] = "ci"  # tests/conftest.py: derandomized, as in CI
    if smoke:
        env["JAX_PLATFORMS"] = "cpu"
    return env


def run_child(
    command: list[str], env: dict[str, str], timeout: float, stop: signal.Signals = signal.SIGINT
) -> tuple[int | None, float]:
    """(exit status, or None when stopped at `timeout`; wall seconds). Output passes through.

    At `timeout` the child gets `stop`, and 20 s later is killed, with whatever it started (it
    runs in a session of its own). On Ctrl-C pytest still writes its report of the tests it ran;
    the benchmarks' process gets SIGTERM instead, which ends it at once, since unwinding a
    KeyboardInterrupt out of a compile in flight can crash the accelerator's runtime.
    """
    start = time.monotonic()
    child = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    try:
        return child.wait(timeout=max(timeout, 1)), time.monotonic() - start
    except subprocess.TimeoutExpired:
        log(f"== stopping {' '.join(command[:4])} ...: its time is up")
        os.killpg(child.pid, stop)
    try:
        child.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    return None, time.monotonic() - start


def tests_markdown(junit: Path, code: int | None, seconds: float) -> tuple[str, int]:
    """`tests.md` from pytest's JUnit XML, and the part's outcome (`PASSED`, `DIFFERS`, `INCOMPLETE`)."""
    lines = ["# Tests on the device", ""]
    if not junit.is_file():
        lines.append(f"pytest wrote no report (exit {code}, {seconds:.0f} s): see its output.")
        return "\n".join(lines) + "\n", INCOMPLETE
    per_file: dict[str, list[float]] = {}
    failures = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        file = case.get("classname", "").replace(".", "/") + ".py"
        counts = per_file.setdefault(file, [0, 0, 0, 0.0])  # passed, failed, skipped, seconds
        counts[3] += float(case.get("time", 0))
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        if problem is not None:
            counts[1] += 1
            message = (problem.get("message") or "").strip().splitlines()
            failures.append(f"- `{file}::{case.get('name')}`: {message[0][:300] if message else 'failed'}")
        elif case.find("skipped") is not None:
            counts[2] += 1
        else:
            counts[0] += 1
    lines += ["| file | passed | failed | skipped | seconds |", "| --- | ---: | ---: | ---: | ---: |"]
    for file, (passed, failed, skipped, spent) in sorted(per_file.items()):
        lines.append(f"| {file} | {passed} | {failed} | {skipped} | {spent:.1f} |")
    lines += ["", f"pytest exit {code}, {seconds:.0f} s wall.", ""]
    if failures:
        lines += ["Failed:", "", *failures, ""]
    if code is None:
        lines.append("Stopped at its time limit: the tests above are those that ran.")
    outcome = DIFFERS if failures or code == 1 else PASSED if code == 0 else INCOMPLETE
    return "\n".join(lines).rstrip() + "\n", outcome


def run_tests(args, out: Path, env: dict[str, str], timeout: float) -> tuple[int, float]:
    tests = SMOKE_TESTS if args.smoke else DEVICE_TESTS
    junit = out / "tests.xml"
    junit.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", "--durations=10"]
    code, seconds = run_child([*command, *tests], env, timeout)
    markdown, outcome = tests_markdown(junit, code, seconds)
    (out / "tests.md").write_text(markdown)
    return outcome, seconds


def environment_markdown() -> str:
    """The device, jax and jaxlib, and the CUDA or TPU runtime the numbers were measured with."""
    import importlib.metadata

    import jax
    import jaxlib

    device = jax.devices()[0]
    rows = [
        ("platform", device.platform),
        ("device kind", device.device_kind),
        ("devices", str(jax.device_count())),
        ("jax", jax.__version__),
        ("jaxlib", jaxlib.__version__),
        ("runtime (PJRT platform version)", " ".join(device.client.platform_version.split())),
    ]
    for package in ("libtpu", "libtpu-nightly", "jax-cuda12-plugin", "jax-cuda13-plugin", "nvidia-cuda-runtime-cu12"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            rows.append((package, importlib.metadata.version(package)))
    if "bytes_limit" in (device.memory_stats() or {}):  # the CPU reports none
        rows.append(("device memory", f"{device.memory_stats()['bytes_limit'] / 2**30:.1f} GiB"))
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    details = jax.print_environment_info(return_string=True)
    return f"# Environment\n\n| | |\n| --- | --- |\n{table}\n\n```text\n{details.strip()}\n```\n"


def run_benchmarks(args) -> int:
    """The benchmarks part, in this process: each benchmark's tables into `--out`, and their
    outcomes into `benchmarks.json` for the process that started this one."""
    sys.path.insert(0, str(Path(__file__).parent))
    import jax

    from scanrewrite.runtime import _chunks

    out, deadline = Path(args.out), time.monotonic() + args.budget_s
    (out / "environment.md").write_text(environment_markdown())
    log(f"== benchmarks on {jax.devices()[0].platform} ({jax.devices()[0].device_kind}), jax {jax.__version__}")
    stats = jax.devices()[0].memory_stats() or {}  # None on the CPU
    benchmarks = SMOKE_BENCHMARKS if args.smoke else device_benchmarks(stats.get("bytes_limit"))
    benchmarks = [benchmark for benchmark in benchmarks if benchmark.module in args.parts]
    outcomes = {}
    for benchmark in benchmarks:
        argv = [arg.replace("{out}", str(out)) for arg in benchmark.argv]
        command = f"python benchmarks/{benchmark.module}.py {' '.join(argv)}"
        if time.monotonic() > deadline:
            outcomes[benchmark.module] = ("skipped: budget spent", 0.0)
            log(f"== {benchmark.module}: skipped, the budget is spent")
            continue
        log(f"== {benchmark.module}: {command}")
        start, printed = time.monotonic(), io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                code = importlib.import_module(benchmark.module).main(argv)
            outcome = "ok" if code == 0 else "DIFFERS"
        except Exception:
            printed.write("\n```text\n" + traceback.format_exc() + "```\n")
            outcome = "error"
        finally:
            _chunks._FORCE_LAYOUT = None  # some pin a layout; the next one starts from the backend's
        seconds = time.monotonic() - start
        title = f"# {benchmark.module}" + (f": {benchmark.what}" if benchmark.what else "")
        (out / f"{benchmark.module}.md").write_text(f"{title}\n\n```bash\n{command}\n```\n\n{printed.getvalue()}")
        outcomes[benchmark.module] = (outcome, seconds)
        (out / "benchmarks.json").write_text(json.dumps(outcomes))
        log(f"== {benchmark.module}: {outcome} in {seconds:.0f} s")
    (out / "benchmarks.json").write_text(json.dumps(outcomes))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "accelerator-results"), help="folder for the tables")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, on the CPU (JAX_PLATFORMS=cpu)")
    parser.add_argument("--budget-s", type=float, help="seconds for the whole run (default 960; 300 with --smoke)")
    parts = ["tests", *(benchmark.module for benchmark in SMOKE_BENCHMARKS)]
    parser.add_argument("--parts", nargs="+", choices=parts, default=parts, help="run only these (default: all)")
    parser.add_argument("--benchmarks-only", action="store_true", help=argparse.SUPPRESS)  # the second part's process
    args = parser.parse_args(argv)
    if args.budget_s is None:
        # Measured on a TPU v5e with Flax (2026-12-06): the tests 280 s, memory_curve's GPT-style
        # stack 272 s (its other two shapes less), long_scan, compile_time and
        # per_step_checkpoint 131 s, and each process opening the chip about 15 s.
        args.budget_s = 300.0 if args.smoke else 960.0
    if args.benchmarks_only:
        return run_benchmarks(args)
    start = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("summary", "environment", *args.parts):
        (out / f"{stale}.md").unlink(missing_ok=True)
    (out / "benchmarks.json").unlink(missing_ok=True)
    env = child_env(args.smoke)

    rows, exits = [], []
    if "tests" in args.parts:
        # With benchmarks to follow, the tests may take half of the budget (they get what is left).
        share = 0.5 if set(args.parts) - {"tests"} else 1.0
        log(f"== tests on the device ({'SMOKE_TESTS' if args.smoke else 'DEVICE_TESTS'}); table in {out}/tests.md")
        outcome, seconds = run_tests(args, out, env, timeout=share * args.budget_s)
        log(f"== tests: {['passed', 'FAILED', 'incomplete'][outcome]} in {seconds:.0f} s")
        rows.append(f"| tests (tests.md) | {['passed', 'FAILED', 'incomplete'][outcome]} | {seconds:.0f} |")
        exits.append(outcome)
    if set(args.parts) - {"tests"}:
        left = args.budget_s - (time.monotonic() - start)
        # The child starts no benchmark past its budget; this process stops it a little later.
        command = [sys.executable, __file__, "--benchmarks-only", "--out", str(out), "--budget-s", str(max(left - 30, 0))]
        command += ["--parts", *args.parts, *(["--smoke"] if args.smoke else [])]
        code, _ = run_child(command, env, timeout=left, stop=signal.SIGTERM)
        outcomes = json.loads((out / "benchmarks.json").read_text()) if (out / "benchmarks.json").is_file() else {}
        unfinished = [b.module for b in SMOKE_BENCHMARKS if b.module in args.parts and b.module not in outcomes]
        for i, module in enumerate(unfinished):
            if code is None:
                outcomes[module] = ("stopped at the budget" if i == 0 else "not started: budget spent", 0.0)
            else:
                outcomes[module] = (f"not finished: its process exited {code}", 0.0)
        rows += [
            f"| {name}{f' ({name}.md)' if (out / f'{name}.md').is_file() else ''} | {outcome} | {seconds:.0f} |"
            for name, (outcome, seconds) in outcomes.items()
        ]
        exits += [
            DIFFERS if outcome == "DIFFERS" else PASSED if outcome == "ok" else INCOMPLETE
            for outcome, _ in outcomes.values()
        ]
    status = DIFFERS if DIFFERS in exits else max(exits)
    summary = "\n".join(
        [
            f"# Accelerator run{' (smoke, CPU)' if args.smoke else ''}",
            "",
            "Device and versions: environment.md.",
            "",
            "| part | outcome | seconds |",
            "| --- | --- | ---: |",
            *rows,
            "",
            f"Exit {status} after {time.monotonic() - start:.0f} s (budget {args.budget_s:.0f} s).",
            "",
        ]
    )
    (out / "summary.md").write_text(summary)
    print(summary)
    return status


if __name__ == "__main__":
    sys.exit(main())
