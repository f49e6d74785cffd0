"""The bundled fixtures, rewritten: the exact expected source, and the same numbers when run.

Golden tests compare `rewrite(fixture, unroll=4)` (with `targets=` for the fixtures of
`update_goldens.TARGETS`) byte for byte with `tests/golden/<fixture>.py`
(regenerate with `python tests/update_goldens.py`). Execution tests import the original and the
rewritten fixture as fresh modules, run both on jax's default device, compare every output leaf,
and check that every rewritten call site really went through `scanrewrite.runtime`.
"""

import collections
import difflib
import functools
import importlib.util
import inspect
import sys
import textwrap
import uuid

import jax
import pytest
from treecheck import assert_trees_close
from update_goldens import FIXTURE_DIR, GOLDEN_DIR, fixture_names, golden_options

import scanrewrite.runtime
from scanrewrite.codemod import revert, rewrite

FIXTURES = fixture_names()

# How many calls of each API every fixture holds: a regenerated golden that silently lost (or
# gained) a rewrite fails here even though it matches the codemod's output.
EXPECTED_REWRITES = {
    "checkpointed_buffers": {"equinox.internal.scan": 1},
    "eqx_module_method": {"equinox.internal.scan": 1},
    "explicit_unroll": {"jax.lax.scan": 2},
    "flax_linen_remat_scan": {"flax.linen.scan": 1},
    "flax_nnx_transformer": {"flax.nnx.scan": 1},
    "fori_loop_rollout": {"jax.lax.fori_loop": 3},
    # Its two hand-chunked loops are left alone (see EXPECTED_SKIPS).
    "hand_chunked_loop": {"jax.lax.scan": 1},
    "horner_polynomials": {"jax.lax.scan": 1},
    "inner_sgd_loop": {"jax.lax.scan": 1},
    "jit_vmap_grad": {"jax.lax.scan": 1},
    "kalman_filter": {"jax.lax.scan": 1},
    "lax_map_per_example": {"jax.lax.map": 2},
    "nested_scans": {"jax.lax.scan": 2},
    "ode_reverse_rollout": {"jax.lax.scan": 1},
    "pragma_unroll": {"equinox.internal.scan": 1},
    "rnn_pytree_carry": {"jax.lax.scan": 1},
    # Its calls are a `functools.partial` of the scan, called later (one passing `unroll` by position).
    "sampler_loop": {"jax.lax.scan": 3},
    # Its other call carries `# scanrewrite: skip`.
    "skip_pragma": {"jax.lax.scan": 1},
    "transformer_block": {"equinox.internal.scan": 1},
    "universal_transformer_checkpoint": {"jax.lax.scan": 5},
}
# Why the calls of a fixture that are left alone are, with how many of each.
EXPECTED_SKIPS = {
    "hand_chunked_loop": {"already a checkpointed, chunked scan": 4},
    "skip_pragma": {"skip pragma": 1},
}
# The fixtures whose every rewritten call had its per-step checkpoint taken over by the runtime.
EXPECTED_ABSORBED = {"universal_transformer_checkpoint": 5, "flax_linen_remat_scan": 1, "flax_nnx_transformer": 1}
RUNTIME_FUNCTIONS = {
    "jax.lax.scan": "scan",
    "equinox.internal.scan": "eqxi_scan",
    "jax.lax.fori_loop": "fori_loop",
    "jax.lax.map": "map",
    "flax.nnx.scan": "nnx_scan",
    "flax.linen.scan": "linen_scan",
}

# float32 throughout; the rewrite reorders nothing, but XLA may fuse an unrolled, recomputed
# body differently, which moves the last bits.
RTOL, ATOL = 1e-5, 1e-6


def _fixture_source(name: str) -> bytes:
    return (FIXTURE_DIR / f"{name}.py").read_bytes()


@functools.cache
def _rewritten(name: str):
    # Rewriting takes about a second per file here, and the result is immutable: share it.
    return rewrite(_fixture_source(name), **golden_options(name))


