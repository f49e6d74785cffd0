"""`FILE.py:FACTORY`: import the file, call the factory, check what it returns."""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from scanrewrite.files import display_path
from scanrewrite.tune._errors import TuneError


def _where(path: str, exc: BaseException) -> str:
    """`path:line` of the innermost frame of `exc` inside `path`, else `path`."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.realpath(frame.filename) == os.path.realpath(path):
            line = frame.lineno
    if line is None and isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        line = exc.lineno
    return f"{display_path(path)}{'' if line is None else f':{line}'}"


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def load(spec: str) -> tuple[Callable, tuple[Any, ...], dict[str, Any]]:
    """Import `FILE.py` and call its `FACTORY()`; `(fn, args, kwargs)`.

    The file is imported as a module named after it, with its folder first on `sys.path`
    (so it imports its neighbours as when run as a script). Raises `TuneError`, one line
    naming the file (and line), when the file is missing or does not import, the factory is
    missing or fails, or it returns anything but `(fn, args)` or `(fn, args, kwargs)`.
    """
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise TuneError(f"expected FILE.py:FACTORY, got {spec!r}")
    shown = display_path(path)
    if not os.path.isfile(path):
        raise TuneError(f"{shown}: no such file")
    folder = os.path.dirname(os.path.abspath(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    module_name = stem if stem.isidentifier() and stem not in sys.modules else f"_scanrewrite_tune_{abs(hash(path))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise TuneError(f"{shown}: cannot import (not a Python file?)")
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, folder)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise TuneError(f"{_where(path, exc)}: cannot import: {_cause(exc)}") from None
    factory = getattr(module, name, None)
    if factory is None:
        raise TuneError(f"{shown}: no {name!r} in the file")
    if not callable(factory):
        raise TuneError(f"{shown}: {name!r} is not a function")
    try:
        made = factory()
    except Exception as exc:
        raise TuneError(f"{_where(path, exc)}: {name}() failed: {_cause(exc)}") from None
    shape = f"{shown}: {name}() must return (fn, args) or (fn, args, kwargs)"
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise TuneError(f"{shape}, got {type(made).__name__}")
    fn, args, *rest = made
    kwargs = rest[0] if rest else {}
    if not callable(fn):
        raise TuneError(f"{shape}: fn is {type(fn).__name__}, not callable")
    if not isinstance(args, (tuple, list)):
        raise TuneError(f"{shape}: args is {type(args).__name__}, not a tuple")
    if not isinstance(kwargs, Mapping):
        raise TuneError(f"{shape}: kwargs is {type(kwargs).__name__}, not a dict")
    return fn, tuple(args), dict(kwargs)
