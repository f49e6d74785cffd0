"""`scanrewrite.settings.Settings`: one type for a site's settings, its defaults written once, the
same object taken by the runtime (`override`), the tuner (`Candidate`) and the write-back."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import pickle
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import scanrewrite.runtime
from scanrewrite.codemod import set_settings, write_picks
from scanrewrite.runtime import ORIGINAL, Site, override, record_sites
from scanrewrite.settings import DEFAULTS, NAMES, Settings
from scanrewrite.tune import ORIGINAL_SCAN, Candidate
from tests.treecheck import assert_trees_close


def test_the_defaults_give_every_setting():
    assert NAMES == ("unroll", "checkpoint", "levels", "store")
    assert DEFAULTS == Settings(unroll=1, checkpoint=True, levels=1, store=0)
    assert DEFAULTS.given() == {"unroll": 1, "checkpoint": True, "levels": 1, "store": 0}
    assert Settings().given() == {} and Settings().or_defaults() == DEFAULTS
    assert Settings(4, store=2).or_defaults() == Settings(4, True, 1, 2)


RUNTIME_FUNCTIONS = ["scan", "eqxi_scan", "fori_loop", "map", "nnx_scan", "linen_scan"]


@pytest.mark.parametrize("name", RUNTIME_FUNCTIONS)
def test_the_runtime_signatures_show_the_defaults(name):
    """The public signatures write the defaults as literals (what `help` and the API pages
    show); they are `DEFAULTS`' (`fori_loop`'s `unroll=None` is jax's spelling of 1)."""
    parameters = inspect.signature(getattr(scanrewrite.runtime, name)).parameters
    shown = {setting: parameters[setting].default for setting in NAMES if setting in parameters}
    assert shown == {setting: getattr(DEFAULTS, setting) for setting in shown} or (
        name == "fori_loop" and shown == {**DEFAULTS.given(), "unroll": None}
    )
    assert set(shown) == ({"unroll", "store"} if name == "eqxi_scan" else set(NAMES))


def test_nothing_but_the_standard_library_is_imported():
    """The command line imports it (through the codemod), and it never imports jax."""
    code = "import sys, scanrewrite.settings; print(sorted({'jax', 'libcst', 'click'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


@pytest.mark.parametrize(
    ("given", "written", "expected"),
    [
        pytest.param(Settings(unroll=8), Settings(4, True, 1, 0), Settings(8, True, 1, 0), id="one-setting"),
        pytest.param(Settings(2, False, 3, 5), Settings(4, True, 1, 0), Settings(2, False, 3, 5), id="every-setting"),
        pytest.param(Settings(), Settings(4, True, 1, 0), Settings(4, True, 1, 0), id="none-given"),
        # An `eqxi_scan` takes no `levels`: an override gives it none.
        pytest.param(Settings(8, levels=2), Settings(4, True, None, 0), Settings(8, True, None, 0), id="not-taken"),
        pytest.param(Settings(ORIGINAL), Settings(4, True, 1, 0), Settings(ORIGINAL, True, 1, 0), id="original"),
    ],
)
def test_an_override_applied(given, written, expected):
    assert given.over(written) == expected


def test_what_writing_settings_back_changes():
    written = Settings(4, True, 1, 0)
    assert Settings(4).changes(written) == ()
    assert Settings(8, "dots_saveable", 2, 3).changes(written) == NAMES
    assert Settings(4, True, 1, 0).changes(Settings(4)) == ()  # the defaults the call leaves
    # As written: `True == 1` in Python, not in a call's arguments; a name is not the policy.
    assert Settings(1).changes(Settings(True)) == ("unroll",)
    policy = jax.checkpoint_policies.dots_saveable
    assert Settings(checkpoint="dots_saveable").changes(Settings(checkpoint=policy)) == ("checkpoint",)
    assert [name for name in NAMES if Settings(2, True, 1, 0).at_default(name)] == ["checkpoint", "levels", "store"]
    assert not Settings(True).at_default("unroll") and not Settings(store=False).at_default("store")


