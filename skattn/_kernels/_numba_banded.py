"""The numba functions of banded attention (imported only where numba is
installed; called through :mod:`skattn._kernels.compiled`).

Arrays are flattened attentions ``(B, T, D)``, C-contiguous; the key padding
is a number of valid keys per attention, ``lengths`` (B,); the global token
an index per attention, ``glob`` (B,), negative or past the tokens for none.
Each function computes attentions ``start:stop`` and rows ``row_start:
row_stop`` of them (queries, or keys for :func:`backward_keys`), so that
tasks side by side write disjoint rows; a row is computed the same way
whichever task computes it.

The band's column of offset ``o`` pairs query ``i`` with key ``i + o``: over
a block of ``BLOCK`` consecutive queries, its keys are consecutive too, for
any dilation. So the queries are copied transposed, ``(D, CHUNK)``, a chunk
at a time, with the keys and values they read (the chunk and the band's span
of keys, and a last column for the global key), and every loop over a column
runs along the block's queries, contiguous in memory (the vector lanes of the
CPU), one pass per feature of the head: the scores of a block are
``(K + 1, BLOCK)``, one row per offset and one for the global key, as the
numpy path's ``(Tq, K + 1)`` transposed. The copies hold a chunk, not the
sequence: beyond its inputs and results, a task holds about ``(CHUNK + span)
* D`` numbers however long the sequence. The valid queries of a column
are one range (its keys inside the sequence and its padding), but for one
query at most: the one whose key is the global token, which reads it through
the global column instead. The softmax is the numpy path's: each query's
scores shifted by their largest, exponentiated (the vectorised exponential
of the full attention's kernels), summed column after column.

The global query (``i == g``) reads every valid key (up to itself with
``causal``): its row is computed by itself, over the keys, and replaces
whatever its block computed for it.

The backward pass runs in two passes. Over the queries
(:func:`backward_queries`): the probabilities recomputed from the
log-sum-exp, the scores' gradients and ``d_q``; the probabilities and score
gradients of each (column, query) are kept in ``(B, K + 1, Tq)`` arrays (the
global query's in ``(B, Tk)``). Over the keys (:func:`backward_keys`): the
keys of a block gather ``d_k`` and ``d_v`` from the queries that read them,
query ``j - o`` in the column of offset ``o``, and every query for the global
key, so that no two rows write the same key.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numba
import numpy as np

from ._numba_exp import exp_inplace
from ._numba_products import JIT

# The loops of a row, inlined into their callers (where LLVM vectorises them
# with the loop around them; a call each would cost as much as the loop).
INLINE = dict(JIT, inline="always")

# Queries (or keys) of a block: its (K + 1, BLOCK) scores are 33 KiB of
# float32 for a window of 65 (about the L1 cache); blocks of 64 were slower
# on benchmarks/banded_speed.py's cases, of 256 about as fast.
BLOCK = 128

# Queries (or keys) of a chunk, whose transposed copies a task holds at once: a
# whole number of blocks; 256 KiB of float32 for heads of 16 features. Copies
# of whole sequences would hold four (D, T) arrays (32 MiB at 131,072 tokens
# and 16 features) and run no faster (benchmarks/banded_speed.py).
CHUNK = 32 * BLOCK


@numba.njit(**JIT)
def _transpose(x, first, last, out):
    """``out[:, :last - first] = x[first:last].T`` of ``x`` (T, D), a block
    of rows at a time (a row of ``out`` a line of the cache at a time)."""
    n_dims = x.shape[1]
    for t0 in range(first, last, BLOCK):
        t1 = min(t0 + BLOCK, last)
        for d in range(n_dims):
            row = out[d, t0 - first : t1 - first]
            for t in range(t1 - t0):
                row[t] = x[t0 + t, d]


@numba.njit(**JIT)
def _copy_window(x, first, last, n_rows, offsets, out):
    """The rows of ``x`` (T, D) that rows ``first:last`` read at ``offsets``
    (rows ``first + min(offsets)`` to ``last - 1 + max(offsets)``, within
    ``0:n_rows``), transposed into ``out`` (D, W + 1), its last column left
    as it is: returns the row of ``out``'s first column."""
    base = max(first + offsets.min(), 0)
    end = max(base, min(last + offsets.max(), n_rows))
    _transpose(x, base, end, out)
    return base


