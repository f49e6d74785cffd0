"""The bundled notebooks, rewritten: the exact expected notebook, and the same numbers when run.

Golden tests compare `rewrite_notebook(fixture, unroll=4)` byte for byte with
`tests/golden/<notebook>.ipynb` (regenerate with `python tests/update_goldens.py`).
Execution tests run every code cell of the original and of the rewritten notebook in
order, in a fresh module each, as a kernel would (IPython lines - magics and shell
escapes - are skipped; a `%%time` cell runs its body), then compare every array the
notebook computed, and check that every rewritten call site went through
`scanrewrite.runtime`. Broken rewrites are rejected, so the comparison can fail.
"""

import collections
import functools
import inspect
import json
import re
import sys
import types
import uuid

import jax
import numpy as np
import pytest
from treecheck import assert_trees_close
from update_goldens import FIXTURE_DIR, GOLDEN_DIR, GOLDEN_OPTIONS, notebook_names

import scanrewrite.runtime
from scanrewrite.notebook import rewrite_notebook

NOTEBOOKS = notebook_names()

EXPECTED_REWRITES = {
    "reverse_ode_vscode": {"jax.lax.scan": 1},
    "rnn_tutorial_colab": {"equinox.internal.scan": 1},
    "universal_transformer_demo": {"jax.lax.scan": 1},
}
# The names each notebook computes that must be among those compared (not only its inputs).
EXPECTED_RESULTS = {
    "reverse_ode_vscode": {"y0", "path", "batch", "sensitivity"},
    "rnn_tutorial_colab": {"loss", "grads", "new_loss", "rnn"},
    "universal_transformer_demo": {"loss", "grads", "out"},
}
RUNTIME_FUNCTIONS = {"jax.lax.scan": "scan", "equinox.internal.scan": "eqxi_scan"}
RTOL, ATOL = 1e-5, 1e-6
_IPYTHON = re.compile(r"^([ \t]*)[%!].*$", re.MULTILINE)


def _fixture(name: str) -> bytes:
    return (FIXTURE_DIR / f"{name}.ipynb").read_bytes()


@functools.cache
def _rewritten(name: str):
    return rewrite_notebook(_fixture(name), **GOLDEN_OPTIONS)


def test_every_notebook_has_a_golden_and_an_expectation():
    assert sorted(path.stem for path in GOLDEN_DIR.glob("*.ipynb")) == NOTEBOOKS
    assert sorted(EXPECTED_REWRITES) == sorted(EXPECTED_RESULTS) == NOTEBOOKS
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_golden(name):
    expected = (GOLDEN_DIR / f"{name}.ipynb").read_bytes()
    assert _rewritten(name).code == expected, (
        f"rewritten fixtures/{name}.ipynb differs from its golden; if the new output is right, run "
        "`python tests/update_goldens.py` and review `git diff tests/golden`"
    )


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_call_is_rewritten_and_the_golden_is_idempotent(name):
    result = _rewritten(name)
    assert dict(collections.Counter(api for _, _, api in result.rewritten)) == EXPECTED_REWRITES[name]
    assert result.skipped == () and result.unparsed == ()
    golden = (GOLDEN_DIR / f"{name}.ipynb").read_bytes()
    again = rewrite_notebook(golden, **GOLDEN_OPTIONS)
    assert again.code == golden and not again.changed


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_only_code_cell_sources_change(name):
    before, after = json.loads(_fixture(name)), json.loads(_rewritten(name).code)
    changed = [i for i, (a, b) in enumerate(zip(before["cells"], after["cells"], strict=True)) if a != b]
    assert changed and all(before["cells"][i]["cell_type"] == "code" for i in changed)
    for i in changed:
        before["cells"][i]["source"] = after["cells"][i]["source"]
    assert before == after


