"""The targets table agrees with the real APIs it describes."""

import inspect
import subprocess
import sys
import textwrap

import equinox.internal
import jax
import jax.numpy as jnp
import pytest

from scanrewrite import runtime
from scanrewrite.codemod import rewrite
from scanrewrite.targets import CHECKPOINT_POLICIES, TARGETS


def _resolve(dotted):
    module, _, name = dotted.rpartition(".")
    if module.startswith("flax"):
        obj = pytest.importorskip(module, reason="flax is not installed (the `flax` extra)")
    else:
        obj = {"jax.lax": jax.lax, "equinox.internal": equinox.internal, "scanrewrite.runtime": runtime}[module]
    return getattr(obj, name)


#: Options of newer Flax releases than the oldest supported (0.10.0), in the table.
_NEWER_FLAX_OPTIONS = {"flax.nnx.scan": ("graph", "graph_updates")}


def _signature_lists(fn):
    params = inspect.signature(fn).parameters.values()
    positional = tuple(p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
    keyword_only = tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
    return positional, keyword_only


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.qualified_name)
def test_row_is_the_replacement_signature(target):
    positional, keyword_only = _signature_lists(_resolve(target.replacement))
    # Where the original takes `unroll` by position, so does the replacement, as `_unroll`.
    assert target.params == tuple("unroll" if name == "_unroll" else name for name in positional)
    assert ("_unroll" in positional) == ("unroll" in target.params)
    # Keyword-only parameters bind by name: their order does not matter.
    assert sorted(target.keyword_only) == sorted(keyword_only)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.qualified_name)
def test_replacement_accepts_every_call_the_original_accepts(target):
    # The rewrite only swaps the callee, so the original's parameters must bind the
    # same way: the same positional order, and every keyword-only one still there.
    positional, keyword_only = _signature_lists(_resolve(target.qualified_name))
    assert target.params[: len(positional)] == positional
    assert set(keyword_only) <= set(target.keyword_only) | set(target.params[len(positional) :])
    # `added` is exactly what the original does not take: on an older Flax, also the options of
    # newer releases (the runtime passes on only the options a call gives).
    newer = set(_NEWER_FLAX_OPTIONS.get(target.qualified_name, ())) - set(positional) - set(keyword_only)
    assert set(target.added) | newer == set(target.keyword_only) - set(positional) - set(keyword_only)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.qualified_name)
def test_every_row_can_take_unroll(target):
    assert "unroll" in target.params + target.keyword_only


def test_policies_are_exactly_the_argument_free_ones():
    # jax calls a policy as policy(prim, *args, **params); the other names in the
    # namespace are factories that take names, devices or policies and return one.
    namespace = jax.checkpoint_policies
    policies = {
        name
        for name, value in vars(namespace).items()
        if not name.startswith("_")
        and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(value).parameters.values())
    }
    assert sorted(CHECKPOINT_POLICIES) == sorted(policies)
    assert len(set(CHECKPOINT_POLICIES)) == len(CHECKPOINT_POLICIES)


@pytest.mark.parametrize("name", CHECKPOINT_POLICIES)
def test_policy_works_under_checkpoint_and_grad(name):
    policy = getattr(jax.checkpoint_policies, name)

    def f(w, x):
        return jnp.sum(jnp.tanh(x @ w) @ w)

    w = jnp.eye(2) * 0.5
    x = jnp.ones((3, 2))
    expected = jax.grad(f)(w, x)
    got = jax.grad(jax.checkpoint(f, policy=policy))(w, x)
    assert jnp.allclose(got, expected, rtol=1e-6)


def test_importing_targets_does_not_import_jax():
    code = "import sys, scanrewrite.targets, scanrewrite.codemod; sys.exit('jax' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.parametrize("checkpoint", [None, "none", "dots_saveable"])
def test_rewritten_program_runs_with_the_checkpoint_option(checkpoint):
    # The names the codemod writes must resolve and be accepted by the runtime.
    source = textwrap.dedent(
        """\
        import jax
        import jax.numpy as jnp
        from jax import lax

        def run(w):
            def step(c, x):
                return jnp.tanh(c * w + x), c
            return lax.scan(step, jnp.float32(0.5), jnp.arange(5.0))
        """
    )
    result = rewrite(source.encode(), unroll=2, checkpoint=checkpoint)
    assert result.changed
    namespace = {}
    exec(compile(result.code, "rewritten.py", "exec"), namespace)
    original = {}
    exec(compile(source, "original.py", "exec"), original)
    for fn in (lambda ns: ns["run"](0.3), lambda ns: jax.grad(lambda w: ns["run"](w)[0])(0.3)):
        got, want = fn(namespace), fn(original)
        assert jax.tree.all(jax.tree.map(lambda a, b: jnp.allclose(a, b, rtol=1e-5), got, want))
