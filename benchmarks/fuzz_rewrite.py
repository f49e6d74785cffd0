"""The rewrite and the revert on many generated programs: the properties of
`tests/fuzz_programs.py` (no crash, output that compiles, idempotence, `--check` agrees, the
revert round trip), on more programs than CI runs (`tests/test_codemod_property.py`).

    python benchmarks/fuzz_rewrite.py --examples 2000 [--seed 0]

Progress on stderr; then a markdown table (programs, how many the rewrite changed, the calls
it rewrote and left alone, the problems found, CPU seconds) and, for each problem, the
smallest program that shows it. Exits 1 if any property broke.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `tests.fuzz_programs`

from _common import Progress  # noqa: E402
from tests.fuzz_programs import check, programs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500, help="programs to generate (default 500)")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    args = parser.parse_args(argv)
    progress = Progress(args.examples)
    counts: collections.Counter[str] = collections.Counter()
    smallest: dict[str, bytes] = {}
    start = time.process_time()

    @seed(args.seed)
    @settings(
        max_examples=args.examples, deadline=None, database=None, phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(programs())
    def run(program: tuple[bytes, dict[str, object]]) -> None:
        source, options = program
        try:
            result, problems = check(source, options)
        except Exception as exc:  # noqa: BLE001 - a crash is a finding, reported with the others
            result, problems = None, [f"crash: {type(exc).__name__}: {exc} at {traceback.format_exc(limit=-1)!r}"]
        counts["programs"] += 1
        if result is None and not problems:
            counts["not parsed by libcst"] += 1
        if result is not None:
            counts["changed"] += result.changed
            counts["calls rewritten"] += len(result.rewritten)
            counts["calls left alone"] += len(result.skipped)
        for problem in problems:
            counts["problems"] += 1
            if problem not in smallest or len(source) < len(smallest[problem]):
                smallest[problem] = source
        progress.step(f"{counts['problems']} problems")

    run()
    counts["CPU seconds"] = round(time.process_time() - start)
    print("| programs | changed | calls rewritten | calls left alone | problems | CPU seconds |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    keys = ("programs", "changed", "calls rewritten", "calls left alone", "problems", "CPU seconds")
    print("| " + " | ".join(str(counts[key]) for key in keys) + " |")
    for problem, source in sorted(smallest.items()):
        print(f"\nPROBLEM {problem}\n{source.decode(errors='replace')}")
    return 1 if smallest else 0


if __name__ == "__main__":
    sys.exit(main())
