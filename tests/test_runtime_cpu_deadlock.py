"""XLA:CPU + LAPACK: independent solves in one loop body can deadlock the intra-op pool.

The issue 8 reproduction, CI-sized: a scan whose step solves a batch of triangular systems
that do not depend on the carry. Unrolled (`jax.lax.scan(unroll=8)`, or the runtime's
straight-line chunk), XLA:CPU runs the 8 solves concurrently; each splits itself into pieces
on the intra-op thread pool and blocks until they finish, and with every pool thread blocked
the program hangs (6 runs of 6 on 2 cores). On CPU the runtime keeps a chunk's steps rolled,
so it must finish every time. A hang shows up as the subprocess outliving its timeout.
"""

import subprocess
import sys
import textwrap

import jax
import pytest

REPRO = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    from jax.lax.linalg import triangular_solve
    import scanrewrite.runtime

    K, B = 8, 5000  # above jaxlib's ~200k flops per call, where LAPACK calls split on the pool
    Ls = jnp.tril(jax.random.normal(jax.random.PRNGKey(0), (2 * K + 3, B, 4, 4))) + 4 * jnp.eye(4)

    def step(x, L):  # the solve does not depend on the carry
        return x + 1e-3 * triangular_solve(L, L, left_side=True, lower=True), None

    run = jax.jit(lambda x: scanrewrite.runtime.scan(step, x, Ls, unroll=K)[0])
    x = jnp.zeros((B, 4, 4))
    for _ in range(10):
        x = run(x)
    eager = scanrewrite.runtime.scan(step, x, Ls, unroll=K)[0]  # the staged eager unit, too
    print("ok", float(eager.sum()))
    """
)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the hazard lives in XLA:CPU")
@pytest.mark.parametrize("run", range(3))
@pytest.mark.main_only("repetitions: without the fix run 0 hangs every time (6 of 6)", ids=["1", "2"])
def test_runtime_does_not_deadlock_on_independent_lapack_calls(run):
    try:
        done = subprocess.run([sys.executable, "-c", REPRO], check=False, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the runtime's program hung (XLA:CPU intra-op pool deadlock), run {run}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok")
