"""The fused attention kernels compiled for contiguous inputs against the
kernels compiled for inputs of any layout.

``skattn._kernels.compiled`` runs the fused forward and backward passes as
compiled for read-only inputs of numba's layout ``"A"`` (any strides), so
that the model's views of its projections and a caller's contiguous arrays
run one kernel per dtype instead of compiling one for each layout. This
script times both compilations of the blocked forward pass and of the
backward pass on contiguous float32 inputs, alternating in one process (one
thread, best of ``--repeats``)::

    python benchmarks/kernel_layouts.py

``A / C`` above 1: the kernel compiled for any layout is slower on
contiguous inputs. Needs numba (the ``[fast]`` extra); about a minute, plus
numba's compilation on the first run.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import time

import numpy as np
from _machine import machine_lines  # benchmarks/_machine.py
from threadpoolctl import threadpool_limits

from skattn._kernels import compiled

# (sequences, tokens, model width, heads), as benchmarks/speed.py names them
SHAPES = {"S1": (512, 32, 64, 4), "S2": (64, 256, 128, 8), "S3": (8, 1024, 64, 4)}


def kernels_of_both_layouts(function, arguments):
    """``function`` compiled for the types of ``arguments`` as they are
    ("C": contiguous inputs) and with its read-only arrays of any layout
    ("A"), as :func:`skattn._kernels.compiled._run` compiles it."""
    exact = compiled._numba_types(arguments, any_layout=False)
    any_layout = compiled._numba_types(arguments, any_layout=True)
    return {"C": function.compile(exact), "A": function.compile(any_layout)}


def best_times(kernels, arguments, repeats):
    """The best time of each kernel, calls alternating."""
    times = {name: [] for name in kernels}
    with threadpool_limits(1):
        for _ in range(repeats):
            for name, kernel in kernels.items():
                start = time.perf_counter()
                kernel(*arguments)
                times[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if compiled.kernels() is None:
        raise SystemExit("needs numba: pip install '.[fast]' from the clone")
    for line in machine_lines():
        print(line)
    kernels = compiled.kernels()
    rng = np.random.default_rng(0)
    print(f"{'shape':<6} {'pass':<9} {'C ms':>8} {'A ms':>8} {'A / C':>6}")
    for name, (n, n_tokens, width, n_heads) in SHAPES.items():
        head_dim = width // n_heads
        shape = (n, n_heads, n_tokens, head_dim)
        q, k, v, d_out = (rng.standard_normal(shape).astype(np.float32) for _ in "qkvd")
        lengths = np.full((n, n_heads), n_tokens, np.int64)
        out = np.empty_like(q)
        lse = np.empty(shape[:-1], np.float32)
        scale = np.float32(head_dim**-0.5)
        inputs = compiled._read_only(q, k, v, lengths)
        forward = (*inputs, False, scale, 0, n * n_heads, 0, n_tokens, out, lse)
        forward += (compiled.products_in_loops(),)
        forward_kernels = kernels_of_both_layouts(kernels.forward, forward)
        forward_kernels["C"](*forward)  # the outputs the backward pass reads
        delta = np.sum(d_out * out, axis=-1)
        grads = [np.empty_like(q) for _ in range(3)]
        inputs = compiled._read_only(d_out, q, k, v, lse, delta, lengths)
        loops = compiled.products_in_loops()
        backward = (*inputs, False, scale, 0, n * n_heads, *grads, loops)
        backward_kernels = kernels_of_both_layouts(kernels.backward, backward)
        for label, pass_kernels, arguments in [
            ("forward", forward_kernels, forward),
            ("backward", backward_kernels, backward),
        ]:
            best = best_times(pass_kernels, arguments, args.repeats)
            print(
                f"{name:<6} {label:<9} {best['C'] * 1e3:8.1f} {best['A'] * 1e3:8.1f} "
                f"{best['A'] / best['C']:6.2f}"
            )


if __name__ == "__main__":
    main()
