"""Running the work on many files (`scanrewrite.per_file`) in a process pool.

The files are read, and screened, here; only the tasks (the files that may hold a scan call)
go to the pool, whose workers parse and rewrite but never write: the files are written here,
one at a time, so that a signal can end the run at once (see `scanrewrite.interrupts`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from scanrewrite.files import Source
from scanrewrite.interrupts import deferred, init_worker, stopping_workers
from scanrewrite.mode import Mode, WriteBack
from scanrewrite.per_file import Task, finish, process_file, read_task, rewrite_task
from scanrewrite.report import FileResult

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor


def process_many(
    sources: Sequence[Source],
    mode: Mode,
    write_back: WriteBack,
    jobs: int,
    on_result: Callable[[FileResult], None],
) -> None:
    """Process `sources`, calling `on_result` for each, in the order of `sources`.

    With `jobs` > 1 and more than one file to parse, the parsing runs in a pool of up to
    `jobs` processes; otherwise here. Files are written here, never by a worker, so that
    a signal (see `scanrewrite.interrupts`) can end the run at once.
    """
    items = [read_task(source, mode) for source in sources]
    tasks = [item for item in items if isinstance(item, Task)]
    if jobs > 1 and len(tasks) > 1:
        with stopping_workers():
            # The pool's threads start with the signals blocked, so that they reach this thread.
            with deferred():
                executor = _pool(min(jobs, len(tasks)))
                if executor is not None:
                    futures = {id(task): executor.submit(rewrite_task, task, mode, write_back) for task in tasks}
            if executor is not None:
                with executor:
                    for item in items:
                        on_result(_outcome(item, futures[id(item)]) if isinstance(item, Task) else item)
                return
    for item in items:
        on_result(process_file(item, mode, write_back) if isinstance(item, Task) else item)


def _outcome(task: Task, future: Future[tuple[FileResult, bytes | None]]) -> FileResult:
    try:
        result, code = future.result()
    except Exception as exc:  # noqa: BLE001 - e.g. a worker killed by the system
        return FileResult(task.source.display, error=(None, f"worker failed: {type(exc).__name__}: {exc}"))
    return finish(task, result, code)


def _pool(workers: int) -> ProcessPoolExecutor | None:
    from concurrent.futures import ProcessPoolExecutor

    try:
        return ProcessPoolExecutor(max_workers=workers, initializer=init_worker)
    except (OSError, NotImplementedError):
        # No working multiprocessing (e.g. no shared memory for its locks): run here.
        return None


def cpu_count() -> int:
    """The CPUs this process may run on (the default for `--jobs`)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
