"""CI: the wheel a registry would get, beside the editable install the tests use: built, its
contents checked, installed (not editable) in a fresh virtual environment with the
dependencies its metadata names, and run there.

    python .ci/wheel.py

Checks: the license file and `py.typed` are in the wheel, with the license expression and
classifiers in its metadata, and every file of the package as in the source tree, byte for byte;
in the fresh environment (no jax: the base install) `scanrewrite --diff fixtures/` rewrites the
fixtures, and `scanrewrite-tune --help` runs; `scanrewrite.runtime` imports from the installed
wheel (with this environment's jax). Exits 1 on the first failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The environment's own packages only, never those of whoever runs CI.
ENV = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def run(*command: str | Path, env: dict[str, str] = ENV, cwd: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    begin = time.monotonic()
    result = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True)
    if os.environ.get("SCANREWRITE_CI_VERBOSE"):
        print(f"{time.monotonic() - begin:5.1f} s  {' '.join(map(str, command))}", file=sys.stderr)
    if result.returncode != 0:
        sys.exit(f"FAIL {' '.join(map(str, command))} (exit {result.returncode}):\n{result.stderr.decode()[-5000:]}")
    return result


def check(condition: bool, message: str) -> None:
    if not condition:
        sys.exit(f"FAIL {message}")


def main() -> None:
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="scanrewrite-wheel-"))
    # Built from a copy of the files git would commit: setuptools writes build/ and
    # *.egg-info into the tree it builds, and an ignored file must not slip into the wheel.
    source = work / "source"
    files = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", work / "dist", source)
    [wheel] = (work / "dist").glob("scanrewrite-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [metadata] = [name for name in names if name.endswith(".dist-info/METADATA")]
        fields = archive.read(metadata).decode().partition("\n\n")[0].splitlines()
    dist_info = metadata.rpartition("/")[0]
    for license_file in ("LICENSE", "LICENSES/libcst-MIT.txt"):
        check(f"{dist_info}/licenses/{license_file}" in names, f"no {license_file} in {wheel.name}")
    check("scanrewrite/py.typed" in names, f"no scanrewrite/py.typed in {wheel.name}")
    check("License-Expression: Apache-2.0 AND MIT" in fields, "no License-Expression: Apache-2.0 AND MIT in the metadata")
    check(any(field.startswith("Classifier: ") for field in fields), "no classifiers in the metadata")
    packages = {path.parent.relative_to(ROOT).as_posix() for path in (ROOT / "scanrewrite").rglob("__init__.py")}
    missing = sorted(package for package in packages if f"{package}/__init__.py" not in names)
    check(not missing, f"packages missing from {wheel.name}: {', '.join(missing)}")
    # The code the main suite tested, so the wheel's command computes what it computed (the
    # editable install's `scanrewrite --diff --unroll 4 fixtures/` is run by tests/test_docs.py).
    with zipfile.ZipFile(wheel) as archive:
        changed = sorted(name for name in names if name.startswith("scanrewrite/") and not name.endswith("/")
                         and archive.read(name) != (source / name).read_bytes())  # fmt: skip
    check(not changed, f"files in {wheel.name} differ from the source tree: {', '.join(changed)}")

    venv = work / "venv"
    # Without a pip of its own (seconds saved): this one installs into it.
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    run(sys.executable, "-m", "pip", "--python", bin_dir / "python", "install", "-q", wheel)
    installed = run(bin_dir / "scanrewrite", "-j1", "--diff", "fixtures/").stdout
    check(b"+++ b/fixtures/" in installed, "the wheel's --diff fixtures/ shows no change")
    check(b"scanrewrite.runtime.scan(" in installed, "the wheel's --diff fixtures/ rewrites no lax.scan")
    help_text = run(bin_dir / "scanrewrite-tune", "--help").stdout
    check(help_text.startswith(b"Usage: scanrewrite-tune"), "scanrewrite-tune --help")
    site = run(bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout
    site = site.decode().strip()
    probe = "import scanrewrite, scanrewrite.runtime; print(scanrewrite.__file__)"
    # Run outside the checkout, whose own `scanrewrite` would come first.
    where = run(sys.executable, "-c", probe, env={**ENV, "PYTHONPATH": site}, cwd=work).stdout.decode().strip()
    check(where.startswith(site), f"scanrewrite.runtime imported from {where}, not from the installed wheel")
    shutil.rmtree(work, ignore_errors=True)
    print(f"wheel: {wheel.name} built, installed and run in {time.monotonic() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
