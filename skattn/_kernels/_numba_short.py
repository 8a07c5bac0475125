"""The compiled attention passes for short attentions (imported only where
numba is installed): fewer than 128 keys (where
:func:`skattn._kernels.compiled.forward_kernel` and
:func:`~skattn._kernels.compiled.backward_kernel` choose them rather than
the blocked kernels of :mod:`skattn._kernels._numba_attention` or numpy).

At a few dozen keys the work of an attention is a few thousand products, and
what costs is everything around them: a library call per product, arrays
allocated per attention, numpy's passes over rows of a few dozen scores.
Here the scratch space is allocated once per call.

The forward pass makes each block of up to ``SHORT_ROWS`` queries one pass
over its scores, in a layout where every loop runs over the queries
(contiguous, which LLVM vectorises): the queries transposed, the scores and
the weighted values with one column per query. Both products are
:func:`skattn._kernels._numba_products.product_set`, which adds the terms of
each sum in their order. As in the blocked kernel, the scores are shifted by
an upper bound of their row (``|scale| |q| max |k|``, folded into the
product as an extra column), a row whose sum underflows is computed again
shifted by its largest score, and each column of values is multiplied by a
power of two that keeps its products from underflowing.

The backward pass recomputes the probabilities and their gradients as the
blocked kernel's compiled loops do, all the keys of an attention in one
block (the keys the contiguous axis), its queries in blocks of up to
``SHORT_ROWS``; the gradients of the queries, keys and values are compiled
products too, written in the gradients' own layout (tokens, features), each
sum over its terms in their order.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numba
import numpy as np

from ._numba_attention import (
    _exact_row,
    _rows_transposed,
    _zero_causal,
    augmented_into,
    augmented_values_into,
    probabilities_and_gradients,
    recomputation_exceeds,
    values_within,
)
from ._numba_exp import exp_inplace
from ._numba_products import JIT, copy_rows, product_add, product_set
from .blocks import SUM_FLOOR

# Queries of one block: its scores are SHORT_ROWS times the number of keys
# (below compiled.SHORT_MAX_KEYS, 128, where compiled.forward_kernel chooses
# this kernel: 127 KiB of float32 scores at most).
SHORT_ROWS = 256


@numba.njit(**JIT)
def _rows(q, keys, values, n_keys, causal, k_max, i0, n_rows, exponent, out, lse,
          s, q_t, acc_t, shift, lo, hi, ceiling):  # fmt: skip
    """Queries ``i0:i0 + n_rows`` of one attention against its ``keys``
    (``[scale * k, 1]``) and ``values`` (``[v * 2**exponent, 1]``); writes
    their rows of ``out`` and ``lse``; returns False, or True without them
    where the bound of some row's scores is not below ``ceiling`` (or NaN).
    The rest: scratch space."""
    n_dims, n_values = q.shape[1], values.shape[1] - 1
    r_pad = (n_rows + 15) // 16 * 16
    # the queries transposed, beside minus the bound of each row's scores;
    # the rows past the block are zero
    qt = q_t[: (n_dims + 1) * r_pad].reshape(n_dims + 1, r_pad)
    for r in range(n_rows):
        norm = 0.0
        for c in range(n_dims):
            x = q[i0 + r, c]
            norm += x * x
            qt[c, r] = x
        bound = math.sqrt(norm) * k_max
        if not bound < ceiling:
            return True
        shift[r] = bound
        qt[n_dims, r] = -shift[r]
    qt[:, n_rows:] = 0.0
    stop = min(n_keys, i0 + n_rows) if causal else n_keys
    for j in range(stop):  # with a causal mask, the queries before a key are 0
        lo[j] = max(0, j - i0) // 16 * 16 if causal else 0
        hi[j] = r_pad
    scores = s[: stop * r_pad].reshape(stop, r_pad)  # (keys, queries)
    product_set(keys[:stop], qt, scores, lo, hi)
    exp_inplace(s[: stop * r_pad])
    if causal:
        _zero_causal(scores, 0, i0)
    # the weighted values and, in the last row, the row sums: (Dv + 1, queries)
    acc = acc_t[: (n_values + 1) * r_pad].reshape(n_values + 1, r_pad)
    lo_v, hi_v = lo[stop : stop + n_values + 1], hi[stop : stop + n_values + 1]
    lo_v[:] = 0
    hi_v[:] = r_pad
    product_set(values[:stop].T, scores, acc, lo_v, hi_v)
    for r in range(n_rows):
        i = i0 + r
        total = acc[n_values, r]
        if not (total >= SUM_FLOOR and total < np.inf):
            # the bound was too loose: the row shifted by its largest score
            row = np.empty(n_values + 1, q.dtype)
            q_row = np.empty(n_dims, q.dtype)
            for c in range(n_dims):
                q_row[c] = qt[c, r]
            end = min(n_keys, i + 1) if causal else n_keys
            shift[r] = _exact_row(q_row, keys, values, end, row)[0]
            for e in range(n_values + 1):
                acc[e, r] = row[e]
            total = acc[n_values, r]
        for e in range(n_values):  # the values were times 2**exponent
            value = acc[e, r] / total
            out[i, e] = math.ldexp(value, -exponent[e]) if exponent[e] else value
        lse[i] = math.log(total) + shift[r]
    return False


@numba.njit(**JIT)
def forward(q, k, v, lengths, causal, scale, start, stop, row_start, row_stop, out,
            lse, exceeded, ceiling):  # fmt: skip
    """Attentions ``start:stop`` (flat indices) of q, k, v (N, H, T, D), their
    queries ``row_start:row_stop``: as
    :func:`skattn._kernels._numba_attention.forward` computes them, and stops
    with ``exceeded[0]`` set where it does."""
    n_heads, dtype = q.shape[1], q.dtype
    n_keys_max, n_dims, n_values = k.shape[2], q.shape[3], v.shape[3]
    rows = min(SHORT_ROWS, (row_stop - row_start + 15) // 16 * 16)
    keys = np.empty((n_keys_max, n_dims + 1), dtype)
    values = np.empty((n_keys_max, n_values + 1), dtype)
    exponent = np.zeros(n_values, np.int32)
    largest = np.empty(n_values, dtype)
    ones = np.ones(n_keys_max, dtype)
    norms = np.empty(n_keys_max, dtype)
    s = np.empty(max(n_keys_max * rows, 1), dtype)
    q_t = np.empty((n_dims + 1) * rows, dtype)
    acc_t = np.empty((n_values + 1) * rows, dtype)
    shift = np.empty(rows, dtype)
    lo = np.zeros(n_keys_max + n_values + 1, np.int64)
    hi = np.zeros(n_keys_max + n_values + 1, np.int64)
    for a in range(start, stop):
        n, h = a // n_heads, a % n_heads
        n_keys = lengths[n, h]
        if n_keys == 0:
            out[n, h, row_start:row_stop] = 0.0
            lse[n, h, row_start:row_stop] = np.inf
            continue
        qa = q[n, h]
        augmented_into(k[n, h], n_keys, ones, scale, keys, norms)
        k_max = math.sqrt(norms[:n_keys].max()) * abs(scale)
        augmented_values_into(v[n, h], n_keys, values, exponent, largest)
        if not values_within(largest, n_keys, ceiling):
            exceeded[0] = True
            return
        for i0 in range(row_start, row_stop, SHORT_ROWS):
            n_rows = min(SHORT_ROWS, row_stop - i0)
            if _rows(qa, keys, values, n_keys, causal, k_max, i0, n_rows, exponent,
                     out[n, h], lse[n, h], s, q_t, acc_t, shift, lo, hi,
                     ceiling):  # fmt: skip
                exceeded[0] = True
                return


@numba.njit(**JIT)
def _scaled_and_transposed(x, n_rows, scale, out, out_t):
    """``out = x[:n_rows] * scale`` (rows contiguous) and ``out_t`` its
    transpose, in one pass over ``x`` (any layout)."""
    for j in range(n_rows):
        for c in range(x.shape[1]):
            value = x[j, c] * scale
            out[j, c] = value
            out_t[c, j] = value


@numba.njit(**JIT)
def backward(d_out, q, k, v, lse, delta, lengths, causal, scale, start, stop, d_q,
             d_k, d_v, exceeded, error_factor, error_max):  # fmt: skip
    """Gradients of attentions ``start:stop`` (flat indices), arrays (N, H, T,
    D), as :func:`skattn._kernels._numba_attention.backward` computes them:
    all the keys of an attention in one block (fewer than 128), its queries
    in blocks of up to ``SHORT_ROWS``, the probabilities and their gradients
    of :func:`skattn._kernels._numba_attention.probabilities_and_gradients`,
    the products of the gradients by :func:`product_add` (``d_q``, ``d_k``,
    ``d_v`` with contiguous rows); stops with ``exceeded[0]`` set where an
    attention's recomputation may be inaccurate, as that kernel does."""
    n_heads, dtype = q.shape[1], q.dtype
    n_queries, n_keys_max = q.shape[2], k.shape[2]
    n_dims, n_values = q.shape[3], v.shape[3]
    rows = max(1, min(SHORT_ROWS, n_queries))
    # an attention's arrays, copied once: [q, -lse] and [dO, -delta] (rows
    # contiguous), scale * k, [scale * k, 1] and [v, 1] transposed (features,
    # keys)
    q_aug = np.empty((n_queries, n_dims + 1), dtype)
    d_out_aug = np.empty((n_queries, n_values + 1), dtype)
    k_scaled_buf = np.empty(n_keys_max * n_dims, dtype)
    k_t_buf = np.empty((n_dims + 1) * n_keys_max, dtype)
    v_t_buf = np.empty((n_values + 1) * n_keys_max, dtype)
    probs = np.empty(rows * n_keys_max, dtype)
    d_scores = np.empty(rows * n_keys_max, dtype)
    zeros = np.zeros(max(rows, n_keys_max), np.int64)
    stops = np.empty(rows, np.int64)
    # the columns of each term of the products of the gradients: all the
    # features of the keys (or values)
    dims = np.full(max(rows, n_keys_max), n_dims, np.int64)
    values = np.full(rows, n_values, np.int64)
    for a in range(start, stop):
        n, h = a // n_heads, a % n_heads
        if recomputation_exceeds(q[n, h], k[n, h], lse[n, h], scale, error_factor,
                                 error_max):  # fmt: skip
            exceeded[0] = True
            return
        n_keys = lengths[n, h]
        d_qa, d_ka, d_va = d_q[n, h], d_k[n, h], d_v[n, h]
        d_ka[:] = 0.0  # the gradients' sums, and 0 for the padded keys
        d_va[:] = 0.0
        if n_keys == 0:
            d_qa[:] = 0.0
            continue
        copy_rows(q[n, h], n_queries, q_aug[:, :n_dims])
        copy_rows(d_out[n, h], n_queries, d_out_aug[:, :n_values])
        for i in range(n_queries):
            lse_i = lse[n, h, i]
            q_aug[i, n_dims] = -lse_i if np.isfinite(lse_i) else 0.0
            d_out_aug[i, n_values] = -delta[n, h, i]
        k_scaled = k_scaled_buf[: n_keys * n_dims].reshape(n_keys, n_dims)
        k_t = k_t_buf[: (n_dims + 1) * n_keys].reshape(n_dims + 1, n_keys)
        v_t = v_t_buf[: (n_values + 1) * n_keys].reshape(n_values + 1, n_keys)
        _scaled_and_transposed(k[n, h], n_keys, scale, k_scaled, k_t)
        _rows_transposed(v[n, h], 0, n_keys, n_keys, v_t_buf)  # v_t[:n_values]
        k_t[n_dims] = 1.0
        v_t[n_values] = 1.0
        for i0 in range(0, n_queries, rows):
            n_rows = min(rows, n_queries - i0)
            end = i0 + n_rows
            for r in range(n_rows):
                stops[r] = min(n_keys, i0 + r + 1) if causal else n_keys
            p = probs[: n_rows * n_keys].reshape(n_rows, n_keys)
            ds = d_scores[: n_rows * n_keys].reshape(n_rows, n_keys)
            probabilities_and_gradients(q_aug[i0:end], k_t, d_out_aug[i0:end], v_t,
                                        p, ds, zeros, stops)  # fmt: skip
            # dV += P^T dO and dK += dS^T q (before the scale): tiles of 6
            # keys by the head's features, each sum over the queries in order
            product_add(p, d_out_aug[i0:end, :n_values], d_va, zeros, values)
            product_add(ds, q_aug[i0:end, :n_dims], d_ka, zeros, dims)
            # d_q = dS (scale * k): tiles of 6 queries by the head's features
            d_q_rows = d_qa[i0:end]
            d_q_rows[:] = 0.0
            product_add(ds.T, k_scaled, d_q_rows, zeros, dims)
        for j in range(n_keys):
            for c in range(n_dims):
                d_ka[j, c] *= scale
