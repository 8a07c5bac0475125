"""When the attention forward pass should fold its shift and row sums.

``attention_tile_shift_folded`` saves the passes of a max-shifted softmax over
the (tq, Tk) scores at the cost of copies of the queries, keys and values with
an extra column; ``attention_tile`` is the exact max-shifted softmax. Both are
timed on float32 tiles of 4 heads (about 2**19 to 2**21 scores per call, as a
batch of short sequences or one long one gives them), one thread, best of 7;
``ratio`` below 1 means folding is faster. ``skattn._kernels.attention.folds_rows`` is
the rule chosen from this table (fold from ``2 * (head_dim + 1)`` keys on).

Run from the repository root (about 20 s)::

    python benchmarks/fold_threshold.py
"""

import time

import numpy as np
from threadpoolctl import threadpool_limits

from skattn._kernels.attention import (
    attention_tile,
    attention_tile_shift_folded,
    fold_keys_values,
    folds_rows,
)

HEADS = 4


def best_seconds(function, *args, repeats=7):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def exact(q, k, v, scale, batch):
    attention_tile(
        q, np.swapaxes(k, -1, -2), v, None, scale, batch, return_weights=False
    )


def folded(q, k, v, scale, batch):
    tile = attention_tile_shift_folded(q, *fold_keys_values(k, v, scale), None, batch)
    assert tile is not None  # random tokens never underflow


def main():
    rng = np.random.default_rng(0)
    print("| head width | keys | sequences | exact ms | folded ms | ratio | folds |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    with threadpool_limits(1):
        for head_dim in (16, 64):
            for n_keys in (4, 8, 16, 32, 64, 128, 256, 1024, 2048):
                scores = 2**19 if n_keys <= 128 else 2**21
                n = max(1, scores // (HEADS * n_keys * n_keys))
                shape = (n, HEADS, n_keys, head_dim)
                q, k, v = (rng.standard_normal(shape, dtype=np.float32) for _ in "qkv")
                args = (q, k, v, np.float32(1 / np.sqrt(head_dim)), (n, HEADS))
                t_exact = best_seconds(exact, *args)
                t_folded = best_seconds(folded, *args)
                print(
                    f"| {head_dim} | {n_keys} | {n} | {t_exact * 1e3:.2f} | "
                    f"{t_folded * 1e3:.2f} | {t_folded / t_exact:.2f} | "
                    f"{'yes' if folds_rows(n_keys, head_dim) else 'no'} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
