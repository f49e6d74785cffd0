"""CI's version matrix: the tests that need jax on the floor, between and newest releases, and the
command line's tests on every supported Python, each part in a virtual environment of its own.

    python .ci/matrix.py            # every part, two at a time (SCANREWRITE_CI_WORKERS)
    python .ci/matrix.py floor      # or only the parts named
    python .ci/matrix.py --list     # the parts, without running anything
    python .ci/matrix.py --with-main  # and `.ci/run`'s parts in the main environment, in one pool

Each part's environment lives in `.ci/envs/<part>` (ignored by git) and is kept between runs, so a
local rerun is fast. A kept environment cannot hide a failure: it is rebuilt from scratch when its
recipe (this file's part, `pyproject.toml`, the interpreter) changes; the project and the pinned
versions are installed into it on every run; `.ci/check_env.py` then checks the installed versions
against the part's pins, and that jax is absent from a part without it. A part is there to show
that each code path works on its releases, so it runs what does that, not every point the main
suite runs: tests/conftest.py, told the part's name (SCANREWRITE_CI_MATRIX), runs a cover of each
parametrized test's values and leaves out the tests marked `main_only`. A Python that is
not on this machine is a skip, reported on stderr and in the summary, never a pass;
`SCANREWRITE_CI_STRICT=1` makes it a failure. Exits 1 if any part failed.

With `--with-main` (what `.ci/run` uses) the main environment's parts (the README's test command,
the docs, the wheel, the accelerator smoke run; `bash .ci/run --part NAME` runs one) join the
matrix's parts in one pool of two workers, longest first, so that neither core idles while the
main suite runs on the other. Every part's output is shown whole when it ends, with its wall and
CPU time (CPU time: that part's processes, the measure that holds on a loaded machine).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKERS = int(os.environ.get("SCANREWRITE_CI_WORKERS", "2"))
# One part's output at a time on the terminal.
_output = threading.Lock()
ENVS = ROOT / ".ci" / "envs"

# The tests that import jax (the runtime, the fixtures executed, the table of APIs checked against
# jax's own signatures), and those that never do (command line and codemod).
JAX_TESTS = (
    "tests/test_runtime*.py",
    "tests/test_fixtures.py",
    "tests/test_notebook_fixtures.py",
    "tests/test_override.py",
    "tests/test_tune*.py",
    "tests/test_targets.py",
)
CLI_TESTS = (
    "tests/test_cli*.py",
    "tests/test_codemod*.py",
    "tests/test_files.py",
    "tests/test_report.py",
    "tests/test_notebook.py",
    "tests/test_notebook_json.py",
    "tests/test_notebook_cli.py",
)
# The release between the floor (pyproject's lower bounds) and the newest: jax 0.6 with the
# equinox of its time.
BETWEEN = ("jax==0.6.2", "jaxlib==0.6.2", "equinox==0.12.2")
# Flax's own tests, which `between` leaves out: Flax's releases are tested at the floor (0.10) and
# the newest (and the main suite's), and the runtime's Flax layer has no branch by release. What it
# does on jax's side, taking a per-step remat over, runs there in test_runtime_absorb.py. (67 s of
# the part's 280-320.)
FLAX_TESTS = ("tests/test_runtime_flax_*.py", "tests/test_tune_flax.py")


@dataclasses.dataclass(frozen=True)
class Part:
    """One environment and the tests run in it."""

    name: str
    python: str  # "3.10"
    # "lowest": every `>=` bound in pyproject.toml pinned with `==`; "newest": the newest releases
    # (upgraded on every run); or a tuple of pins, the rest newest.
    versions: str | tuple[str, ...]
    with_jax: bool  # install the `runtime` and `flax` extras (jax, equinox, flax), or the command line's deps only
    tests: tuple[str, ...]
    #: Test files matched by `tests` that the part does not run.
    leave_out: tuple[str, ...] = ()


# Longest first, since they run two at a time. The command line's tests on Python 3.10 and 3.13 run
# in the jax parts of the same Python and pins (one environment less each); `cli-3.12` keeps them
# in an environment without jax, which is coverage of its own (the command line never imports
# jax; `tests/test_cli_tune_without_jax.py` runs the real interpreter there).
PARTS = (
    Part("floor", "3.10", "lowest", True, JAX_TESTS + CLI_TESTS),
    Part("newest-3.13", "3.13", "newest", True, JAX_TESTS + CLI_TESTS),
    Part("between", "3.12", BETWEEN, True, JAX_TESTS, leave_out=FLAX_TESTS),
    Part("cli-3.12", "3.12", "newest", False, CLI_TESTS),
)


@dataclasses.dataclass(frozen=True)
class MainPart:
    """One of `.ci/run`'s parts in the main environment (`bash .ci/run --part FUNCTION`)."""

    name: str
    function: str


