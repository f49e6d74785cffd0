"""The summary line, the messages and the exit codes (`scanrewrite.report`, `scanrewrite.mode`)."""

from __future__ import annotations

import pytest

from scanrewrite.mode import WriteBack
from scanrewrite.report import Changed, FileResult, Report


def filled(write_back: WriteBack, *, changed: int, same: int, calls: int, skipped: int, failed: int) -> Report:
    report = Report(check=write_back.fails_on_change, diff=write_back.shows_diff, quiet=True)
    report.change_count, report.same_count, report.failure_count = changed, same, failed
    report.rewritten_calls, report.skipped_calls = calls, skipped
    return report


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        pytest.param(
            (2, 40, 5, 3, 1),
            "2 files rewritten (5 scan calls), 40 left unchanged, 3 calls skipped, 1 file failed",
            id="all",
        ),
        pytest.param((1, 1, 1, 1, 2), "1 file rewritten (1 scan call), 1 left unchanged, 1 call skipped, 2 files failed", id="singular"),
        pytest.param((0, 3, 0, 0, 0), "3 files left unchanged", id="unchanged only"),
        pytest.param((0, 1, 0, 2, 0), "1 file left unchanged, 2 calls skipped", id="skipped"),
        pytest.param((0, 0, 0, 0, 1), "1 file failed", id="failed only"),
        pytest.param((0, 0, 0, 0, 0), "no Python files found", id="nothing"),
    ],
)
def test_summary(counts: tuple[int, ...], expected: str) -> None:
    changed, same, calls, skipped, failed = counts
    report = filled(WriteBack.YES, changed=changed, same=same, calls=calls, skipped=skipped, failed=failed)
    assert str(report) == expected


@pytest.mark.parametrize("write_back", [WriteBack.CHECK, WriteBack.DIFF, WriteBack.CHECK_DIFF])
def test_summary_says_would_when_nothing_is_written(write_back: WriteBack) -> None:
    report = filled(write_back, changed=2, same=40, calls=5, skipped=0, failed=0)
    assert str(report) == "2 files would be rewritten (5 scan calls), 40 left unchanged"


@pytest.mark.parametrize(
    ("write_back", "changed", "failed", "code"),
    [
        (WriteBack.YES, 0, 0, 0),
        (WriteBack.YES, 3, 0, 0),
        (WriteBack.DIFF, 3, 0, 0),
        (WriteBack.CHECK, 0, 0, 0),
        (WriteBack.CHECK, 3, 0, 1),
        (WriteBack.CHECK_DIFF, 3, 0, 1),
        (WriteBack.YES, 3, 1, 2),
        (WriteBack.CHECK, 3, 1, 2),
        (WriteBack.DIFF, 0, 1, 2),
    ],
)
def test_return_code(write_back: WriteBack, changed: int, failed: int, code: int) -> None:
    report = filled(write_back, changed=changed, same=1, calls=changed, skipped=0, failed=failed)
    assert report.return_code == code


@pytest.mark.parametrize(
    ("check", "diff", "cell_diff", "expected"),
    [
        (False, False, False, WriteBack.YES),
        (True, False, False, WriteBack.CHECK),
        (False, True, False, WriteBack.DIFF),
        (True, True, False, WriteBack.CHECK_DIFF),
        (False, False, True, WriteBack.CELL_DIFF),
        (False, True, True, WriteBack.CELL_DIFF),
        (True, False, True, WriteBack.CHECK_CELL_DIFF),
    ],
)
def test_write_back_from_configuration(check: bool, diff: bool, cell_diff: bool, expected: WriteBack) -> None:
    write_back = WriteBack.from_configuration(check=check, diff=diff, cell_diff=cell_diff)
    assert write_back is expected
    assert write_back.writes == (not check and not diff and not cell_diff)
    assert write_back.shows_diff == (diff or cell_diff)
    assert write_back.diffs_cells == cell_diff
    assert write_back.fails_on_change == check


def test_record_counts_and_prints(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(verbose=True, color=False)
    report.record(FileResult("a.py", Changed.YES, rewritten=(3, 9), skipped=((12, "unroll may come from **kwargs"),)))
    report.record(FileResult("b.py"))
    report.record(FileResult("c.py", error=(7, "cannot parse: invalid syntax")))
    report.record(FileResult("d.py", error=(None, "cannot read: not a regular file")))
    report.ignored("build/e.py", "matches --exclude")
    report.summary()
    assert capsys.readouterr().err.splitlines() == [
        "a.py:3: rewritten",
        "a.py:9: rewritten",
        "a.py:12: skipped (unroll may come from **kwargs)",
        "rewritten a.py",
        "b.py: unchanged",
        "error: c.py:7: cannot parse: invalid syntax",
        "error: d.py: cannot read: not a regular file",
        "build/e.py: ignored (matches --exclude)",
        "1 file rewritten (2 scan calls), 1 left unchanged, 1 call skipped, 2 files failed",
    ]
    assert report.return_code == 2


def test_absorbed_per_step_checkpoints_are_noted_and_counted(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(check=True, verbose=True, color=False)
    note = "per-step jax.checkpoint absorbed: the runtime checkpoints chunks instead"
    report.record(
        FileResult(
            "a.py",
            Changed.YES,
            rewritten=(3, 5, "cell 2:line 1"),
            notes=((3, note), ("cell 2:line 1", note)),
            absorbed=(3, "cell 2:line 1"),
        )
    )
    report.summary()
    assert capsys.readouterr().err.splitlines() == [
        f"a.py:3: rewritten ({note})",
        "a.py:5: rewritten",
        f"a.py:cell 2:line 1: rewritten ({note})",
        "would rewrite a.py",
        "1 file would be rewritten (3 scan calls, 2 per-step checkpoints absorbed)",
    ]


def test_default_verbosity_names_changed_files_only(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(check=True, color=False)
    report.record(FileResult("a.py", Changed.YES, rewritten=(3,), skipped=((4, "pragma"),)))
    report.record(FileResult("b.py"))
    report.ignored("c.py", "matches .gitignore")
    report.summary()
    assert capsys.readouterr().err.splitlines() == [
        "would rewrite a.py",
        "1 file would be rewritten (1 scan call), 1 left unchanged, 1 call skipped",
    ]


def test_quiet_prints_errors_only(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(quiet=True, color=False)
    report.record(FileResult("a.py", Changed.YES, rewritten=(3,)))
    report.record(FileResult("c.py", error=(1, "cannot parse: invalid syntax")))
    report.summary()
    assert capsys.readouterr().err == "error: c.py:1: cannot parse: invalid syntax\n"


def test_colour_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    Report(color=True).failed("a.py", "boom")
    assert capsys.readouterr().err == "\x1b[31merror: a.py: boom\x1b[0m\n"
    Report(color=False).failed("a.py", "boom")
    assert capsys.readouterr().err == "error: a.py: boom\n"
