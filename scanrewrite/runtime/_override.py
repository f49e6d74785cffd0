"""Trace-time overrides of a rewritten call's settings, by call site.

Every runtime call knows its call site (the file and line of the rewritten call). `resolve`
gives the settings a call should use: what the call wrote, unless an active override says
otherwise for all sites or for this one. The staging cache keys on the resolved settings, so
an override always reaches the compiled program.

`override` and `record_sites` are the public API (`scanrewrite.tune` is built on them). Both
change a value in jax's own jit cache key (`jax.make_user_context`), so a `jax.jit` function
traced earlier under other settings is traced again rather than silently reusing a
compilation made without them. On a jax without `make_user_context` (older than about 0.7),
entering and leaving either one clears jax's caches instead (`jax.clear_caches()`), with a
warning the first time: correct, but every jitted function compiles again.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import operator
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import jax

from scanrewrite.runtime import _levels
from scanrewrite.runtime._compat import make_user_context
from scanrewrite.runtime._policies import policy_of
from scanrewrite.runtime._validate import check_store, check_unroll
from scanrewrite.settings import ORIGINAL, Settings

__all__ = ["ORIGINAL", "Call", "Site", "Sites", "built", "building", "call_site", "override", "record_sites", "resolve"]


class Site(NamedTuple):
    """Where a rewritten call stands: the absolute path of its file and the line of the call."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"

    @classmethod
    def parse(cls, site: Site | str | tuple[str, int]) -> Site:
        """`site` as a `Site` with its path made absolute (symbolic links resolved).

        Accepts a `Site`, a `(path, line)` pair or a `"path:line"` string; raises
        `ValueError` naming anything else.
        """
        if isinstance(site, str):
            path, sep, line = site.rpartition(":")
            if not sep or not path or not line.strip().isdigit():
                raise ValueError(f"a site is 'path:line', got {site!r}")
            site = (path, int(line))
        try:
            path, line = site
        except (TypeError, ValueError):
            raise ValueError(f"a site is a Site, 'path:line' or (path, line), got {site!r}") from None
        if not isinstance(path, (str, os.PathLike)) or isinstance(line, bool):
            raise ValueError(f"a site is a Site, 'path:line' or (path, line), got {site!r}")
        try:
            line = operator.index(line)
        except TypeError:
            raise ValueError(f"a site's line must be an int, got {line!r}") from None
        return cls(_absolute(os.fspath(path)), line)


@functools.lru_cache(maxsize=4096)
def _absolute(path: str) -> str:
    return os.path.realpath(path)


def call_site(depth: int = 2) -> Site | None:
    """The site of the frame `depth` levels up from this function, if any.

    `depth=1` is the function that calls `call_site`, so the default, 2, is that function's
    caller: called first thing in `scan`/`eqxi_scan`, the user's (rewritten) call line.

    Where that frame is a library's (as jax's traceback filtering tells them: jax, the
    standard library, installed packages), the site is the nearest frame further up that is
    the user's or names `scanrewrite`: a runtime function applied rather than called, as in
    `jax.jit(functools.partial(scanrewrite.runtime.scan, step, unroll=4))(init, xs)`, is
    called by jax, and the line that matters is the one that applied it, not jax's. A
    rewritten call in an installed package's own file (one that names `scanrewrite`) is its
    own site.
    """
    try:
        frame = sys._getframe(depth)
    except ValueError:
        return None
    caller = frame
    while frame is not None and _is_library(frame.f_code):
        frame = frame.f_back
    frame = caller if frame is None else frame
    return Site(_absolute(frame.f_code.co_filename), frame.f_lineno)


def _is_library(code: Any) -> bool:
    return not _is_user_file(code.co_filename) and "scanrewrite" not in code.co_names


try:
    # The heuristic jax's own tracebacks use (cached by file name); libraries that wrap jax's
    # transformations (equinox, flax) register their files with it.
    from jax._src.source_info_util import is_user_filename as _is_user_file
except ImportError:  # pragma: no cover - a jax without it: only jax's own files are a library's
    _JAX_DIR = os.path.dirname(jax.__file__) + os.sep

    def _is_user_file(path: str) -> bool:
        return not path.startswith(_JAX_DIR)


class Call(NamedTuple):
    """A rewritten call as `record_sites` saw it first: which runtime function, and the
    settings the call itself wrote (before any override)."""

    #: `"scan"`, `"eqxi_scan"`, `"fori_loop"`, `"map"`, `"nnx_scan"` or `"linen_scan"`.
    api: str
    #: As the call passed them; a setting the function takes none of is None (`eqxi_scan`'s
    #: `levels`).
    settings: Settings


class _Entry(NamedTuple):
    """One active override: for `sites` (None: every site), these settings."""

    sites: frozenset[Site] | None
    settings: Settings