def _api_counts(result) -> dict[str, int]:
    return dict(collections.Counter(entry.api for entry in result.rewritten))


def test_every_fixture_has_a_golden_and_an_expectation():
    goldens = sorted(path.stem for path in GOLDEN_DIR.glob("*.py"))
    assert goldens == FIXTURES, "run `python tests/update_goldens.py` to add or remove goldens"
    assert sorted(EXPECTED_REWRITES) == FIXTURES


@pytest.mark.parametrize("name", FIXTURES)
def test_golden(name):
    expected = (GOLDEN_DIR / f"{name}.py").read_bytes()
    actual = _rewritten(name).code
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.decode().splitlines(keepends=True),
                actual.decode().splitlines(keepends=True),
                fromfile=f"tests/golden/{name}.py (expected)",
                tofile=f"rewrite(fixtures/{name}.py) (actual)",
            )
        )
        pytest.fail(
            f"rewritten fixtures/{name}.py differs from its golden file:\n{diff}\n"
            "If the new output is right, regenerate with `python tests/update_goldens.py` "
            "and review `git diff tests/golden` before committing.",
            pytrace=False,
        )


@pytest.mark.parametrize("name", FIXTURES)
def test_every_call_is_rewritten(name):
    result = _rewritten(name)
    assert _api_counts(result) == EXPECTED_REWRITES[name]
    assert dict(collections.Counter(entry.reason for entry in result.skipped)) == EXPECTED_SKIPS.get(name, {})
    assert sum(entry.absorbed is not None for entry in result.rewritten) == EXPECTED_ABSORBED.get(name, 0)


def test_skip_pragma_leaves_its_call_alone():
    source = _fixture_source("skip_pragma").decode()
    (skipped_line,) = [
        number
        for number, line in enumerate(source.splitlines(), start=1)
        if line.endswith("# scanrewrite: skip")
    ]
    golden = (GOLDEN_DIR / "skip_pragma.py").read_text()
    assert "z, _ = lax.scan(iterate, z0, None, length=n_iterations)  # scanrewrite: skip\n" in golden
    # Still used by the skipped call, so the import stays.
    assert "from jax import lax\n" in golden
    result = _rewritten("skip_pragma")
    assert skipped_line not in {entry.line for entry in result.rewritten}
    assert [entry.line for entry in result.skipped] == [skipped_line]


@pytest.mark.parametrize("name", FIXTURES)
def test_golden_is_idempotent(name):
    golden = (GOLDEN_DIR / f"{name}.py").read_bytes()
    result = rewrite(golden, **golden_options(name))
    assert result.rewritten == ()
    assert not result.changed
    assert result.code == golden


def _load(path, source: bytes, monkeypatch):
    """Executes `source` as a fresh module from `path`, registered in `sys.modules` only for this test."""
    path.write_bytes(source)
    name = f"scanrewrite_fixture_{path.stem}_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # Registered because dataclasses (and so eqx.Module) look their module up by name.
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def _run(module):
    # TF32 matmuls on recent GPUs round inputs to 10 bits, so a last-bit difference upstream can
    # become a 1e-3 one; full float32 keeps the comparison about the rewrite, not the hardware.
    with jax.default_matmul_precision("float32"):
        return jax.block_until_ready(module.run())


# Each original's results, by fixture name: several tests compare against the same original,
# whose compile is about half of each, and it computes the same wherever it is loaded from.
_EXPECTED: dict[str, object] = {}


def _expected(name, tmp_path, monkeypatch):
    """The original fixture's results, computed once per test process."""
    if name not in _EXPECTED:
        _EXPECTED[name] = _run(_load(tmp_path / f"{name}_original.py", _fixture_source(name), monkeypatch))
    return _EXPECTED[name]


