"""Rewrite `jax.lax.scan` and `equinox.internal.scan` calls into chunked, checkpointed scans.

Importing this package never imports jax; only `scanrewrite.runtime` does.
"""

__version__ = "0.1.0"
