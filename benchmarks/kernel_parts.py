"""The compiled attention forward kernel at one thread, split into its parts,
against torch's fused attention and the parts of torch's unfused one.

Runs on demand, never in the test suite (numba; torch for its columns). Where
``attention_parts.py`` splits ``multi_head_attention`` into projections and
attention, this script splits the attention kernel itself. For each shape of
``speed.py`` (float32 contiguous ``(N, H, T, D)`` queries, keys and values,
heads of ``d / h`` features), at one thread, alternating the cases in one
process, the median of ``--repeats`` calls each:

- ``kernel``: the compiled forward pass that ``compiled.forward_kernel``
  chooses (the short kernel for S1; the blocked kernel, its products by BLAS
  or compiled loops as ``compiled.products_in_loops()`` says), called
  directly;
- ``products``: the kernel's two products a block alone (the scores, then the
  weighted values), at the kernel's block shapes and the heads' own width, as
  many blocks as the kernel computes;
- ``exponentials``: the kernel's exponentials over as many scores, in blocks
  of the kernel's size, each query shifted and its exponentials summed in the
  same pass;
- ``rest``: the kernel less the two (copies, shifts, the output's
  normalisation, dispatch); parts timed alone run from warmer caches than
  inside the kernel, so the rest is a lower bound;
- torch's ``scaled_dot_product_attention`` (its fused CPU kernel) on the same
  arrays, and its unfused parts: ``torch.bmm`` of the queries by the keys,
  ``torch.softmax`` of the scores, ``torch.bmm`` of the probabilities by the
  values (all heads at once; left out where the scores take over 512 MiB).

FLOPs as in ``speed.py`` (a multiply-add is 2; the two products only), rates
against ``sgemm peak``: ``np.matmul`` of two 2048 x 2048 float32 matrices on
one thread. Run::

    python benchmarks/kernel_parts.py --shapes S1,S3,S4
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import statistics
import time

import numba
import numpy as np
from _machine import machine_lines, products_choice  # benchmarks/_machine.py
from attention_parts import SHAPES, checked_shapes, sgemm_peak
from threadpoolctl import threadpool_limits

from skattn._kernels import _numba_attention, _numba_short, compiled
from skattn._kernels._numba_exp import exp_summed
from skattn._kernels._numba_products import product_add, product_set
from skattn._kernels.blocks import KEYS, ROWS

SCORES_LIMIT = 512 * 2**20  # bytes of torch's unfused scores


@numba.njit
def _blas_blocks(keys, queries_t, values, scores, out, n_blocks):
    """The blocked kernel's products by BLAS, ``n_blocks`` times."""
    for _ in range(n_blocks):
        np.dot(keys, queries_t, scores)
        np.dot(scores.T, values, out)


@numba.njit
def _loop_blocks(keys, queries_t, values, scores, acc_t, lo, hi, n_blocks):
    """The blocked kernel's products in compiled loops, ``n_blocks`` times."""
    for _ in range(n_blocks):
        product_set(keys, queries_t, scores, lo, hi)
        product_add(values, scores, acc_t, lo, hi)


@numba.njit
def _short_blocks(keys, queries_t, values_t, scores, acc_t, lo, hi, n_blocks):
    """The short kernel's products, ``n_blocks`` times."""
    for _ in range(n_blocks):
        product_set(keys, queries_t, scores, lo, hi)
        product_set(values_t, scores, acc_t, lo, hi)


@numba.njit
def _exp_summed_blocks(scores, offset, sums, n_blocks):
    """The kernels' exponentials of a block of ``scores`` (keys, queries),
    shifted by ``offset`` and summed, ``n_blocks`` times."""
    for _ in range(n_blocks):
        exp_summed(scores, offset, sums)