def _record_runtime_calls(monkeypatch, path) -> dict[str, set]:
    """Counts, per runtime function, the distinct call sites in the file at `path` that called it:
    the line of the call, or for a `functools.partial` of the function, the line in that file that
    called the partial (through jax's `jit` too: the nearest frame of the file)."""
    sites = {function: set() for function in RUNTIME_FUNCTIONS.values()}
    for function in sites:
        original = getattr(scanrewrite.runtime, function)

        def counting(*args, _original=original, _function=function, **kwargs):
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename != str(path):
                frame = frame.f_back
            caller = inspect.getframeinfo(frame) if frame is not None else None
            if caller is not None:
                # Python 3.10 has no positions (columns); there the call's bytecode offset tells
                # two calls on one line apart.
                where = getattr(caller, "positions", None)
                site = (where.lineno, where.col_offset) if where else (caller.lineno, None, frame.f_lasti)
                sites[_function].add(site)
            return _original(*args, **kwargs)

        monkeypatch.setattr(scanrewrite.runtime, function, functools.wraps(original)(counting))
    return sites


def _in_original_classes(actual, expected):
    """`actual` rebuilt with `expected`'s node types, once their structures print the same.

    Each module defines its own classes (a NamedTuple carry, an eqx.Module), so the two runs'
    trees can never be equal as treedefs, only alike in every name, key and static field.
    """
    actual_structure = jax.tree_util.tree_structure(actual)
    expected_structure = jax.tree_util.tree_structure(expected)
    assert str(actual_structure) == str(expected_structure)
    return jax.tree_util.tree_unflatten(expected_structure, jax.tree_util.tree_leaves(actual))


def _run_both(name, tmp_path, monkeypatch, corrupt=lambda code: code):
    if name.startswith("flax_"):
        pytest.importorskip("flax", reason="flax is not installed (the `flax` extra)")
    rewritten = corrupt(_rewritten(name).code)
    rewritten_path = tmp_path / f"{name}_rewritten.py"
    sites = _record_runtime_calls(monkeypatch, rewritten_path)
    expected = _expected(name, tmp_path, monkeypatch)
    actual = _run(_load(rewritten_path, rewritten, monkeypatch))
    return _in_original_classes(actual, expected), expected, sites, rewritten


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.main_only(
    "the same runtime calls: transformer_block's checkpointed eqxi_scan in pragma_unroll, its"
    " eqx.Module in eqx_module_method; the others' plain scan over xs in kalman_filter and jit_vmap_grad",
    ids=["transformer_block", "horner_polynomials", "skip_pragma", "hand_chunked_loop"],
)
@pytest.mark.main_only(
    "run in newest-3.13 (and the first in the main suite); in floor and between, test_runtime_absorb.py"
    " runs each per-step checkpoint spelling, and test_runtime_flax_*'s remat cases flax's",
    ids=["universal_transformer_checkpoint", "flax_linen_remat_scan", "flax_nnx_transformer"],
    parts=["newest-3.13"],
)
def test_rewritten_fixture_computes_the_same(name, tmp_path, monkeypatch):
    actual, expected, sites, rewritten = _run_both(name, tmp_path, monkeypatch)

    compared = assert_trees_close(actual, expected, rtol=RTOL, atol=ATOL)
    assert compared == len(jax.tree_util.tree_leaves(expected)) > 0

    # Every rewritten call site ran through the runtime, and each recorded site is one (or, where
    # the file binds the function with `functools.partial`, may be a call of that partial).
    lines = rewritten.decode().splitlines()
    for function, function_sites in sites.items():
        partial = f"partial(scanrewrite.runtime.{function}," in rewritten.decode()
        for line, column, *_ in function_sites:
            call = f"scanrewrite.runtime.{function}("
            assert partial or (lines[line - 1][column:].startswith(call) if column is not None else call in lines[line - 1])
    executed = {api: len(sites[function]) for api, function in RUNTIME_FUNCTIONS.items() if sites[function]}
    assert executed == EXPECTED_REWRITES[name]