def test_settings_are_values():
    assert Settings(4, "dots_saveable") == Settings(4, "dots_saveable") != Settings(4, "dots_with_no_batch_dims_saveable")
    policy = jax.checkpoint_policies.dots_saveable
    assert len({Settings(4), Settings(4), Settings(4, policy), Settings(4, policy)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings(4).unroll = 2  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(Settings(ORIGINAL, False))) == Settings(ORIGINAL, False)
    # A candidate is a `Settings`; the length it is named by is not part of what it is.
    assert Candidate(16, store=16, length=16) == Candidate(16, store=16)
    assert hash(Candidate(16, store=16, length=16)) == hash(Candidate(16, store=16))
    assert isinstance(ORIGINAL_SCAN, Settings) and ORIGINAL_SCAN.original and ORIGINAL_SCAN.unroll is ORIGINAL


def step(h, x):
    return jnp.tanh(h * x + 0.5), jnp.sum(h * h)


def test_override_takes_a_settings_or_keywords():
    h, xs = jnp.ones(3), jnp.linspace(0.0, 1.0, 12)
    fn = lambda h, xs: scanrewrite.runtime.scan(step, h, xs, unroll=4)  # noqa: E731
    loss = lambda h, xs: jnp.sum(fn(h, xs)[1])  # noqa: E731
    grad = jax.grad(loss)
    with override(unroll=2, checkpoint=jax.checkpoint_policies.dots_saveable, levels=2, store=3):
        by_keywords = str(jax.make_jaxpr(grad)(h, xs))
    with override(Settings(2, "dots_saveable", 2, 3)):  # a policy by name
        by_object = str(jax.make_jaxpr(grad)(h, xs))
    assert by_keywords == by_object != str(jax.make_jaxpr(grad)(h, xs))
    with pytest.raises(TypeError, match="not both"):
        with override(Settings(2), unroll=3):
            pass
    with pytest.raises(ValueError, match="needs `unroll`"):
        with override(Settings()):
            pass
    with pytest.raises(ValueError, match="`checkpoint` must be"):
        with override(Settings(checkpoint="dots")):
            pass


PROGRAM = """\
import jax.numpy as jnp
import scanrewrite.runtime


def step(h, x):
    return jnp.tanh(h * x + 0.5), jnp.sum(h * h)


def loss(h, xs):
    h, ys = scanrewrite.runtime.scan(step, h, xs, unroll=4)
    return jnp.sum(h) + jnp.sum(ys)
"""
LINE = 10


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "pick",
    [
        pytest.param(Candidate(2, "dots_saveable", 2, store=3), id="every-setting"),
        pytest.param(Candidate(3, False), id="no-checkpoint"),
        pytest.param(Candidate(1, True, 1, store=0), id="the-defaults"),
        pytest.param(Candidate(12, "reductions_saveable", length=12), id="runtime-policy-per-step"),
    ],
)
def test_a_pick_applied_by_override_is_the_program_written_back(tmp_path, pick):
    """The tuner measures a pick through `override`, and the codemod writes the same object
    into the source: the program written back is the program measured."""
    before, after = tmp_path / "before.py", tmp_path / "after.py"
    before.write_text(PROGRAM)
    result = write_picks(PROGRAM.encode(), {LINE: pick})
    assert result.updated == (LINE,)
    after.write_bytes(result.code)
    written, measured = _load(after, "settings_after"), _load(before, "settings_before")
    args = (jnp.ones(3), jnp.linspace(0.0, 1.0, 12))
    site = Site(str(before.resolve()), LINE)
    with override(pick, sites=[site]), record_sites() as found_measured:
        program_measured = str(jax.make_jaxpr(jax.grad(measured.loss))(*args))
    with record_sites() as found_written:
        program_written = str(jax.make_jaxpr(jax.grad(written.loss))(*args))
    assert program_measured == program_written
    (plans_measured,), (plans_written,) = found_measured.plans.values(), found_written.plans.values()
    assert plans_measured == plans_written
    (call,) = found_written.values()
    assert pick.changes(call.settings) in ((), ("checkpoint",))  # a name written back as its policy
    assert_trees_close(jax.grad(written.loss)(*args), jax.grad(measured.loss)(*args), rtol=1e-5, atol=1e-6)


def test_the_write_back_takes_settings_and_refuses_what_it_cannot_write():
    source = b"import scanrewrite.runtime\n\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\n"
    written = set_settings(source, {3: Settings(2, False, "auto", 5)}).code
    assert b'unroll=2, checkpoint=False, levels="auto", store=5\n)' in written
    assert set_settings(written, {3: Settings(4, True, 1, 0)}).code == source
    for bad, message in [
        (Settings(2, jax.checkpoint_policies.dots_saveable), "`checkpoint` must be True, False or a policy's name"),
        (Settings(2, "none"), "`checkpoint` must be"),
        (Settings(2, store=-1), "`store` must be"),
        (Settings(2, store=True), "`store` must be"),
        (Settings(0), "`unroll` must be"),
        (Settings(ORIGINAL), "`unroll` must be"),
        (Settings(2, levels=0), "`levels`"),
    ]:
        with pytest.raises(ValueError, match=message):
            set_settings(source, {3: bad})


def test_the_runtime_turns_a_name_into_its_policy():
    from scanrewrite.runtime import named_policy
    from scanrewrite.targets import ALL_POLICIES, RUNTIME_POLICIES

    for name in ALL_POLICIES:
        owner = scanrewrite.runtime if name in RUNTIME_POLICIES else jax.checkpoint_policies
        assert named_policy(name) is getattr(owner, name)
    with pytest.raises(ValueError, match="got 'dots'"):
        named_policy("dots")


def test_a_recorded_call_holds_what_it_wrote():
    fn = lambda h, xs: scanrewrite.runtime.scan(step, h, xs, unroll=3, store=2)  # noqa: E731
    with record_sites() as found:
        jax.make_jaxpr(fn)(jnp.ones(3), jnp.ones(6))
    assert [call.settings for call in found.values()] == [Settings(3, True, 1, 2)]
