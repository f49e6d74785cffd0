"""Python files written the way users write them, for timing the rewrite: imports, functions,
classes, comments, and `lax.scan` calls in several spellings, at a chosen density."""

from __future__ import annotations

import random

#: The imports every generated file opens with; each scan spelling below resolves through one.
_HEADER = '''"""A generated module: a model's layers, its training step and some helpers."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.lax import scan
from jax.lax import scan as lax_scan


'''

#: Scan calls as users spell them; ``{i}`` makes names unique.
_CALLS = (
    "    carry, ys = jax.lax.scan(step_{i}, carry, xs)\n",
    "    carry, ys = lax.scan(step_{i}, carry, xs, length=n)\n",
    "    carry, ys = scan(step_{i}, carry, xs, reverse=True)\n",
    "    carry, ys = lax_scan(\n        step_{i},\n        carry,\n        xs,\n    )\n",
    "    carry, _ = jax.lax.scan(jax.checkpoint(step_{i}), carry, None, length=n)\n",
)

#: Plain code between the calls, 10 lines each.
_FILLER = (
    '''def helper_{i}(x, y=None, *, scale=1.0):
    """Scales `x` and adds `y` when given."""
    if y is None:
        y = jnp.zeros_like(x)
    total = x * scale + y  # elementwise
    for _ in range(3):
        total = jnp.tanh(total) + math.pi
    return total


''',
    '''class Layer{i}:
    """A dense layer with its own parameters."""

    def __init__(self, width: int, key) -> None:
        self.w = jax.random.normal(key, (width, width)) / math.sqrt(width)
        self.b = jnp.zeros((width,))

    def __call__(self, x):
        return jnp.dot(x, self.w) + self.b


''',
    '''@functools.partial(jax.jit, static_argnums=(1,))
def loss_{i}(params, n, batch={{"x": [1, 2, 3], "y": (4, 5)}}):
    # Mean squared error over the batch.
    prediction = [p * 2 for p in params if p is not None]
    error = sum(
        (a - b) ** 2 for a, b in zip(prediction, batch["y"])
    )
    return error / max(n, 1)


''',
)

_STEP = '''def run_{i}(carry, xs, n):
    def step_{i}(c, x):
        return c + x, c * x

{call}    return carry, ys if ys is not None else None


'''


def generated_file(lines: int, calls_per_100: int, seed: int = 0) -> str:
    """A module of about `lines` lines with about `calls_per_100` scan calls per 100 lines."""
    rng = random.Random(seed)
    parts = [_HEADER]
    count = len(_HEADER.splitlines())
    calls_wanted = max(1, round(lines * calls_per_100 / 100))
    # A scan call comes with its function: about 9 lines; the rest is filler of 10.
    filler = max(0, (lines - count - 9 * calls_wanted) // 10)
    kinds = [True] * calls_wanted + [False] * filler
    rng.shuffle(kinds)
    for i, is_call in enumerate(kinds):
        if is_call:
            call = rng.choice(_CALLS).format(i=i)
            if "ys = " not in call:
                call += "    ys = None\n"
            parts.append(_STEP.format(i=i, call=call))
        else:
            parts.append(rng.choice(_FILLER).format(i=i))
    return "".join(parts).rstrip("\n") + "\n"
