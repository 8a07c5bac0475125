"""Where each compiled attention pass is faster than the numpy path.

``skattn.multi_head_attention`` on float32 tokens of width 64 to 128, one to
eight heads (heads of 8 to 64 features), 2**21 to 2**23 scores per call,
once on each compiled kernel, the short one (``_numba_short``) and the blocked
one (``_numba_attention``), and once on the numpy path (the projections, the
same on all, included); best of 9 at one and two threads, the three
alternating. ``short`` and ``blocked`` are their times over the numpy path's
(below 1: faster). ``runs`` says what
``skattn._kernels.compiled.forward_kernel``, the rule chosen from this table,
runs: for heads of at most 16 features the short kernel from ``2 * head_dim``
to 127 keys; else the blocked kernel from ``head_dim**2 / 4`` keys on; the
numpy path elsewhere.

``--backward`` times the backward pass instead: ``attention_backward`` of the
heads of the same projections (views of them, as the model passes them), from
the numpy path's output and log-sum-exp, on each kernel; ``runs`` then says
what ``compiled.backward_kernel`` runs.

Needs numba (the ``[fast]`` extra). Run from the repository root (about a
minute a pass)::

    python benchmarks/compiled_crossover.py [--backward]
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import functools
import math

import numpy as np
from fold_threshold import best_seconds  # benchmarks/fold_threshold.py
from threadpoolctl import threadpool_limits

from skattn import multi_head_attention
from skattn._kernels import compiled
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward
from skattn._kernels.multi_head import project, split_heads

# (width, heads, keys): heads of 8, 16, 32 and 64 features
CASES = [
    (64, 8, 16), (64, 8, 32), (64, 8, 64), (64, 8, 128), (64, 8, 256),
    (64, 4, 8), (64, 4, 16), (64, 4, 32), (64, 4, 64), (64, 4, 128), (64, 4, 256),
    (64, 4, 512), (64, 4, 1024), (64, 4, 2048),
    (64, 2, 32), (64, 2, 64), (64, 2, 128), (64, 2, 256), (64, 2, 1024),
    (64, 1, 32), (64, 1, 64), (64, 1, 128), (64, 1, 256), (64, 1, 512),
    (64, 1, 1024), (64, 1, 2048), (64, 1, 4096), (128, 2, 8192),
]  # fmt: skip


def time_kernels(run, kernel_setting):
    """Seconds of ``run()`` on the short kernel, the blocked kernel and the
    numpy path, the kernel forced by ``compiled.<kernel_setting>``."""
    variants = [(False, "short"), (False, "blocked"), (True, None)]
    seconds = [math.inf] * len(variants)
    for _ in range(3):
        for i, (disabled, kernel) in enumerate(variants):
            compiled._DISABLED = disabled
            setattr(compiled, kernel_setting, kernel)  # at every size
            run()  # warm-up: numba compiles on its first call
            seconds[i] = min(seconds[i], best_seconds(run, repeats=3))
    return seconds


def time_variants(x, weights, n_heads):
    """Seconds of the forward pass on each kernel (:func:`time_kernels`)."""
    attention = functools.partial(multi_head_attention, x, *weights, n_heads=n_heads)
    return time_kernels(attention, "_FORWARD_KERNEL")


def time_backward_variants(x, weights, n_heads):
    """Seconds of the backward pass on each kernel (:func:`time_kernels`)."""
    rng = np.random.default_rng(1)
    q, k, v = (split_heads(project(x, w), n_heads) for w in weights[:3])
    d_out = rng.standard_normal(q.shape[:-1] + (v.shape[-1],), dtype=np.float32)
    compiled._DISABLED = True
    out, lse, _ = attention_forward(q, k, v)
    backward = functools.partial(attention_backward, d_out, q, k, v, out, lse)
    return time_kernels(backward, "_BACKWARD_KERNEL")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backward", action="store_true", help="the backward pass")
    args = parser.parse_args(argv)
    if compiled.kernels() is None:
        raise SystemExit("numba is not installed: pip install '.[fast]'")
    time_passes = time_backward_variants if args.backward else time_variants
    choose = compiled.backward_kernel if args.backward else compiled.forward_kernel
    rng = np.random.default_rng(0)
    print(
        "| threads | head width | keys | sequences | numpy ms | short | blocked "
        "| runs |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for n_threads in (1, 2):
        with threadpool_limits(n_threads):
            for width, n_heads, n_keys in CASES:
                scores = 2**23 if n_keys >= 4096 else 2**21
                n = max(1, scores // (n_heads * n_keys * n_keys))
                x = rng.standard_normal((n, n_keys, width), dtype=np.float32)
                weights = [
                    rng.standard_normal((width, width), dtype=np.float32) / 8
                    for _ in range(4)
                ]
                t_short, t_blocked, t_numpy = time_passes(x, weights, n_heads)
                head_dim = width // n_heads
                compiled._FORWARD_KERNEL = compiled._BACKWARD_KERNEL = None
                runs = choose(n_keys, head_dim) or "numpy"
                print(
                    f"| {n_threads} | {head_dim} | {n_keys} | {n} | "
                    f"{t_numpy * 1e3:.2f} | {t_short / t_numpy:.2f} | "
                    f"{t_blocked / t_numpy:.2f} | "
                    f"{runs} |",
                    flush=True,
                )
    compiled._DISABLED = False


if __name__ == "__main__":
    main()
