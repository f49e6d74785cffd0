"""The fastest program at any memory, 6 layers: Flax's own nnx.scan with and without remat beside
the runtime's straight-line programs (every layer in one chunk) with and without recomputation."""
import sys, statistics, time
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, "benchmarks")
import jax
from flax import nnx
from _common import interleaved_times, max_rel_diff, peak_bytes
from flax_gpt import nnx_model, nnx_step
import scanrewrite.runtime as rt
from tune_flax_gpt import FULL, SMOKE
layers = int(next((a.split("=")[1] for a in sys.argv if a.startswith("--layers=")), 6))
only = next((a.split("=")[1].split(",") for a in sys.argv if a.startswith("--only=")), None)
sizes = (SMOKE if "--smoke" in sys.argv else (layers,) + FULL[1:])
rounds = 2 if "--smoke" in sys.argv else 7
plain = lambda h, block: block(h)
axes = dict(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
PROGRAMS = {
    "flax, remat": lambda: nnx.scan(nnx.remat(plain), **axes),
    "flax, no remat": lambda: nnx.scan(plain, **axes),
    "runtime unroll=True, remat taken over": lambda: rt.nnx_scan(nnx.remat(plain), **axes, unroll=True),
    "runtime unroll=True, checkpoint=False": lambda: rt.nnx_scan(plain, **axes, unroll=True, checkpoint=False),
    "runtime unroll=True, reductions_saveable": lambda: rt.nnx_scan(plain, **axes, unroll=True, checkpoint=rt.reductions_saveable),
    "runtime k=1, reductions_saveable": lambda: rt.nnx_scan(plain, **axes, unroll=1, checkpoint=rt.reductions_saveable),
}
if only:
    PROGRAMS = {k: v for i, (k, v) in enumerate(PROGRAMS.items()) if str(i) in only}
for fp32 in (True, False):
    t0 = time.time()
    graphdef, params, rest, x = nnx_model(*sizes, dropout=0.0, fp32_softmax=fp32)
    lowered = {k: jax.jit(nnx_step(make(), graphdef)).lower(params, rest, x) for k, make in PROGRAMS.items()}
    def comp(k):
        c = lowered[k].compile()
        return k, (c, c.memory_analysis().temp_size_in_bytes, peak_bytes(c) or 0)
    with ThreadPoolExecutor(6) as pool:
        progs = dict(pool.map(comp, lowered))
    outs = {k: jax.block_until_ready(v[0](params, rest, x)) for k, v in progs.items()}
    times = interleaved_times({k: (lambda c=v[0]: c(params, rest, x)) for k, v in progs.items()}, (), rounds)
    base = statistics.median(times["flax, remat"]); bp = progs["flax, remat"][2] or 1
    print(f"== {'Linen attention, fp32 softmax' if fp32 else 'NNX attention'}, sizes {sizes}, {time.time()-t0:.0f} s", flush=True)
    for k, (c, temp, peak) in progs.items():
        t = statistics.median(times[k])
        print(f"{k:42s} {t*1e3:7.1f} ms {t/base:5.2f}x  temp {temp/2**30:6.3f} GiB  peak {peak/2**30:6.3f} GiB {peak/bp:5.2f}x  diff {max_rel_diff(outs[k], outs['flax, remat']):.1e}", flush=True)
