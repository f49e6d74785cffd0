"""A call site's settings, one type for the runtime, the tuner and the write-back.

A rewritten call has four settings: `unroll` (steps per chunk), `checkpoint`, `levels` and
`store`. `Settings` holds them. The runtime resolves a call's `Settings` for its site
(`scanrewrite.runtime.override` takes one too). The tuner's candidates are `Settings`
(`scanrewrite.tune.Candidate`). The write-back writes one into the source
(`scanrewrite.codemod.set_settings`). `DEFAULTS` is where the runtime's defaults are
written, once: a call that writes no argument gets them, and the write-back writes no
argument for them.

Plain data: no jax, libcst or click, so the command line can import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DEFAULTS", "ORIGINAL", "NAMES", "Original", "Settings"]


class Original:
    """The type of `ORIGINAL`: a single, hashable, picklable-by-name marker."""

    _instance: Original | None = None

    def __new__(cls) -> Original:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "scanrewrite.runtime.ORIGINAL"

    def __reduce__(self) -> str:
        return "ORIGINAL"


ORIGINAL = Original()
"""`override(unroll=ORIGINAL)`: the call runs as the call it replaced (`jax.lax.scan` with
`unroll=1`, `equinox.internal.scan`, `jax.lax.fori_loop` without `unroll`, `jax.lax.map`),
not chunked and not checkpointed. The baseline `scanrewrite.tune` measures every candidate
against."""


@dataclass(frozen=True)
class Settings:
    """The settings of one rewritten call: each None where it is not given.

    What "not given" means is the holder's: in an override, the call's own setting stands;
    in a tuner's candidate or a pick to write back, the written one stays; in what a call
    wrote (`scanrewrite.runtime.record_sites`), the call takes no such setting (an
    `eqxi_scan` takes no `levels`). Frozen and hashable wherever its values are (a policy
    that is not, or an array, is not), so a `Settings` can be a cache key.

    ```python
    Settings(unroll=8, checkpoint="dots_saveable")  # k=8, the chunks under jax's dots policy
    ```
    """

    #: Steps per chunk, as `scanrewrite.runtime.scan`'s `unroll`: an int >= 0 or a bool; or
    #: `ORIGINAL`, the call the rewrite replaced.
    unroll: int | bool | Original | None = None
    #: `True` (each chunk in `jax.checkpoint`), `False` (none), or a policy by name: one of
    #: `jax.checkpoint_policies` or of the runtime's own (`scanrewrite.targets.ALL_POLICIES`),
    #: which the runtime turns into the policy itself. A policy itself only where a call
    #: wrote one (as `record_sites` records it): the write-back writes names.
    checkpoint: bool | str | Callable[..., Any] | None = None
    #: Nested checkpointing: an int >= 1 or `"auto"`.
    levels: int | Literal["auto"] | None = None
    #: The last steps whose residuals are kept: an int >= 0.
    store: int | None = None

    def given(self) -> dict[str, Any]:
        """The settings given (not None), by name, in the order of the fields."""
        return {name: getattr(self, name) for name in NAMES if getattr(self, name) is not None}

    def over(self, written: Settings) -> Settings:
        """`written` with each setting given here in its place: an override applied to what a
        call wrote. A setting `written` does not give stays not given (a call that takes no
        `levels` is given none)."""
        return dataclasses.replace(
            written, **{name: value for name, value in self.given().items() if getattr(written, name) is not None}
        )

    def or_defaults(self) -> Settings:
        """These settings, each one not given as its default (`DEFAULTS`)."""
        return dataclasses.replace(DEFAULTS, **self.given())

    def at_default(self, name: str) -> bool:
        """Whether setting `name` is given here as its default, which a call writes as no
        argument (`unroll=True` is not the default `1`)."""
        return _same(getattr(self, name), getattr(DEFAULTS, name))

    def changes(self, written: Settings) -> tuple[str, ...]:
        """The names of the settings given here that differ from `written`'s (its default
        where it gives none): what writing these settings over it changes. Compared as
        written: `unroll=True` is not `unroll=1`, a policy's name is not the policy."""
        base = written.or_defaults()
        return tuple(name for name, value in self.given().items() if not _same(value, getattr(base, name)))


#: The field names of `Settings`, in order.
NAMES: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(Settings))

DEFAULTS = Settings(unroll=1, checkpoint=True, levels=1, store=0)
"""The runtime's defaults: what a call that writes none of these arguments gets (the runtime
functions' signatures show them, `tests/test_settings.py` checks that they agree), and what the
write-back writes as no argument."""


def _same(a: Any, b: Any) -> bool:
    """Whether two settings' values are the same as written: equal, and a bool only to a bool
    (in Python `True == 1`)."""
    if a is b:
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot be compared (arrays of several) differ
        return False
