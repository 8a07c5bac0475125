"""The compiled exponential of the attention kernels (imported only where
numba is installed): ``exp(min(x, 0))`` of shifted scores, Cephes' expf and
exp written as one plain loop of arithmetic that LLVM vectorises (numba's
``np.exp`` calls the scalar libm exp without Intel's SVML), in 512-bit
vectors where the CPU has them; the forward pass's exponentials of a block
of scores, shifted and summed in the same pass; and the backward pass's
probabilities and scores' gradients of a block, in one pass.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

from ._numba_products import JIT
from ._numba_vectors import VECTOR_BITS


def exp_inplace(s):
    """``s[:] = exp(min(s, 0))``.

    Its arguments are shifted scores: a score minus an upper bound of its row
    (or minus the row's log-sum-exp), at most 0 but for the rounding of the
    product, which can reach thousands for scores of 1e10 in float32. Taken
    as 0, such rounding cannot overflow a row's sum.
    """


# Cephes' expf and exp: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts,
# so that n ln 2 is exact), a polynomial of r, times 2**n built from its
# exponent bits. n is rounded by adding 1.5 * 2**23 (2**52 in float64) plus
# the exponent's bias: the sum's lowest mantissa bits are then n + 127 (n +
# 1023), which shifted into the exponent field make 2**n, and subtracting the
# constant gives n exactly (two operations where a rounding, a conversion to
# integer and an addition took four: the forward pass's exponentials 13 to 19 %
# faster; the same results but where x log2(e) is half-way between integers).
_LN2_HI_32, _LN2_LO_32 = np.float32(0.693359375), np.float32(-2.12194440e-4)
_LN2_HI_64, _LN2_LO_64 = 6.93145751953125e-1, 1.42860682030941723212e-6
_ROUND_32 = np.float32(1.5 * 2**23 + 127)
_ROUND_64 = 1.5 * 2**52 + 1023


@intrinsic
def _float_of_bits(typingctx, bits, like):
    """The float of the type of ``like`` whose bits are those of the integer
    ``bits`` (its low bits, or sign-extended to the float's width)."""
    if not isinstance(bits, types.Integer) or not isinstance(like, types.Float):
        return None
    width = like.bitwidth

    def codegen(context, builder, signature, arguments):
        value = arguments[0]
        if bits.bitwidth > width:
            value = builder.trunc(value, ir.IntType(width))
        elif bits.bitwidth < width:
            value = builder.sext(value, ir.IntType(width))
        return builder.bitcast(value, context.get_value_type(like))

    return like(bits, like), codegen


@intrinsic
def _bits_of_float(typingctx, x):
    """The bits of the float ``x`` as a signed integer of its width."""
    if not isinstance(x, types.Float):
        return None
    integer = types.int32 if x.bitwidth == 32 else types.int64

    def codegen(context, builder, signature, arguments):
        return builder.bitcast(arguments[0], ir.IntType(x.bitwidth))

    return integer(x), codegen


@intrinsic
def _vectors_of_512_bits(typingctx):
    """Mark the function that calls it to be vectorised in 512-bit vectors
    where the CPU has them, and never inlined.

    On CPUs with AVX-512, LLVM's tuning prefers 256-bit vectors (numba has no
    per-function vector width): the exponential's loop runs about a third
    faster in 512-bit ones. Kept out of line, so that the loops of the
    kernels that call it keep the width LLVM chooses for them (the kernels'
    explicit vectors, :mod:`._numba_vectors`, have the CPU's own width).
    Other CPUs ignore the attributes. llvmlite checks function attributes
    against a list without LLVM's string attributes, hence ``set.add``; an
    llvmlite whose attributes are no set compiles the function in the host's
    vectors, as the kernels.
    """

    def codegen(context, builder, signature, arguments):
        attributes = builder.function.attributes
        if isinstance(attributes, set):
            set.add(attributes, '"prefer-vector-width"="512"')
            set.add(attributes, '"min-legal-vector-width"="512"')
        attributes.add("noinline")
        return context.get_dummy_value()

    return types.none(), codegen


@numba.njit(inline="always", **JIT)
def _exp32(x):
    """``exp(min(x, 0))`` of a float32 (Cephes' expf), as a loop's body."""
    log2e = np.float32(1.44269504088896341)
    x = min(max(x, np.float32(-87.0)), np.float32(0.0))  # exp >= 2**-126
    rounded = x * log2e + _ROUND_32
    n = rounded - _ROUND_32
    x = x - n * _LN2_HI_32
    x = x - n * _LN2_LO_32
    p = np.float32(1.9875691500e-4)
    p = p * x + np.float32(1.3981999507e-3)
    p = p * x + np.float32(8.3334519073e-3)
    p = p * x + np.float32(4.1665795894e-2)
    p = p * x + np.float32(1.6666665459e-1)
    p = p * x + np.float32(5.0000001201e-1)
    y = p * x * x + x + np.float32(1.0)
    return y * _float_of_bits(_bits_of_float(rounded) << np.int32(23), y)


@numba.njit(inline="always", **JIT)
def _exp64(x):
    """``exp(min(x, 0))`` of a float64 (Cephes' reduction), as a loop's body."""
    log2e = 1.4426950408889634
    x = min(max(x, -708.0), 0.0)  # exp >= 2**-1022
    rounded = x * log2e + _ROUND_64
    n = rounded - _ROUND_64
    x = x - n * _LN2_HI_64
    x = x - n * _LN2_LO_64
    # Taylor to degree 12: below 2e-16 on |r| <= ln 2 / 2
    p = 1.0 / 479001600.0
    p = p * x + 1.0 / 39916800.0
    p = p * x + 1.0 / 3628800.0
    p = p * x + 1.0 / 362880.0
    p = p * x + 1.0 / 40320.0
    p = p * x + 1.0 / 5040.0
    p = p * x + 1.0 / 720.0
    p = p * x + 1.0 / 120.0
    p = p * x + 1.0 / 24.0
    p = p * x + 1.0 / 6.0
    p = p * x + 0.5
    y = p * x * x + x + 1.0
    return y * _float_of_bits(_bits_of_float(rounded) << np.int64(52), y)


@numba.njit(**JIT)
def _exp_float32(s):
    _vectors_of_512_bits()
    for j in range(s.shape[0]):
        s[j] = _exp32(s[j])


@numba.njit(**JIT)
def _exp_float64(s):
    _vectors_of_512_bits()
    for j in range(s.shape[0]):
        s[j] = _exp64(s[j])


@overload(exp_inplace, jit_options=JIT)
def _exp_inplace(s):
    if s.dtype == numba.float32:
        return lambda s: _exp_float32(s)
    return lambda s: _exp_float64(s)


@numba.njit(**JIT)
def exponential(x):
    """``exp(min(x, 0))`` of a 1-D array, in place, as the kernels compute it."""
    exp_inplace(x)
    return x


def _exp(x):
    """``exp(min(x, 0))`` of a float32 or float64, as the kernels compute it."""


@overload(_exp, inline="always", jit_options=JIT)
def _exp_of_dtype(x):
    if x == numba.float32:
        return lambda x: _exp32(x)
    return lambda x: _exp64(x)


# Where vectors are 256 bits wide (AVX2), the forward pass's exponentials are
# taken four keys at a time: four independent polynomials a vector of queries
# hide each other's latency, and each query's sum and offset are read once
# for the four (a block of 256 keys by 32 queries on an AMD EPYC, Zen 3: 0.77
# to 0.82 ns a score against 1.07 to 1.11 one key at a time). With 512-bit
# vectors (AVX-512) one key at a time was the faster (an Intel Xeon: 0.51 to
# 0.56 against 0.61 to 0.64). Either way every sum adds its keys in their
# order: the same results.
_KEYS_AT_ONCE = 1 if VECTOR_BITS == 512 else 4


@numba.njit(**JIT)
def exp_summed(block_t, offset, sums):
    """``block_t[j, r] = exp(min(block_t[j, r] + offset[r], 0))`` and
    ``sums[r] +=`` the column's exponentials: a block of scores (keys,
    queries) becomes its probabilities before normalisation, each query
    shifted by its ``offset``."""
    _vectors_of_512_bits()
    zero = np.zeros(1, block_t.dtype)[0]  # in the blocks' dtype, as y
    n_keys = block_t.shape[0]
    j = 0  # the first key left to one at a time
    if _KEYS_AT_ONCE == 4:
        # a while loop: LLVM vectorised the queries' loop three times slower
        # inside a loop over range(0, n, 4) (the S2 forward kernel on Zen 3)
        while j + 4 <= n_keys:
            _four_keys_summed(block_t, offset, sums, j, 0, 0, 0, 0, zero)
            j += 4
    for key in range(j, n_keys):
        _key_summed(block_t, offset, sums, key, 0, zero)


@numba.njit(**JIT)
def exp_summed_causal(block_t, offset, first, sums):
    """:func:`exp_summed`, the keys past a causal query (its columns before
    ``first[j]`` of key ``j``) 0 and left out of the sums."""
    _vectors_of_512_bits()
    zero = np.zeros(1, block_t.dtype)[0]  # in the blocks' dtype, as y
    n_keys = block_t.shape[0]
    j = 0
    if _KEYS_AT_ONCE == 4:
        while j + 4 <= n_keys:
            s0, s1, s2, s3 = first[j], first[j + 1], first[j + 2], first[j + 3]
            _four_keys_summed(block_t, offset, sums, j, s0, s1, s2, s3, zero)
            j += 4
    for key in range(j, n_keys):
        _key_summed(block_t, offset, sums, key, first[key], zero)


# The passes of exp_summed and exp_summed_causal over one key and over four,
# inlined: every column, then 0 before a key's first query (LLVM does not
# vectorise a loop from that query: measured 18 times slower). exp_summed
# gives starts of 0, constants after inlining: its passes kept their speed
# (the forward passes within 1 % of separate loops without the comparison).


@numba.njit(inline="always", **JIT)
def _key_summed(block_t, offset, sums, key, start, zero):
    for r in range(block_t.shape[1]):
        y = _exp(block_t[key, r] + offset[r])
        y = y if r >= start else zero
        block_t[key, r] = y
        sums[r] += y


@numba.njit(inline="always", **JIT)
def _four_keys_summed(block_t, offset, sums, j, s0, s1, s2, s3, zero):
    """Keys ``j`` to ``j + 3``: four independent exponentials a vector of
    queries, each query's offset and sum read once, the sum adding the four
    keys in their order."""
    for r in range(block_t.shape[1]):
        shift = offset[r]
        y0 = _exp(block_t[j, r] + shift)
        y1 = _exp(block_t[j + 1, r] + shift)
        y2 = _exp(block_t[j + 2, r] + shift)
        y3 = _exp(block_t[j + 3, r] + shift)
        y0 = y0 if r >= s0 else zero
        y1 = y1 if r >= s1 else zero
        y2 = y2 if r >= s2 else zero
        y3 = y3 if r >= s3 else zero
        block_t[j, r] = y0
        block_t[j + 1, r] = y1
        block_t[j + 2, r] = y2
        block_t[j + 3, r] = y3
        sums[r] = (((sums[r] + y0) + y1) + y2) + y3


@numba.njit(**JIT)
def probabilities_from_scores(block_t, d_block_t, lse, delta):
    """A block of scores (keys, queries) becomes its probabilities,
    ``block_t[j, r] = exp(min(block_t[j, r] - lse[r], 0))``, and the
    products of its values by the outputs' gradients the scores' gradients,
    ``d_block_t[j, r] = block_t[j, r] * (d_block_t[j, r] - delta[r])``."""
    _vectors_of_512_bits()
    for j in range(block_t.shape[0]):
        for r in range(block_t.shape[1]):
            p = _exp(block_t[j, r] - lse[r])
            block_t[j, r] = p
            d_block_t[j, r] = p * (d_block_t[j, r] - delta[r])


@numba.njit(**JIT)
def probabilities_from_scores_causal(block_t, d_block_t, lse, delta, first):
    """:func:`probabilities_from_scores`, both 0 before ``first[j]`` (the
    queries key ``j`` follows), whose entries are not read."""
    _vectors_of_512_bits()
    zero = np.zeros(1, block_t.dtype)[0]  # in the blocks' dtype, as p
    for j in range(block_t.shape[0]):
        start = first[j]
        for r in range(block_t.shape[1]):  # every column, as exp_summed_causal
            kept = r >= start
            p = _exp(block_t[j, r] - lse[r])
            block_t[j, r] = p if kept else zero
            d_block_t[j, r] = p * (d_block_t[j, r] - delta[r]) if kept else zero
