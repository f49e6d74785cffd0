"""Ctrl-C and SIGTERM: the run ends at once, by the signal itself, never in the middle of a write.

As ruff does, a run that gets SIGINT or SIGTERM prints nothing more and ends as killed by
that signal, so a shell reports 130 (143) and a script that runs it stops too. Nothing
needs undoing at that moment except a file being replaced: `deferred` holds the signals
back for that long, so a write in flight completes and no other starts. Workers only
compute (the files are written here): while a pool runs, a signal kills them first
(`stopping_workers`), and a worker whose parent dies anyway (SIGKILL) exits on its own.

POSIX only; elsewhere the process keeps Python's own handling of the signals.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_POSIX = hasattr(signal, "pthread_sigmask")


def _in_main_thread() -> bool:
    # Only the main thread may set signal handlers (click's test runner may call from another).
    return _POSIX and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def ending_by_signal() -> Iterator[None]:
    """Within this block, SIGINT and SIGTERM end the process as the system does by default:
    at once, whatever Python is doing (a parse in libcst's native code included), with no
    `KeyboardInterrupt` traceback. The previous handlers come back at its end."""
    with _handling(signal.SIG_DFL):
        yield


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back until the end of this block, where one that came is
    acted on: a file written inside is written whole. Only for work that cannot block
    for long (a terminal or a pipe can: never around output)."""
    if not _in_main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def stopping_workers() -> Iterator[None]:
    """Within this block a signal first kills this process's worker processes, then ends it.

    Start the pool (its processes and threads) inside `deferred()` inside this block: its
    threads then keep the signals blocked, so that only the main thread, which waits on
    results and runs the handler at once, ever receives them.
    """
    with _handling(_stop):
        yield


@contextlib.contextmanager
def _handling(handler: object) -> Iterator[None]:
    """`handler` for the signals within the block; one the process was started with
    ignored (`nohup`, a background job of a script) stays ignored."""
    previous = {}
    if _in_main_thread():
        for number in _SIGNALS:
            if signal.getsignal(number) != signal.SIG_IGN:
                previous[number] = signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def _stop(number: int, frame: object) -> None:
    import multiprocessing

    children = multiprocessing.active_children()
    for child in children:
        child.kill()
    for child in children:
        child.join(timeout=5)
    signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
    os.kill(os.getpid(), number)
    os._exit(128 + number)  # not reached: the signal has ended the process


def init_worker() -> None:
    """Run first in each worker process: the signals end it as the system does by default
    (it writes nothing, so nothing needs finishing), and it exits when its parent is gone."""
    if not _POSIX:
        return
    for number in _SIGNALS:
        if signal.getsignal(number) != signal.SIG_IGN:
            signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True).start()


def _exit_with(sentinel: int) -> None:
    import multiprocessing.connection

    multiprocessing.connection.wait([sentinel])
    os._exit(1)