MAIN_PARTS = (
    MainPart("main suite", "main_suite"),
    MainPart("accelerator smoke", "accelerator_smoke"),
    MainPart("docs", "docs"),
    MainPart("wheel", "wheel"),
)
# Every part, longest first, so that the short ones fill in at the end (wall time on 2026-12-07,
# two at a time, with the tests' compilation cache: the main suite 670 s; newest-3.13 470 s, floor
# 370 s, between 230 s without Flax's tests; the accelerator smoke run 140-210 s, cli-3.12 80 s,
# the docs 25 s, the wheel 12 s; docs/development.md says why the pool is slower than the parts
# alone). With the smoke run after cli-3.12, as when it took 60 s, it ended the run alone: 1225 s
# against about 1185.
ORDER = ("main suite", "newest-3.13", "floor", "between", "accelerator smoke", "cli-3.12", "docs", "wheel")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pyenv_root() -> Path | None:
    """Where pyenv keeps its Pythons, as `pyenv root` says (or $PYENV_ROOT, or ~/.pyenv)."""
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    if shutil.which("pyenv"):
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    home = Path.home() / ".pyenv"
    return home if home.is_dir() else None


def version_of(python: str) -> str | None:
    """The "X.Y" of an interpreter, or None if it does not run (a pyenv shim for a Python that
    is not selected exists on PATH but fails)."""
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python(version: str) -> tuple[str | None, list[str]]:
    """An interpreter for Python `version` ("3.10"), and the places looked in.

    pyenv's versions folder first (the newest patch release), as a new machine would find them,
    then `pythonX.Y` on PATH.
    """
    looked = []
    root = pyenv_root()
    if root is not None:
        pattern = str(root / "versions" / f"{version}.*" / "bin" / f"python{version}")
        looked.append(pattern)
        patch = lambda p: [int(n) if n.isdigit() else -1 for n in re.split(r"[.]", Path(p).parents[1].name)]
        for candidate in sorted(glob.glob(pattern), key=patch, reverse=True):
            if version_of(candidate) == version:
                return candidate, looked
    looked.append(f"python{version} on PATH")
    on_path = shutil.which(f"python{version}")
    if on_path and version_of(on_path) == version:
        return on_path, looked
    return None, looked


def lower_bounds() -> list[str]:
    """Every `name>=X` requirement of pyproject.toml (dependencies and extras) as `name==X`, with
    its environment marker; jaxlib pinned with jax, whose release it must match."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *sum(project["optional-dependencies"].values(), [])]
    pins = []
    for requirement in requirements:
        name, bound, rest = requirement.partition(">=")
        if bound:
            pins.append(f"{name}=={rest}")
            if name == "jax":
                pins.append("jaxlib==" + rest.split(";")[0].strip())
    return pins


def run(command: list[str], log_path: Path, **kwargs) -> bool:
    """Run `command`, its output into `log_path`; on failure, show that output. True if it passed."""
    with open(log_path, "w") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, **kwargs).returncode
    if code != 0:
        log(f"$ {' '.join(command)}  (exit {code})")
        log(log_path.read_text()[-20000:])
    return code == 0


def prepare(part: Part, python: str, env: dict[str, str]) -> Path | None:
    """The part's virtual environment, created or reused, with the project and its pins
    installed; None (after saying why) if that fails."""
    venv = ENVS / part.name
    bin_python = venv / "bin" / "python"
    pins = lower_bounds() if part.versions == "lowest" else [] if part.versions == "newest" else list(part.versions)
    recipe = repr((dataclasses.astuple(part), pins, python, (ROOT / "pyproject.toml").read_text()))
    stamp = hashlib.sha256(recipe.encode()).hexdigest()
    stamp_file = venv / "scanrewrite-ci-recipe"
    if not (stamp_file.is_file() and stamp_file.read_text() == stamp and version_of(str(bin_python)) == part.python):
        shutil.rmtree(venv, ignore_errors=True)
        if not run([python, "-m", "venv", str(venv)], ENVS / f"{part.name}.venv.log", env=env):
            return None
        # The pip a Python ships with can be old (23.0 on 3.10.13): its resolver backtracked for
        # nine minutes over hundreds of releases (orbax-checkpoint, protobuf, humanize) to find
        # the floor's set, downloading each whole; today's finds the same set in under a minute.
        upgrade = [str(bin_python), "-m", "pip", "install", "-q", "--upgrade", "pip"]
        if not run(upgrade, ENVS / f"{part.name}.pip.log", env=env):
            return None
    constraints = ENVS / f"{part.name}.constraints.txt"
    constraints.write_text("".join(pin + "\n" for pin in pins))
    # Flax too, so that the Flax tests run (they skip only where flax is not installed).
    extras = "runtime,flax,test-cli" if part.with_jax else "test-cli"
    # --no-compile: pip byte-compiles every installed module (half of an install's CPU time, 12 of
    # 24 s for `between`); Python compiles those the tests import when they first do (3 s).
    install = [str(bin_python), "-m", "pip", "install", "-q", "-c", str(constraints), "-e", f".[{extras}]"]
    install.insert(5, "--no-compile")
    if part.versions == "newest":
        install[5:5] = ["--upgrade", "--upgrade-strategy", "eager"]
    if not run(install, ENVS / f"{part.name}.install.log", env=env):
        return None
    # What is installed must be what the part says: pins exact, jax absent where it must be.
    check = [str(bin_python), str(ROOT / ".ci" / "check_env.py"), "--jax" if part.with_jax else "--no-jax"]
    if not run([*check, *(pin.split(";")[0].strip() for pin in pins)], ENVS / f"{part.name}.check.log", env=env):
        return None
    stamp_file.write_text(stamp)
    return bin_python


def timed(command: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    """Run `command` from the checkout, its output kept; its exit code, output, and the CPU time
    (user and system) of it and every process it waited for."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return process.returncode, out.read(), usage.ru_utime + usage.ru_stime


