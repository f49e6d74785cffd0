"""Run inside a CI environment by .ci/matrix.py: fail unless what is installed is what the part
asks for, so an environment kept from an earlier run cannot hide a failure; print the versions.

    python check_env.py --jax|--no-jax [name==version ...]
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import sys

SHOWN = ("jax", "jaxlib", "equinox", "flax", "libcst", "click", "pathspec", "tomli", "pytest", "hypothesis")


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def release(version: str) -> tuple[int, ...]:
    """`9.0` and `9.0.0` are the same release."""
    parts = [int(p) for p in version.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def main(args: list[str]) -> int:
    want_jax, pins = args[0] == "--jax", args[1:]
    problems = []
    for pin in pins:
        name, _, version = pin.partition("==")
        have = installed(name)
        if have is not None and release(have) != release(version):
            problems.append(f"{name} {have} is installed, the part pins {version}")
    if (importlib.util.find_spec("jax") is not None) != want_jax:
        problems.append("jax is installed in a part without jax" if not want_jax else "jax is missing")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    versions = [f"{name} {installed(name)}" for name in SHOWN if installed(name)]
    print(", ".join([f"Python {platform.python_version()}", *versions]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
