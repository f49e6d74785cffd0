"""The device's own count of a program's memory beside XLA's: `memory_stats()`'s peak.

XLA's compiled temp size (`compile().memory_analysis()`, what `memory_curve.py` reports) is
what the compiler planned for temporaries, and its peak (`peak_memory_in_bytes`, accelerators
only) what it planned for arguments, outputs, temporaries and a loop's stacked state at once;
`memory_stats()["peak_bytes_in_use"]` is what the device's allocator saw.
The peak only grows within a process, so each program runs in a process of its own: compiled,
called once, and reported as the peak during the call less the bytes in use before it (the
arguments), beside its temp size. The programs are `memory_curve.py`'s, by name.

    python benchmarks/peak_memory.py --shape gru     # lax.scan, the checkpointed scan, k = 1, 4, 16
    python benchmarks/peak_memory.py --shape gru --programs "runtime k=4" "lax.scan"
    python benchmarks/peak_memory.py --smoke         # tiny, on the CPU (which reports no peak)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import jax
import memory_curve
from _common import peak_bytes

PROGRAMS = (
    "lax.scan",
    memory_curve.CHECKPOINTED,
    "lax.scan(jax.checkpoint(f), unroll=4)",
    "runtime k=1",
    "runtime k=4",
    "runtime k=16",
)


def _shape(name: str, smoke: bool) -> memory_curve.Shape:
    shape = (memory_curve.SMOKE if smoke else memory_curve.SHAPES)[name]()
    return shape if smoke else dataclasses.replace(shape, ks=(4, 16))


def one(shape: memory_curve.Shape, program: str) -> dict:
    """`program` of `shape` compiled and called once in this process: {temp, peak} in bytes
    (peak None where the device reports no memory stats) and the device; or {error}."""
    try:
        params, h0, xs = shape.arrays()
        compiled = memory_curve.gradient(shape, memory_curve.variants(shape)[program]).lower(params, h0, xs).compile()
        jax.block_until_ready((params, h0, xs))
        device = jax.devices()[0]
        before = device.memory_stats() or {}
        jax.block_until_ready(compiled(params, h0, xs))
        after = device.memory_stats() or {}
    except Exception as error:  # noqa: BLE001 - a row that says why, the others go on
        return {"error": f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:80]}"}
    peak = after.get("peak_bytes_in_use")
    return {
        "temp": compiled.memory_analysis().temp_size_in_bytes,
        "xla_peak": peak_bytes(compiled),
        "peak": None if peak is None else peak - before.get("bytes_in_use", 0),
        "device": f"{device.platform} ({device.device_kind}), jax {jax.__version__}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=list(memory_curve.SHAPES), default="gru")
    parser.add_argument("--programs", nargs="+", default=None, help="memory_curve.py's program names")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (for the CPU, in seconds)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one program, JSON out
    args = parser.parse_args(argv)
    if args.one:
        shape = _shape(args.shape, args.smoke)
        print(json.dumps(one(shape, args.one) if args.one in memory_curve.variants(shape) else {"error": "no such program"}))
        return 0
    # This process never opens the device: each child must be the one process that holds it.
    programs = args.programs or PROGRAMS
    print(f"benchmarks/peak_memory.py, {args.shape}{' (smoke)' if args.smoke else ''}: each program in a process of its own\n")
    print("| program | XLA temp (MiB) | XLA peak (MiB) | peak during the call, less the arguments (MiB) | device |\n"
          "| --- | ---: | ---: | ---: | --- |")
    failed = 0
    for program in programs:
        command = [sys.executable, __file__, "--shape", args.shape, "--one", program, *(["--smoke"] if args.smoke else [])]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = done.stdout.strip().splitlines()
        row = json.loads(lines[-1]) if done.returncode == 0 and lines else {"error": f"exit {done.returncode}"}
        if row.get("error") == "no such program" and args.programs is None:
            continue  # a default program that this shape's sizes do not build
        if "error" in row:
            failed += 1
            print(f"| {program} | failed: {row['error']} | | | |", flush=True)
            continue
        peak = "n/a (no memory stats)" if row["peak"] is None else f"{row['peak'] / 2**20:.2f}"
        xla_peak = "n/a (the CPU's is no peak)" if row["xla_peak"] is None else f"{row['xla_peak'] / 2**20:.2f}"
        print(f"| {program} | {row['temp'] / 2**20:.2f} | {xla_peak} | {peak} | {row['device']} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    raise SystemExit(main())