def show(name: str, output: str, result: str, wall: float, cpu: float, detail: str = "") -> None:
    """A part's whole output, then its one summary line."""
    with _output:
        print(output, end="", flush=True)
        log(f"== {name}: {result} in {wall:.0f} s ({detail}CPU {cpu:.0f} s)")


def run_part(part: Part) -> str:
    """Run one part; returns "passed", "failed" or "skipped"."""
    start = time.monotonic()
    python, looked = find_python(part.python)
    if python is None:
        log(f"SKIP {part.name}: no Python {part.python} on this machine (looked in: {', '.join(looked)})")
        return "skipped"
    ENVS.mkdir(parents=True, exist_ok=True)
    # The environment's own packages only, never those of whoever runs CI.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    # The part's name: tests/conftest.py then runs what shows each code path on this part's
    # releases, not every point the main suite runs (a cover of each test's parameters, no tests
    # marked `main_only`), and tests/test_codemod_property.py fewer generated programs.
    env["SCANREWRITE_CI_MATRIX"] = part.name
    bin_python = prepare(part, python, env)
    installed = time.monotonic()
    if bin_python is None:
        log(f"FAIL {part.name}: could not build its environment ({installed - start:.0f} s)")
        return "failed"
    log(f"== {part.name}: {(ENVS / f'{part.name}.check.log').read_text().strip()}")
    left_out = {p for pattern in part.leave_out for p in glob.glob(pattern, root_dir=ROOT)}
    tests = sorted({p for pattern in part.tests for p in glob.glob(pattern, root_dir=ROOT)} - left_out)
    if not tests:  # pytest given no files would run the whole suite instead
        log(f"FAIL {part.name}: no test files match {' '.join(part.tests)}")
        return "failed"
    pytest = [str(bin_python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    # Parts run side by side: each one's output is kept and shown whole when it ends.
    code, output, cpu = timed(pytest, env)
    end = time.monotonic()
    result = "passed" if code == 0 else "failed"
    detail = f"environment {installed - start:.0f} s, tests {end - installed:.0f} s, tests' "
    show(part.name, output, result, end - start, cpu, detail)
    return result


def run_main_part(part: MainPart) -> str:
    """Run one of `.ci/run`'s parts in the main environment; returns "passed" or "failed"."""
    start = time.monotonic()
    log(f"== {part.name}: bash .ci/run --part {part.function}")
    code, output, cpu = timed(["bash", str(ROOT / ".ci" / "run"), "--part", part.function], dict(os.environ))
    result = "passed" if code == 0 else "failed"
    show(part.name, output, result, time.monotonic() - start, cpu)
    return result


def main(argv: list[str]) -> int:
    with_main = "--with-main" in argv
    argv = [arg for arg in argv if arg != "--with-main"]
    if argv == ["--list"]:
        for part in PARTS:
            left_out = f" (not {' '.join(part.leave_out)})" if part.leave_out else ""
            print(f"{part.name:12} Python {part.python:5} {part.versions!s:40} {' '.join(part.tests)}{left_out}")
        return 0
    names = {part.name for part in PARTS}
    unknown = [name for name in argv if name not in names]
    if unknown:
        log(f"error: unknown part(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return 2
    jobs: list[Part | MainPart] = [part for part in PARTS if not argv or part.name in argv]
    if with_main:
        jobs = sorted([*jobs, *MAIN_PARTS], key=lambda job: ORDER.index(job.name))
    # Two parts at a time: CI has 2 cores, and a part is one pytest process.
    start = time.monotonic()
    run_job = lambda job: run_main_part(job) if isinstance(job, MainPart) else run_part(job)
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = dict(zip((job.name for job in jobs), pool.map(run_job, jobs)))
    summary = ", ".join(f"{name} {result}" for name, result in results.items())
    log(f"== all parts, {WORKERS} at a time, in {time.monotonic() - start:.0f} s: {summary}")
    strict = os.environ.get("SCANREWRITE_CI_STRICT") == "1"
    return 1 if "failed" in results.values() or (strict and "skipped" in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
