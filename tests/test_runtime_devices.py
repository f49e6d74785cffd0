"""The runtime across 8 simulated CPU devices equals `jax.lax.scan`, shardings included.

The checks live in `tests/multidevice_check.py` and run in one subprocess, because the
device count is fixed when jax starts; the rest of the suite keeps one device.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def results():
    env = {
        **os.environ,
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8".strip(),
        "JAX_PLATFORMS": "cpu",
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.multidevice_check"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


MODES = ["eager", "jit", "shard_map"]


@pytest.mark.parametrize("levels", [1, 2])
@pytest.mark.parametrize("mode", MODES, ids=["sharded-eager", "sharded-jit", "shard_map-psum"])
def test_forward_grad_and_shardings_match_lax_scan(results, mode, levels):
    # Carry and ys forward; the gradients wrt init and xs: 4 leaves, each with its sharding.
    assert results[f"{mode}-levels{levels}"] == "ok 4"


@pytest.mark.parametrize("mode", MODES)
def test_checker_rejects_a_wrong_scan(results, mode):
    assert results[f"{mode}-broken"].startswith("rejected: ")
