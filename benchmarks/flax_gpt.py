"""A GPT-style stack written the Flax way, and its rewrite: what a Flax user gets.

The stack is the shape of `memory_curve.py`'s GPT-style one (pre-LN blocks, multi-head causal
attention through Flax's own `MultiHeadAttention` / `nn.MultiHeadDotProductAttention`, a 4x
GELU MLP, dropout, bfloat16), built twice: NNX, `nnx.scan` over `nnx.remat` blocks made with
`nnx.vmap`; and Linen, `nn.scan(nn.remat(Block))` with the parameters and the dropout stream
split per layer. Each is measured as Flax runs it, rewritten (`scanrewrite.runtime.nnx_scan` /
`linen_scan` with `unroll=4`, the plain rewrite: on an accelerator `checkpoint=True` keeps the
step's reductions) and rewritten as before that default (`checkpoint=True` keeping nothing):
step time of `jax.jit(value_and_grad)` (median of interleaved rounds), XLA's compiled temp
memory, and the largest relative difference of the loss and every gradient from Flax's own,
with the same parameters and the same dropout masks, and for NNX whether the blocks' state
after the step (each layer's dropout key and counter) is exactly Flax's own.

    python benchmarks/flax_gpt.py                 # 16 layers, batch 8, seq 1024, width 1024
    python benchmarks/flax_gpt.py --smoke         # tiny, on the CPU
    python benchmarks/flax_gpt.py --sizes 4 8 1024 1024 16   # layers, batch, seq, width, heads

Exits 1 if a rewrite's numbers differ from Flax's by more than twice the peer's (Flax's own
scan with a remat that keeps dots, the same up to rounding) or 5e-2, whichever is larger: a
gradient that is zero but for rounding (the attention's key bias: a softmax does not change
when its input shifts) differs by its own size between any two programs. A state that is not
Flax's own fails it whatever the numbers.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _common import Progress, compile_lowered, compile_with_costs, interleaved_times, max_rel_diff
from default_rewrite import keeping_nothing

import scanrewrite.runtime

DTYPE = jnp.bfloat16


def nnx_model(layers: int, batch: int, seq: int, width: int, heads: int, dropout: float = 0.1, fp32_softmax: bool = False) -> tuple:
    """(graphdef, params, rest, x): the NNX stack of `layers` blocks made with `nnx.vmap`, split
    into its parameters and the rest (each layer's dropout stream: a key and a counter), each
    block dropping `dropout` of its MLP's outputs, its attention's softmax in float32 if
    `fp32_softmax` (as Linen's `force_fp32_for_softmax`)."""
    from flax import linen, nnx

    def attention(*args, is_causal=False, **kwargs):
        return linen.dot_product_attention(*args, force_fp32_for_softmax=True, **kwargs)

    class Block(nnx.Module):
        def __init__(self, rngs):
            kw = dict(dtype=DTYPE, param_dtype=DTYPE, rngs=rngs)
            self.ln1, self.ln2 = nnx.LayerNorm(width, **kw), nnx.LayerNorm(width, **kw)
            fn = dict(attention_fn=attention) if fp32_softmax else {}
            self.attn = nnx.MultiHeadAttention(heads, width, decode=False, **fn, **kw)
            self.up, self.down = nnx.Linear(width, 4 * width, **kw), nnx.Linear(4 * width, width, **kw)
            self.drop = nnx.Dropout(dropout, rngs=rngs)

        def __call__(self, x):
            mask = nnx.make_causal_mask(jnp.ones((batch, seq)))
            h = x + self.attn(self.ln1(x), mask=mask)
            return h + self.drop(self.down(jax.nn.gelu(self.up(self.ln2(h)))))

    @nnx.vmap(in_axes=0, out_axes=0)
    def make(key):
        return Block(nnx.Rngs(params=key, dropout=jax.random.fold_in(key, 1)))

    # Made in one compiled program: eagerly, each operation on each shape compiles alone.
    blocks = nnx.jit(make)(jax.random.split(jax.random.key(0), layers))
    graphdef, params, rest = nnx.split(blocks, nnx.Param, ...)
    x = jax.random.normal(jax.random.key(1), (batch, seq, width)).astype(DTYPE)
    return graphdef, params, rest, x


def nnx_step(forward, graphdef):
    """The training step of `forward(x, blocks)`: (loss, gradients, the blocks' state after the
    step). The state is every variable that is not a parameter, as plain arrays (each layer's
    dropout key as its key data, and its counter, which each draw advances): a rewrite must
    leave it as Flax's own scan leaves it."""
    from flax import nnx

    def loss(blocks, x):
        return jnp.mean(forward(x, blocks).astype(jnp.float32) ** 2)

    def value_and_grad(params, rest, x):
        blocks = nnx.merge(graphdef, params, rest)
        value, grads = nnx.value_and_grad(loss)(blocks, x)
        after = nnx.split(blocks, nnx.Param, ...)[2].to_pure_dict()
        return value, grads, jax.tree.map(lambda a: jax.random.key_data(a) if jnp.issubdtype(a.dtype, jax.dtypes.prng_key) else a, after)

    return value_and_grad


def nnx_programs(layers: int, batch: int, seq: int, width: int, heads: int) -> dict[str, tuple]:
    """name -> (jitted value and gradient, its arguments), for each way of running the scan."""
    from flax import nnx

    graphdef, params, rest, x = nnx_model(layers, batch, seq, width, heads)

    def program(scan, policy=None, **settings):
        body = nnx.remat(lambda h, block: block(h), policy=policy)
        forward = scan(body, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, **settings)
        return jax.jit(nnx_step(forward, graphdef)), (params, rest, x)

    return _ways(program, nnx.scan, scanrewrite.runtime.nnx_scan, "nnx.scan(nnx.remat(block))")


def linen_block(batch: int, seq: int, width: int, heads: int, dropout: float = 0.1, fp32_softmax: bool = False):
    """The Linen block, `Block()(x, _) -> (x, None)`, for `nn.scan(nn.remat(Block), ...)`,
    dropping `dropout` of its MLP's outputs, its attention's softmax in float32 if
    `fp32_softmax`."""
    from flax import linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            mask = nn.make_causal_mask(jnp.ones((batch, seq)))
            attend = nn.MultiHeadDotProductAttention(heads, dtype=DTYPE, param_dtype=DTYPE, deterministic=True,
                                                     force_fp32_for_softmax=fp32_softmax)  # fmt: skip
            h = x + attend(nn.LayerNorm(dtype=DTYPE, param_dtype=DTYPE)(x), mask=mask)
            up = nn.Dense(4 * width, dtype=DTYPE, param_dtype=DTYPE)(nn.LayerNorm(dtype=DTYPE, param_dtype=DTYPE)(h))
            down = nn.Dense(width, dtype=DTYPE, param_dtype=DTYPE)(jax.nn.gelu(up))
            return h + nn.Dropout(dropout, deterministic=False)(down), None

    return Block


def linen_programs(layers: int, batch: int, seq: int, width: int, heads: int) -> dict[str, tuple]:
    from flax import linen as nn

    Block = linen_block(batch, seq, width, heads)
    x = jax.random.normal(jax.random.key(1), (batch, seq, width)).astype(DTYPE)
    keys = {"params": jax.random.key(0), "dropout": jax.random.key(2)}

    def program(scan, policy=None, **settings):
        stack = scan(nn.remat(Block, policy=policy), variable_axes={"params": 0}, split_rngs={"params": True, "dropout": True},
                     length=layers, **settings)()  # fmt: skip
        params = jax.jit(stack.init)(keys, x, None)
        loss = lambda params, x: jnp.mean(stack.apply(params, x, None, rngs={"dropout": keys["dropout"]})[0]
                                          .astype(jnp.float32) ** 2)  # fmt: skip
        return jax.jit(jax.value_and_grad(loss)), (params, x)

    return _ways(program, nn.scan, scanrewrite.runtime.linen_scan, "nn.scan(nn.remat(Block))")


def _ways(program, flax_scan, rewritten, name: str) -> dict[str, tuple]:
    """Flax's own; a peer the same up to rounding (its remat keeping dots), whose difference
    from Flax's own is the rounding spread to read the others' against; the rewrite; and the
    rewrite as before the default."""
    found = {
        name: program(flax_scan),
        f"{name}, remat keeping dots (a peer)": program(flax_scan, jax.checkpoint_policies.dots_with_no_batch_dims_saveable),
        f"rewrite --unroll 4 of {name}": program(rewritten, unroll=4),
    }
    with keeping_nothing():
        # Traced here, where the layout keeps nothing: the program as it was before the default.
        fn, args = program(rewritten, unroll=4)
        found["the same, keeping nothing (before)"] = (fn.lower(*args), args)
    return found


def measure(programs: dict[str, tuple], repeats: int, progress: Progress) -> tuple[list[str], dict[str, float]]:
    rows, compiled, outs = [], {}, {}
    for name, (fn, args) in programs.items():
        if hasattr(fn, "compile"):  # lowered already, where the layout was pinned
            compiled[name], seconds, temp = compile_lowered(fn, 0.0)
        else:
            compiled[name], seconds, temp = compile_with_costs(fn, *args)
        outs[name] = jax.block_until_ready(compiled[name](*args))
        rows.append((name, seconds, temp))
        progress.step(name)
    args = {name: a for name, (_, a) in programs.items()}
    times = interleaved_times({n: (lambda c=c, a=args[n]: c(*a)) for n, c in compiled.items()}, (), repeats,
                              lambda r: progress.step(f"round {r + 1}"))  # fmt: skip
    base_name = rows[0][0]
    base_time, base_temp = statistics.median(times[base_name]), rows[0][2]
    lines = ["| program | step (ms) | vs Flax | temp memory (MiB) | vs Flax | compile (s) | max rel diff | state as Flax's |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    for name, seconds, temp in rows:
        t = statistics.median(times[name])
        diff = max_rel_diff(outs[name], outs[base_name])
        lines.append(f"| {name} | {t * 1e3:.1f} | {t / base_time:.2f} | {temp / 2**20:.1f} | {temp / base_temp:.2f} "
                     f"| {seconds:.1f} | {diff:.1e} | {same_state(outs[name], outs[base_name])} |")  # fmt: skip
    diffs = {name: max_rel_diff(o, outs[base_name]) for name, o in outs.items()}
    # A state that is not Flax's own (a counter advanced otherwise) is a difference however
    # small its relative size.
    return lines, {name: d if same_state(outs[name], outs[base_name]) != "no" else math.inf for name, d in diffs.items()}


def same_state(out: tuple, flax_out: tuple) -> str:
    """Whether the state after the step (NNX: each layer's dropout key and counter, the third
    output) is exactly Flax's own: `yes`, `no`, or `n/a` where the step returns none (Linen: its
    dropout stream is the key passed to `apply`, and its masks show in the loss and gradients)."""
    if len(out) < 3:
        return "n/a"
    a, e = jax.tree.leaves(out[2]), jax.tree.leaves(flax_out[2])
    same = len(a) == len(e) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, e))
    return "yes" if same else "no"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (for the CPU, in seconds)")
    parser.add_argument("--apis", nargs="+", choices=["nnx", "linen"], default=["nnx", "linen"])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--sizes", type=int, nargs=5, metavar=("LAYERS", "BATCH", "SEQ", "WIDTH", "HEADS"),
                        help="instead of 16 8 1024 1024 16 (or --smoke's 2 1 8 16 2)")  # fmt: skip
    args = parser.parse_args(argv)
    sizes = tuple(args.sizes) if args.sizes else (2, 1, 8, 16, 2) if args.smoke else (16, 8, 1024, 1024, 16)
    repeats = 2 if args.smoke else args.repeats
    device = jax.devices()[0]
    print(f"benchmarks/flax_gpt.py on {device.platform} ({device.device_kind}), jax {jax.__version__}, "
          f"{sizes[0]} layers, batch {sizes[1]}, seq {sizes[2]}, width {sizes[3]}, {sizes[4]} heads, bfloat16\n")  # fmt: skip
    agree = True
    progress = Progress(len(args.apis) * (4 + repeats))
    for api in args.apis:
        lines, diffs = measure((nnx_programs if api == "nnx" else linen_programs)(*sizes), repeats, progress)
        print(f"\n## {api}\n\n" + "\n".join(lines) + "\n", flush=True)
        peer = list(diffs.values())[1]
        agree &= all(diff <= max(2 * peer, 5e-2) for diff in diffs.values())
    return 0 if agree else 1


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    raise SystemExit(main())
