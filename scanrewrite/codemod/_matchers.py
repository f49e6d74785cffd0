"""libcst's matcher-decoratable visitors without their cost per instance.

`MatcherDecoratableTransformer.__init__` (and so every `ContextAwareTransformer`, such as
`RemoveImportsVisitor`) looks for methods that carry matcher decorators with `dir()` and
`getattr` over every attribute of the new instance, some 700 visit and leave methods: about
20 ms each time, more than the rest of a small file's rewrite. Which methods carry one is a
property of the class, so `NoMatcherSearch` answers `dir()` from a per-class list of exactly
those methods: libcst then finds the same ones (none, for ours) at no cost.
"""

from __future__ import annotations

import functools

from libcst.matchers._decorators import (
    CONSTRUCTED_LEAVE_MATCHER_ATTR,
    CONSTRUCTED_VISIT_MATCHER_ATTR,
    VISIT_NEGATIVE_MATCHER_ATTR,
    VISIT_POSITIVE_MATCHER_ATTR,
)

__all__ = ["NoMatcherSearch"]

_MATCHER_ATTRS = (
    CONSTRUCTED_LEAVE_MATCHER_ATTR,
    CONSTRUCTED_VISIT_MATCHER_ATTR,
    VISIT_NEGATIVE_MATCHER_ATTR,
    VISIT_POSITIVE_MATCHER_ATTR,
)


class NoMatcherSearch:
    """Put first among the bases of a subclass of a libcst matcher-decoratable visitor: its
    `dir()` lists only the methods that carry a matcher decorator (what libcst looks for)."""

    def __dir__(self) -> list[str]:
        return list(_decorated(type(self)))


@functools.cache
def _decorated(cls: type) -> tuple[str, ...]:
    """The attributes of `cls` that carry a matcher decorator, found as libcst finds them."""
    return tuple(
        name for name in dir(cls) if any(hasattr(getattr(cls, name, None), attr) for attr in _MATCHER_ATTRS)
    )
