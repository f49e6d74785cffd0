"""The summary line, the messages and the exit codes (`scanrewrite.report`, `scanrewrite.mode`)."""

from __future__ import annotations

import pickle

import pytest

from scanrewrite.codemod import SourceError
from scanrewrite.errors import InputError
from scanrewrite.files import FileError
from scanrewrite.mode import WriteBack
from scanrewrite.notebook import NotebookError
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
    report = filled(write_back, changed=2, same=40, calls=5, skipped=3, failed=1)
    assert str(report) == "2 files would be rewritten (5 scan calls), 40 would be left unchanged, 3 calls would be skipped, 1 file failed"
    report = filled(write_back, changed=0, same=1, calls=0, skipped=1, failed=0)
    assert str(report) == "1 file would be left unchanged, 1 call would be skipped"


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


def record_all(report: Report) -> None:
    report.record(FileResult("a.py", Changed.YES, rewritten=(3, 9), skipped=((12, "unroll may come from **kwargs"),)))
    report.record(FileResult("b.py"))
    report.record(FileResult("c.py", error=(7, "cannot parse: invalid syntax")))
    report.record(FileResult("d.py", error=(None, "cannot read: not a regular file")))
    report.ignored("build/e.py", "matches --exclude")
    report.ignored("f.py", "matches .gitignore", named=True)
    report.summary()


def test_verbose_names_every_call_and_no_file_left_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    # -v: one line per call rewritten or skipped; the files left alone are only counted.
    report = Report(verbose=1, color=False)
    record_all(report)
    assert capsys.readouterr().err.splitlines() == [
        "a.py:3: rewritten",
        "a.py:9: rewritten",
        "a.py:12: skipped (unroll may come from **kwargs)",
        "rewritten a.py",
        "error: c.py:7: cannot parse: invalid syntax",
        "error: d.py: cannot read: not a regular file",
        "f.py: ignored (matches .gitignore)",
        "1 file rewritten (2 scan calls), 1 left unchanged, 1 call skipped, 2 files failed",
    ]
    assert report.return_code == 2


@pytest.mark.parametrize("error_type", [FileError, SourceError, NotebookError])
def test_a_file_source_or_notebook_error_is_one_shape(
    error_type: type[InputError], capsys: pytest.CaptureFixture[str]
) -> None:
    located = error_type("cannot parse: invalid syntax", 7)
    unlocated = error_type("cannot read: not a regular file")
    assert isinstance(located, InputError)
    assert (located.message, located.line, str(located)) == ("cannot parse: invalid syntax", 7, "line 7: cannot parse: invalid syntax")
    assert (unlocated.line, str(unlocated)) == (None, "cannot read: not a regular file")
    # A worker process may send one back.
    assert pickle.loads(pickle.dumps(located)).entry == located.entry
    report = Report(color=False)
    report.record(FileResult("c.py", error=located.entry))
    report.record(FileResult("d.py", error=unlocated.entry))
    assert capsys.readouterr().err.splitlines() == [
        "error: c.py:7: cannot parse: invalid syntax",
        "error: d.py: cannot read: not a regular file",
    ]


def test_very_verbose_names_every_file_and_path_too(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(verbose=2, color=False)
    record_all(report)
    assert capsys.readouterr().err.splitlines() == [
        "a.py:3: rewritten",
        "a.py:9: rewritten",
        "a.py:12: skipped (unroll may come from **kwargs)",
        "rewritten a.py",
        "b.py: left unchanged",
        "error: c.py:7: cannot parse: invalid syntax",
        "error: d.py: cannot read: not a regular file",
        "build/e.py: ignored (matches --exclude)",
        "f.py: ignored (matches .gitignore)",
        "1 file rewritten (2 scan calls), 1 left unchanged, 1 call skipped, 2 files failed",
    ]


@pytest.mark.parametrize("write_back", [WriteBack.CHECK, WriteBack.DIFF, WriteBack.CHECK_DIFF, WriteBack.CELL_DIFF])
def test_every_message_says_would_when_nothing_is_written(write_back: WriteBack, capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(check=write_back.fails_on_change, diff=write_back.shows_diff, verbose=2, color=False)
    record_all(report)
    assert capsys.readouterr().err.splitlines() == [
        "a.py:3: would rewrite",
        "a.py:9: would rewrite",
        "a.py:12: would skip (unroll may come from **kwargs)",
        "would rewrite a.py",
        "b.py: would be left unchanged",
        "error: c.py:7: cannot parse: invalid syntax",
        "error: d.py: cannot read: not a regular file",
        "build/e.py: ignored (matches --exclude)",
        "f.py: ignored (matches .gitignore)",
        "1 file would be rewritten (2 scan calls), 1 would be left unchanged, 1 call would be skipped, 2 files failed",
    ]


@pytest.mark.parametrize(
    ("write_back", "expected"),
    [
        pytest.param(
            WriteBack.YES,
            [
                "a.py:3: reverted (dropped levels=2: memory as jax.lax.scan's again)",
                "a.py:12: skipped (skip pragma)",
                "reverted a.py",
                "b.py: left unchanged",
                "1 file reverted (1 scan call), 1 left unchanged, 1 call skipped",
            ],
            id="in place",
        ),
        pytest.param(
            WriteBack.CHECK,
            [
                "a.py:3: would revert (dropped levels=2: memory as jax.lax.scan's again)",
                "a.py:12: would skip (skip pragma)",
                "would revert a.py",
                "b.py: would be left unchanged",
                "1 file would be reverted (1 scan call), 1 would be left unchanged, 1 call would be skipped",
            ],
            id="check",
        ),
    ],
)
def test_revert_messages(write_back: WriteBack, expected: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(check=write_back.fails_on_change, diff=write_back.shows_diff, verbose=2, color=False, reverting=True)
    note = "dropped levels=2: memory as jax.lax.scan's again"
    report.record(FileResult("a.py", Changed.YES, rewritten=(3,), skipped=((12, "skip pragma"),), notes=((3, note),)))
    report.record(FileResult("b.py"))
    report.summary()
    assert capsys.readouterr().err.splitlines() == expected


def test_absorbed_per_step_checkpoints_are_noted_and_counted(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(check=True, verbose=1, color=False)
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
        f"a.py:3: would rewrite ({note})",
        "a.py:5: would rewrite",
        f"a.py:cell 2:line 1: would rewrite ({note})",
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
        "1 file would be rewritten (1 scan call), 1 would be left unchanged, 1 call would be skipped",
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