def _code_cells(notebook: bytes) -> list[str]:
    cells = json.loads(notebook)["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]


def _run_notebook(notebook: bytes, tag: str, monkeypatch) -> dict:
    """Runs the code cells in order in one fresh module; returns its namespace."""
    name = f"scanrewrite_notebook_{tag}_{uuid.uuid4().hex}"
    module = types.ModuleType(name)
    # Registered because dataclasses (and so eqx.Module) look their module up by name.
    monkeypatch.setitem(sys.modules, name, module)
    with jax.default_matmul_precision("float32"):
        for number, source in enumerate(_code_cells(notebook), start=1):
            runnable = _IPYTHON.sub(lambda match: match.group(1) + "pass", source)
            exec(compile(runnable, f"<{tag} cell {number}>", "exec"), module.__dict__)
    return vars(module)


def _results(namespace: dict) -> dict:
    """The values of the namespace that are arrays or pytrees of arrays."""
    results = {}
    for key, value in namespace.items():
        if key.startswith("_") or callable(value) and not hasattr(value, "__dataclass_fields__"):
            continue
        leaves = jax.tree_util.tree_leaves(value)
        if leaves and all(isinstance(leaf, (jax.Array, np.ndarray)) for leaf in leaves):
            results[key] = value
    return jax.block_until_ready(results)


def _record_runtime_calls(monkeypatch, tag: str) -> dict[str, set]:
    """Per runtime function, the distinct call sites in the cells of `tag` that called it."""
    sites = {function: set() for function in RUNTIME_FUNCTIONS.values()}
    for function in sites:
        original = getattr(scanrewrite.runtime, function)

        def counting(*args, _original=original, _function=function, **kwargs):
            caller = inspect.getframeinfo(sys._getframe(1))
            if caller.filename.startswith(f"<{tag} cell "):
                # Python 3.10 has no positions; its frame line is the call's line there.
                where = getattr(caller, "positions", None)
                sites[_function].add((caller.filename, where.lineno if where else caller.lineno))
            return _original(*args, **kwargs)

        monkeypatch.setattr(scanrewrite.runtime, function, functools.wraps(original)(counting))
    return sites


# Each original notebook's results, by name: two tests compare against the same original, whose
# compile is about half of each.
_EXPECTED: dict[str, dict] = {}


def _run_both(name, monkeypatch, corrupt=lambda code: code):
    sites = _record_runtime_calls(monkeypatch, "rewritten")
    if name not in _EXPECTED:
        _EXPECTED[name] = _results(_run_notebook(_fixture(name), "original", monkeypatch))
    expected = _EXPECTED[name]
    actual = _results(_run_notebook(corrupt(_rewritten(name).code), "rewritten", monkeypatch))
    return actual, expected, sites


def _compare(actual: dict, expected: dict) -> int:
    assert sorted(actual) == sorted(expected)
    compared = 0
    for key in expected:
        # Each run defines its own classes (an eqx.Module): equal as printed structures only.
        structure = jax.tree_util.tree_structure(expected[key])
        assert str(jax.tree_util.tree_structure(actual[key])) == str(structure), key
        rebuilt = jax.tree_util.tree_unflatten(structure, jax.tree_util.tree_leaves(actual[key]))
        compared += assert_trees_close(rebuilt, expected[key], rtol=RTOL, atol=ATOL)
    return compared


@pytest.mark.parametrize("name", NOTEBOOKS)
@pytest.mark.main_only(
    "their scans as programs: test_fixtures.py's universal_transformer_checkpoint and eqx_module_method;"
    " reverse_ode_vscode runs a notebook's cells",
    ids=["rnn_tutorial_colab", "universal_transformer_demo"],
)
def test_rewritten_notebook_computes_the_same(name, monkeypatch):
    actual, expected, sites = _run_both(name, monkeypatch)
    assert EXPECTED_RESULTS[name] <= set(expected)
    compared = _compare(actual, expected)
    assert compared == sum(len(jax.tree_util.tree_leaves(value)) for value in expected.values()) > 0
    executed = {api: len(sites[function]) for api, function in RUNTIME_FUNCTIONS.items() if sites[function]}
    assert executed == EXPECTED_REWRITES[name]


def test_comparison_rejects_a_flipped_reverse(monkeypatch):
    def flip_reverse(code):
        call = b"scanrewrite.runtime.scan(step, y_final, ts, reverse=True, unroll=4)"
        assert code.count(call) == 1
        return code.replace(call, call.replace(b"reverse=True", b"reverse=False"))

    actual, expected, _ = _run_both("reverse_ode_vscode", monkeypatch, corrupt=flip_reverse)
    with pytest.raises(AssertionError, match="values differ"):
        _compare(actual, expected)


def test_comparison_rejects_a_runtime_that_drops_the_remainder(monkeypatch):
    # 6 layers with unroll=4: this runtime applies 4 and silently drops the last 2.
    real_scan = scanrewrite.runtime.scan

    def drop_remainder(f, init, xs=None, length=None, *args, unroll=1, **kwargs):
        return real_scan(f, init, xs, length - length % unroll, *args, unroll=unroll, **kwargs)

    monkeypatch.setattr(scanrewrite.runtime, "scan", drop_remainder)
    actual, expected, _ = _run_both("universal_transformer_demo", monkeypatch)
    with pytest.raises(AssertionError, match="values differ"):
        _compare(actual, expected)
