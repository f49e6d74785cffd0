"""Which kept reductions make the bf16-softmax Flax stack slower: variants of the policy, compiled and timed; HLO dumped."""
import sys, time, importlib, statistics, os
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, "benchmarks")
import jax
from jax import lax
from _common import interleaved_times, max_rel_diff, peak_bytes
from scanrewrite.runtime import override, reductions_saveable
from scanrewrite.settings import ORIGINAL
EXT = {lax.reduce_max_p, lax.reduce_min_p}
def rank(args): return len(getattr(args[0], "shape", ())) if args else -1
def sums(p, *a, **k): return p is lax.reduce_sum_p
def softmax_only(p, *a, **k): return (p is lax.reduce_sum_p or p in EXT) and rank(a) >= 4
def ln_only(p, *a, **k): return p is lax.reduce_sum_p and rank(a) == 3
def max_only(p, *a, **k): return p in EXT
def softmax_max_ln(p, *a, **k): return (p in EXT and rank(a) >= 4) or (p is lax.reduce_sum_p and rank(a) == 3)
def every(p, *a, **k): return p is lax.reduce_sum_p or p in EXT
CONFIGS = [("original", dict(unroll=ORIGINAL)), ("k=1", dict(unroll=1, checkpoint=True)),
           ("rs", dict(unroll=1, checkpoint=reductions_saveable))] + [
           (f.__name__, dict(unroll=1, checkpoint=f)) for f in (sums, softmax_only, ln_only, max_only, softmax_max_ln)]
out = os.environ.get("OUT", "/tmp")
for target in sys.argv[1:]:
    mod, name = target.split(":")
    fn, args = getattr(importlib.import_module(mod), name)()
    t0 = time.time()
    lowered = []
    for label, s in CONFIGS:
        with override(**s):
            lowered.append((label, jax.jit(fn).lower(*args)))
    def comp(item):
        t = time.time(); c = item[1].compile(); m = c.memory_analysis()
        return item[0], c, m.temp_size_in_bytes, peak_bytes(c) or 0, time.time() - t
    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(comp, lowered))
    for label, c, *_ in done:
        if label in ("original", "rs", "softmax_only", "ln_only"):
            with open(f"{out}/{name}.{label}.hlo.txt", "w") as fh:
                fh.write(c.as_text())
    outs = {label: jax.block_until_ready(c(*args)) for label, c, *_ in done}
    times = interleaved_times({label: (lambda c=c: c(*args)) for label, c, *_ in done}, (), 5)
    base = statistics.median(times["original"]); bt = done[0][2]; bp = done[0][3]
    for label, c, temp, peak, s in done:
        t = statistics.median(times[label])
        print(f"{name:20s} {label:15s} {t*1e3:7.1f} ms {t/base:5.2f}x  temp {temp/2**30:6.3f} GiB {temp/bt:5.2f}x  peak {peak/2**30:6.3f} GiB {peak/max(bp,1):5.2f}x  compile {s:5.1f} s  diff {max_rel_diff(outs[label], outs['original']):.1e}", flush=True)
    print(f"{target} done in {time.time()-t0:.0f} s", flush=True)
