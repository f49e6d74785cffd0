"""A memory budget: bytes, a fraction of the original's memory, or of the device's memory."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from scanrewrite.tune._errors import TuneError

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "tb": 10**12}


@dataclass(frozen=True)
class Budget:
    """A memory budget for a compiled program's memory (`_compile.judged_bytes`: XLA's peak on
    an accelerator, its temp size on the CPU): bytes, a fraction of the original program's (every
    site as written), or a fraction of the device's memory."""

    bytes: int | None = None
    fraction: float | None = None
    #: A fraction of the device's memory (`memory_stats()["bytes_limit"]`).
    device: float | None = None

    @classmethod
    def parse(cls, text: str | int | float | None) -> Budget | None:
        """`"2GiB"`, `"512MB"`, `1000000` (bytes); `"0.5x"` or `"50%"` (of the original program's); a
        bare number up to 1, `"0.8"`, of the device's memory (less than a byte means nothing
        else)."""
        if text is None:
            return None
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            text = str(text)
        if not isinstance(text, str):
            raise TuneError(f"{_BUDGET_FORMS}, got {text!r}")
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*(x|%|[a-z]*)\s*", text.lower())
        if match is None or match.group(2) not in (*_UNITS, "x", "%"):
            raise TuneError(f"{_BUDGET_FORMS}, got {text!r}")
        number, unit = float(match.group(1)), match.group(2)
        if number <= 0:
            raise TuneError(f"a memory budget must be positive, got {text!r}")
        if unit == "x":
            return cls(fraction=number)
        if unit == "%":
            return cls(fraction=number / 100)
        if unit == "" and number <= 1:
            return cls(device=number)
        return cls(bytes=int(number * _UNITS[unit]))

    def limit(self, baseline_bytes: int | None, device_bytes: int | None = None) -> int | None:
        """The budget in bytes, given the original program's memory and the device's memory (None:
        unknown, no limit)."""
        if self.bytes is not None:
            return self.bytes
        if self.device is not None:
            if device_bytes is None:
                raise TuneError(
                    f"a budget of {self.device:g} of the device's memory, but the device reports no memory "
                    "size (the CPU does not): give bytes ('12GiB') or a fraction of the original program's ('0.5x')"
                )
            return math.floor(self.device * device_bytes)
        if baseline_bytes is None:
            return None
        return math.floor(self.fraction * baseline_bytes)

    def __str__(self) -> str:
        if self.bytes is not None:
            return f"{self.bytes} bytes"
        if self.device is not None:
            return f"{self.device:g} of the device's memory"
        return f"{self.fraction:g}x the original program's memory"


_BUDGET_FORMS = "a memory budget is bytes ('2GiB'), a fraction of the original program's ('0.5x', '50%') or of the device's memory ('0.8')"
