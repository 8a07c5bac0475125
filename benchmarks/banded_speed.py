"""Banded attention against full attention, on the numpy and compiled paths.

The attention kernels alone (no projections): one sequence of ``T`` tokens,
4 heads of 16 features, float32, no mask, at one thread; full attention
(:func:`skattn._kernels.attention.attention_forward` and its backward pass)
and banded attention (:func:`skattn._kernels.banded.banded_forward` and its
backward pass) with a window of 65 and dilations 1 and 4, at T = 1,024, 4,096
and 16,384. ``forward`` times the forward pass, ``forward+backward`` the
forward pass followed by the backward pass; the best of ``--repeats`` runs,
each kernel called once beforehand on 256 tokens (numba compiles on a first
call). ``compiled`` runs the compiled kernels at every size (the rule
``pays_off`` of full attention runs them from 64 keys for heads of 16
features, so at all these sizes too); ``numpy`` sets ``compiled._DISABLED``.

Columns: milliseconds on each path, ``compiled / numpy`` (below 1: the
compiled kernels are faster) and, for the banded rows, the time over full
attention's on the same path (``/ full``).

Needs numba (the ``[fast]`` extra). Run from ``benchmarks/`` (about two
minutes, most of it full attention at 16,384 tokens)::

    python benchmarks/banded_speed.py
    python benchmarks/banded_speed.py --lengths 1024,4096 --repeats 5
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import time

import numpy as np
from _machine import machine_lines  # benchmarks/_machine.py
from threadpoolctl import threadpool_limits

from skattn._kernels import compiled
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward
from skattn._kernels.banded import banded_backward, banded_forward

N_HEADS, HEAD_DIM, WINDOW = 4, 16, 65
KERNELS = {  # name: band (window, dilation), None for full attention
    "full": None,
    f"banded w{WINDOW} d1": (WINDOW, 1),
    f"banded w{WINDOW} d4": (WINDOW, 4),
}
PASSES = ("forward", "forward+backward")


def run(band, q, k, v, d_out, backward):
    """One forward pass of full (``band`` None) or banded attention, and its
    backward pass if ``backward``."""
    if band is None:
        out, lse, _ = attention_forward(q, k, v)
        if backward:
            attention_backward(d_out, q, k, v, out, lse)
        return
    window, dilation = band
    out, lse, _ = banded_forward(q, k, v, window=window, dilation=dilation)
    if backward:
        banded_backward(d_out, q, k, v, out, lse, window=window, dilation=dilation)


def best_ms(band, arrays, backward, repeats):
    """The best of ``repeats`` runs, in milliseconds."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run(band, *arrays, backward)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def inputs(rng, n_tokens):
    """q, k, v and the output's gradient: (1, heads, T, head width), float32."""
    shape = (1, N_HEADS, n_tokens, HEAD_DIM)
    return [rng.standard_normal(shape, dtype=np.float32) for _ in range(4)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="1024,4096,16384")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if compiled.kernels() is None:
        raise SystemExit("numba is not installed: pip install '.[fast]'")
    rng = np.random.default_rng(0)
    for line in machine_lines():
        print(f"> {line}")
    print()
    print(
        "| T | attention | pass | numpy ms | compiled ms | compiled / numpy "
        "| numpy / full | compiled / full |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    rule = compiled.MIN_KEYS_PER_SQUARED_DIM
    compiled.MIN_KEYS_PER_SQUARED_DIM = 0
    with threadpool_limits(1):
        for disabled in (True, False):  # warm-up: numba compiles
            compiled._DISABLED = disabled
            for band in KERNELS.values():
                run(band, *inputs(rng, 256), True)
        for n_tokens in map(int, args.lengths.split(",")):
            arrays = inputs(rng, n_tokens)
            full = {}
            for name, band in KERNELS.items():
                for backward, label in enumerate(PASSES):
                    times = []
                    for disabled in (True, False):
                        compiled._DISABLED = disabled
                        times.append(best_ms(band, arrays, backward, args.repeats))
                    if band is None:
                        full[label] = times
                    relative = [
                        "" if band is None else f"{t / f:.3f}"
                        for t, f in zip(times, full[label], strict=True)
                    ]
                    print(
                        f"| {n_tokens:,} | {name} | {label} | {times[0]:.1f} | "
                        f"{times[1]:.1f} | {times[1] / times[0]:.2f} | "
                        f"{relative[0]} | {relative[1]} |",
                        flush=True,
                    )
    compiled._DISABLED = False
    compiled.MIN_KEYS_PER_SQUARED_DIM = rule


if __name__ == "__main__":
    main()