class _State(NamedTuple):
    """What is in force: the overrides (outermost first) and the open recordings' tokens.

    Hashable, since it is part of jax's jit cache key.
    """

    entries: tuple[_Entry, ...] = ()
    recording: tuple[int, ...] = ()


_STATE = make_user_context(_State()) if make_user_context is not None else None
#: Fallback for a jax without `make_user_context`: the same state, outside jax's cache key.
_fallback_state = _State()
_warned = False
_tokens = itertools.count()


class Sites(dict):
    """What `record_sites` yields: each `Site` (in the order first seen) to its `Call`, and in
    `plans` the plans the runtime built there (`_plan.Plan`, each once, in the order built)."""

    def __init__(self) -> None:
        super().__init__()
        self.plans: dict[Site, list[Any]] = {}
        # The plans a staged program made, by its request and input types, for a later call
        # that finds the program cached and makes none.
        self._by_key: dict[Any, list[Any]] = {}

    def _built(self, site: Site, key: Any, plans: list[Any], note: str | None) -> None:
        try:
            if plans:
                self._by_key[key] = plans
            else:
                plans = self._by_key.get(key, [])
        except TypeError:  # an unhashable setting: no lookup
            pass
        for plan in plans:
            if note is not None:
                plan = plan._replace(reasons=(note, *plan.reasons))
            seen = self.plans.setdefault(site, [])
            if plan not in seen:
                seen.append(plan)

    def report(self) -> str:
        """One line per plan built: the site, the runtime function, what was built and why."""
        lines = []
        for site, plans in self.plans.items():
            api = self[site].api if site in self else "scan"
            lines.extend(f"{site}: {api}: {plan.describe()}" for plan in plans)
        return "\n".join(lines)


#: Open recordings, innermost last: each maps a site to its call.
_recorders: list[Sites] = []
#: The plans made while a recorded call runs, innermost call last (`building`, `built`).
_pending: list[list[Any]] = []


def built(plan: Any) -> None:
    """Report a plan the runtime is building (called where the program is traced)."""
    if _pending:
        _pending[-1].append(plan)


@contextlib.contextmanager
def building(site: Site | None, key: Any, note: str | None = None) -> Iterator[None]:
    """Collect the plans built while a call at `site` runs, for every open recording. `key`
    (the call's request and input types) finds the plan of a program already staged, which
    makes none when called again; `note` is a reason to add (a checkpoint taken over in Flax)."""
    if not _recorders or site is None:
        yield
        return
    plans: list[Any] = []
    _pending.append(plans)
    try:
        yield
    finally:
        _pending.pop()
    for found in _recorders:
        found._built(site, key, plans, note)


def _current() -> _State:
    return _STATE.value if _STATE is not None else _fallback_state


@contextlib.contextmanager
def _entered(state: _State) -> Iterator[None]:
    global _fallback_state, _warned
    if _STATE is not None:
        with _STATE(state):
            yield
        return
    if not _warned:
        _warned = True
        warnings.warn(
            f"jax {jax.__version__} has no `jax.make_user_context`, so scanrewrite.runtime.override "
            "and record_sites clear jax's caches (jax.clear_caches()) on entering and leaving, so "
            "that no jitted function keeps a compilation made under other settings",
            RuntimeWarning,
            stacklevel=4,
        )
    previous, _fallback_state = _fallback_state, state
    jax.clear_caches()
    try:
        yield
    finally:
        _fallback_state = previous
        jax.clear_caches()


_UNSET: Any = object()


