"""The revert undoes the rewrite: the round trip over every codemod case, every fixture and a
sample of real files (and over generated programs in `test_codemod_property.py`).

For `y = rewrite(x)` and `z = revert(y)`:

- `z` imports nothing it does not use (beyond what `x` did not use: ruff's F401);
- `z` is `x` byte for byte where the rewrite kept the import the call used (none of `x`'s
  imports is under an ``if``, in a ``try`` or a loop), `x` reaches the API's module through
  one import only (read or not), passes no `unroll=` int literal (the rewrite cannot tell the
  user's from its own), lays its calls out as the formatters do, and holds no
  runtime call already (blank lines aside, where `x` lacks those the sorters put around an
  import block);
- `rewrite(z)` is `y` (with the options that wrote `y`), under the same conditions but the
  import (where the import went, or another import spells the call, the layout too may
  differ: a call spelled anew, and an import nothing reads may go, read by it too); so `z` calls the same APIs with the same arguments as `x`, which is how `z`
  computes what `x` computes (`test_fixtures.py` runs the reverted fixtures too);
- `revert(z)` is `z`;
- where `x` passes ruff's and isort's import sorting and ruff format, so does `z`.

`tests/revert_corpus.py` runs the same checks over every installed package (a few thousand
files); here a bounded sample of them runs in CI.
"""

from __future__ import annotations

import ast
import collections
import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scanrewrite.codemod import revert
from tests import test_codemod, test_codemod_bytes, test_codemod_imports, test_codemod_levels, test_codemod_skips
from tests import program_facts
from tests.revert_corpus import Outcome, corpus_files, round_trip
from tests.update_goldens import golden_options

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
GOLDENS = ROOT / "tests" / "golden"


