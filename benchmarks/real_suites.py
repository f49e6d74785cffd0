"""Real projects' test suites before and after `scanrewrite --unroll 3`, run interleaved.

For each project: its sdist is downloaded at run time (`pip download --no-deps --no-binary
:all:`, nothing of it is kept in this repository) and unpacked twice, as `before/` and `after/`;
`after/` is rewritten with `python -m scanrewrite --unroll 3 <package folder>`. Then the same
pytest command (only the test files whose code reaches a rewritten scan) runs in each, in
rounds, each in a fresh process, the order turned around every round (before, after, after,
before, ...) so that a machine that slows down or speeds up during the run favours neither;
the table gives, per project, the tests passed and failed in each copy, and the after/before
ratio per round (median, min and max) of the wall time, of the CPU time (user + sys of the
pytest process tree) and of the time inside the tests (the sum of pytest's durations of every
test's setup, call and teardown, which leaves out start-up, imports and collection). The load
average is printed beside it: on a shared machine the CPU time is the number to read.

After the timed rounds, one more (untimed) session of the after-suite runs inside
`scanrewrite.runtime.record_sites()` (the pytest plugin `real_steps/scanrewrite_sites.py`), and
a second table counts the rewritten call sites it ran: all of them, those where the runtime
planned for a derivative (no plan of the site says "nothing can differentiate the call"; inside
`jax.jit` it cannot rule one out), and those called under a derivative (`jax.grad`, `jax.vjp`,
`jax.jvp`: the tests took one). A project may name a step file of `real_steps/`, training
steps of its own code that record their losses and trained parameters; it is copied into both
copies and runs with the tests, and the table gives the largest relative difference of those
numbers after against before (and before against before, to show that the step repeats).
`--rounds 0` runs only that count.

The projects' own dependencies must be importable by this Python (they are not installed here):

    pip install absl-py chex distrax dm_env tree-math dm-haiku einops gin-config scikit-image optax
    pip install --no-deps colt minato rjsonnet cloudpickle dill formed==0.0.5 jmp safetensors aqtp
    pip install diffrax jax-autovmap hypothesis paramax lineax tqdm beartype  # bijx, flowjax
    pip install --no-deps flowjax==19.1.2  # its metadata, which flowjax reads on import

    python benchmarks/real_suites.py [--projects rlax jax-cfd] [--rounds 3] [--dir DIR]
        [--source NAME=DIR] [--other-runtime DIR] [--profile]

A project whose release on the registry is not the one measured (or has no sdist pip can
download) names a commit of its repository instead; `--source NAME=DIR` then gives a folder
holding that commit's tree (e.g. `git archive COMMIT | tar -x -C DIR`), which is copied into
`before/` and `after/`. A row may also name the options of the rewrite (`--unroll 4 --targets
...` for the Flax and equinox projects that scan over layers) and the folder of its package
that goes on `PYTHONPATH` (`src` for a src layout).

`--other-runtime DIR` runs the after-suite a second time in each round with the scanrewrite of
the checkout DIR (another branch's runtime), as a third column.

`--profile` instead runs each after-suite once under cProfile and prints the runtime's frames
by cumulative time (where the rewrite's time goes). Some tests of these releases fail on a
newer jax before the rewrite too; the table counts them so that before and after compare alike.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import NamedTuple


class Project(NamedTuple):
    """A project on the registry: its pinned release (or `git:OWNER/NAME@COMMIT`, unpacked from
    `--source`), the package folder to rewrite, the test files to run (those that import a module
    with a scan, relative to the sdist's root), the options of the rewrite, the folder that
    goes on `PYTHONPATH` for its package to import ("" for the root), and a step file of
    `real_steps/` (training steps of the project's own code that record their numbers), run
    beside the tests."""

    requirement: str
    package: str
    tests: tuple[str, ...]
    options: tuple[str, ...] = ("--unroll", "3")
    path: str = ""
    step: str | None = None


#: The options of the rewrite for the projects that scan over layers, as issue 43 tried them.
_LAYERS = ("--unroll", "4", "--targets", "lax.scan,eqxi.scan,nnx.scan,linen.scan")


PROJECTS = {
    # RL losses: multistep returns and v-trace, under jit, vmap and grad.
    "rlax": Project(
        "rlax==0.1.9",
        "rlax",
        tuple(
            f"rlax/_src/{name}_test.py" for name in ("multistep", "nonlinear_bellman", "value_learning", "vtrace")
        ),
    ),
    # Fluid simulations: trajectories of time steps, under jit (some tests fail on a newer jax).
    "jax-cfd": Project(
        "jax-cfd==0.2.1",
        "jax_cfd",
        (
            "jax_cfd/base/funcutils_test.py",
            "jax_cfd/base/array_utils_test.py",
            "jax_cfd/base/time_stepping_test.py",
            "jax_cfd/spectral/time_stepping_test.py",
        ),
    ),
    # Samplers: inference loops, slice sampling and tempered SMC, under jit and vmap.
    "blackjax": Project(
        "blackjax==1.7.1",
        "blackjax",
        ("tests/test_util.py", "tests/mcmc/test_slice.py", "tests/smc/test_tempered_smc.py"),
    ),
    # Flax NNX: `@nnx.split_rngs` + `@nnx.scan(in_axes=(nnx.Carry, 0, 0))` over blocks that
    # `nnx.vmap` built (feed-forward, RNN and transformer encoders). The last commit before the
    # project moved to `jax.lax.scan` over its modules; not on the registry at that commit.
    "formed-nnx": Project(
        "git:altescy/formed@dbfdb05bcff931477f5680281b0eef630c49f171",
        "src/formed",
        ("tests/integrations/flax/modules/test_feedforward.py", "tests/integrations/flax/modules/test_encoders.py"),
        _LAYERS,
        "src",
    ),
    # equinox: `Stacked` scans a block over layers that `filter_vmap` built, through its own
    # `scan` (a per-step `eqx.filter_checkpoint` with a policy built in a helper).
    "haliax": Project(
        "haliax==1.4.dev453", "src/haliax", ("tests/test_scan.py", "tests/test_hof.py"), _LAYERS, "src"
    ),
    # Flax NNX normalizing flows: `ScanChain` is `jax.lax.scan` over a stack of bijections
    # split with `nnx.split` (forward, and reversed), trained with `nnx.value_and_grad`.
    "bijx": Project(
        "bijx==1.3.2",
        "src/bijx",
        (
            "tests/test_architectures.py::TestCouplingFlow",
            "tests/test_architectures.py::TestInitFor",
            "tests/test_bijections_core.py::TestBijectionChaining::test_scan_chain_bijection",
        ),
        _LAYERS,
        "src",
        "bijx_step.py",
    ),
    # equinox normalizing flows: `Scan` is `jax.lax.scan` over stacked flow layers, and a masked
    # autoregressive layer's inverse a `jax.lax.scan` over dimensions, trained by its own loops.
    "flowjax": Project(
        "flowjax==19.1.2",
        "flowjax",
        ("tests/test_bijections/test_masked_autoregressive.py", "tests/test_bijections/test_jax_transforms.py", "tests/test_flows.py"),
        _LAYERS,
        "",
        "flowjax_step.py",
    ),
}

#: Where a step file, copied into a project's root, is found, and what it imports to record.
_STEP_TEST, _STEP_RECORD = "scanrewrite_step_test.py", "scanrewrite_step_record.py"

#: This checkout, whose scanrewrite rewrites and (by default) runs the rewritten code.
_HERE = Path(__file__).resolve().parent.parent
_STEPS = _HERE / "benchmarks" / "real_steps"
_ENV = {**os.environ, "PYTHONPATH": str(_HERE)}


def unpack(name: str, project: Project, workdir: Path, source: Path | None = None) -> tuple[Path, Path]:
    """The project's sdist (or the tree in `source`) unpacked into `before/` and `after/` under
    `workdir` (downloaded and rewritten once; reused when there)."""
    before, after = workdir / "before" / name, workdir / "after" / name
    if after.exists():
        return before, after
    if project.requirement.startswith("git:"):
        if source is None:
            raise SystemExit(f"error: {name} is {project.requirement}: give its tree with --source {name}=DIR")
        for target in (before, after):
            shutil.copytree(source, target, symlinks=True)
            _add_step(project, target)
        _rewrite(project, after)
        return before, after
    downloads = workdir / "sdists"
    downloads.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(downloads)]
        + [project.requirement],
        check=True,
    )
    stem = project.requirement.replace("==", "-").replace("-", "_").lower()
    (sdist,) = [p for p in downloads.iterdir() if p.name.replace("-", "_").lower().startswith(stem)]
    for target in (before, after):
        with tarfile.open(sdist) as archive:
            top = archive.getnames()[0].split("/")[0]
            archive.extractall(target.parent, filter="data")
        shutil.move(target.parent / top, target)
        _add_step(project, target)
    _rewrite(project, after)
    return before, after


def _add_step(project: Project, root: Path) -> None:
    if project.step is not None:
        shutil.copy(_STEPS / project.step, root / _STEP_TEST)
        shutil.copy(_STEPS / "_record.py", root / _STEP_RECORD)


def _tests(project: Project) -> tuple[str, ...]:
    return (*project.tests, _STEP_TEST) if project.step is not None else project.tests


def _rewrite(project: Project, after: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "scanrewrite", *project.options, project.package], cwd=after, env=_ENV, check=True
    )


class Run(NamedTuple):
    wall: float
    cpu: float
    passed: int
    failed: int
    in_tests: float


def run_tests(
    folder: Path,
    tests: tuple[str, ...],
    profile: Path | None = None,
    runtime: Path = _HERE,
    path: str = "",
    numbers: Path | None = None,
    sites: Path | None = None,
) -> Run:
    """One pytest process over `tests` in `folder`, importing scanrewrite from the checkout
    `runtime` (and the project from `folder / path`, where `path` is not empty): wall and CPU
    seconds (user + sys of the process tree), tests passed and failed, and the seconds pytest
    timed inside the tests. A step file writes its numbers to `numbers`; with `sites`, the
    rewritten call sites the session ran are counted into that file (`real_steps/scanrewrite_sites.py`)."""
    command = [sys.executable]
    if profile is not None:
        command += ["-m", "cProfile", "-o", str(profile)]
    command += ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0", "--durations-min=0", *tests]
    command += ["-p", "scanrewrite_sites"] if sites is not None else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    paths = [str(folder / path)] * bool(path) + [str(runtime)] + [str(_STEPS)] * (sites is not None)
    env = {**_ENV, "PYTHONPATH": os.pathsep.join(paths)}
    for name, file in (("SCANREWRITE_STEP_OUT", numbers), ("SCANREWRITE_SITES_OUT", sites)):
        if file is not None:
            file.unlink(missing_ok=True)
            env[name] = str(file)
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|error)", summary)}
    if not counts:
        raise SystemExit(f"error: no pytest summary in {folder}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    in_tests = sum(float(t) for t in re.findall(r"^([\d.]+)s (?:setup|call|teardown) ", result.stdout, re.MULTILINE))
    return Run(wall, cpu, counts.get("passed", 0), counts.get("failed", 0) + counts.get("error", 0), in_tests)


def ratios(after: list[float], before: list[float]) -> str:
    """The per-round after/before ratios as 'median (min-max)'."""
    r = [a / b for a, b in zip(after, before)]
    return f"{statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})"


def show_profile(path: Path, limit: int = 25) -> None:
    import pstats

    stats = pstats.Stats(str(path))
    stats.sort_stats("cumulative").print_stats(r"scanrewrite", limit)


def differences(after: Path, before: Path) -> tuple[float, float]:
    """The largest relative difference between two step files' numbers: of each loss, and of the
    trained parameters of each step as a whole (the largest difference over the largest
    magnitude: a parameter near zero does not inflate it)."""
    a, b = json.loads(after.read_text()), json.loads(before.read_text())
    if a.keys() != b.keys():
        raise SystemExit(f"error: {after} and {before} hold different steps")

    losses = params = 0.0
    for name in a:
        if len(a[name]["params"]) != len(b[name]["params"]) or len(a[name]["losses"]) != len(b[name]["losses"]):
            raise SystemExit(f"error: {after} and {before} differ in shape at {name}")
        pairs = list(zip(a[name]["losses"], b[name]["losses"]))
        losses = max([losses, *(abs(p - q) / max(abs(p), abs(q), 1e-30) for p, q in pairs)])
        x, y = a[name]["params"], b[name]["params"]
        scale = max([1e-30, *map(abs, x), *map(abs, y)])
        params = max([params, *(abs(p - q) / scale for p, q in zip(x, y))])
    return losses, params


def count_sites(folder: Path, project: Project, out: Path) -> dict[str, dict]:
    """The rewritten call sites one more (untimed) pytest session in `folder` runs: per site, as
    `real_steps/scanrewrite_sites.py` writes them."""
    run_tests(folder, _tests(project), path=project.path, sites=out)
    if not out.exists():
        raise SystemExit(f"error: {folder}: the session wrote no site counts")
    return json.loads(out.read_text())


def table(folders: dict, runs: dict[tuple[str, str], list[Run]], other_runtime: Path | None) -> None:
    """The timed rounds of each project, as a Markdown table."""
    print(
        "| project | runtime | passed / failed before | after | wall before (s) | wall after/before "
        "| CPU before (s) | CPU after/before | in tests before (s) | in tests after/before |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in folders:
        b = runs[(name, "before")]
        for side, runtime in (("after", _HERE), ("other", other_runtime)):
            if (name, side) not in runs:
                continue
            a = runs[(name, side)]
            print(
                f"| {name} | {runtime.name} | {b[0].passed} / {b[0].failed} | {a[0].passed} / {a[0].failed} "
                f"| {statistics.median(r.wall for r in b):.1f} | {ratios([r.wall for r in a], [r.wall for r in b])} "
                f"| {statistics.median(r.cpu for r in b):.1f} | {ratios([r.cpu for r in a], [r.cpu for r in b])} "
                f"| {statistics.median(r.in_tests for r in b):.1f} "
                f"| {ratios([r.in_tests for r in a], [r.in_tests for r in b])} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", nargs="+", default=list(PROJECTS), choices=list(PROJECTS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/scanrewrite-real-suites"))
    parser.add_argument("--source", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--other-runtime", type=Path)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    sources = {name: Path(folder) for name, _, folder in (item.partition("=") for item in args.source)}
    folders = {name: unpack(name, PROJECTS[name], args.dir, sources.get(name)) for name in args.projects}
    if args.profile:
        for name, (_, after) in folders.items():
            path = args.dir / f"{name}.prof"
            print(f"## {name}: {run_tests(after, _tests(PROJECTS[name]), path, path=PROJECTS[name].path)}")
            show_profile(path)
        return
    numbers = args.dir / "numbers"
    numbers.mkdir(exist_ok=True)
    runs: dict[tuple[str, str], list[Run]] = {}
    for round_ in range(args.rounds):
        for name, (before, after) in folders.items():
            project = PROJECTS[name]
            sides = [("before", before, _HERE), ("after", after, _HERE)]
            if args.other_runtime:
                sides.append(("other", after, args.other_runtime.resolve()))
            for side, folder, runtime in sides if round_ % 2 == 0 else reversed(sides):
                out = numbers / f"{name}-{side}-{round_}.json" if project.step else None
                run = run_tests(folder, _tests(project), runtime=runtime, path=project.path, numbers=out)
                runs.setdefault((name, side), []).append(run)
                print(f"round {round_ + 1} {name} {side}: {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, "
                      f"{run.in_tests:.1f} s in tests, {run.passed} passed, {run.failed} failed; load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    print(f"{args.rounds} rounds, interleaved; load average at the end {os.getloadavg()} on {os.cpu_count()} cores\n")
    if args.rounds:
        table(folders, runs, args.other_runtime)
    print("\n| project | rewritten sites run | planned for a derivative | ran under a derivative "
          "| step numbers, after vs before: losses, parameters | before vs before |")
    print("| --- | ---: | ---: | ---: | --- | --- |")
    for name, (_, after) in folders.items():
        project = PROJECTS[name]
        sites = count_sites(after, project, args.dir / f"{name}-sites.json")
        planned = sum(site["planned_for_derivative"] for site in sites.values())
        derived = sum(site["under_derivative"] for site in sites.values())
        diff = same = "-"
        if project.step and args.rounds:
            found = [differences(numbers / f"{name}-after-{r}.json", numbers / f"{name}-before-{r}.json")
                     for r in range(args.rounds)]
            diff = f"{max(f[0] for f in found):.1e}, {max(f[1] for f in found):.1e}"
            # Whether the step itself repeats exactly: the floor the difference above is read against.
            found = [differences(numbers / f"{name}-before-{r}.json", numbers / f"{name}-before-0.json")
                     for r in range(1, args.rounds)]
            same = f"{max(f[0] for f in found):.1e}, {max(f[1] for f in found):.1e}" if found else "-"
        print(f"| {name} | {len(sites)} | {planned} | {derived} | {diff} | {same} |")
        for site, found in sorted(sites.items()):
            built = sorted({plan.split(". Why:")[0] for plan in found["plans"]})
            print(f"{name}: {os.path.relpath(site, after)}: planned for a derivative {found['planned_for_derivative']}, "
                  f"under one {found['under_derivative']}; built: {'; '.join(built) or 'nothing'}", file=sys.stderr)


if __name__ == "__main__":
    main()
