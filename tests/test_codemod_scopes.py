"""The scopes of only the statements that can matter (`codemod/_scopes.py`) give every answer
the whole module's give: which statements are analysed, and the same rewrite, revert and
write-back as an analysis of the whole module, over every codemod case, every fixture and
generated programs."""

from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings

import scanrewrite.codemod._scopes as scopes_module
from scanrewrite.codemod import Settings, SourceError, read_unroll, revert, rewrite, set_settings
from tests.fuzz_programs import OPTIONS, programs
from tests.test_codemod_roundtrip import CASES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _kept(source: str) -> tuple[list[str], frozenset[str]] | None:
    """The first line of each analysed statement, and the names the others read."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    kept = scopes_module._kept_statements(module, source, ast.parse(source))
    if kept is None:
        return None
    statements, read, _ = kept
    return [module.code_for_node(statement).strip().splitlines()[0] for statement in statements], read


def test_a_statement_that_only_reads_an_import_is_left_out():
    kept, read = _kept(
        """\
        import jax
        import numpy as np

        def helper(x):
            return jax.numpy.tanh(x) + np.pi

        def run(f, c, xs):
            return jax.lax.scan(f, c, xs)
        """
    )
    assert kept == ["import jax", "def run(f, c, xs):"]
    assert read == {"jax"}


@pytest.mark.parametrize(
    "other",
    [
        pytest.param("jax = None", id="binds the import's name"),
        pytest.param("def helper(jax):\n    return jax", id="binds it in a scope of its own"),
        pytest.param("def helper(x: 'jax.Array'):\n    return jax", id="names it in a string"),
        pytest.param("def helper():\n    global g\n    g = 1", id="says global"),
        pytest.param("step = jax.checkpoint(inner)", id="binds a name the call reads"),
        pytest.param("def helper(x):\n    return lax.cond(x)", id="mentions a part of a known API"),
    ],
)
def test_a_statement_that_may_change_an_answer_is_kept(other: str):
    kept, _ = _kept(f"import jax\nfrom jax import lax\n\n{other}\n\ny = jax.lax.scan(step, c, xs)\n")
    assert kept[2] == other.splitlines()[0]


def test_lines_are_counted_as_python_counts_them():
    """A form feed is no line break to Python (it is to `str.splitlines`): the statement after
    one is still read whole."""
    kept, _ = _kept("import jax\n\x0c\ndef run(f, c, xs):\n    x = 1\x0c\n    return jax.lax.scan(f, c, xs)\n")
    assert kept == ["import jax", "def run(f, c, xs):"]


def test_a_star_import_has_the_whole_module_analysed():
    assert _kept("from jax.lax import *\n\ndef f():\n    return 1\n\ny = scan(f, c, xs)\n") is None


def _everything(source: bytes, options: dict[str, object]) -> list[object]:
    """Every transform's result on `source` (the rewrite, then the revert and write-back of it)."""
    try:
        result = rewrite(source, **options)
    except SourceError as exc:
        return [str(exc)]
    found: list[object] = [result]
    if result.changed:
        found += [revert(result.code), read_unroll(result.code)]
        found.append(set_settings(result.code, {call.line: Settings(2, False, 2) for call in result.rewritten}))
    return found


def _agrees(source: bytes, options: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    some = _everything(source, options)
    with monkeypatch.context() as patch:
        patch.setattr(scopes_module, "_kept_statements", lambda module, code, tree: None)
        whole = _everything(source, options)
    assert some == whole


@pytest.mark.parametrize("case", range(len(CASES)), ids=[case_id for case_id, _, _ in CASES])
def test_every_codemod_case_agrees_with_the_whole_analysis(case: int, monkeypatch: pytest.MonkeyPatch):
    _, source, options = CASES[case]
    _agrees(source, options, monkeypatch)


@pytest.mark.parametrize("name", sorted(path.stem for path in FIXTURES.glob("*.py")))
def test_every_fixture_agrees_with_the_whole_analysis(name: str, monkeypatch: pytest.MonkeyPatch):
    source = (FIXTURES / f"{name}.py").read_bytes()
    _agrees(source, {"targets": "lax.scan,eqxi.scan,lax.fori_loop,lax.map,nnx.scan,linen.scan"}, monkeypatch)


# 25 in the version matrix's parts, as `test_codemod_property.FUZZ_EXAMPLES` is cut there.
@settings(
    max_examples=25 if os.environ.get("SCANREWRITE_CI_MATRIX") else 100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(program=programs())
def test_generated_programs_agree_with_the_whole_analysis(program, monkeypatch: pytest.MonkeyPatch):
    source, options = program
    _agrees(source, options, monkeypatch)


def test_the_comparison_can_fail(monkeypatch: pytest.MonkeyPatch):
    """An analysis that leaves out a statement it needs (the other use of `lax`) is caught."""
    source = b"from jax import lax\n\ny = lax.scan(f, c, xs)\n\ndef g(x):\n    return lax.cond(x)\n"
    _agrees(source, {}, monkeypatch)
    real = scopes_module._kept_statements

    def forgetful(module, code, tree):
        statements, read, starts = real(module, code, tree)
        return statements[:-1], read, starts

    monkeypatch.setattr(scopes_module, "_kept_statements", forgetful)
    with pytest.raises(AssertionError):
        _agrees(source, {}, monkeypatch)
    assert OPTIONS  # the generated programs' options are those the fuzz test draws
