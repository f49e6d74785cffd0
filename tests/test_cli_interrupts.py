"""Ctrl-C and SIGTERM in the middle of a real run: it ends at once, by the signal, and leaves
every file old or new, no worker behind and no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.test_cli import TWO_SCANS, rewritten

SMALL_FILES = 40
# Last in the order of the run: its parse alone (libcst's native parser, one call that a
# signal handler written in Python would wait for) takes seconds, so a run interrupted
# after the first file is always mid-run.
HUGE = TWO_SCANS + "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(6000))


def _tree(root: Path) -> None:
    (root / ".git").mkdir()
    for i in range(SMALL_FILES):
        (root / f"a{i:03}.py").write_text(TWO_SCANS)
    (root / "z.py").write_text(HUGE)


def _state(root: Path) -> dict[str, tuple[bytes, int]]:
    files = sorted(path for path in root.iterdir() if path.is_file())
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in files}


def _children(pid: int) -> set[int]:
    tasks = Path(f"/proc/{pid}/task")
    return {int(child) for task in tasks.iterdir() for child in (task / "children").read_text().split()}


def _default_signals() -> None:
    # A suite started in the background by a script inherits SIGINT ignored, which the command
    # rightly keeps (as it keeps `nohup`'s): what is tested here is a terminal's Ctrl-C.
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from /proc (Linux)")
@pytest.mark.parametrize(
    ("jobs", "number", "group"),
    [
        # Ctrl-C on a terminal signals the whole foreground process group, workers included.
        pytest.param(1, signal.SIGINT, True, id="-j1 ctrl-c"),
        pytest.param(2, signal.SIGINT, True, id="-j2 ctrl-c"),
        # `kill`, `timeout` and CI runners signal the command alone: it must stop its workers.
        pytest.param(2, signal.SIGTERM, False, id="-j2 sigterm to the command alone"),
    ],
)
def test_a_signal_ends_the_run_at_once(tmp_path: Path, jobs: int, number: int, group: bool) -> None:
    _tree(tmp_path)
    before = _state(tmp_path)
    expected = rewritten(TWO_SCANS)
    process = subprocess.Popen(
        [sys.executable, "-m", "scanrewrite", f"-j{jobs}", "."],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_default_signals,
    )
    # Whatever goes wrong, the test ends: a run still going after two minutes is killed.
    watchdog = threading.Timer(120, os.killpg, (process.pid, signal.SIGKILL))
    watchdog.start()
    try:
        first = process.stderr.readline()
        assert first == b"rewritten a000.py\n"
        workers = _children(process.pid)
        assert len(workers) >= (jobs if jobs > 1 else 0)
        sent = time.monotonic()
        (os.killpg if group else os.kill)(process.pid, number)
        rest = process.stderr.read()
        process.wait(timeout=30)
        ended = time.monotonic() - sent
    finally:
        watchdog.cancel()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    after = _state(tmp_path)

    assert process.returncode == -number  # ended by the signal: a shell says 128 + number
    assert ended < 10, ended  # promised within a second; this leaves room for a loaded CI machine
    lines = (first + rest).decode().splitlines()
    assert all(line.startswith("rewritten a") for line in lines), lines  # no traceback, no "Aborted!"
    # The workers are killed and reaped before the command ends; any other helper
    # (a forkserver, say) follows its parent within moments.
    deadline = time.monotonic() + 2
    while any(map(_running, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [worker for worker in workers if _running(worker)]
    assert set(after) == set(before)  # no temporary file left behind
    changed = {name for name in after if after[name] != before[name]}
    reported = {line.removeprefix("rewritten ") for line in lines}
    # Every file is old or new; what was reported was written, and at most the one write in
    # flight when the signal came completed unreported.
    assert all(after[name][0] == expected for name in changed)
    assert reported <= changed and len(changed - reported) <= 1
    assert "z.py" not in changed and len(changed) < SMALL_FILES
    time.sleep(0.5)
    assert _state(tmp_path) == after  # nothing is still writing
