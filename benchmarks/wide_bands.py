"""Bands as wide as the sequence or wider, against full attention: time and
peak memory.

A band that covers the sequence is full attention and must cost no more than
it. This script calls :func:`skattn.scaled_dot_product_attention` on one
batch of 2 sequences, 4 heads of 16 features, float64, no mask, with full
attention and with windows of 10, 10**4 and 10**6 (``--windows``), on 6 and
1,000 tokens (``--lengths``), on the numpy path and the compiled one, and
prints for each the peak memory of the call beyond its inputs
(``tracemalloc``, which also traces what numba's runtime allocates) and the
best time of ``--repeats`` calls. ``--old CHECKOUT`` runs the same calls with
the package of another checkout, imported as ``skattn_old``, in the same
process; a call that fails prints its error in place of its numbers.

How to run (one thread; about a minute, more with an old checkout whose wide
bands are slow)::

    git worktree add /tmp/skattn-old <commit>
    OMP_NUM_THREADS=1 python benchmarks/wide_bands.py --old /tmp/skattn-old
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import time
import tracemalloc

import numpy as np
from _machine import machine_lines  # benchmarks/_machine.py
from compare_versions import import_old
from threadpoolctl import threadpool_limits

import skattn
from skattn._kernels import compiled


def measure(package, path, n_tokens, window, repeats):
    """Peak MiB and best milliseconds of one call, or the error it raised."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 4, n_tokens, 16)) for _ in range(3))
    kernels = package._kernels.compiled
    disabled = kernels._DISABLED
    kernels._DISABLED = path == "numpy"
    try:
        warm = (array[..., :2, :] for array in (q, k, v))
        package.scaled_dot_product_attention(*warm)  # numba loads its kernels
        tracemalloc.start()
        try:
            package.scaled_dot_product_attention(q, k, v, window=window)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            package.scaled_dot_product_attention(q, k, v, window=window)
            times.append(time.perf_counter() - start)
        return f"{peak / 2**20:.3f}", f"{1000 * min(times):.2f}"
    except (MemoryError, ValueError, OverflowError) as error:
        return f"{type(error).__name__}: {str(error)[:60]}", "–"
    finally:
        kernels._DISABLED = disabled


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="6,1000")
    parser.add_argument("--windows", default="10,10000,1000000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old", help="a checkout of another version")
    args = parser.parse_args()
    for line in machine_lines():
        print(f"> {line}  ")
    print()
    packages = [("this checkout", skattn)]
    if args.old:
        packages.append(("old", import_old(args.old)))
    windows = [None, *map(int, args.windows.split(","))]
    paths = ["numpy"] + (["compiled"] if compiled.enabled() else [])
    print("| version | path | tokens | window | peak MiB | best ms |")
    print("|---|---|---:|---|---:|---:|")
    cases = [
        (n_tokens, window, name, package, path)
        for n_tokens in map(int, args.lengths.split(","))
        for window in windows
        for name, package in packages
        for path in paths
    ]
    with threadpool_limits(limits=1):
        for n_tokens, window, name, package, path in cases:
            peak, ms = measure(package, path, n_tokens, window, args.repeats)
            label = "full" if window is None else f"{window:,}"
            print(f"| {name} | {path} | {n_tokens:,} | {label} | {peak} | {ms} |")


if __name__ == "__main__":
    main()
