"""Where the compiled attention forward pass is faster than the numpy path.

``skattn.multi_head_attention`` on float32 tokens of width 64 to 128, one to
eight heads (heads of 16 to 64 features), 2**21 to 2**23 scores per call,
once on the compiled kernels and once on the numpy path (the projections,
the same on both, included); best of 9 at one and two threads. ``ratio``
below 1 means the compiled kernels are faster. ``compiled`` says what
``skattn._kernels.compiled.pays_off``, the rule chosen from this table, runs:
the compiled kernels from ``head_dim**2 / 4`` keys on.

Needs numba (the ``[fast]`` extra). Run from the repository root (about a
minute)::

    python benchmarks/compiled_crossover.py
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import functools

import numpy as np
from fold_threshold import best_seconds  # benchmarks/fold_threshold.py
from threadpoolctl import threadpool_limits

from skattn import multi_head_attention
from skattn._kernels import compiled

# (width, heads, keys): heads of 16, 32 and 64 features
CASES = [
    (64, 4, 32), (64, 4, 64), (64, 4, 128), (64, 4, 256),
    (64, 2, 64), (64, 2, 128), (64, 2, 256),
    (64, 1, 32), (64, 1, 128), (64, 1, 256), (64, 1, 512), (64, 1, 1024),
    (64, 1, 4096), (128, 2, 8192),
]  # fmt: skip


def time_both(x, weights, n_heads):
    """Seconds of the compiled kernels and of the numpy path."""
    attention = functools.partial(multi_head_attention, n_heads=n_heads)
    seconds = []
    for disabled in (False, True):
        compiled._DISABLED = disabled
        compiled.MIN_KEYS_PER_SQUARED_DIM = 0  # compiled at every size
        attention(x, *weights)  # warm-up: numba compiles on its first call
        seconds.append(best_seconds(attention, x, *weights, repeats=9))
    return seconds


def main():
    if compiled.kernels() is None:
        raise SystemExit("numba is not installed: pip install '.[fast]'")
    rule = compiled.MIN_KEYS_PER_SQUARED_DIM
    rng = np.random.default_rng(0)
    print(
        "| threads | head width | keys | sequences | compiled ms | numpy ms "
        "| ratio | compiled |"
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
                t_compiled, t_numpy = time_both(x, weights, n_heads)
                head_dim = width // n_heads
                compiled.MIN_KEYS_PER_SQUARED_DIM = rule
                runs = compiled.pays_off(n_keys, head_dim)
                print(
                    f"| {n_threads} | {head_dim} | {n_keys} | {n} | "
                    f"{t_compiled * 1e3:.2f} | {t_numpy * 1e3:.2f} | "
                    f"{t_compiled / t_numpy:.2f} | {'yes' if runs else 'no'} |",
                    flush=True,
                )
    compiled._DISABLED = False


if __name__ == "__main__":
    main()
