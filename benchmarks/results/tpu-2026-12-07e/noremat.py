"""Flax's own nnx.scan with and without nnx.remat (fp32 and bf16 softmax): time and peak: the floor of recomputing nothing."""
import sys, time, statistics
sys.path.insert(0, "benchmarks")
import jax
from flax import nnx
from _common import interleaved_times, peak_bytes
from flax_gpt import nnx_model, nnx_step
from tune_flax_gpt import FULL
FULL = (int(sys.argv[1]),) + FULL[1:] if len(sys.argv) > 1 else FULL
for fp32 in (True, False):
    graphdef, params, rest, x = nnx_model(*FULL, dropout=0.0, fp32_softmax=fp32)
    progs = {}
    for label, remat in (("remat", True), ("no remat", False)):
        body = lambda h, block: block(h)
        if remat:
            body = nnx.remat(body)
        fwd = nnx.scan(body, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        c = jax.jit(nnx_step(fwd, graphdef)).lower(params, rest, x).compile()
        m = c.memory_analysis()
        progs[label] = (c, m.temp_size_in_bytes, peak_bytes(c))
    times = interleaved_times({k: (lambda c=v[0]: c(params, rest, x)) for k, v in progs.items()}, (), 7)
    base = statistics.median(times["remat"])
    for k, (c, temp, peak) in progs.items():
        t = statistics.median(times[k])
        print(f"fp32_softmax={fp32} {k:9s} {t*1e3:7.1f} ms {t/base:5.2f}x temp {temp/2**30:6.3f} GiB peak {peak/2**30:6.3f} GiB", flush=True)