@numba.njit(**JIT)
def _window_width(n_rows, offsets):
    """Columns of a chunk's window of rows (see :func:`_copy_window`)."""
    return min(CHUNK + offsets.max() - offsets.min(), n_rows)


@numba.njit(**INLINE)
def _fma(out, a, b):
    """``out += a * b`` of 1-D arrays of one length."""
    for t in range(out.shape[0]):
        out[t] += a[t] * b[t]


@numba.njit(**INLINE)
def _axpy(out, weight, a):
    """``out += weight * a``."""
    for t in range(out.shape[0]):
        out[t] += weight * a[t]


@numba.njit(**INLINE)
def _dot(a, b):
    """``a . b`` of two 1-D arrays, in their dtype."""
    total = a.dtype.type(0)
    for d in range(a.shape[0]):
        total += a[d] * b[d]
    return total


@numba.njit(**JIT)
def _ranges(i0, i1, offsets, n_valid, g, causal, lo, hi, skip):
    """The queries of ``i0:i1`` that each column reads a valid key for: the
    range ``lo[c]:hi[c]`` but query ``skip[c]`` (-1: none), the one that
    reads the global key in that column; the global column last."""
    n_offsets = offsets.shape[0]
    for c in range(n_offsets):
        o = offsets[c]
        lo[c] = max(i0, -o)
        hi[c] = max(lo[c], min(i1, n_valid - o))
        skip[c] = g - o if g >= 0 else -1
    if 0 <= g < n_valid:
        lo[n_offsets] = max(i0, g) if causal else i0
        hi[n_offsets] = max(lo[n_offsets], i1)
    else:
        lo[n_offsets] = hi[n_offsets] = i0
    skip[n_offsets] = g
    for c in range(n_offsets + 1):
        if not lo[c] <= skip[c] < hi[c]:
            skip[c] = -1


@numba.njit(**JIT)
def _block_dots(a_t, b_t, i0, a0, b0, lo, hi, offsets, out):
    """``out[c, i - i0] = a_i . b_{key}`` over the valid queries of each
    column (key ``i + offset``, or the global key in the global column), of
    the transposed ``a_t`` (D, W), query ``i`` in its column ``i - a0``, and
    ``b_t`` (D, W' + 1), key ``j`` in its column ``j - b0`` and the global
    key in its last; 0 elsewhere."""
    n_offsets, n_dims = offsets.shape[0], a_t.shape[0]
    out[:] = 0.0
    for c in range(n_offsets + 1):
        start, stop = lo[c], hi[c]
        if stop <= start:
            continue
        row = out[c, start - i0 : stop - i0]
        queries = slice(start - a0, stop - a0)
        if c == n_offsets:  # the global column
            for d in range(n_dims):
                _axpy(row, b_t[d, -1], a_t[d, queries])
            continue
        first = start + offsets[c] - b0
        for d in range(n_dims):
            _fma(row, a_t[d, queries], b_t[d, first : first + stop - start])


@numba.njit(**JIT)
def _block_values(weights, v_t, i0, b0, lo, hi, offsets, out_t):
    """``out_t[e, i - i0] = sum over the columns of weights[c, i - i0] *
    v_{key}[e]`` (the keys of :func:`_block_dots`, ``v_t`` laid out as its
    ``b_t``), column after column."""
    n_offsets = offsets.shape[0]
    out_t[:] = 0.0
    for c in range(n_offsets + 1):
        start, stop = lo[c], hi[c]
        if stop <= start:
            continue
        row = weights[c, start - i0 : stop - i0]
        for e in range(v_t.shape[0]):
            target = out_t[e, start - i0 : stop - i0]
            if c < n_offsets:
                first = start + offsets[c] - b0
                _fma(target, row, v_t[e, first : first + stop - start])
            else:
                _axpy(target, v_t[e, -1], row)


@numba.njit(**JIT)
def _global_scores(q_row, k, n_keys, scale, scores):
    """``scores[j] = scale * q_row . k_j`` for ``j < n_keys``."""
    for j in range(n_keys):
        scores[j] = _dot(q_row, k[j]) * scale


@numba.njit(**JIT)
def _global_forward(q_row, k, v, n_keys, scale, scores, out_row):
    """The global query's row over its ``n_keys`` keys: writes ``out_row``
    and returns its log-sum-exp."""
    out_row[:] = 0.0
    if n_keys == 0:
        return np.inf
    _global_scores(q_row, k, n_keys, scale, scores)
    row_max = scores[:n_keys].max()
    for j in range(n_keys):
        scores[j] -= row_max
    exp_inplace(scores[:n_keys])
    total = scores.dtype.type(0)
    for j in range(n_keys):
        total += scores[j]
        _axpy(out_row, scores[j], v[j])
    for e in range(out_row.shape[0]):
        out_row[e] /= total
    return row_max + np.log(total)


