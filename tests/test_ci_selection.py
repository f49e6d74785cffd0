"""What CI's matrix parts run of the suite (tests/conftest.py, SCANREWRITE_CI_MATRIX): every
value of every parameter, not every point; `main_only` left out but where a part is named."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = '''
import pytest

@pytest.mark.parametrize("a", [1, 2, 3])
@pytest.mark.parametrize("b", ["x", "y"])
def test_product(a, b):
    pass

@pytest.mark.parametrize("n, k", [(1, 2), (1, 3), (4, 2)])
def test_cases(n, k):
    pass

@pytest.mark.parametrize("a", [1, 2])
@pytest.mark.parametrize("b", ["x", "y"])
@pytest.mark.matrix_every_point
def test_every_point(a, b):
    pass

@pytest.mark.main_only("test_cases covers it")
def test_main_only():
    pass

@pytest.mark.parametrize("case", ["p", "q", "r"])
@pytest.mark.main_only("p covers it", ids=["q", "r"], parts=["newest"])
def test_some_cases(case):
    pass

@pytest.mark.parametrize("case", ["p", "q"])
@pytest.mark.main_only("a misspelt id", ids=["s"])
def test_misspelt(case):
    pass

def test_plain():
    pass
'''


def collected(folder: Path, part: str | None) -> tuple[set[str], str]:
    env = {k: v for k, v in os.environ.items() if k != "SCANREWRITE_CI_MATRIX"}
    if part is not None:
        env["SCANREWRITE_CI_MATRIX"] = part
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "test_x.py"],
        cwd=folder, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return {line.split("::")[1] for line in done.stdout.splitlines() if line.startswith("test_x.py::")}, done.stdout


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_x.py").write_text(TESTS)
    return tmp_path


def test_the_main_suite_runs_every_point(folder: Path):
    names, _ = collected(folder, None)
    assert len(names) == 6 + 3 + 4 + 1 + 3 + 2 + 1


def test_a_matrix_part_runs_a_cover_of_every_value(folder: Path):
    names, output = collected(folder, "floor")
    product = {name for name in names if name.startswith("test_product")}
    assert len(product) == 3  # each of a's three values once, both of b's among them
    ids = [name.rstrip("]").split("[")[1].split("-") for name in product]  # "test_product[x-1]"
    assert {b for b, a in ids} == {"x", "y"} and {a for b, a in ids} == {"1", "2", "3"}
    # One parametrize of several names is a list of cases: each runs.
    assert {name for name in names if name.startswith("test_cases")} == {
        "test_cases[1-2]", "test_cases[1-3]", "test_cases[4-2]"
    }  # fmt: skip
    assert len([name for name in names if name.startswith("test_every_point")]) == 4
    assert "test_main_only" not in names and "test_plain" in names
    assert {name for name in names if name.startswith("test_some_cases")} == {"test_some_cases[p]"}
    # A misspelt id leaves nothing out, and says so.
    assert {name for name in names if name.startswith("test_misspelt")} == {"test_misspelt[p]", "test_misspelt[q]"}
    assert "main_only names ids it does not have: ['s']" in output


def test_a_part_named_by_main_only_runs_those_cases(folder: Path):
    names, _ = collected(folder, "newest")
    assert {name for name in names if name.startswith("test_some_cases")} == {
        "test_some_cases[p]", "test_some_cases[q]", "test_some_cases[r]"
    }  # fmt: skip
    assert "test_main_only" not in names