def _median_ms(function, repeats):
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def kernel_cases(q, k, v):
    """``{part: callable}`` of the compiled kernel and its parts, and the
    kernel's name."""
    batch, n_heads, n_tokens, head_dim = q.shape
    rng = np.random.default_rng(1)
    lengths = np.full((batch, n_heads), n_tokens, np.int64)
    out = np.empty_like(q)
    lse = np.empty(q.shape[:3], q.dtype)
    scale = np.float32(1 / np.sqrt(head_dim))
    n_attentions = batch * n_heads
    choice = compiled.forward_kernel(n_tokens, head_dim)
    checks = (np.zeros(1, np.bool_), compiled.RANGE_CEILING[q.dtype.itemsize])
    if choice == "short":
        rows = keys = n_tokens
        n_blocks = n_attentions
        args = (q, k, v, lengths, False, scale, 0, n_attentions, 0, n_tokens)

        def kernel():
            _numba_short.forward(*args, out, lse, *checks)

        blocks = _short_blocks
        operands = (
            rng.standard_normal((keys, head_dim), dtype=np.float32),
            rng.standard_normal((head_dim, rows), dtype=np.float32),
            rng.standard_normal((head_dim, keys), dtype=np.float32),
            np.empty((keys, rows), np.float32),
            np.empty((head_dim, rows), np.float32),
        )
        ranges = (np.zeros(keys, np.int64), np.full(keys, rows, np.int64))
    else:
        loops = compiled.products_in_loops()
        name = "loops" if loops else "BLAS"
        choice = f"{choice} ({name})"
        if loops:
            rows, keys = _numba_attention.FORWARD_ROWS, _numba_attention.FORWARD_KEYS
        else:
            rows, keys = ROWS, KEYS
        n_blocks = n_attentions * -(-n_tokens // rows) * -(-n_tokens // keys)
        args = (q, k, v, lengths, False, scale, 0, n_attentions, 0, n_tokens)

        def kernel():
            _numba_attention.forward(*args, out, lse, *checks, loops)

        # the products of the heads' own width: the offsets are added in
        # the exponentials' pass
        keys_scaled = rng.standard_normal((keys, head_dim), dtype=np.float32)
        queries_t = rng.standard_normal((head_dim, rows), dtype=np.float32)
        values = rng.standard_normal((keys, head_dim), dtype=np.float32)
        scores = np.empty((keys, rows), np.float32)
        operands = (keys_scaled, queries_t, values, scores)
        if loops:
            blocks = _loop_blocks
            operands += (np.zeros((head_dim, rows), np.float32),)
            ranges = (np.zeros(keys, np.int64), np.full(keys, rows, np.int64))
        else:
            blocks = _blas_blocks
            operands += (np.empty((rows, head_dim), np.float32),)
            ranges = ()
    exps = -rng.random(rows * keys, dtype=np.float32) * 20
    offset = -rng.random(rows, dtype=np.float32)
    sums = np.zeros(rows, np.float32)

    def exponentials():
        _exp_summed_blocks(exps.reshape(keys, rows), offset, sums, n_blocks)

    cases = {
        "kernel": kernel,
        "products": lambda: blocks(*operands, *ranges, n_blocks),
        "exponentials": exponentials,
    }
    return cases, choice


def torch_cases(q, k, v):
    """``{part: callable}`` of torch's attention, or {} without torch."""
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(1)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    cases = {
        "torch fused": lambda: torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv
        )
    }
    batch, n_heads, n_tokens, head_dim = q.shape
    if batch * n_heads * n_tokens**2 * 4 <= SCORES_LIMIT:
        flat = [a.reshape(batch * n_heads, n_tokens, head_dim) for a in (tq, tk, tv)]
        scores = torch.bmm(flat[0], flat[1].transpose(1, 2))
        probs = torch.softmax(scores, -1)
        cases["torch QK bmm"] = lambda: torch.bmm(flat[0], flat[1].transpose(1, 2))
        cases["torch softmax"] = lambda: torch.softmax(scores, -1)
        cases["torch PV bmm"] = lambda: torch.bmm(probs, flat[2])
    return cases


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--shapes", default="S1,S3,S4", help="among S1..S4")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls a case")
    args = parser.parse_args(argv)
    shapes = checked_shapes(parser, args.shapes)
    if not compiled.enabled():
        parser.error("the compiled kernels are off: install numba (the [fast] extra)")
    print("\n".join(machine_lines()))
    print(f"# {products_choice()}")
    peak = sgemm_peak(args.repeats)
    print(f"# sgemm peak, one thread: {peak:.0f} GFLOP/s")
    print()
    print(
        "| shape (B, T, d, h) | kernel | part | ms | GFLOP/s | of the peak "
        "| ns a score |"
    )
    print("|---|---|---|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for shape in shapes:
        batch, n_tokens, width, n_heads = SHAPES[shape]
        head_dim = width // n_heads
        q, k, v = (
            rng.standard_normal((batch, n_heads, n_tokens, head_dim), dtype=np.float32)
            for _ in range(3)
        )
        cases, choice = kernel_cases(q, k, v)
        cases.update(torch_cases(q, k, v))
        times = {name: [] for name in cases}
        with threadpool_limits(limits=1):
            for _ in range(3):  # rounds, the cases alternating
                for name, function in cases.items():
                    times[name].append(_median_ms(function, args.repeats))
        ms = {name: min(values) for name, values in times.items()}
        ms["rest"] = ms["kernel"] - ms["products"] - ms["exponentials"]
        n_scores = batch * n_heads * n_tokens**2
        flops = 4 * n_scores * head_dim
        counted = {
            "kernel": flops,
            "products": flops,
            "torch fused": flops,
            "torch QK bmm": flops / 2,
            "torch PV bmm": flops / 2,
        }
        torch_names = [name for name in cases if name.startswith("torch")]
        for name in ["kernel", "products", "exponentials", "rest", *torch_names]:
            rate = counted[name] / ms[name] / 1e6 if name in counted else None
            print(
                f"| {shape} {SHAPES[shape]} | {choice} | {name} | {ms[name]:.1f} | "
                f"{'-' if rate is None else f'{rate:.1f}'} | "
                f"{'-' if rate is None else f'{rate / peak:.2f}'} | "
                f"{ms[name] * 1e6 / n_scores:.2f} |"
            )
        if "torch fused" in ms:
            print(
                f"| {shape} {SHAPES[shape]} | {choice} | kernel / torch fused | "
                f"{ms['kernel'] / ms['torch fused']:.2f} | | | |"
            )
    print()
    print(
        "ms: the least of 3 rounds' medians of --repeats calls; the parts are "
        "timed alone, from warmer caches than inside the kernel (the docstring)."
    )


if __name__ == "__main__":
    main()
