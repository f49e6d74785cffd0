"""Stage 5, measure: compiled configurations timed in interleaved rounds, so that load from
other processes falls on every configuration alike; each one's first outputs are checked
against the original's as they come (`Program.verify`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from scanrewrite.tune._choose import Timing
from scanrewrite.tune._compile import Compiled, Program, one_line


def measure(
    program: Program,
    entries: Sequence[Compiled],
    repeats: int,
    warmup: int,
    advance: Callable[[], None] = lambda: None,
) -> list[Timing | str]:
    """Step times of `entries` over `repeats` interleaved rounds after `warmup` calls each;
    for an entry whose call fails, the one-line reason instead. `advance` is called after
    each round."""
    failed: dict[int, str] = {}
    for index, entry in enumerate(entries):
        try:
            for _ in range(warmup):
                program.verify(entry, program.run(entry))
        except Exception as exc:  # noqa: BLE001 - a candidate that fails is reported in its row
            failed[index] = f"failed to run: {one_line(exc)}"
    times: list[list[float]] = [[] for _ in entries]
    for _ in range(repeats):
        for index, entry in enumerate(entries):
            if index in failed:
                continue
            start = time.perf_counter()
            try:
                outputs = program.run(entry)
            except Exception as exc:  # noqa: BLE001 - as above
                failed[index] = f"failed to run: {one_line(exc)}"
                continue
            times[index].append(time.perf_counter() - start)
            program.verify(entry, outputs)
        advance()
    return [failed[i] if i in failed else Timing(tuple(times[i])) for i in range(len(entries))]