@numba.njit(**JIT)
def _scratch(q, k, v, offsets):
    """Each task's arrays: a chunk's transposed queries, keys and values (and
    the global key, last), the block's scores, shifts and sums, its transposed
    output, the columns' ranges, and a row of every key for the global
    query."""
    dtype, n_columns = q.dtype, offsets.shape[0] + 1
    size = max(BLOCK, k.shape[1])
    width = _window_width(k.shape[1], offsets) + 1
    return (
        np.empty((q.shape[2], min(CHUNK, q.shape[1])), dtype),
        np.empty((k.shape[2], width), dtype),
        np.empty((v.shape[2], width), dtype),
        np.empty((n_columns, BLOCK), dtype),
        np.empty(BLOCK, dtype),
        np.empty(BLOCK, dtype),
        np.empty((v.shape[2], BLOCK), dtype),
        np.empty(n_columns, np.int64),
        np.empty(n_columns, np.int64),
        np.empty(n_columns, np.int64),
        np.empty(size, dtype),
    )


@numba.njit(**JIT)
def forward(
    q,
    k,
    v,
    lengths,
    glob,
    offsets,
    causal,
    scale,
    start,
    stop,
    row_start,
    row_stop,
    out,
    lse,
):
    """Banded attention of attentions ``start:stop``, queries ``row_start:
    row_stop``: q (B, Tq, D), k (B, Tk, D), v (B, Tk, Dv); writes out
    (B, Tq, Dv) and lse (B, Tq) (+inf and zeros for a row with no allowed
    key)."""
    n_keys, n_values = k.shape[1], v.shape[2]
    q_t, k_t, v_t, scores, row_max, row_sum, out_t, lo, hi, skip, row = _scratch(
        q, k, v, offsets
    )
    minus_inf = q.dtype.type(-np.inf)
    q0 = k0 = 0  # the first query and key of the chunk's copies
    for a in range(start, stop):
        n_valid, g = min(lengths[a], n_keys), glob[a]
        if 0 <= g < n_valid:  # the global key, in the last column
            k_t[:, -1] = k[a, g]
            v_t[:, -1] = v[a, g]
        for i0 in range(row_start, row_stop, BLOCK):
            i1 = min(i0 + BLOCK, row_stop)
            if (i0 - row_start) % CHUNK == 0:  # the next chunk's copies
                chunk = min(i0 + CHUNK, row_stop)
                _transpose(q[a], i0, chunk, q_t)
                k0 = _copy_window(k[a], i0, chunk, n_valid, offsets, k_t)
                _copy_window(v[a], i0, chunk, n_valid, offsets, v_t)
                q0 = i0
            _ranges(i0, i1, offsets, n_valid, g, causal, lo, hi, skip)
            _block_dots(q_t, k_t, i0, q0, k0, lo, hi, offsets, scores)
            row_max[:] = minus_inf
            for c in range(scores.shape[0]):
                a0, a1 = lo[c] - i0, hi[c] - i0
                s, largest = scores[c, a0:a1], row_max[a0:a1]
                for t in range(s.shape[0]):
                    s[t] *= scale
                if skip[c] >= 0:
                    scores[c, skip[c] - i0] = minus_inf
                for t in range(s.shape[0]):
                    largest[t] = max(largest[t], s[t])
            row_sum[:] = 0.0
            for c in range(scores.shape[0]):
                a0, a1 = lo[c] - i0, hi[c] - i0
                s, largest, total = scores[c, a0:a1], row_max[a0:a1], row_sum[a0:a1]
                for t in range(s.shape[0]):
                    s[t] -= largest[t]
                exp_inplace(s)
                if skip[c] >= 0:
                    scores[c, skip[c] - i0] = 0.0
                for t in range(s.shape[0]):
                    total[t] += s[t]
            _block_values(scores, v_t, i0, k0, lo, hi, offsets, out_t)
            for t in range(i1 - i0):
                i = i0 + t
                if row_max[t] == minus_inf:  # no allowed key
                    out[a, i] = 0.0
                    lse[a, i] = np.inf
                    continue
                for e in range(n_values):
                    out[a, i, e] = out_t[e, t] / row_sum[t]
                lse[a, i] = row_max[t] + np.log(row_sum[t])
        if row_start <= g < row_stop:
            n_read = min(n_valid, g + 1) if causal else n_valid
            lse[a, g] = _global_forward(
                q[a, g], k[a], v[a], n_read, scale, row, out[a, g]
            )


