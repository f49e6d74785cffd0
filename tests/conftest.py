import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import settings

# CI gets a fixed, derandomized profile so a run is reproducible; locally, more examples.
# No example database: the parts run side by side in one checkout with different hypothesis
# releases, and one part replaying what another generated made a run depend on their order.
settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, print_blob=True, database=None)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# Set by .ci/matrix.py, to the part's name, in the parts that run the suite again on other jax and
# Python releases.
MATRIX = os.environ.get("SCANREWRITE_CI_MATRIX", "")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "main_only(reason, ids=None, parts=()): run in the main suite only, not in CI's matrix parts"
        " but those named in parts (with ids, only the parametrization points with one of those ids"
        " are left out); the reason names the test or case that still runs the same code path there",
    )
    config.addinivalue_line(
        "markers",
        "matrix_every_point: in CI's matrix parts, run every parametrization point of this test, not a cover",
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    if MATRIX:
        return "matrix part: main_only tests left out; parametrized tests run a cover of their values"
    return None


def leaves_out(item: pytest.Item, marker: pytest.Mark) -> bool:
    """Whether `marker` (a `main_only`) leaves `item` out of a matrix part."""
    if not marker.args:
        raise pytest.UsageError(f"{item.nodeid}: main_only needs a reason (what still covers it in a matrix part)")
    if MATRIX in marker.kwargs.get("parts", ()):
        return False
    ids = marker.kwargs.get("ids")
    if ids is None:
        return True
    return bool(set(ids) & set(getattr(getattr(item, "callspec", None), "_idlist", ())))


def matrix_selection(items: list[pytest.Item]) -> list[pytest.Item]:
    """What a matrix part runs of `items`, in their order.

    A matrix part is there to show that each code path works on another jax or Python, which the
    main suite's whole product of parameters is not needed for. Left out: the tests and cases
    marked `main_only` (but in the parts they name). Of each parametrized test function (unless
    `matrix_every_point`), a deterministic subset of its points that holds every value of every
    parameter at least once (a greedy cover, the point with the most values not yet held first,
    ties in collection order). The values of one `parametrize` of several names are one case each
    (its whole tuple), so a hand-picked list of cases runs whole; only products of parameters
    shrink.
    """
    kept, points, named = [], {}, {}
    for item in items:
        key = (item.path, item.cls, item.originalname)
        for marker in item.iter_markers("main_only"):
            named.setdefault((key, item.nodeid.split("[")[0]), set()).update(marker.kwargs.get("ids") or ())
        if any(leaves_out(item, marker) for marker in item.iter_markers("main_only")):
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None or item.get_closest_marker("matrix_every_point"):
            kept.append(item)
        else:
            # One id per `parametrize` (pytest's own, as in the test's name); `callspec.indices`
            # is no per-parameter index since pytest 8 reorders by it.
            points.setdefault(key, []).append((item, set(enumerate(callspec._idlist))))
    for (key, name), ids in named.items():
        seen = {id_ for item in items if (item.path, item.cls, item.originalname) == key
                for id_ in getattr(getattr(item, "callspec", None), "_idlist", ())}
        if ids - seen:  # a misspelt id runs its point after all: safe, but say so
            message = f"{name}: main_only names ids it does not have: {sorted(ids - seen)}"
            warnings.warn(pytest.PytestConfigWarning(message))
    for group in points.values():
        missing = set().union(*(values for _, values in group))
        while missing:
            best = max(range(len(group)), key=lambda i: (len(group[i][1] & missing), -i))
            kept.append(group[best][0])
            missing -= group[best][1]
    chosen = set(map(id, kept))
    return [item for item in items if id(item) in chosen]


# Many tests compile the same program again from other Python functions (`jax.lax.scan`'s program
# for each case compared with it, a fixture's original beside its rewrite), which jax's in-memory
# caches, keyed by function, compile anew: a persistent compilation cache private to this process
# compiles each once (11% of the main suite's wall time, 13% of its CPU). A hit returns the
# executable XLA compiled, its memory analysis too, and jax counts it as a compile
# (`backend_compile_duration`), so what a test sees is unchanged but the time. Subprocesses do not
# inherit it; a cache the user set up is left as they set it.
_jax_cache: list[str] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    if "jax" not in sys.modules:  # nothing collected compiles in this process
        return
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    if jax.config.jax_compilation_cache_dir:
        return
    _jax_cache.append(tempfile.mkdtemp(prefix="scanrewrite-tests-jax-cache-"))
    jax.config.update("jax_compilation_cache_dir", _jax_cache[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilation_cache.reset_cache()  # jax reads the settings once, at the first compile


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _jax_cache:
        shutil.rmtree(folder, ignore_errors=True)


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