# Reverted, these spell their calls otherwise than the fixture (the rewrite removed the import
# they used) and one drops the user's own `unroll=2`: they must still compute the same. (The
# round trip of every fixture is checked at the source level in test_codemod_roundtrip.py.)
@pytest.mark.parametrize("name", ["explicit_unroll", "checkpointed_buffers"])
def test_reverted_fixture_computes_the_same(name, tmp_path, monkeypatch):
    reverted = revert((GOLDEN_DIR / f"{name}.py").read_bytes()).code
    assert reverted != _fixture_source(name) and b"scanrewrite" not in reverted
    expected = _expected(name, tmp_path, monkeypatch)
    actual = _run(_load(tmp_path / f"{name}_reverted.py", reverted, monkeypatch))
    actual = _in_original_classes(actual, expected)
    assert assert_trees_close(actual, expected, rtol=RTOL, atol=ATOL) == len(jax.tree_util.tree_leaves(expected)) > 0


# Programs whose imports bind a scan's name only sometimes: a revert that spelled its calls
# through them would raise NameError (or call None) where the program ran.
CONDITIONAL_IMPORTS = {
    "type checking": """\
        from typing import TYPE_CHECKING

        import jax
        import jax.numpy as jnp

        if TYPE_CHECKING:
            from jax.lax import scan as typed_scan
        """,
    "try": """\
        import jax
        import jax.numpy as jnp

        try:
            from jax.lax import scan
        except ImportError:
            scan = None
        """,
    "branch": """\
        import sys

        import jax
        import jax.numpy as jnp

        if sys.version_info < (3, 0):
            from jax import lax
        """,
}
CONDITIONAL_RUN = """
    def run():
        xs = jnp.linspace(0.0, 1.0, 7)
        return jax.lax.scan(lambda c, x: (jnp.sin(c) + x, c * x), 0.5, xs)
"""


@pytest.mark.parametrize("name", CONDITIONAL_IMPORTS)
def test_reverted_program_runs_where_a_name_is_bound_only_sometimes(name, tmp_path, monkeypatch):
    source = (textwrap.dedent(CONDITIONAL_IMPORTS[name]) + textwrap.dedent(CONDITIONAL_RUN)).encode()
    reverted = revert(rewrite(source, unroll=3).code).code
    assert b"scanrewrite" not in reverted
    expected = _run(_load(tmp_path / "original.py", source, monkeypatch))
    actual = _run(_load(tmp_path / "reverted.py", reverted, monkeypatch))
    assert assert_trees_close(actual, expected, rtol=RTOL, atol=ATOL) == 2


def test_comparison_rejects_a_flipped_reverse(tmp_path, monkeypatch):
    def flip_reverse(code):
        call = b"scanrewrite.runtime.scan(step, y_final, ts, reverse=True, unroll=4)"
        assert code.count(call) == 1
        return code.replace(call, call.replace(b"reverse=True", b"reverse=False"))

    actual, expected, _, _ = _run_both("ode_reverse_rollout", tmp_path, monkeypatch, corrupt=flip_reverse)
    with pytest.raises(AssertionError, match="values differ"):
        assert_trees_close(actual, expected, rtol=RTOL, atol=ATOL)


def test_comparison_rejects_a_runtime_that_drops_the_remainder(tmp_path, monkeypatch):
    # 13 SGD steps with unroll=4: this runtime runs 12 and silently drops the last one.
    real_scan = scanrewrite.runtime.scan

    def drop_remainder(f, init, xs=None, length=None, *args, unroll=1, **kwargs):
        return real_scan(f, init, xs, length - length % unroll, *args, unroll=unroll, **kwargs)

    monkeypatch.setattr(scanrewrite.runtime, "scan", drop_remainder)
    actual, expected, _, _ = _run_both("inner_sgd_loop", tmp_path, monkeypatch)
    with pytest.raises(AssertionError, match="values differ"):
        assert_trees_close(actual["w"], expected["w"], rtol=RTOL, atol=ATOL)
    with pytest.raises(AssertionError, match="shape"):
        assert_trees_close(actual["losses"], expected["losses"], rtol=RTOL, atol=ATOL)
