"""The tuner's one error."""

from __future__ import annotations


class TuneError(Exception):
    """Bad input to the tuner: one line, naming the file and line where there is one."""