@numba.njit(**JIT)
def _global_backward(d_out_row, q_row, k, v, row_lse, delta, n_keys, scale, kept):
    """The global query's row of :func:`backward_queries`: returns its
    ``d_q``; its probabilities and scores' gradients in ``kept``."""
    probs, d_scores, scores = kept
    d_q_row = np.zeros(q_row.shape[0], q_row.dtype)
    if n_keys == 0 or not np.isfinite(row_lse):
        return d_q_row
    _global_scores(q_row, k, n_keys, scale, scores)
    for j in range(n_keys):
        scores[j] -= row_lse
    exp_inplace(scores[:n_keys])
    for j in range(n_keys):
        p = scores[j]
        d_score = (_dot(d_out_row, v[j]) - delta) * p * scale
        probs[j], d_scores[j] = p, d_score
        _axpy(d_q_row, d_score, k[j])
    return d_q_row


@numba.njit(**JIT)
def backward_queries(
    d_out,
    q,
    k,
    v,
    out,
    lse,
    lengths,
    glob,
    offsets,
    causal,
    scale,
    start,
    stop,
    row_start,
    row_stop,
    d_q,
    probs,
    d_scores,
    global_probs,
    global_d_scores,
):
    """First pass of the gradients: queries ``row_start:row_stop`` of
    attentions ``start:stop``. Writes d_q (B, Tq, D), and the probabilities
    and scores' gradients ``probs``, ``d_scores`` (B, K + 1, Tq) of each
    column and query (zero where not allowed, and for the global query), and
    ``global_probs``, ``global_d_scores`` (B, Tk) of the global query's row
    (left as they are for an attention without one: zeros from the
    caller)."""
    n_keys, n_dims = k.shape[1], q.shape[2]
    q_t, k_t, v_t, p_block, delta, neg_lse, d_q_t, lo, hi, skip, row = _scratch(
        q, k, v, offsets
    )
    d_out_t = np.empty((d_out.shape[2], q_t.shape[1]), d_out.dtype)
    ds_block = np.empty_like(p_block)
    n_columns = p_block.shape[0]
    q0 = k0 = 0  # the first query and key of the chunk's copies
    for a in range(start, stop):
        n_valid, g = min(lengths[a], n_keys), glob[a]
        if 0 <= g < n_valid:  # the global key, in the last column
            k_t[:, -1] = k[a, g]
            v_t[:, -1] = v[a, g]
        for i0 in range(row_start, row_stop, BLOCK):
            i1 = min(i0 + BLOCK, row_stop)
            n_rows = i1 - i0
            if (i0 - row_start) % CHUNK == 0:  # the next chunk's copies
                chunk = min(i0 + CHUNK, row_stop)
                _transpose(q[a], i0, chunk, q_t)
                _transpose(d_out[a], i0, chunk, d_out_t)
                k0 = _copy_window(k[a], i0, chunk, n_valid, offsets, k_t)
                _copy_window(v[a], i0, chunk, n_valid, offsets, v_t)
                q0 = i0
            _ranges(i0, i1, offsets, n_valid, g, causal, lo, hi, skip)
            _block_dots(q_t, k_t, i0, q0, k0, lo, hi, offsets, p_block)
            _block_dots(d_out_t, v_t, i0, q0, k0, lo, hi, offsets, ds_block)
            empty = False
            for t in range(n_rows):
                i = i0 + t
                delta[t] = _dot(d_out[a, i], out[a, i])  # sum_j p_ij dp_ij
                empty = empty or not np.isfinite(lse[a, i])
                neg_lse[t] = -lse[a, i] if np.isfinite(lse[a, i]) else 0.0
            for c in range(n_columns):
                a0, a1 = lo[c] - i0, hi[c] - i0
                p, shift = p_block[c, a0:a1], neg_lse[a0:a1]
                for t in range(p.shape[0]):
                    p[t] = p[t] * scale + shift[t]
                exp_inplace(p)
                if skip[c] >= 0:
                    p_block[c, skip[c] - i0] = 0.0
                if empty:  # rows with no allowed key: none in a band's range
                    for t in range(a0, a1):
                        if not np.isfinite(lse[a, i0 + t]):
                            p_block[c, t] = 0.0
                p, ds = p_block[c, :n_rows], ds_block[c, :n_rows]
                for t in range(n_rows):  # dS = P * (dP - delta), scaled
                    ds[t] = (ds[t] - delta[t]) * p[t] * scale
            if i0 <= g < i1:  # the global query: its own row, below
                p_block[:, g - i0] = 0.0
                ds_block[:, g - i0] = 0.0
            _block_values(ds_block, k_t, i0, k0, lo, hi, offsets, d_q_t)
            for t in range(n_rows):
                for d in range(n_dims):
                    d_q[a, i0 + t, d] = d_q_t[d, t]
            probs[a, :, i0:i1] = p_block[:, :n_rows]
            d_scores[a, :, i0:i1] = ds_block[:, :n_rows]
        if row_start <= g < row_stop:
            n_read = min(n_valid, g + 1) if causal else n_valid
            kept = (global_probs[a], global_d_scores[a], row)
            delta_g = _dot(d_out[a, g], out[a, g])
            d_q[a, g] = _global_backward(
                d_out[a, g],
                q[a, g],
                k[a],
                v[a],
                lse[a, g],
                delta_g,
                n_read,
                scale,
                kept,
            )


