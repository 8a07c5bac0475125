"""The blocked compiled attention's products: compiled loops against BLAS.

The blocked kernel (``skattn/_kernels/_numba_attention.py``) multiplies its
blocks either by the BLAS that scipy ships (``np.dot`` in numba) or in its
own loops, which LLVM vectorises for the CPU numba compiles for;
``skattn._kernels.compiled.products_in_loops`` chooses the loops where
scipy's OpenBLAS runs a kernel without AVX-512 and for the backward pass of
heads of at most 16 features, BLAS elsewhere. This script
times both choices of the forward and of the backward pass, alternating in
one process (float32, heads of 16 to 64 features, queries = keys, one
thread, best of ``--repeats``), so that the rule can be checked on any
machine, and under settings that emulate another one: OpenBLAS's kernels by
``OPENBLAS_CORETYPE``, numba's by ``NUMBA_CPU_NAME`` with
``NUMBA_CPU_FEATURES`` (without it numba keeps the host's features), which
``--features-without`` prints::

    python benchmarks/products_choice.py
    # OpenBLAS's AVX-512 kernels (an Intel CPU with AVX-512):
    OPENBLAS_CORETYPE=SkylakeX python benchmarks/products_choice.py
    # a CPU with AVX2 and no AVX-512:
    AVX2=$(python benchmarks/products_choice.py \
        --features-without avx512,avxvnni,vaes,vpclmulqdq,gfni)
    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=$AVX2 OPENBLAS_CORETYPE=Haswell \
        python benchmarks/products_choice.py
    # AVX without AVX2 and FMA: --features-without
    # avx2,avx512,avxvnni,vaes,vpclmulqdq,gfni,fma,f16c, sandybridge, Sandybridge;
    # SSE4.2: --features-without avx,fma,f16c,vaes,vpclmulqdq,gfni, nehalem, Nehalem

``loops / BLAS`` below 1: the loops are faster. Needs numba (the ``[fast]``
extra); about 35 seconds, plus numba's compilation on the first run of a
target.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse

import numpy as np
from _machine import machine_lines, products_choice  # benchmarks/_machine.py
from fold_threshold import best_seconds  # benchmarks/fold_threshold.py
from threadpoolctl import threadpool_limits

from skattn._kernels import compiled
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward

# (head width, keys, sequences), 4 heads each
CASES = [(16, 1024, 4), (32, 1024, 4), (64, 1024, 4), (16, 4096, 1), (64, 4096, 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--features-without",
        help="print the host's CPU features for NUMBA_CPU_FEATURES without those "
        "that start with these comma-separated prefixes, and exit",
    )
    args = parser.parse_args()
    if args.features_without:
        from llvmlite import binding

        drop = tuple(args.features_without.split(","))
        features = binding.get_host_cpu_features().items()
        print(
            ",".join(f"{'+-'[not on or k.startswith(drop)]}{k}" for k, on in features)
        )
        return
    if compiled.kernels() is None:
        raise SystemExit("numba is not installed: pip install '.[fast]'")
    for line in machine_lines():
        print(line)
    print(f"# the rule's choice here: {products_choice()}")
    print(
        "\n| head width | keys | sequences | pass | BLAS ms | loops ms | loops / BLAS |"
        "\n|---:|---:|---:|---|---:|---:|---:|"
    )
    rng = np.random.default_rng(0)
    compiled.MIN_KEYS_PER_SQUARED_DIM = 0
    compiled._FORWARD_KERNEL = "blocked"
    with threadpool_limits(1):
        for head_dim, n_keys, n in CASES:
            shape = (n, 4, n_keys, head_dim)
            q, k, v, d_out = (
                rng.standard_normal(shape, dtype=np.float32) for _ in range(4)
            )
            out, lse, _ = attention_forward(q, k, v)
            passes = {
                "forward": (attention_forward, (q, k, v)),
                "backward": (attention_backward, (d_out, q, k, v, out, lse)),
            }
            for name, (function, arguments) in passes.items():
                seconds = {True: np.inf, False: np.inf}
                for _ in range(2):  # the two choices alternate
                    for loops in (False, True):
                        compiled._PRODUCTS_IN_LOOPS = loops
                        function(*arguments)  # numba compiles on its first call
                        best = best_seconds(function, *arguments, repeats=args.repeats)
                        seconds[loops] = min(seconds[loops], best)
                blas, loops = seconds[False] * 1e3, seconds[True] * 1e3
                print(
                    f"| {head_dim} | {n_keys} | {n} | {name} | {blas:.1f} | "
                    f"{loops:.1f} | {loops / blas:.2f} |",
                    flush=True,
                )
    compiled._PRODUCTS_IN_LOOPS = None
    compiled._FORWARD_KERNEL = None


if __name__ == "__main__":
    main()