@contextlib.contextmanager
def override(
    settings: Settings | None = None,
    /,
    *,
    unroll: Any = _UNSET,
    checkpoint: Any = _UNSET,
    levels: Any = _UNSET,
    store: Any = _UNSET,
    sites: None | Site | str | Iterable[Site | str | tuple[str, int]] = None,
) -> Iterator[None]:
    """Use other settings for rewritten calls traced (or run) inside this block.

    **Arguments:**

    - `settings`: the settings as one `Settings` (those it gives), instead of the keywords.
    - `unroll`: steps per chunk, as `scanrewrite.runtime.scan`'s `unroll`; or `ORIGINAL`, to
        run each call as the call it replaced (`jax.lax.scan`, `equinox.internal.scan`,
        `jax.lax.fori_loop`, `jax.lax.map`).
    - `checkpoint`: as `scanrewrite.runtime.scan`'s `checkpoint` (`True`, `False` or a
        policy), or a policy's name (`"dots_saveable"`, `"reductions_saveable"`: one of
        `jax.checkpoint_policies` or of the runtime's own). `eqxi_scan` uses it with
        `kind="lax"` only.
    - `levels`: as `scanrewrite.runtime.scan`'s `levels` (an int >= 1 or `"auto"`).
        `eqxi_scan` takes no `levels` and ignores it.
    - `store`: as `scanrewrite.runtime.scan`'s `store` (an int >= 0: the last steps whose
        residuals are kept). `eqxi_scan` uses it with `kind="lax"` only.
    - `sites`: `None` for every rewritten call; else the calls to override, each a `Site`, a
        `"path:line"` string or a `(path, line)` pair, where the line is the first line of the
        call (the line `scanrewrite` reports; for a runtime function bound with
        `functools.partial`, the first line of the call that runs the partial, as
        `record_sites` names it). Paths are compared as absolute paths with
        symbolic links resolved, so a relative path is read from the current folder.

    Overrides nest: an inner block wins over an outer one for the settings it names, at the
    sites it names; other settings and sites keep the outer block's. A setting not given is
    not overridden.

    The override is part of jax's jit cache key: a jitted function called (or lowered) inside
    the block is traced again under it, never reusing a compilation from outside it, and is
    traced again after the block if called under other settings. Python code that runs
    outside any trace (eager calls) sees the override on every call.

    ```python
    with scanrewrite.runtime.override(unroll=8, sites=["model.py:42"]):
        loss, grads = train_step(params, batch)     # model.py:42 runs with unroll=8
    with scanrewrite.runtime.override(scanrewrite.runtime.Settings(unroll=8, checkpoint="dots_saveable")):
        loss, grads = train_step(params, batch)     # every site, k=8 under jax's dots policy
    ```
    """
    keywords = {"unroll": unroll, "checkpoint": checkpoint, "levels": levels, "store": store}
    keywords = {name: value for name, value in keywords.items() if value is not _UNSET}
    if settings is None:
        given = keywords
    elif not isinstance(settings, Settings):
        raise TypeError(f"override takes a `Settings` (or keywords), got {settings!r}")
    elif keywords:
        raise TypeError("override takes a `Settings` or keywords, not both")
    else:
        given = settings.given()
    if not given:
        raise ValueError("override needs `unroll`, `checkpoint` or `levels` (or `store`)")
    entry = _Entry(_sites(sites), Settings(**{name: _checked(name, value) for name, value in given.items()}))
    state = _current()
    with _entered(state._replace(entries=(*state.entries, entry))):
        yield


def _checked(name: str, value: Any) -> Any:
    """An override's setting `name` as the runtime uses it (a policy's name as the policy); a
    `ValueError` naming the setting if it is none."""
    if name == "unroll":
        return value if value is ORIGINAL else check_unroll(value, expected="ORIGINAL, a bool or a non-negative int")
    if name == "checkpoint":
        return policy_of(value)
    if name == "levels":
        _levels.check(value)
        return value
    return check_store(value)


def _sites(sites: None | Site | str | Iterable[Site | str | tuple[str, int]]) -> frozenset[Site] | None:
    if sites is None:
        return None
    if isinstance(sites, (str, Site)):
        return frozenset([Site.parse(sites)])
    return frozenset(Site.parse(site) for site in sites)


@contextlib.contextmanager
def record_sites() -> Iterator[dict[Site, Call]]:
    """Collect the rewritten calls run or traced inside this block.

    Yields a dict (a `Sites`), filled as calls happen: each call's `Site` (in the order first
    seen) to a `Call`: the runtime function called there and the settings the call itself
    wrote, before any override (a `Settings`, whose `levels` is None at an `eqxi_scan`, which
    takes none). Its `plans` holds, per site, what the runtime built there on this
    device (`_plan.Plan`: program, chunk size, layout, checkpoint or policy, stored steps,
    levels, staging, and why each), and `report()` says it in one line per plan:

    ```python
    with scanrewrite.runtime.record_sites() as sites:
        jax.grad(loss)(params)
    print(sites.report())
    ```

    Jitted functions are traced again inside the block (it changes jax's jit cache key), so a
    function compiled earlier still reports its sites and plans.
    """
    found = Sites()
    state = _current()
    _recorders.append(found)
    try:
        with _entered(state._replace(recording=(*state.recording, next(_tokens)))):
            yield found
    finally:
        _recorders.remove(found)


def resolve(site: Site | None, written: Settings, *, api: str) -> Settings:
    """`written`, the settings as the call wrote them, with any active override for `site`
    applied (`Settings.over`); an open `record_sites` records the call as one of `api` (the
    runtime function's name).

    Only the settings the call gives are overridden (an `eqxi_scan` gives no `levels`). A
    resolved `unroll` may be `ORIGINAL`: the caller then runs the scan it replaced.
    """
    if _recorders and site is not None:
        call = Call(api, written)
        for found in _recorders:
            found.setdefault(site, call)
    resolved = written
    for entry in _current().entries:
        if entry.sites is None or site in entry.sites:
            resolved = entry.settings.over(resolved)
    return resolved
