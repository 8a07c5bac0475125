"""The attention patterns by sequence length: BigBird's blocks against the band
of as many keys a query and full attention, time and peak memory.

The attention kernels alone (no projections), through the patterns' kernels
(``pattern._kernels_of()``, as the model calls them): one sequence of ``T``
tokens, 4 heads of 16 features, float32, no mask, at one thread, at T =
1,024 to 65,536 (``--lengths``). The patterns:

- ``bigbird``: ``BigBirdAttention(block_size=64, window_blocks=3,
  n_random_blocks=3)``, 384 keys a query (numpy: it has no compiled kernels);
- ``banded``: ``BandedAttention(window=383)``, as many keys a query, on the
  compiled path where numba is installed (``banded numpy``: the numpy path);
- ``full``: up to ``--full-max`` tokens (quadratic; "–" beyond).

Each cell is the best of ``--repeats`` runs of the forward pass followed by
the backward pass, the patterns alternating run by run, each called once
beforehand on 1,024 tokens. ``T→4T`` is a row's time over its time at a
quarter of the tokens (4: linear in ``T``; 16: quadratic). ``peak MiB`` is
``tracemalloc``'s peak of one forward and backward call beyond its inputs, at
the longest length.

Run from ``benchmarks/`` (about a minute)::

    python pattern_speed.py
    python pattern_speed.py --lengths 1024,4096 --repeats 2
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import time
import tracemalloc

import numpy as np
from _machine import machine_lines  # benchmarks/_machine.py
from threadpoolctl import threadpool_limits

from skattn._kernels import compiled
from skattn.patterns import BandedAttention, BigBirdAttention, FullAttention

HEADS, HEAD_DIM = 4, 16
PATTERNS = {
    "bigbird": (BigBirdAttention(block_size=64, window_blocks=3, n_random_blocks=3),),
    "banded": (BandedAttention(window=383),),
    "banded numpy": (BandedAttention(window=383), "numpy"),
    "full": (FullAttention(),),
}


def forward_backward(pattern, q, k, v, numpy_path=False):
    """One forward and backward call of the pattern's kernels."""
    kernels = pattern._kernels_of()
    call = dict(mask=None, causal=False, dropout=None)
    previous = compiled._DISABLED
    compiled._DISABLED = numpy_path or previous
    try:
        out, lse, _ = kernels.forward(q, k, v, return_weights=False, **call)
        kernels.backward(out, q, k, v, out, lse, **call)
    finally:
        compiled._DISABLED = previous


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="1024,4096,16384,65536")
    parser.add_argument("--full-max", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    rng = np.random.default_rng(0)
    for line in machine_lines():
        print(line)
    times = {name: {} for name in PATTERNS}
    peaks = {}
    with threadpool_limits(1):
        small = [rng.standard_normal((HEADS, 1024, HEAD_DIM)).astype(np.float32)]
        for pattern, *path in PATTERNS.values():
            forward_backward(pattern, *small * 3, numpy_path=bool(path))
        for n_tokens in lengths:
            q, k, v = (
                rng.standard_normal((HEADS, n_tokens, HEAD_DIM)).astype(np.float32)
                for _ in range(3)
            )
            for _ in range(args.repeats):
                for name, (pattern, *path) in PATTERNS.items():
                    if name == "full" and n_tokens > args.full_max:
                        continue
                    start = time.perf_counter()
                    forward_backward(pattern, q, k, v, numpy_path=bool(path))
                    elapsed = time.perf_counter() - start
                    best = times[name].get(n_tokens, np.inf)
                    times[name][n_tokens] = min(best, elapsed)
        n_tokens = lengths[-1]
        for name, (pattern, *path) in PATTERNS.items():
            if name == "full" and n_tokens > args.full_max:
                continue
            tracemalloc.start()
            forward_backward(pattern, q, k, v, numpy_path=bool(path))
            peaks[name] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
    header = ["pattern", *(f"T={n} ms" for n in lengths), "T→4T", "peak MiB"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, row in times.items():
        cells = [f"{1e3 * row[n]:.0f}" if n in row else "–" for n in lengths]
        ratios = [row[n] / row[n // 4] for n in lengths if n in row and n // 4 in row]
        growth = f"{max(ratios):.1f}" if ratios else "–"
        peak = f"{peaks[name]:.0f}" if name in peaks else "–"
        print(f"| {name} | " + " | ".join(cells) + f" | {growth} | {peak} |")


if __name__ == "__main__":
    main()
