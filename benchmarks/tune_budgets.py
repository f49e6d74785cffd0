"""`scanrewrite-tune` at three budgets between the checkpointed scan's memory and the for-loop's.

For each target `FILE.py:FACTORY` (a program whose site is written
`jax.lax.scan(jax.checkpoint(f))` and rewritten, as `tune_gpt.py`'s and `tune_llama.py`'s are):

1. one process compiles the function as the original (`lax.scan(jax.checkpoint(f))`, m0) and as
   the for-loop's program (`unroll=N, store=N`: every step stored, m1) and reads XLA's temp
   memory of each, and the largest relative difference of the for-loop's outputs from the
   original's (per leaf, the largest difference over the largest magnitude, as the tuner
   measures it): two programs the same up to rounding;
2. the tuner runs as a user runs it, `python -m scanrewrite.tune FILE.py:FACTORY --ks 1,4
   --memory-budget BYTES --compile-threads 8 -v` with no `--rtol`, at m0 + f (m1 - m0) for
   f = 1/4, 1/2, 3/4, each in a process of its own (one process at a time can hold an
   accelerator), its log appended to `OUT/<target>.log`;
3. each run's table is read back: its exit code, the heading's verdict on rounding, the pick,
   the fastest timed candidate that fits and computes the original's numbers (the pick should
   be it, or within the noise of it), and every candidate marked `differs` with its max rel
   diff beside the for-loop's. `OUT/summary.md` collects them.

    python benchmarks/tune_budgets.py tune_gpt.py:medium tune_llama.py:medium --out DIR   # a device
    python benchmarks/tune_budgets.py tune_gpt.py:smoke tune_llama.py:smoke --out DIR     # the CPU
    python benchmarks/tune_budgets.py --summarize DIR/gpt.log                             # re-read logs
    python benchmarks/tune_budgets.py tune_gpt.py:small --endpoints DIR/endpoints.json --fractions 0.25

Runs go half-way first (every target), then a quarter, then three quarters, so that a run cut
short by `--deadline-s` (start no run after it) or `--limit-s` (stop the run in flight at it,
exit 124 in its row) still has each target at one budget. Exits 0 when every run exited 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FRACTIONS = (0.5, 0.25, 0.75)
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _name(target: str) -> str:
    file, _, factory = target.partition(":")
    return f"{Path(file).stem}-{factory}"


def endpoints(targets: list[str]) -> dict[str, dict]:
    """target -> {m0, m1, steps, for_loop_diff, ...}, all in this process."""
    import jax
    import numpy as np

    from scanrewrite import runtime
    from scanrewrite.tune._factory import load

    found = {}
    for target in targets:
        file, _, factory = target.partition(":")
        fn, args, kwargs = load(f"{HERE / file}:{factory}")
        with runtime.record_sites() as calls:
            jax.eval_shape(fn, *args, **kwargs)
        (site,) = calls
        steps = jax.tree.leaves(args[0])[0].shape[0]  # the layers, scanned over as `xs`
        result = {"site": str(site), "steps": steps}
        outs = {}
        for label, settings in (("m0", {"unroll": runtime.ORIGINAL}), ("m1", {"unroll": steps, "store": steps})):
            with runtime.override(**settings):
                start = time.perf_counter()
                compiled = jax.jit(fn).lower(*args, **kwargs).compile()
                result[f"{label}_compile_s"] = round(time.perf_counter() - start, 1)
            result[label] = compiled.memory_analysis().temp_size_in_bytes
            outs[label] = [np.asarray(leaf, np.float64) for leaf in jax.tree.leaves(jax.block_until_ready(compiled(*args, **kwargs)))]
        result["for_loop_diff"] = max(
            float(np.max(np.abs(a - e)) / np.max(np.abs(e))) if np.max(np.abs(e)) > 0 else float(np.max(np.abs(a)))
            for a, e in zip(outs["m1"], outs["m0"], strict=True)
        )
        result["device"] = f"{jax.devices()[0].platform} ({jax.devices()[0].device_kind}), jax {jax.__version__}"
        found[target] = result
        print(json.dumps({target: result}), flush=True)
    return found


def _bytes(text: str) -> float | None:
    match = re.fullmatch(r"\s*([0-9.]+) (B|KiB|MiB|GiB|TiB)\s*", text)
    return float(match.group(1)) * _UNITS[match.group(2)] if match else None


def summarize(log: str, budget: float | None = None, for_loop_diff: float | None = None) -> dict:
    """What one run's log says: the heading's verdict, the pick, the fastest that fits, `differs`."""
    heading = next((line for line in log.splitlines() if "memory budget" in line and "jax" in line), "")
    if budget is None:
        match = re.search(r"memory budget ([0-9.]+ \w+)", heading)
        budget = _bytes(match.group(1)) if match else None
    verdict = re.search(r"the function computes in \w+.*", heading)
    pick_line = next((line for line in log.splitlines() if re.match(r"\S+:\d+ \(\w+, written", line)), "")
    rows, table = [], False
    for line in log.splitlines():
        if line.startswith("| candidate |"):
            table = True
            continue
        if table and not line.startswith("|"):
            table = False
        if table and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append({"name": cells[0], "ms": cells[2], "spread": cells[3], "memory": cells[4], "diff": cells[8],
                         "mark": cells[9]})  # fmt: skip
    fits = []
    for row in rows:
        memory = _bytes(row["memory"])
        timed = row["ms"] not in ("n/a", "")
        if timed and memory is not None and (budget is None or memory <= budget) and "differs" not in row["mark"]:
            fits.append((float(row["ms"]), row))
    fastest = min(fits, key=lambda f: f[0])[1] if fits else None
    pick = next((row for row in rows if row["mark"] == "pick"), None)
    differs = [row for row in rows if "differs" in row["mark"]]
    return {
        "verdict": verdict.group(0) if verdict else "(no rounding verdict: not a narrow float, or --rtol)",
        "pick_line": pick_line,
        "pick": pick,
        "fastest": fastest,
        "pick_is_fastest": pick is not None and fastest is not None and pick["name"] == fastest["name"],
        "pick_within_noise": pick is not None and fastest is not None and _within_noise(pick, fastest),
        "differs": differs,
        "differs_closer_than_for_loop": [r for r in differs if for_loop_diff is not None and r["diff"] != "n/a"
                                         and float(r["diff"]) <= for_loop_diff],
    }


def _within_noise(pick: dict, fastest: dict) -> bool:
    """Whether the pick's median is within the larger spread of the fastest's, as the tuner's
    rule ties them."""
    spread = max(float(r["spread"].strip("±%") or 0) / 100 for r in (pick, fastest))
    return float(pick["ms"]) <= float(fastest["ms"]) * (1 + spread)


def _row(row: dict | None) -> str:
    return "none" if row is None else f"{row['name']} ({row['ms']} ms {row['spread']}, {row['memory']})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="FILE.py:FACTORY, FILE relative to benchmarks/")
    parser.add_argument("--out", default="tune-budgets")
    parser.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS))
    parser.add_argument("--compile-threads", type=int, default=8)
    parser.add_argument("--deadline-s", type=float, default=None, help="start no run after this many seconds")
    parser.add_argument("--limit-s", type=float, default=None, help="stop a run still going after this many seconds")
    parser.add_argument("--endpoints-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--endpoints", metavar="JSON", help="read the endpoints from an earlier run's endpoints.json "
                        "(XLA's memory is exact, the for-loop's difference deterministic) instead of compiling them")
    parser.add_argument("--summarize", nargs="+", metavar="LOG", help="re-read tuner logs and print their summary")
    args = parser.parse_args(argv)
    if args.summarize:
        for path in args.summarize:
            for run in Path(path).read_text().split("\n=== ")[1:]:
                head, _, body = run.partition("\n")
                if head.startswith("exit"):
                    print(f"  {head}")
                    continue
                print(f"{path}: {head}\n  {json.dumps(summarize(body), indent=1)}")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.endpoints_only:
        (out / "endpoints.json").write_text(json.dumps(endpoints(args.targets), indent=1))
        return 0
    start = time.perf_counter()
    # Stopped from outside (`timeout`), stop the run in flight too: a tuner left running holds
    # the accelerator, and the next process to open it fails (subprocess.run kills its child on
    # any exception).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    left = lambda: None if args.limit_s is None else max(1.0, args.limit_s - (time.perf_counter() - start))
    # The endpoints in a process of their own: it lets go of the device before the tuner runs.
    if args.endpoints:
        given = json.loads(Path(args.endpoints).read_text())
        (out / "endpoints.json").write_text(json.dumps({t: given[t] for t in args.targets}, indent=1))
    else:
        try:
            done = subprocess.run([sys.executable, __file__, *args.targets, "--out", str(out), "--endpoints-only"],
                                  check=False, timeout=left())  # fmt: skip
        except subprocess.TimeoutExpired:
            print("endpoints stopped at --limit-s", file=sys.stderr)
            return 2
        if done.returncode:
            print(f"endpoints failed: exit {done.returncode}", file=sys.stderr)
            return 2
    found = json.loads((out / "endpoints.json").read_text())
    summary = [f"# tune_budgets.py, {next(iter(found.values()))['device']}\n",
               "| target | budget | bytes | exit | pick | fastest that fits | pick is it (within noise) | differs (max rel diff) | for-loop's diff |",
               "| --- | --- | ---: | ---: | --- | --- | --- | --- | ---: |"]  # fmt: skip
    for target, e in found.items():
        print(f"{target}: checkpointed scan {e['m0'] / 2**20:.1f} MiB, for-loop {e['m1'] / 2**20:.1f} MiB "
              f"(max rel diff from the original {e['for_loop_diff']:.1e})", flush=True)  # fmt: skip
    failed = False
    for fraction in args.fractions:
        for target, e in found.items():
            if args.deadline_s is not None and time.perf_counter() - start > args.deadline_s:
                print(f"skipped {target} at {fraction}: past the deadline", flush=True)
                continue
            budget = int(e["m0"] + fraction * (e["m1"] - e["m0"]))
            command = [sys.executable, "-m", "scanrewrite.tune", f"{HERE / target.partition(':')[0]}:{target.partition(':')[2]}",
                       "--ks", "1,4", "--memory-budget", str(budget), "--compile-threads", str(args.compile_threads), "-v"]  # fmt: skip
            log = out / f"{_name(target)}.log"
            with log.open("a") as sink:
                sink.write(f"\n=== {target} at {fraction} of the way: {budget} bytes "
                           f"({budget / 2**30:.3f} GiB; m0 {e['m0']}, m1 {e['m1']})\n$ {' '.join(command[1:])}\n")  # fmt: skip
                sink.flush()
                began = time.perf_counter()
                try:
                    rc = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, check=False, timeout=left(),
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode  # fmt: skip
                except subprocess.TimeoutExpired:
                    rc = 124  # as `timeout` says it
                sink.write(f"=== exit {rc} after {time.perf_counter() - began:.0f} s\n")
            failed |= rc != 0
            text = log.read_text().split("\n=== ")[-2]
            s = summarize(text, budget, e["for_loop_diff"])
            differs = ", ".join(f"{r['name']} ({r['diff']})" for r in s["differs"]) or "none"
            summary.append(f"| {target} | {fraction} | {budget} | {rc} | {_row(s['pick'])} | {_row(s['fastest'])} "
                           f"| {'yes' if s['pick_is_fastest'] else 'no'} ({'yes' if s['pick_within_noise'] else 'no'}) | {differs} | {e['for_loop_diff']:.1e} |")  # fmt: skip
            summary.append(f"|  | verdict: {s['verdict'][:300]} |  |  |  |  |  |  |  |")
            (out / "summary.md").write_text("\n".join(summary) + "\n")
            print(summary[-2], flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
