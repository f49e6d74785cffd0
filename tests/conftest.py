import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI gets a fixed, derandomized profile so a run is reproducible; locally, more examples.
settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# Set by .ci/matrix.py in the parts that run the suite again on other jax and Python releases.
MATRIX = bool(os.environ.get("SCANREWRITE_CI_MATRIX"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "main_only(reason): run in the main suite only, not in CI's matrix parts; the reason names the"
        " test or case that still runs the same code path there",
    )
    config.addinivalue_line(
        "markers",
        "matrix_every_point: in CI's matrix parts, run every parametrization point of this test, not a cover",
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    if MATRIX:
        return "matrix part: main_only tests left out; parametrized tests run a cover of their values"
    return None


def matrix_selection(items: list[pytest.Item]) -> list[pytest.Item]:
    """What a matrix part runs of `items`, in their order.

    A matrix part is there to show that each code path works on another jax or Python, which the
    main suite's whole product of parameters is not needed for. Left out: the tests and cases
    marked `main_only`. Of each parametrized test function (unless `matrix_every_point`), a
    deterministic subset of its points that holds every value of every parameter at least once
    (a greedy cover, the point with the most values not yet held first, ties in collection
    order). The values of one `parametrize` of several names are one case each (its whole
    tuple), so a hand-picked list of cases runs whole; only products of parameters shrink.
    """
    kept, points = [], {}
    for item in items:
        marker = item.get_closest_marker("main_only")
        if marker is not None:
            if not marker.args:
                raise pytest.UsageError(f"{item.nodeid}: main_only needs a reason (what still covers it)")
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None or item.get_closest_marker("matrix_every_point"):
            kept.append(item)
        else:
            points.setdefault((item.path, item.cls, item.originalname), []).append(item)
    for group in points.values():
        # One id per `parametrize` (pytest's own, as in the test's name); `callspec.indices` is no
        # per-parameter index since pytest 8 reorders by it.
        values = [set(enumerate(item.callspec._idlist)) for item in group]
        missing = set().union(*values)
        while missing:
            best = max(range(len(group)), key=lambda i: (len(values[i] & missing), -i))
            kept.append(group[best])
            missing -= values[best]
    chosen = set(map(id, kept))
    return [item for item in items if id(item) in chosen]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not MATRIX:
        return
    selected = matrix_selection(items)
    chosen = set(map(id, selected))
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
    items[:] = selected


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (with `.git`, as a root marker) that is the current folder."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path
