"""The compiled attention passes for short attentions (imported only where
numba is installed): fewer than 128 keys (where
:func:`skattn._kernels.compiled.forward_kernel` and
:func:`~skattn._kernels.compiled.backward_kernel` choose them rather than
the blocked kernels of :mod:`skattn._kernels._numba_attention` or numpy).

At a few dozen keys the work of an attention is a few thousand products, and
what costs is everything around them: a library call per product, arrays
allocated per attention, numpy's passes over rows of a few dozen scores,
copies of the keys and values. Here the scratch space is allocated once per
call.

The forward pass reads the keys and values where they are, and makes each
block of up to ``SHORT_ROWS`` queries one pass over its scores, in a layout
where every loop runs over the queries (contiguous, which LLVM vectorises):
the queries transposed and scaled (square blocks of vectors shuffled in
registers), the scores and the weighted values with one column per query.
Both products are :func:`skattn._kernels._numba_products.product_set`, which
adds the terms of each sum in their order. All the scores of a block are at
hand, so each query's are shifted by their largest (as the numpy path's
exact tile does): one pass finds it (in registers, where no causal mask cuts
the block), and the pass that takes the exponentials sums them. Each column
of values whose magnitudes are below 1/2 is multiplied by a power of two
that keeps its products from underflowing (those values copied).

The backward pass works in the same layout, a block of up to
``SHORT_ROWS`` queries against all the keys: the scores and the products of
the values by the outputs' gradients (keys, queries) are products of the
keys and values where they are by the queries (scaled) and the outputs'
gradients, both transposed; one pass makes them the probabilities (each
query's scores minus its log-sum-exp, exponentiated) and the scores'
gradients. The gradients of the values, keys and queries are
:func:`skattn._kernels._numba_products.product_add` in their own layout
(tokens, features), each sum over its terms in their order. The bound of
the recomputed scores' error is checked block by block, from the norms of
the transposed queries.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numba
import numpy as np

from ._numba_attention import (
    column_exponents,
    scaled_into,
    scaled_values_into,
    values_within,
)
from ._numba_exp import (
    exp_summed,
    exp_summed_causal,
    probabilities_from_scores,
    probabilities_from_scores_causal,
)
from ._numba_products import (
    JIT,
    copy_rows,
    product_add,
    product_set,
    scaled_rows,
    transposed_into,
    zero_rows,
)
from ._numba_vectors import (
    broadcast,
    divide,
    lanes,
    load,
    maximum,
    multiply,
    multiply_add,
    store,
    vector_like,
)

# Queries of one block: its scores are SHORT_ROWS times the number of keys
# (below compiled.SHORT_MAX_KEYS, 128, where compiled.forward_kernel chooses
# this kernel: 127 KiB of float32 scores at most).
SHORT_ROWS = 256


@numba.njit(**JIT)
def _column_shifts(block_t, first, shift, checks):
    """``shift[0, r]``: minus the largest of the scores of query ``r`` in
    ``block_t`` (keys, queries), of the keys whose ``first`` query it is or
    follows (the others are past a causal query; their entries are not
    read); ``checks[0, r]``: 0, or NaN where one of its scores is NaN or
    infinite."""
    n_keys, n_columns = block_t.shape
    zero = np.zeros(1, block_t.dtype)[0]  # in the scores' dtype, as x
    for r in range(n_columns):
        shift[0, r] = -np.inf
        checks[0, r] = 0.0
    for j in range(n_keys):
        start = first[j]
        # every column, the ones before start left out by a select: LLVM
        # vectorises that, not a loop from start
        for r in range(n_columns):
            x = block_t[j, r]
            kept = r >= start
            largest = shift[0, r]
            shift[0, r] = x if kept & (x > largest) else largest
            checks[0, r] += x * zero if kept else zero
    for r in range(n_columns):
        shift[0, r] = -shift[0, r]


@numba.njit(inline="always", **JIT)
def _largest_of_column(block_t, c, like):
    """The largest of each column of the vector of columns ``c`` of
    ``block_t`` over its keys, and 0 or NaN where one is NaN or infinite."""
    zero = broadcast(0.0, like)
    m = load(block_t, 0, c)
    check = multiply(m, zero)
    for j in range(1, block_t.shape[0]):
        x = load(block_t, j, c)
        m = maximum(x, m)
        check = multiply_add(x, zero, check)
    return m, check


@numba.njit(**JIT)
def _column_shifts_all(block_t, shift, checks):
    """:func:`_column_shifts` of a block whose queries all read every key
    (its columns a multiple of 16: whole vectors), the columns' running
    maxima in registers: four vectors of columns at a time (their maxima's
    latencies overlap), then one."""
    like = vector_like(block_t)
    n = lanes(like)
    zero, minus = broadcast(0.0, like), broadcast(-1.0, like)
    n_columns = block_t.shape[1]
    c = 0
    while c + 4 * n <= n_columns:
        m0, m1 = load(block_t, 0, c), load(block_t, 0, c + n)
        m2, m3 = load(block_t, 0, c + 2 * n), load(block_t, 0, c + 3 * n)
        k0, k1 = multiply(m0, zero), multiply(m1, zero)
        k2, k3 = multiply(m2, zero), multiply(m3, zero)
        for j in range(1, block_t.shape[0]):
            x0, x1 = load(block_t, j, c), load(block_t, j, c + n)
            x2, x3 = load(block_t, j, c + 2 * n), load(block_t, j, c + 3 * n)
            m0, m1 = maximum(x0, m0), maximum(x1, m1)
            m2, m3 = maximum(x2, m2), maximum(x3, m3)
            k0, k1 = multiply_add(x0, zero, k0), multiply_add(x1, zero, k1)
            k2, k3 = multiply_add(x2, zero, k2), multiply_add(x3, zero, k3)
        store(shift, 0, c, multiply(m0, minus))
        store(shift, 0, c + n, multiply(m1, minus))
        store(shift, 0, c + 2 * n, multiply(m2, minus))
        store(shift, 0, c + 3 * n, multiply(m3, minus))
        store(checks, 0, c, k0)
        store(checks, 0, c + n, k1)
        store(checks, 0, c + 2 * n, k2)
        store(checks, 0, c + 3 * n, k3)
        c += 4 * n
    while c + n <= n_columns:
        m, check = _largest_of_column(block_t, c, like)
        store(shift, 0, c, multiply(m, minus))
        store(checks, 0, c, check)
        c += n


@numba.njit(**JIT)
def _rows(q, k, values, n_keys, causal, scale, i0, n_rows, exponent, out, lse,
          s, q_t, acc_t, shift, checks, sums, first, lo, hi, ceiling):  # fmt: skip
    """Queries ``i0:i0 + n_rows`` of one attention against its keys ``k``
    and ``values`` (``v * 2**exponent``); writes their rows of ``out`` and
    ``lse``; returns False, or True without them where the largest score of
    some query is not below ``ceiling`` in magnitude, or some score is NaN or
    infinite. The rest: scratch space."""
    n_dims, n_values = q.shape[1], values.shape[1]
    r_pad = (n_rows + 15) // 16 * 16
    # the queries transposed and scaled; the columns past the block are zero
    qt = q_t[: n_dims * r_pad].reshape(n_dims, r_pad)
    transposed_into(q[i0 : i0 + n_rows], n_rows, scale, qt)
    qt[:, n_rows:] = 0.0
    stop = min(n_keys, i0 + n_rows) if causal else n_keys
    for j in range(stop):  # with a causal mask, the queries before a key are 0
        first[j] = max(0, j - i0) if causal else 0
        lo[j] = first[j] // 16 * 16
        hi[j] = r_pad
    scores = s[: stop * r_pad].reshape(stop, r_pad)  # (keys, queries)
    product_set(k[:stop], qt, scores, lo, hi)
    offset, total = shift[0, :r_pad], sums[0, :r_pad]
    if causal:
        _column_shifts(scores, first[:stop], shift[:, :r_pad], checks[:, :r_pad])
    else:
        _column_shifts_all(scores, shift[:, :r_pad], checks[:, :r_pad])
    for r in range(n_rows):
        if not (abs(offset[r]) < ceiling and checks[0, r] == 0.0):
            return True
    total[:] = 0.0
    if causal:
        exp_summed_causal(scores, offset, first[:stop], total)
    else:
        exp_summed(scores, offset, total)
    # the weighted values: (Dv, queries)
    acc = acc_t[: n_values * r_pad].reshape(n_values, r_pad)
    lo_v, hi_v = lo[stop : stop + n_values], hi[stop : stop + n_values]
    lo_v[:] = 0
    hi_v[:] = r_pad
    product_set(values[:stop].T, scores, acc, lo_v, hi_v)
    # divided by the sums in vectors of queries (every sum is at least 1),
    # then transposed into the output's rows
    like = vector_like(acc)
    n = lanes(like)
    for e in range(n_values):
        if exponent[e]:  # the values were times 2**exponent
            for r in range(n_rows):
                acc[e, r] = math.ldexp(acc[e, r] / total[r], -exponent[e])
        else:
            for r in range(0, r_pad, n):
                store(acc, e, r, divide(load(acc, e, r), load(sums, 0, r)))
    transposed_into(acc[:, :n_rows], n_values, 1.0, out[i0 : i0 + n_rows])
    for r in range(n_rows):
        lse[i0 + r] = math.log(total[r]) - offset[r]
    return False


@numba.njit(**JIT)
def forward(q, k, v, lengths, causal, scale, start, stop, row_start, row_stop, out,
            lse, exceeded, ceiling):  # fmt: skip
    """Attentions ``start:stop`` (flat indices) of q, k, v (N, H, T, D), their
    queries ``row_start:row_stop``: as
    :func:`skattn._kernels._numba_attention.forward` computes them, each
    query's scores shifted by their largest; stops with ``exceeded[0]`` set
    where some attention's sum of values over its keys, or largest score,
    reaches ``ceiling`` in magnitude, or some score is NaN or infinite."""
    n_heads, dtype = q.shape[1], q.dtype
    n_keys_max, n_dims, n_values = k.shape[2], q.shape[3], v.shape[3]
    rows = min(SHORT_ROWS, (row_stop - row_start + 15) // 16 * 16)
    scaled_values = np.empty((n_keys_max, n_values), dtype)
    exponent = np.zeros(n_values, np.int32)
    largest = np.empty((1, n_values), dtype)
    s = np.empty(max(n_keys_max * rows, 1), dtype)
    q_t = np.empty(n_dims * rows, dtype)
    acc_t = np.empty(n_values * rows, dtype)
    shift = np.empty((1, rows), dtype)  # 2-D: read and written in vectors
    checks = np.empty((1, rows), dtype)
    sums = np.empty((1, rows), dtype)
    first = np.zeros(n_keys_max, np.int64)
    lo = np.zeros(n_keys_max + n_values, np.int64)
    hi = np.zeros(n_keys_max + n_values, np.int64)
    for a in range(start, stop):
        n, h = a // n_heads, a % n_heads
        n_keys = lengths[n, h]
        if n_keys == 0:
            out[n, h, row_start:row_stop] = 0.0
            lse[n, h, row_start:row_stop] = np.inf
            continue
        values = v[n, h]
        if column_exponents(values, n_keys, exponent, largest):
            scaled_values_into(values, n_keys, scaled_values, exponent, largest)
            values = scaled_values
        if not values_within(largest[0], n_keys, ceiling):
            exceeded[0] = True
            return
        for i0 in range(row_start, row_stop, SHORT_ROWS):
            n_rows = min(SHORT_ROWS, row_stop - i0)
            if _rows(q[n, h], k[n, h], values, n_keys, causal, scale, i0, n_rows,
                     exponent, out[n, h], lse[n, h], s, q_t, acc_t, shift, checks,
                     sums, first, lo, hi, ceiling):  # fmt: skip
                exceeded[0] = True
                return


@numba.njit(**JIT)
def _recomputation_exceeds(q_t, n_rows, lse, k_norm, error_factor, error_max,
                           norms):  # fmt: skip
    """Whether the bound of the error of some recomputed score of the
    queries ``q_t[:, :n_rows]`` (transposed, times the scale) exceeds
    ``error_max``: ``error_factor * (|q| k_norm + |lse|)`` (``k_norm``: the
    keys' largest norm; ``lse``: 0 where infinite), the bound of
    :func:`skattn._kernels._numba_attention.recomputation_exceeds`, the
    queries' norms summed in vectors of queries."""
    norms[:n_rows] = 0.0
    for c in range(q_t.shape[0]):
        for r in range(n_rows):
            norms[r] += q_t[c, r] * q_t[c, r]
    exceeds = False
    for r in range(n_rows):
        bound = error_factor * (math.sqrt(norms[r]) * k_norm + abs(lse[r]))
        exceeds = exceeds | (bound > error_max)
    return exceeds


@numba.njit(**JIT)
def backward(d_out, q, k, v, lse, delta, lengths, causal, scale, start, stop, d_q,
             d_k, d_v, exceeded, error_factor, error_max):  # fmt: skip
    """Gradients of attentions ``start:stop`` (flat indices), arrays (N, H, T,
    D), as :func:`skattn._kernels._numba_attention.backward` computes them,
    in the layout of :func:`forward` (see the module's docstring); ``d_q``,
    ``d_k``, ``d_v`` with contiguous rows. Stops with ``exceeded[0]`` set
    where an attention's recomputation may be inaccurate, as that kernel
    does."""
    n_heads, dtype = q.shape[1], q.dtype
    n_queries, n_keys_max = q.shape[2], k.shape[2]
    n_dims, n_values = q.shape[3], v.shape[3]
    rows = max(1, min(SHORT_ROWS, n_queries))
    # a block of queries: times the scale, as rows and transposed; the
    # outputs' gradients transposed (and as rows where d_out's are not
    # contiguous); the keys times the scale, as rows
    q_s = np.empty((rows, n_dims), dtype)
    q_t = np.empty((n_dims, rows), dtype)
    d_out_t = np.empty((n_values, rows), dtype)
    d_out_c = np.empty((rows, n_values), dtype)
    k_s = np.empty((n_keys_max, n_dims), dtype)
    rows_in_place = n_values <= 1 or d_out.strides[3] == d_out.itemsize
    s_buf = np.empty(n_keys_max * rows, dtype)
    ds_buf = np.empty(n_keys_max * rows, dtype)
    lse_c = np.empty(rows, dtype)
    delta_c = np.empty(rows, dtype)
    norms = np.empty(rows, dtype)
    key_norms = np.empty(n_keys_max, dtype)
    first = np.zeros(n_keys_max, np.int64)
    hi = np.zeros(n_keys_max, np.int64)
    zeros = np.zeros(max(rows, n_keys_max), np.int64)
    # the columns of each term of the products of the gradients: all the
    # features of the queries (or keys, or values)
    dims = np.full(max(rows, n_keys_max), n_dims, np.int64)
    values = np.full(rows, n_values, np.int64)
    for a in range(start, stop):
        n, h = a // n_heads, a % n_heads
        n_keys = lengths[n, h]
        d_qa, d_ka, d_va = d_q[n, h], d_k[n, h], d_v[n, h]
        zero_rows(d_ka, n_keys_max)  # the gradients' sums, and 0 for padded keys
        zero_rows(d_va, n_keys_max)
        if n_keys == 0:
            zero_rows(d_qa, n_queries)
            continue
        # the keys times the scale, and their largest norm (all of them, as
        # the numpy path's bound)
        scaled_into(k[n, h], n_keys_max, scale, k_s, key_norms)
        k_norm = math.sqrt(key_norms.max())
        for i0 in range(0, n_queries, rows):
            n_rows = min(rows, n_queries - i0)
            end = i0 + n_rows
            n_k = min(n_keys, end) if causal else n_keys  # keys some query reads
            transposed_into(q[n, h, i0:end], n_rows, scale, q_t)
            scaled_rows(q[n, h, i0:end], n_rows, scale, q_s)
            d_out_rows = d_out[n, h, i0:end]
            if not rows_in_place:
                copy_rows(d_out_rows, n_rows, d_out_c)
                d_out_rows = d_out_c[:n_rows]
            transposed_into(d_out_rows, n_rows, 1.0, d_out_t)
            for r in range(n_rows):
                value = lse[n, h, i0 + r]
                lse_c[r] = value if np.isfinite(value) else 0.0
                delta_c[r] = delta[n, h, i0 + r]
            if _recomputation_exceeds(q_t, n_rows, lse_c, k_norm, error_factor,
                                      error_max, norms):  # fmt: skip
                exceeded[0] = True
                return
            for j in range(n_k):  # with a causal mask, the queries a key follows
                first[j] = max(0, j - i0) if causal else 0
                hi[j] = n_rows
            # the scores and the products of the values by dO (keys, queries)
            s = s_buf[: n_k * n_rows].reshape(n_k, n_rows)
            ds = ds_buf[: n_k * n_rows].reshape(n_k, n_rows)
            product_set(k[n, h, :n_k], q_t[:, :n_rows], s, first, hi)
            product_set(v[n, h, :n_k], d_out_t[:, :n_rows], ds, first, hi)
            lse_r, delta_r = lse_c[:n_rows], delta_c[:n_rows]
            if causal:
                probabilities_from_scores_causal(s, ds, lse_r, delta_r, first)
            else:
                probabilities_from_scores(s, ds, lse_r, delta_r)
            # dV += P^T dO, dK += dS^T (scale * q): tiles of keys by the
            # head's features, each sum over the queries in order
            product_add(s.T, d_out_rows, d_va, zeros, values)
            product_add(ds.T, q_s[:n_rows], d_ka, zeros, dims)
            # dQ = dS (scale * k): tiles of queries by the head's features
            d_q_rows = d_qa[i0:end]
            zero_rows(d_q_rows, n_rows)
            product_add(ds, k_s[:n_k], d_q_rows, zeros, dims)