@numba.njit(**JIT)
def backward_keys(
    d_out,
    q,
    glob,
    offsets,
    start,
    stop,
    row_start,
    row_stop,
    probs,
    d_scores,
    global_probs,
    global_d_scores,
    d_k,
    d_v,
):
    """Second pass of the gradients: keys ``row_start:row_stop`` of
    attentions ``start:stop`` gather d_k (B, Tk, D) and d_v (B, Tk, Dv) from
    the queries that read them (see :func:`backward_queries`)."""
    n_queries, n_dims, n_values = q.shape[1], q.shape[2], d_out.shape[2]
    n_offsets = offsets.shape[0]
    readers = -offsets  # key j: query j - o
    width = _window_width(n_queries, readers) + 1
    q_t = np.empty((n_dims, width), q.dtype)
    d_out_t = np.empty((n_values, width), d_out.dtype)
    d_k_t = np.empty((n_dims, BLOCK), q.dtype)
    d_v_t = np.empty((n_values, BLOCK), q.dtype)
    q0 = 0  # the first query of the chunk's copies
    for a in range(start, stop):
        g = glob[a]
        for j0 in range(row_start, row_stop, BLOCK):
            j1 = min(j0 + BLOCK, row_stop)
            if (j0 - row_start) % CHUNK == 0:  # the queries of the next chunk
                chunk = min(j0 + CHUNK, row_stop)
                q0 = _copy_window(q[a], j0, chunk, n_queries, readers, q_t)
                _copy_window(d_out[a], j0, chunk, n_queries, readers, d_out_t)
            d_k_t[:] = 0.0
            d_v_t[:] = 0.0
            for c in range(n_offsets):  # key j: query j - o
                o = offsets[c]
                first, last = max(j0, o), min(j1, n_queries + o)
                if last <= first:
                    continue
                ds = d_scores[a, c, first - o : last - o]
                p = probs[a, c, first - o : last - o]
                rows = slice(first - o - q0, last - o - q0)
                for d in range(n_dims):
                    _fma(d_k_t[d, first - j0 : last - j0], ds, q_t[d, rows])
                for e in range(n_values):
                    _fma(d_v_t[e, first - j0 : last - j0], p, d_out_t[e, rows])
            if 0 <= g < n_queries:  # the global query's row
                ds, p = global_d_scores[a, j0:j1], global_probs[a, j0:j1]
                for d in range(n_dims):
                    _axpy(d_k_t[d, : j1 - j0], q[a, g, d], ds)
                for e in range(n_values):
                    _axpy(d_v_t[e, : j1 - j0], d_out[a, g, e], p)
            for t in range(j1 - j0):
                for d in range(n_dims):
                    d_k[a, j0 + t, d] = d_k_t[d, t]
                for e in range(n_values):
                    d_v[a, j0 + t, e] = d_v_t[e, t]
            if j0 <= g < j1:  # every query's global column
                for i in range(n_queries):
                    _axpy(d_k[a, g], d_scores[a, n_offsets, i], q[a, i])
                    _axpy(d_v[a, g], probs[a, n_offsets, i], d_out[a, i])
