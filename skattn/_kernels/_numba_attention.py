"""The numba functions of :mod:`skattn._kernels.compiled` (imported only
where numba is installed): attention, and the threshold statistics of the
random features.

Arrays are ``(N, H, T, D)`` of any strides; an attention is one ``(n, h)``,
taken by its flat index ``n * H + h``. Each attention copies its queries, keys
and values once into contiguous blocks, the columns of values times powers of
two (:func:`scaled_values_into`). The forward pass shifts each query's scores
by an offset (minus an upper bound of its row) in the pass that takes their
exponentials and sums them (:func:`._numba_exp.exp_summed`), between the
two products of a block. The backward pass's blocks have an extra column (the
rows' log-sum-exp and correction terms, or ones), so that one product gives a
block of shifted scores. The products are ``np.dot`` (scipy's BLAS) or
compiled loops (:mod:`._numba_products`; ``loops``: the caller's choice,
:func:`skattn._kernels.compiled.products_in_loops`), but for the backward
pass's gradient of the queries, always ``np.dot``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numba
import numpy as np

from ._numba_exp import exp_inplace, exp_summed, exp_summed_causal
from ._numba_products import (
    JIT,
    column_maxima,
    copy_rows,
    product_add,
    product_set,
    transposed_into,
)
from .blocks import KEYS, ROWS, SUM_FLOOR

# The blocks of the forward pass's compiled loops: 256 query rows by 32 keys
# (32 KiB of float32 scores), the rows the vectorised dimension of its loops
# (_rows_pass_loops); among 4 shapes of row and key blocks, the fastest.
FORWARD_ROWS = 256
FORWARD_KEYS = 32

# The blocks of the backward pass's compiled loops: 512 keys (the contiguous
# axis of its loops, _backward_loops) by 64 queries; among 12 shapes of 128 to
# 1024 keys by 16 to 128 queries, the fastest at heads of 16 to 64 features.
BACKWARD_KEYS = 512
BACKWARD_ROWS = 64

# The passes over one attention and over one block of its rows, each called
# from one place, are inlined into their caller by numba rather than compiled
# as functions of their own: numba optimises and compiles each function with
# everything it calls, so that each level of calls of its own would compile
# the products and exponentials below it again (benchmarks/compile_time.py
# measures the compilation). The machine code is the same: same bits, same
# speed.
INLINED = dict(JIT, inline="always")


@numba.njit(**JIT)
def scaled_into(x, rows, scale, out, norms):
    """Write ``x[:rows] * scale`` into the first ``x.shape[1]`` columns of
    ``out[:rows]`` and the squared norms of the rows of ``x[:rows]`` (before
    the scale) into ``norms[:rows]``."""
    n_dims = x.shape[1]
    first = 0
    while first + 4 <= rows:  # four rows at once: their sums' latencies overlap
        i = first
        norms[i] = 0.0
        n0 = n1 = n2 = n3 = norms[i]  # in registers, in the dtype of norms
        for d in range(n_dims):
            x0, x1, x2, x3 = x[i, d], x[i + 1, d], x[i + 2, d], x[i + 3, d]
            n0 += x0 * x0
            n1 += x1 * x1
            n2 += x2 * x2
            n3 += x3 * x3
            out[i, d] = x0 * scale
            out[i + 1, d] = x1 * scale
            out[i + 2, d] = x2 * scale
            out[i + 3, d] = x3 * scale
        norms[i], norms[i + 1], norms[i + 2], norms[i + 3] = n0, n1, n2, n3
        first += 4
    for i in range(first, rows):
        norms[i] = 0.0
        for d in range(n_dims):
            value = x[i, d]
            norms[i] += value * value
            out[i, d] = value * scale


@numba.njit(**JIT)
def augmented_into(x, rows, column, scale, out, norms):
    """Write ``[x[:rows] * scale, column]`` into ``out[:rows]`` and the
    squared norms of the rows of ``x[:rows]`` (before the scale) into
    ``norms[:rows]`` (:func:`scaled_into`)."""
    scaled_into(x, rows, scale, out, norms)
    n_dims = x.shape[1]
    for i in range(rows):
        out[i, n_dims] = column[i]


@numba.njit(**JIT)
def _augmented(x, rows, column, scale):
    """``[x[:rows] * scale, column]``, contiguous, and the squared norms of
    its rows (:func:`augmented_into`)."""
    out = np.empty((rows, x.shape[1] + 1), x.dtype)
    norms = np.empty(rows, x.dtype)
    augmented_into(x, rows, column, scale, out, norms)
    return out, norms


@numba.njit(**JIT)
def column_exponents(v, n_keys, exponent, largest):
    """Write into ``exponent`` the power of two of each column of
    ``v[:n_keys]`` that brings its largest magnitude (written into
    ``largest[0]``) to at least 1/2, so that its products with exponentials far
    below 1 do not underflow (see
    :func:`skattn._kernels.folded.value_column_exponents`); return whether
    some column has one (a column of magnitudes below 1/2)."""
    column_maxima(v, n_keys, largest)
    scaled = False
    for e in range(v.shape[1]):
        # 0 from 1/2 on, without the library call
        top = largest[0, e]
        exponent[e] = 0 if top >= 0.5 else max(-math.frexp(top)[1], 0)
        scaled = scaled or exponent[e] != 0
    return scaled


@numba.njit(**JIT)
def scaled_values_into(v, n_keys, out, exponent, largest):
    """Write ``v[:n_keys] * 2**exponent`` into the first ``v.shape[1]``
    columns of ``out[:n_keys]`` and ``exponent`` (of each column:
    :func:`column_exponents`). ``largest``: scratch of one row of one number
    a column; ``out`` with contiguous rows."""
    n_values = v.shape[1]
    values = out[:, :n_values]
    copy_rows(v, n_keys, values)  # in vectors where v's rows are contiguous
    if column_exponents(values, n_keys, exponent, largest):
        for j in range(n_keys):  # the columns of magnitudes below 1/2
            for e in range(n_values):
                if exponent[e]:
                    out[j, e] = math.ldexp(out[j, e], exponent[e])


@numba.njit(**JIT)
def _add_into(acc, terms):
    """``acc += terms`` of two 2-D arrays of one shape, in plain loops (numba's
    ``+=`` of array slices costs a temporary array a call)."""
    for r in range(acc.shape[0]):
        for e in range(acc.shape[1]):
            acc[r, e] += terms[r, e]


@numba.njit(**JIT)
def _rows_transposed(x, i0, n_rows, n_columns, buffer):
    """``x[i0:i0 + n_rows].T`` copied into the start of ``buffer`` as a
    C-contiguous ``(x.shape[1], n_columns)`` array, zero past ``n_rows``
    columns: the rows of a block as the products read them (OpenBLAS
    multiplies it faster than the transposed view, in F order, of the rows;
    the compiled loops run over its padded columns)."""
    out = buffer[: x.shape[1] * n_columns].reshape(x.shape[1], n_columns)
    transposed_into(x[i0 : i0 + n_rows], n_rows, 1.0, out)
    out[:, n_rows:] = 0.0
    return out


@numba.njit(**JIT)
def _zero_causal(block_t, j0, i0):
    """Zero the probabilities of keys after their query: ``block_t`` is
    (keys, queries) of the block at key ``j0`` and query ``i0``."""
    n_keys, n_rows = block_t.shape
    for j in range(max(0, i0 + 1 - j0), n_keys):
        for r in range(n_rows):
            if j0 + j > i0 + r:
                block_t[j, r] = 0.0


@numba.njit(**JIT)
def _first_queries(first, n_keys, j0, i0, n_columns):
    """``first[j]``: the first column of queries (rows ``i0`` on) that key
    ``j0 + j`` may be attended by under a causal mask, at most
    ``n_columns``."""
    for j in range(n_keys):
        first[j] = min(max(0, j0 + j - i0), n_columns)


@numba.njit(**INLINED)
def _rows_pass_blas(queries, keys, values, offset, n_keys, causal, i0, n_rows, s,
                    acc, sums, first, tmp):  # fmt: skip
    """``acc[:n_rows] = sum over the allowed keys of exp(q . k + offset) v``
    and ``sums[:n_rows]`` the sums of the exponentials, for the rows ``i0:i0
    + n_rows`` of ``queries``: the products by scipy's BLAS (``np.dot``),
    blocks of ``ROWS`` by ``KEYS``."""
    stop = min(n_keys, i0 + n_rows) if causal else n_keys
    width = acc.shape[1]
    acc[:n_rows] = 0.0
    sums[:n_rows] = 0.0
    out = tmp[: n_rows * width].reshape(n_rows, width)
    q_block_t = _rows_transposed(queries, i0, n_rows, n_rows, tmp[n_rows * width :])
    offset_block = offset[i0 : i0 + n_rows]
    for j0 in range(0, stop, KEYS):
        nk = min(KEYS, stop - j0)
        scores_t = s[: nk * n_rows].reshape(nk, n_rows)  # (keys, queries)
        np.dot(keys[j0 : j0 + nk], q_block_t, scores_t)
        if causal and j0 + nk - 1 > i0:  # keys past some of the block's queries
            _first_queries(first, nk, j0, i0, n_rows)
            exp_summed_causal(scores_t, offset_block, first, sums)
        else:
            exp_summed(scores_t, offset_block, sums)
        np.dot(scores_t.T, values[j0 : j0 + nk], out)
        _add_into(acc[:n_rows], out)


@numba.njit(**INLINED)
def _rows_pass_loops(queries, keys, values, offset, n_keys, causal, i0, n_rows, s,
                     acc, sums, first, tmp):  # fmt: skip
    """:func:`_rows_pass_blas` in blocks of ``FORWARD_ROWS`` by
    ``FORWARD_KEYS``, its products compiled (:mod:`._numba_products`).

    The products' contiguous axis is the block's rows (the queries and the
    weighted values transposed, rows padded to a multiple of 16 with zero
    queries). With a causal mask, the rows before a key (in steps of 16) are
    skipped: their probabilities are 0."""
    stop = min(n_keys, i0 + n_rows) if causal else n_keys
    width = acc.shape[1]
    width_q = queries.shape[1]
    r_pad = (n_rows + 15) // 16 * 16
    q_t = _rows_transposed(queries, i0, n_rows, r_pad, tmp)
    used = width_q * r_pad
    acc_t = tmp[used : used + width * r_pad].reshape(width, r_pad)
    used += width * r_pad
    offset_t, sums_t = tmp[used : used + r_pad], tmp[used + r_pad : used + 2 * r_pad]
    acc_t[:] = 0.0
    sums_t[:] = 0.0
    offset_t[:] = 0.0  # the padded rows: zero queries
    offset_t[:n_rows] = offset[i0 : i0 + n_rows]
    lo = np.zeros(FORWARD_KEYS, np.int64)
    hi = np.full(FORWARD_KEYS, r_pad, np.int64)
    for j0 in range(0, stop, FORWARD_KEYS):
        nk = min(FORWARD_KEYS, stop - j0)
        scores_t = s[: nk * r_pad].reshape(nk, r_pad)
        if causal:
            _first_queries(first, nk, j0, i0, r_pad)
            for j in range(nk):
                lo[j] = first[j] // 16 * 16
        product_set(keys[j0 : j0 + nk], q_t, scores_t, lo, hi)
        if causal and j0 + nk - 1 > i0:  # keys past some of the block's queries
            exp_summed_causal(scores_t, offset_t, first, sums_t)
        else:
            exp_summed(scores_t, offset_t, sums_t)
        product_add(values[j0 : j0 + nk], scores_t, acc_t, lo, hi)
    for r in range(n_rows):
        sums[r] = sums_t[r]
        for e in range(width):
            acc[r, e] = acc_t[e, r]


@numba.njit(**JIT)
def _exact_row(q_row, keys, values, n_keys, acc):
    """One row of queries (its ``len(q_row)`` features) against its
    ``n_keys`` keys, shifted by its largest score: ``acc`` gets the weighted
    values (``values``' columns); returns the shift and the sum of the
    exponentials. The scores are computed once, so that the shift and the
    exponentials see the same rounding."""
    n_dims = q_row.shape[0]
    scores = np.zeros(n_keys, q_row.dtype)
    for j in range(n_keys):
        for d in range(n_dims):
            scores[j] += q_row[d] * keys[j, d]
    best = scores.max()
    scores -= best
    exp_inplace(scores)
    acc[:] = 0.0
    for j in range(n_keys):
        for e in range(acc.shape[0]):
            acc[e] += scores[j] * values[j, e]
    return best, scores.sum()


@numba.njit(**JIT)
def values_within(largest, n_keys, ceiling):
    """Whether a sum of ``n_keys`` values of the columns' largest magnitudes
    ``largest`` stays below ``ceiling`` (a NaN value is not counted)."""
    for e in range(largest.shape[0]):
        if not largest[e] * n_keys < ceiling:
            return False
    return True


@numba.njit(**INLINED)
def _forward_one(
    q, k, v, n_keys, causal, scale, row_start, row_stop, out, lse, s, acc, sums,
    first, tmp, loops, ceiling,
):  # fmt: skip
    """One attention, queries ``row_start:row_stop``: q (Tq, Dk), k (Tk, Dk),
    v (Tk, Dv) of any strides; writes out (Tq, Dv) and lse (Tq) and returns
    False, or returns True without them where the bound of some row's scores
    (``|q| max|scale k|``, from squared norms in the dtype: infinite where one
    overflows) or a sum of values over the keys is not below ``ceiling`` (or
    is NaN): the numpy path computes those divided by powers of two. ``s``,
    ``acc``, ``sums``, ``first``, ``tmp``: scratch space (see
    :func:`forward`); ``loops``: the products compiled, else by BLAS."""
    dtype = q.dtype
    n_dims, n_values = q.shape[1], v.shape[1]
    if n_keys == 0:
        out[row_start:row_stop] = 0.0
        lse[row_start:row_stop] = np.inf
        return False
    keys, k_norms = np.empty((n_keys, n_dims), dtype), np.empty(n_keys, dtype)
    scaled_into(k, n_keys, scale, keys, k_norms)
    k_max = math.sqrt(k_norms.max()) * abs(scale)
    values, exponent = np.empty((n_keys, n_values), dtype), np.zeros(n_values, np.int32)
    largest = np.empty((1, n_values), dtype)
    scaled_values_into(v, n_keys, values, exponent, largest)
    if not values_within(largest[0], n_keys, ceiling):
        return True
    queries, q_norms = np.empty((row_stop, n_dims), dtype), np.empty(row_stop, dtype)
    scaled_into(q, row_stop, 1.0, queries, q_norms)
    # each row's offset: minus an upper bound of its scores
    offset = np.empty(row_stop, dtype)
    for i in range(row_start, row_stop):
        bound = math.sqrt(q_norms[i]) * k_max
        if not bound < ceiling:
            return True
        offset[i] = -bound
    block = FORWARD_ROWS if loops else ROWS
    for i0 in range(row_start, row_stop, block):
        n_rows = min(block, row_stop - i0)
        if loops:
            _rows_pass_loops(queries, keys, values, offset, n_keys, causal, i0,
                             n_rows, s, acc, sums, first, tmp)  # fmt: skip
        else:
            _rows_pass_blas(queries, keys, values, offset, n_keys, causal, i0,
                            n_rows, s, acc, sums, first, tmp)  # fmt: skip
        for r in range(n_rows):
            i = i0 + r
            total = sums[r]
            if not (total >= SUM_FLOOR and total < np.inf):
                # the bound was too loose: the row shifted by its largest score
                stop = min(n_keys, i + 1) if causal else n_keys
                shift, total = _exact_row(queries[i], keys, values, stop, acc[r])
                offset[i] = -shift
            for e in range(n_values):  # the values were times 2**exponent
                value = acc[r, e] / total
                out[i, e] = math.ldexp(value, -exponent[e]) if exponent[e] else value
            lse[i] = math.log(total) - offset[i]
    return False


@numba.njit(**JIT)
def forward(
    q, k, v, lengths, causal, scale, start, stop, row_start, row_stop, out, lse,
    exceeded, ceiling, loops,
):  # fmt: skip
    """Attentions ``start:stop`` (flat indices) of q, k, v (N, H, T, D), their
    products compiled (``loops``) or by BLAS; stops with ``exceeded[0]`` set
    where an attention's scores or values are out of its range (see
    :func:`_forward_one`)."""
    n_heads, dtype = q.shape[1], q.dtype
    rows, keys = (FORWARD_ROWS, FORWARD_KEYS) if loops else (ROWS, KEYS)
    s = np.empty(rows * keys, dtype)
    acc = np.empty((rows, v.shape[3]), dtype)
    sums = np.empty(rows, dtype)
    first = np.empty(keys, np.int64)
    # the block's transposed queries and its results (transposed for the
    # loops, with the rows' offsets and sums)
    tmp = np.empty(rows * (v.shape[3] + q.shape[3] + 2), dtype)
    for a in range(start, stop):
        n, h = a // n_heads, a % n_heads
        beyond = _forward_one(
            q[n, h],
            k[n, h],
            v[n, h],
            lengths[n, h],
            causal,
            scale,
            row_start,
            row_stop,
            out[n, h],
            lse[n, h],
            s,
            acc,
            sums,
            first,
            tmp,
            loops,
            ceiling,
        )
        if beyond:
            exceeded[0] = True
            return


@numba.njit(**INLINED)
def _backward_blas(q_aug, k_aug, d_out_aug, v_aug, q_c, k_scaled, d_out_c, n_keys,
                   causal, scale, d_q_acc, d_k, d_v):  # fmt: skip
    """The gradients' products by BLAS, in blocks of ``KEYS`` by ``ROWS``
    (see :func:`_backward_one`)."""
    dtype = q_aug.dtype
    n_queries, n_dims, n_values = q_c.shape[0], q_c.shape[1], d_out_c.shape[1]
    probs = np.empty(KEYS * ROWS, dtype)
    d_scores = np.empty(KEYS * ROWS, dtype)
    d_k_block = np.empty((KEYS, n_dims), dtype)
    d_v_block = np.empty((KEYS, n_values), dtype)
    tmp_k = np.empty(KEYS * n_dims, dtype)
    tmp_v = np.empty(KEYS * n_values, dtype)
    tmp_q = np.empty(ROWS * n_dims, dtype)
    rows_t = np.empty(ROWS * max(q_aug.shape[1], d_out_aug.shape[1]), dtype)
    for j0 in range(0, n_keys, KEYS):
        nk = min(KEYS, n_keys - j0)
        d_k_acc, d_v_acc = d_k_block[:nk], d_v_block[:nk]
        d_k_acc[:] = 0.0
        d_v_acc[:] = 0.0
        # with a causal mask, the queries before j0 attend to none of these keys
        first = (j0 // ROWS) * ROWS if causal else 0
        for i0 in range(first, n_queries, ROWS):
            n_rows = min(ROWS, n_queries - i0)
            p_t = probs[: nk * n_rows].reshape(nk, n_rows)  # (keys, queries)
            q_t = _rows_transposed(q_aug, i0, n_rows, n_rows, rows_t)
            np.dot(k_aug[j0 : j0 + nk], q_t, p_t)
            exp_inplace(probs[: nk * n_rows])
            if causal and j0 + nk > i0:
                _zero_causal(p_t, j0, i0)
            ds_t = d_scores[: nk * n_rows].reshape(nk, n_rows)
            d_out_t = _rows_transposed(d_out_aug, i0, n_rows, n_rows, rows_t)
            np.dot(v_aug[j0 : j0 + nk], d_out_t, ds_t)
            for x in range(nk * n_rows):  # dS = P * (dP - delta)
                d_scores[x] *= probs[x]
            out_v = tmp_v[: nk * n_values].reshape(nk, n_values)
            np.dot(p_t, d_out_c[i0 : i0 + n_rows], out_v)
            _add_into(d_v_acc, out_v)
            out_k = tmp_k[: nk * n_dims].reshape(nk, n_dims)
            np.dot(ds_t, q_c[i0 : i0 + n_rows], out_k)
            _add_into(d_k_acc, out_k)
            out_q = tmp_q[: n_rows * n_dims].reshape(n_rows, n_dims)
            np.dot(ds_t.T, k_scaled[j0 : j0 + nk], out_q)
            _add_into(d_q_acc[i0 : i0 + n_rows], out_q)
        for j in range(nk):
            for d in range(n_dims):
                d_k[j0 + j, d] = d_k_acc[j, d] * scale
            for e in range(n_values):
                d_v[j0 + j, e] = d_v_acc[j, e]


@numba.njit(**JIT)
def gradient_terms(q_aug, k_t, d_out_aug, v_t, q, d_out, p, ds, d_k_t, d_v_t, lo,
                   stops):  # fmt: skip
    """One block of the backward pass's compiled loops: the probabilities
    ``p`` and the scores' gradients ``ds`` (:func:`probabilities_and_gradients`),
    their terms added to the gradients of the values ``d_v_t`` and of the
    keys ``d_k_t`` (features, keys; the latter before its scale)."""
    probabilities_and_gradients(q_aug, k_t, d_out_aug, v_t, p, ds, lo, stops)
    product_add(d_out, p, d_v_t, lo, stops)
    product_add(q, ds, d_k_t, lo, stops)


@numba.njit(**JIT)
def probabilities_and_gradients(q_aug, k_t, d_out_aug, v_t, p, ds, lo, stops):
    """The probabilities ``p`` and the scores' gradients ``ds`` (queries,
    keys) of the queries of ``q_aug`` (``[q, -lse]``) and ``d_out_aug``
    (``[dO, -delta]``) against the keys of ``k_t`` (``[scale * k, 1]``
    transposed) and ``v_t`` (``[v, 1]`` transposed), 0 past each query's
    ``stops`` (``lo``: zeros)."""
    product_set(q_aug, k_t, p, lo, stops)
    product_set(d_out_aug, v_t, ds, lo, stops)
    n_rows, n_keys = p.shape
    whole = True  # every row to the last key: one call of the exponential
    for r in range(n_rows):
        whole = whole and stops[r] == n_keys
    if whole:
        exp_inplace(p.reshape(n_rows * n_keys))
    for r in range(n_rows):  # dS = P * (dP - delta); 0 past the stop
        stop = stops[r]
        p_row, ds_row = p[r], ds[r]
        if not whole:
            exp_inplace(p_row[:stop])
        for x in range(stop):
            ds_row[x] *= p_row[x]
        p_row[stop:] = 0.0
        ds_row[stop:] = 0.0


@numba.njit(**INLINED)
def _backward_loops(q_aug, k_aug, d_out_aug, v_aug, q_c, k_scaled, d_out_c, n_keys,
                    causal, scale, d_q_acc, d_k, d_v):  # fmt: skip
    """The gradients' products compiled (:mod:`._numba_products`), in blocks
    of ``BACKWARD_KEYS`` keys by ``BACKWARD_ROWS`` queries, the keys the
    contiguous axis: the probabilities and their gradients (queries, keys),
    the gradients of the keys and values transposed (features, keys).
    With a causal mask, a query's keys stop at its own."""
    dtype = q_aug.dtype
    n_queries, n_dims, n_values = q_c.shape[0], q_c.shape[1], d_out_c.shape[1]
    keys, rows = BACKWARD_KEYS, BACKWARD_ROWS
    probs = np.empty(rows * keys, dtype)
    d_scores = np.empty(rows * keys, dtype)
    k_buf = np.empty((n_dims + 1) * keys, dtype)
    v_buf = np.empty((n_values + 1) * keys, dtype)
    d_k_buf = np.empty(n_dims * keys, dtype)
    d_v_buf = np.empty(n_values * keys, dtype)
    tmp_q = np.empty(rows * n_dims, dtype)
    zeros = np.zeros(max(rows, keys), np.int64)
    stops = np.empty(rows, np.int64)
    for j0 in range(0, n_keys, keys):
        nk = min(keys, n_keys - j0)
        k_t = k_buf[: (n_dims + 1) * nk].reshape(n_dims + 1, nk)
        v_t = v_buf[: (n_values + 1) * nk].reshape(n_values + 1, nk)
        for x in range(nk):
            for c in range(n_dims + 1):
                k_t[c, x] = k_aug[j0 + x, c]
            for c in range(n_values + 1):
                v_t[c, x] = v_aug[j0 + x, c]
        d_k_t = d_k_buf[: n_dims * nk].reshape(n_dims, nk)
        d_v_t = d_v_buf[: n_values * nk].reshape(n_values, nk)
        d_k_t[:] = 0.0
        d_v_t[:] = 0.0
        # with a causal mask, the queries before j0 attend to none of these keys
        first = (j0 // rows) * rows if causal else 0
        for i0 in range(first, n_queries, rows):
            n_rows = min(rows, n_queries - i0)
            p = probs[: n_rows * nk].reshape(n_rows, nk)
            ds = d_scores[: n_rows * nk].reshape(n_rows, nk)
            for r in range(n_rows):
                stops[r] = max(0, min(nk, i0 + r + 1 - j0)) if causal else nk
            end = i0 + n_rows
            q_rows, d_out_rows = q_aug[i0:end], d_out_aug[i0:end]
            gradient_terms(q_rows, k_t, d_out_rows, v_t, q_c[i0:end], d_out_c[i0:end],
                           p, ds, d_k_t, d_v_t, zeros, stops)  # fmt: skip
            # the queries' gradient by BLAS: its sum runs along the keys; in
            # loops over the features, or over the queries of dS transposed,
            # it is slower
            out_q = tmp_q[: n_rows * n_dims].reshape(n_rows, n_dims)
            np.dot(ds, k_scaled[j0 : j0 + nk], out_q)
            _add_into(d_q_acc[i0 : i0 + n_rows], out_q)
        for x in range(nk):
            for d in range(n_dims):
                d_k[j0 + x, d] = d_k_t[d, x] * scale
            for e in range(n_values):
                d_v[j0 + x, e] = d_v_t[e, x]


@numba.njit(**INLINED)
def _backward_one(
    d_out, q, k, v, lse, delta, n_keys, causal, scale, d_q, d_k, d_v, loops
):
    """Gradients of one attention: every array 2-D (tokens, features) but
    lse and delta (Tq,); writes d_q, d_k, d_v. ``loops``: the products
    compiled, else by BLAS."""
    dtype = q.dtype
    n_queries, n_dims = q.shape[0], q.shape[1]
    d_k[n_keys:] = 0.0
    d_v[n_keys:] = 0.0
    if n_keys == 0:
        d_q[:] = 0.0
        return
    neg_lse = np.empty(n_queries, dtype)
    for i in range(n_queries):
        neg_lse[i] = -lse[i] if np.isfinite(lse[i]) else 0.0
    ones = np.ones(n_keys, dtype)
    q_aug, _ = _augmented(q, n_queries, neg_lse, 1.0)  # [q, -lse]
    k_aug, _ = _augmented(k, n_keys, ones, scale)  # [scale * k, 1]
    d_out_aug, _ = _augmented(d_out, n_queries, -delta, 1.0)  # [dO, -delta]
    v_aug, _ = _augmented(v, n_keys, ones, 1.0)  # [v, 1]
    q_c = np.ascontiguousarray(q)
    k_scaled = np.ascontiguousarray(k_aug[:, :n_dims])  # scale * k
    d_out_c = np.ascontiguousarray(d_out)
    d_q_acc = np.zeros((n_queries, n_dims), dtype)
    if loops:
        _backward_loops(q_aug, k_aug, d_out_aug, v_aug, q_c, k_scaled, d_out_c,
                        n_keys, causal, scale, d_q_acc, d_k, d_v)  # fmt: skip
    else:
        _backward_blas(q_aug, k_aug, d_out_aug, v_aug, q_c, k_scaled, d_out_c,
                       n_keys, causal, scale, d_q_acc, d_k, d_v)  # fmt: skip
    for i in range(n_queries):
        for d in range(n_dims):
            d_q[i, d] = d_q_acc[i, d]


@numba.njit(**JIT)
def recomputation_exceeds(q, k, lse, scale, error_factor, error_max):
    """Whether the probabilities of some row of an attention, recomputed as
    ``exp(scale * q.k - lse)``, may be off by more than ``error_max``: the
    bound of :func:`skattn._kernels.attention_backward.recompute_error_bound`,
    ``error_factor * (|scale| |q| max|k| + |lse|)`` (``error_factor``: ``(Dk +
    2) * eps``), over all the queries and keys of the arrays, as it is
    computed there (a row with no key, of infinite lse, counts its lse as
    0), in the arrays' dtype."""
    zero = abs(scale) - abs(scale)  # 0 in the dtype of scale, the arrays'
    largest = zero
    for j in range(k.shape[0]):
        norm = zero
        for d in range(k.shape[1]):
            norm += k[j, d] * k[j, d]
        largest = max(largest, norm)
    k_max = math.sqrt(largest) * abs(scale)
    for i in range(q.shape[0]):
        norm = zero
        for d in range(q.shape[1]):
            norm += q[i, d] * q[i, d]
        shift = abs(lse[i]) if np.isfinite(lse[i]) else zero
        if error_factor * (math.sqrt(norm) * k_max + shift) > error_max:
            return True
    return False


@numba.njit(**JIT)
def backward(
    d_out, q, k, v, lse, delta, lengths, causal, scale, start, stop, d_q, d_k, d_v,
    exceeded, error_factor, error_max, loops,
):  # fmt: skip
    """Gradients of attentions ``start:stop`` (flat indices), arrays (N, H, T, D),
    their products compiled (``loops``) or by BLAS; stops with ``exceeded[0]``
    set where an attention's recomputation may be inaccurate
    (:func:`recomputation_exceeds`)."""
    n_heads = q.shape[1]
    for a in range(start, stop):
        n, h = a // n_heads, a % n_heads
        if recomputation_exceeds(q[n, h], k[n, h], lse[n, h], scale, error_factor,
                                 error_max):  # fmt: skip
            exceeded[0] = True
            return
        _backward_one(
            d_out[n, h],
            q[n, h],
            k[n, h],
            v[n, h],
            lse[n, h],
            delta[n, h],
            lengths[n, h],
            causal,
            scale,
            d_q[n, h],
            d_k[n, h],
            d_v[n, h],
            loops,
        )


@numba.njit(**JIT)
def threshold_statistics(tokens, lengths, thresholds, longest_stretch):
    """Per sequence, feature and threshold: how many valid tokens are above
    the threshold (``longest_stretch=False``), or the longest run of
    consecutive valid tokens above it (True).

    tokens (N, T, E), lengths (N,), thresholds (K, E); returns (N, K, E) in
    the dtype of ``tokens``: whole numbers, exact.
    """
    n_sequences, _, n_features = tokens.shape
    n_thresholds = thresholds.shape[0]
    out = np.zeros((n_sequences, n_thresholds, n_features), tokens.dtype)
    run = np.zeros((n_thresholds, n_features), tokens.dtype)
    for n in range(n_sequences):
        run[:] = 0.0
        for t in range(lengths[n]):
            for k in range(n_thresholds):
                for e in range(n_features):
                    above = tokens[n, t, e] > thresholds[k, e]
                    if longest_stretch:
                        run[k, e] = run[k, e] + 1.0 if above else 0.0
                        out[n, k, e] = max(out[n, k, e], run[k, e])
                    elif above:
                        out[n, k, e] += 1.0
    return out