def _source(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else textwrap.dedent(value).encode()


def _cases() -> list[tuple[str, bytes, dict[str, object]]]:
    """(id, source, rewrite options) of every codemod test case."""
    cases = []
    plain = [
        test_codemod.SPELLINGS, test_codemod.PLACES, test_codemod.LAYOUT, test_codemod.IMPORTS, test_codemod.NOOP,
        test_codemod_bytes.REWRITES, test_codemod_imports.PLACEMENT, test_codemod_imports.KEPT,
        test_codemod_skips.UNROLL_PRAGMAS,
    ]
    for params in plain:
        cases += [(param.id, _source(param.values[0]), {}) for param in params]
    cases += [(param.id, _source(param.values[0]), {}) for param in test_codemod_skips.SKIPS]
    cases += [(param.id, _source(param.values[1]), {"checkpoint": param.values[0]}) for param in test_codemod_skips.CHECKPOINT]
    cases += [(param.id, _source(param.values[1]), {"levels": param.values[0]}) for param in test_codemod_levels.LEVELS]
    return cases


CASES = _cases()


@functools.cache
def _case_outcomes() -> tuple[Outcome, ...]:
    return tuple(round_trip(x, options) for _, x, options in CASES)


def test_round_trip_over_every_codemod_case():
    outcomes = collections.Counter()
    for (case_id, _, _), outcome in zip(CASES, _case_outcomes(), strict=True):
        assert outcome.problems == [], f"{case_id}: {outcome.problems}"
        outcomes[outcome.kind] += 1
    # Many cases come back byte for byte; most others lost the import the call used.
    assert outcomes["identical"] >= 20 and outcomes["import removed"] >= 50, outcomes


def _ruff_unused(tmp_path: Path, files: dict[str, bytes]) -> dict[str, set[str]]:
    """The imports ruff calls unused (F401), per file."""
    pytest.importorskip("ruff", reason="ruff is in the test extras")
    for name, code in files.items():
        (tmp_path / name).write_bytes(code)
    found = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F401", "--output-format", "concise", *files],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    ).stdout
    unused: dict[str, set[str]] = {name: set() for name in files}
    for line in found.splitlines():
        name, _, message = line.partition(":")
        if name in unused and "`" in message:
            unused[name].add(message.split("`")[1])
    return unused


def test_the_round_trip_leaves_no_unused_import(tmp_path: Path):
    files = {}
    for index, ((_, x, _), outcome) in enumerate(zip(CASES, _case_outcomes(), strict=True)):
        if outcome.kind != "unchanged":
            files[f"x{index}.py"], files[f"z{index}.py"] = x, outcome.reverted
    for name, code in _fixture_round_trips().items():
        files[f"x_{name}.py"], files[f"z_{name}.py"] = (FIXTURES / f"{name}.py").read_bytes(), code
    unused = _ruff_unused(tmp_path, files)
    for name in files:
        if name.startswith("z"):
            assert unused[name] <= unused["x" + name[1:]], name
    # The check can fail: a reverted file that kept the runtime import is caught.
    kept = _ruff_unused(tmp_path, {"kept.py": b"import jax\nimport scanrewrite.runtime\n\njax.lax.scan(f, c, xs)\n"})
    assert kept == {"kept.py": {"scanrewrite.runtime"}}


#: The fixtures are written for ruff format at one of these line lengths (most at 120, the
#: newer ones at the default, 88, at which the goldens are written and reverted).
FIXTURE_LINE_LENGTHS = (88, 120)


@functools.cache
def _fixture_round_trips() -> dict[str, bytes]:
    """Each fixture's golden (its rewrite), reverted."""
    return {path.stem: revert(path.read_bytes()).code for path in sorted(GOLDENS.glob("*.py"))}


@pytest.mark.parametrize("name", sorted(path.stem for path in FIXTURES.glob("*.py")))
def test_round_trip_over_every_fixture(name: str):
    golden = (GOLDENS / f"{name}.py").read_bytes()
    outcome = round_trip((FIXTURES / f"{name}.py").read_bytes(), golden_options(name), golden)
    assert outcome.problems == []
    assert outcome.reverted == _fixture_round_trips()[name]


def test_fixtures_stay_formatted_and_sorted(tmp_path: Path):
    """Where a fixture is formatted as ruff formats it (at either line length), and its
    imports sorted as ruff and isort sort them, so is its reverted rewrite."""
    pytest.importorskip("ruff", reason="ruff is in the test extras")
    files = {}
    for name, code in _fixture_round_trips().items():
        files[f"x_{name}.py"], files[f"z_{name}.py"] = (FIXTURES / f"{name}.py").read_bytes(), code
    for name, code in files.items():
        (tmp_path / name).write_bytes(code)
    formatted_somewhere = set()
    for length in FIXTURE_LINE_LENGTHS:
        formatted = subprocess.run(
            [sys.executable, "-m", "ruff", "format", "--isolated", "--line-length", str(length), "--check", *files],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )
        unformatted = {name for name in files if f"{name}:" in formatted.stdout + formatted.stderr}
        assert {name for name in unformatted if name.startswith("z_")} <= {"z" + name[1:] for name in unformatted}
        formatted_somewhere |= set(files) - unformatted
    fixtures = {name for name in files if name.startswith("x_")}
    # The check can fail: a fixture formatted at neither length is caught, and most are formatted.
    assert "x_explicit_unroll.py" not in formatted_somewhere, "the check can fail"
    assert len(fixtures - formatted_somewhere) < len(fixtures) / 4
    assert test_codemod_imports._unsorted(tmp_path, files) == {"ruff": set(), "isort": set()}


# --- real files -----------------------------------------------------------------------------


def test_round_trip_over_a_sample_of_installed_packages():
    files = corpus_files(limit=2)
    if not files:
        pytest.skip("jax is not installed")
    for path, source in files:
        outcome = round_trip(source, {"unroll": 4})
        assert outcome.problems == [], f"{path}: {outcome.problems}"


def test_round_trip_catches_a_wrong_revert(monkeypatch: pytest.MonkeyPatch):
    import tests.revert_corpus as corpus

    source = b"import jax\n\ny = jax.lax.scan(f, c, xs, reverse=True)\nz = jax.jit\n"
    assert round_trip(source, {}).problems == []

    def dropping_reverse(code: bytes, **options: object):
        result = revert(code, **options)
        return type(result)(result.code.replace(b", reverse=True", b""), result.rewritten, result.skipped)

    monkeypatch.setattr(corpus, "revert", dropping_reverse)
    assert "the reverted program's calls differ from the original's" in round_trip(source, {}).problems


def test_a_layout_change_away_from_the_calls_is_caught(monkeypatch):
    """Where the rewrite removed an import, the round trip lets a statement holding a call come
    back in another layout, and nothing else: a revert that also joins another statement's
    lines is caught."""
    import tests.revert_corpus as corpus

    x = b"from jax.lax import scan\n\ny = scan(f, c, xs)\nz = (\n    1,\n    2,\n)\n"
    assert round_trip(x, {}).problems == []

    def joining(code, **options):
        result = revert(code, **options)
        return type(result)(result.code.replace(b"(\n    1,\n    2,\n)", b"(1, 2)"), result.rewritten, result.skipped)

    monkeypatch.setattr(corpus, "revert", joining)
    assert "rewrite(revert(y)) != y" in round_trip(x, {}).problems
    # The same change at the call's own statement is the layout a call spelled anew may take.
    assert corpus._differ_only_at_calls(
        b"y = scanrewrite.runtime.scan(\n    f, c, xs, unroll=4\n)\n", b"y = scanrewrite.runtime.scan(f, c, xs, unroll=4)\n"
    )


def test_a_local_variable_is_no_read_of_an_import():
    """A function's own `jax` (assigned, a loop's target, ...) reads no import of `jax`: an
    import only such a name matches is one nothing reads, which the round trip lets go."""
    def reads(code):
        return program_facts.reads(ast.parse(textwrap.dedent(code)))

    assert "jax" not in reads("def g():\n    jax = make()\n    return jax.lax\n")
    assert "jax" not in reads("def g():\n    for jax in xs:\n        jax.lax\n")
    assert "jax" not in reads("def g():\n    print(jax)\n    del jax\n")
    assert "jax" in reads("def g():\n    global jax\n    jax = make()\n    return jax.lax\n")
    assert "jax" in reads("def g():\n    return [jax for jax in xs], jax.lax\n")
    assert "jax" in reads("def g():\n    h = lambda jax: jax\n    return jax.lax\n")
