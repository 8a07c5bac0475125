"""Banded attention: Longformer's sliding window, with its dilation.

Query ``i`` attends key ``j`` only when ``i - j`` is a multiple of
``dilation`` and ``|i - j| <= (window // 2) * dilation``; with ``causal``, only
when ``0 <= i - j <= (window - 1) * dilation``. Each query reads its keys at
``K`` fixed offsets from its own position (:func:`band_offsets`), so the
scores are an ``(B, Tq, K)`` array, one column per offset: time and memory
``O(T * K)``, never ``O(T**2)``.

One token per sequence may be global (Longformer's global attention, the class
token of ``pooling="cls"``): its query reads every allowed key, and every
query may read its key beside the band (a last column of the scores).

The result equals the dense kernel
(:func:`~skattn._kernels.attention.attention_forward`) given the band (with
the global token's row and column) as its boolean mask, to float rounding:
the same max-shifted softmax, the same dropout multipliers (a pure function
of the stream key and the (query, key) indices), zeros and ``lse = inf`` for
a row with no allowed key. Numpy on arrays; where numba is installed,
compiled kernels compute the cases the model runs (key padding, the global
token, no dropout, no weights returned) to float rounding of the same
(:func:`skattn._kernels.compiled_banded.banded_forward`).

Shape legend: B attentions (the batch axes flattened), Tq queries, Tk keys,
K offsets of the band, D head width.

Reference: I. Beltagy, M. E. Peters, A. Cohan, "Longformer: The
Long-Document Transformer", 2020.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from . import compiled_banded
from .attention import default_scale, exp_minus_row_max
from .dropout import INDEX_BITS, check_dropout, keep_scale

# The numpy path loops over the band's columns a block of rows at a time, each
# block about BLOCK_BYTES of each operand (its rows of every attention): the
# block stays in the CPU's caches from one column to the next, and each
# product lands in one buffer of that size, where a fresh (B, T, D) product
# per column is paged in anew from about 32 MiB on (131,072 tokens, 4 heads
# of 16, window 65: forward and backward in 2.3 s, 5.4 s in whole columns;
# blocks of 256 KiB or 4 MiB no faster). Each element sums its columns in the
# same order, whatever the block.
BLOCK_BYTES = 2**20


def band_offsets(window, dilation=1, causal=False):
    """The key offsets ``j - i`` that a query reads, in increasing order.

    Parameters
    ----------
    window : int
        ``window // 2`` keys on each side of the query, and the query; with
        ``causal``, the query and ``window - 1`` keys before it.
    dilation : int, default=1
        Gap between two keys of the band.
    causal : bool, default=False

    Returns
    -------
    offsets : ndarray of int64 of shape (K,)
    """
    if causal:
        return -dilation * np.arange(window - 1, -1, -1, dtype=np.int64)
    half = window // 2
    return dilation * np.arange(-half, half + 1, dtype=np.int64)


def band_mask(n_queries, n_keys, window, dilation=1, causal=False):
    """The band as a dense boolean mask of shape ``(n_queries, n_keys)``."""
    offset = np.arange(n_keys)[None, :] - np.arange(n_queries)[:, None]
    return np.isin(offset, band_offsets(window, dilation, causal))


class Band:
    """One banded attention call on flattened batches.

    Parameters
    ----------
    n_queries, n_keys : int
    window, dilation : int
    causal : bool
    mask : ndarray of bool of shape (B, 1 or Tq, Tk), or None
        True where a query may attend to a key.
    global_index : ndarray of int of shape (B,), or None
        The global token of each attention (an index past the keys: none).
    """

    def __init__(self, n_queries, n_keys, window, dilation, causal, mask, glob):
        self.n_queries, self.n_keys = n_queries, n_keys
        self.causal = causal
        self.offsets = band_offsets(window, dilation, causal)
        rows = np.arange(n_queries, dtype=np.int64)[:, None]
        inside = (rows >= -self.offsets) & (rows < n_keys - self.offsets)  # (Tq, K)
        self.mask = mask
        allowed = inside[None]
        if mask is not None or glob is not None:
            keys = self.key_index()
        if mask is not None:
            if mask.shape[1] == 1:
                gathered = mask[:, 0, keys]  # (B, Tq, K)
            else:
                gathered = mask[:, rows, keys]
            allowed = allowed & gathered
        self.glob = glob
        if glob is not None:
            n_batch = len(glob)
            allowed = np.broadcast_to(allowed, (n_batch, *inside.shape)).copy()
            allowed &= keys[None] != glob[:, None, None]  # its own column
            self.global_rows = np.flatnonzero(glob < n_queries)
            allowed[self.global_rows, glob[self.global_rows]] = False  # whole rows
            allowed = np.concatenate([allowed, self._global_column()], axis=-1)
        self.allowed = allowed  # (B or 1, Tq, K [+ 1])

    def key_index(self):
        """Each query's key at each offset, clipped to the keys: (Tq, K) int64
        (8 bytes a score: computed where a call needs it, not kept)."""
        keys = np.arange(self.n_queries, dtype=np.int64)[:, None] + self.offsets
        return np.clip(keys, 0, max(self.n_keys - 1, 0), out=keys)

    def _global_column(self):
        """Whether each query may read its attention's global key."""
        glob, rows = self.glob, np.arange(self.n_queries)
        column = (glob[:, None] < self.n_keys) & (rows != glob[:, None])  # (B, Tq)
        if self.causal:
            column &= rows >= glob[:, None]
        if self.mask is not None:
            key = np.minimum(glob, self.n_keys - 1)
            column &= self.mask[np.arange(len(glob)), :, key]  # (B, 1 or Tq)
        return column[..., None]

    def _global_key(self, array):
        """Each attention's global row of ``array`` (B, T, D): (B, D)."""
        index = np.minimum(self.glob, array.shape[1] - 1)
        return array[np.arange(len(array)), index]

    def _blocks(self, n_rows, operand):
        """``(start, stop)`` of the blocks of ``n_rows`` rows that hold about
        BLOCK_BYTES of ``operand`` (B, T, D) each."""
        row_bytes = operand.shape[0] * operand.shape[-1] * operand.itemsize
        size = max(1, BLOCK_BYTES // max(row_bytes, 1))
        return [(r, min(r + size, n_rows)) for r in range(0, n_rows, size)]

    def dots(self, a, b, scale=1.0):
        """``scale * a_i . b_{i + offset}`` of each query and allowed key, -inf
        elsewhere: (B, Tq, K [+ 1])."""
        n_batch = max(len(a), len(b), len(self.allowed))
        out = np.zeros((n_batch, self.n_queries, self.allowed.shape[-1]), a.dtype)
        for r0, r1 in self._blocks(self.n_queries, a):
            for column, offset in enumerate(self.offsets):
                start = max(r0, -offset)
                stop = min(r1, self.n_keys - offset)
                if stop > start:
                    np.einsum(
                        "btd,btd->bt",
                        a[:, start:stop],
                        b[:, start + offset : stop + offset],
                        out=out[:, start:stop, column],
                    )
        if self.glob is not None:
            out[..., -1] = np.einsum("btd,bd->bt", a, self._global_key(b))
        out *= scale
        return out

    def weighted_sum(self, weights, b):
        """``sum over the band of weights[:, i, o] * b[:, i + offset]``:
        (B, Tq, D)."""
        out = np.zeros((len(weights), self.n_queries, b.shape[-1]), b.dtype)
        blocks = self._blocks(self.n_queries, out)
        product = np.empty(
            (len(weights), blocks[0][1] if blocks else 0, b.shape[-1]),
            np.result_type(weights, b),
        )
        for r0, r1 in blocks:
            for column, offset in enumerate(self.offsets):
                start = max(r0, -offset)
                stop = min(r1, self.n_keys - offset)
                if stop > start:
                    np.multiply(
                        weights[:, start:stop, column, None],
                        b[:, start + offset : stop + offset],
                        out=product[:, : stop - start],
                    )
                    out[:, start:stop] += product[:, : stop - start]
        if self.glob is not None:
            out += weights[..., -1, None] * self._global_key(b)[:, None, :]
        return out

    def scatter_sum(self, weights, a, n_keys):
        """``out[:, j] = sum over (i, o) with i + offset = j of
        weights[:, i, o] * a[:, i]``: (B, Tk, D)."""
        out = np.zeros((len(weights), n_keys, a.shape[-1]), a.dtype)
        blocks = self._blocks(n_keys, out)
        product = np.empty(
            (len(weights), blocks[0][1] if blocks else 0, a.shape[-1]),
            np.result_type(weights, a),
        )
        for j0, j1 in blocks:  # keys j0:j1, read by queries j - offset
            for column, offset in enumerate(self.offsets):
                first = max(j0, max(0, -offset) + offset)
                last = min(j1, min(self.n_queries, self.n_keys - offset) + offset)
                if last > first:
                    np.multiply(
                        weights[:, first - offset : last - offset, column, None],
                        a[:, first - offset : last - offset],
                        out=product[:, : last - first],
                    )
                    out[:, first:last] += product[:, : last - first]
        if self.glob is not None:
            total = np.einsum("bt,btd->bd", weights[..., -1], a)
            rows = np.flatnonzero(self.glob < n_keys)
            out[rows, self.glob[rows]] += total[rows]
        return out

    def row_dots(self, a, b):
        """``sum(a * b, axis=-1)`` of (B, Tq, D) arrays, a block of rows at a
        time: (B, Tq)."""
        out = np.empty(a.shape[:-1], np.result_type(a, b))
        for r0, r1 in self._blocks(a.shape[1], a):
            out[:, r0:r1] = np.sum(a[:, r0:r1] * b[:, r0:r1], axis=-1)
        return out

    def multipliers(self, dropout, n_batch, dtype):
        """The dense kernel's dropout multipliers of the band's pairs."""
        p, stream = dropout
        keys = self.key_index()
        keys = np.broadcast_to(keys, (n_batch, *keys.shape))
        if self.glob is not None:
            glob = np.broadcast_to(
                self.glob[:, None, None], (n_batch, self.n_queries, 1)
            )
            keys = np.concatenate([keys, glob], axis=-1)
        rows = np.arange(self.n_queries, dtype=np.uint64)[:, None] << np.uint64(
            INDEX_BITS
        )
        index = rows | keys.astype(np.uint64)
        return keep_scale(stream[:, None, None], index, p, dtype)

    def dense(self, weights):
        """The band's weights as a dense (B, Tq, Tk) array (zero elsewhere)."""
        n_batch = len(weights)
        dense = np.zeros((n_batch, self.n_queries, self.n_keys), weights.dtype)
        allowed = np.broadcast_to(self.allowed, weights.shape)
        batch, rows, columns = np.nonzero(allowed[..., : len(self.offsets)])
        keys = self.key_index()
        dense[batch, rows, keys[rows, columns]] = weights[batch, rows, columns]
        if self.glob is not None:
            batch, rows = np.nonzero(allowed[..., -1])
            dense[batch, rows, self.glob[batch]] = weights[batch, rows, -1]
        return dense

    # The global tokens' rows: every allowed key
    # -------------------------------------------

    def global_scores(self, q, k, scale):
        """Scores of the global queries against every key, -inf where not
        allowed: (G, Tk), for the attentions ``self.global_rows``."""
        index = self.global_rows
        query = q[index, self.glob[index]]  # (G, D)
        scores = np.einsum("gd,gtd->gt", query, k[index]) * scale
        allowed = np.ones(scores.shape, dtype=bool)
        if self.mask is not None:
            row = self.glob[index] if self.mask.shape[1] > 1 else 0
            allowed &= self.mask[index, row]
        if self.causal:
            allowed &= np.arange(self.n_keys) <= self.glob[index][:, None]
        np.copyto(scores, -np.inf, where=~allowed)
        return scores

    def global_multipliers(self, dropout, dtype):
        """The dense kernel's dropout multipliers of the global rows: (G, Tk)."""
        p, stream = dropout
        index = self.global_rows
        rows = self.glob[index].astype(np.uint64)[:, None] << np.uint64(INDEX_BITS)
        grid = rows | np.arange(self.n_keys, dtype=np.uint64)
        return keep_scale(stream[index][:, None], grid, p, dtype)


def _flatten(array, batch_shape):
    """``array`` (..., a, b) broadcast to the batch shape, as (B, a, b)."""
    full = np.broadcast_to(array, batch_shape + array.shape[-2:])
    return full.reshape((math.prod(batch_shape),) + array.shape[-2:])


def _prepare(q, k, v, extra, mask, dropout, global_index):
    """The batch shape of a call and its arrays flattened to (B, T, D)."""
    batch_shape = np.broadcast_shapes(
        q.shape[:-2], k.shape[:-2], v.shape[:-2], *(a.shape[:-2] for a in extra)
    )
    if mask is not None:
        batch_shape = np.broadcast_shapes(batch_shape, mask.shape[:-2])
    dropout = check_dropout(dropout, k.shape[-2])
    if dropout is not None:
        batch_shape = np.broadcast_shapes(batch_shape, np.shape(dropout[1]))
    n_batch = math.prod(batch_shape)
    flat = [_flatten(a, batch_shape) for a in (q, k, v, *extra)]
    if mask is not None:
        mask = _flatten(mask, batch_shape)
    if dropout is not None:
        stream = np.broadcast_to(dropout[1], batch_shape).reshape(n_batch)
        dropout = (dropout[0], stream)
    if global_index is not None:
        index = np.asarray(global_index, dtype=np.int64)
        index = index.reshape(index.shape + (1,) * (len(batch_shape) - index.ndim))
        global_index = np.broadcast_to(index, batch_shape).reshape(n_batch)
    return batch_shape, flat, mask, dropout, global_index


def banded_forward(
    q,
    k,
    v,
    *,
    window,
    dilation=1,
    mask=None,
    causal=False,
    scale=None,
    return_weights=False,
    dropout=None,
    global_index=None,
):
    """Banded attention, keeping what the backward pass needs.

    Runs compiled where :func:`skattn._kernels.compiled_banded.banded_lengths`
    allows (``mask`` key padding or None, no dropout, no weights returned).

    Parameters
    ----------
    q : ndarray of shape (..., Tq, D)
    k : ndarray of shape (..., Tk, D)
    v : ndarray of shape (..., Tk, Dv)
        Queries, keys and values in one floating dtype.
    window, dilation : int
        The band (see the module's docstring).
    mask : ndarray of bool, broadcastable to (..., Tq, Tk), default=None
        True where a query may attend to a key; combined with the band.
    causal : bool, default=False
    scale : float, default=None
        None: ``1 / sqrt(D)``.
    return_weights : bool, default=False
        Also return the dense weights ``(..., Tq, Tk)``, zero outside the band
        (``Tq * Tk`` memory).
    dropout : None or (float, ndarray of uint64), default=None
        As :func:`~skattn._kernels.attention.attention_forward`'s.
    global_index : array-like of int, default=None
        The global token of each attention, broadcastable to the leading batch
        axes (one per sequence); an index past the keys: none.

    Returns
    -------
    out : ndarray of shape (..., Tq, Dv)
    lse : ndarray of shape (..., Tq)
        Log-sum-exp of each row's allowed scores (+inf for an empty row).
    weights : ndarray of shape (..., Tq, Tk) or None
    """
    dtype = q.dtype
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    batch_shape, (q, k, v), mask, dropout, glob = _prepare(
        q, k, v, (), mask, dropout, global_index
    )
    n_batch = len(q)
    scale = dtype.type(default_scale(q.shape[-1]) if scale is None else scale)
    shape = batch_shape + (n_queries,)
    lengths = compiled_banded.banded_lengths(
        q, k, v, mask, dropout, return_weights, glob
    )
    if lengths is not None:
        offsets = band_offsets(window, dilation, causal)
        result = compiled_banded.banded_forward(
            q, k, v, lengths, glob, offsets, causal, scale
        )
        if result is not None:  # None: numba failed to compile it
            out, lse = result
            return out.reshape(shape + (v.shape[-1],)), lse.reshape(shape), None
    band = Band(n_queries, n_keys, window, dilation, causal, mask, glob)
    scores = band.dots(q, k, scale)
    np.copyto(scores, -np.inf, where=~band.allowed)
    row_max, empty, row_sum = exp_minus_row_max(scores)  # scores: exp, in place
    if dropout is not None:
        scores *= band.multipliers(dropout, n_batch, dtype)
    out = band.weighted_sum(scores, v)
    np.divide(out, row_sum, out=out, where=~empty)
    with np.errstate(divide="ignore"):
        lse = (row_max + np.log(row_sum))[..., 0]
    lse[empty[..., 0]] = np.inf
    weights = None
    if return_weights:
        np.divide(scores, row_sum, out=scores, where=~empty)
        weights = band.dense(scores)
    if glob is not None and len(band.global_rows):
        _global_forward(band, q, k, v, scale, dropout, out, lse, weights)
    out = out.reshape(shape + (v.shape[-1],))
    if weights is not None:
        weights = weights.reshape(shape + (n_keys,))
    return out, lse.reshape(shape), weights


def _global_forward(band, q, k, v, scale, dropout, out, lse, weights):
    """Write the global queries' rows (every allowed key) into the results."""
    index, rows = band.global_rows, band.glob[band.global_rows]
    scores = band.global_scores(q, k, scale)  # (G, Tk)
    row_max = scores.max(axis=-1, keepdims=True, initial=-np.inf)
    empty = np.isneginf(row_max)
    row_max[empty] = 0
    scores = np.exp(scores - row_max)
    row_sum = scores.sum(axis=-1, keepdims=True)
    if dropout is not None:
        scores *= band.global_multipliers(dropout, q.dtype)
    context = np.einsum("gt,gtd->gd", scores, v[index])
    np.divide(context, row_sum, out=context, where=~empty)
    out[index, rows] = context
    with np.errstate(divide="ignore"):
        row_lse = (row_max + np.log(row_sum))[:, 0]
    row_lse[empty[:, 0]] = np.inf
    lse[index, rows] = row_lse
    if weights is not None:
        np.divide(scores, row_sum, out=scores, where=~empty)
        weights[index, rows] = scores


def banded_backward(
    d_out,
    q,
    k,
    v,
    out,
    lse,
    *,
    window,
    dilation=1,
    mask=None,
    causal=False,
    scale=None,
    dropout=None,
    global_index=None,
):
    """Gradients of :func:`banded_forward` with respect to ``q``, ``k``, ``v``.

    The probabilities are recomputed from ``lse``; ``sum_j p_ij dp_ij =
    d_out_i . out_i`` is the row term of the softmax's gradient (as in
    FlashAttention's backward pass, dropout included). Runs compiled where
    :func:`banded_forward` does, the arrays of one dtype.

    Parameters
    ----------
    d_out : ndarray of shape (..., Tq, Dv)
        Gradient of the loss with respect to ``out``.
    q, k, v, out, lse
        The inputs and results of :func:`banded_forward`.
    window, dilation, mask, causal, scale, dropout, global_index
        As given to :func:`banded_forward`.

    Returns
    -------
    d_q, d_k, d_v : ndarray of shape batch + (Tq, D), batch + (Tk, D),
        batch + (Tk, Dv), with batch the broadcast batch shape.
    """
    dtype = q.dtype
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    lse = lse[..., None]
    batch_shape, (q, k, v, d_out, out, lse), mask, dropout, glob = _prepare(
        q, k, v, (d_out, out, lse), mask, dropout, global_index
    )
    n_batch = len(q)
    lse = lse[..., 0]  # (B, Tq)
    scale = dtype.type(default_scale(q.shape[-1]) if scale is None else scale)
    grads = _compiled_backward(
        d_out, q, k, v, out, lse, mask, dropout, glob, (window, dilation, causal), scale
    )
    if grads is not None:
        return tuple(g.reshape(batch_shape + g.shape[1:]) for g in grads)
    band = Band(n_queries, n_keys, window, dilation, causal, mask, glob)
    probabilities = band.dots(q, k, scale)
    refused = ~band.allowed | ~np.isfinite(lse)[..., None]  # (B, Tq, K [+ 1])
    with np.errstate(invalid="ignore", over="ignore"):
        probabilities -= np.where(np.isfinite(lse), lse, 0)[..., None]
        np.exp(probabilities, out=probabilities)
    np.copyto(probabilities, 0, where=refused)
    del refused
    multipliers = None
    if dropout is not None:
        multipliers = band.multipliers(dropout, n_batch, dtype)
    dropped = probabilities if multipliers is None else probabilities * multipliers
    d_v = band.scatter_sum(dropped, d_out, n_keys)
    d_scores = band.dots(d_out, v)  # d_out_i . v_j
    if multipliers is not None:
        d_scores *= multipliers
    d_scores -= band.row_dots(d_out, out)[..., None]
    d_scores *= probabilities
    d_scores *= scale
    d_q = band.weighted_sum(d_scores, k)
    d_k = band.scatter_sum(d_scores, q, n_keys)
    if glob is not None and len(band.global_rows):
        _global_backward(band, d_out, q, k, v, out, lse, scale, dropout, d_q, d_k, d_v)
    return (
        d_q.reshape(batch_shape + d_q.shape[1:]),
        d_k.reshape(batch_shape + d_k.shape[1:]),
        d_v.reshape(batch_shape + d_v.shape[1:]),
    )


def _compiled_backward(d_out, q, k, v, out, lse, mask, dropout, glob, band, scale):
    """The gradients of flattened arrays from the compiled kernels where they
    apply (the arrays of one dtype), else None."""
    lengths = compiled_banded.banded_lengths(q, k, v, mask, dropout, False, glob)
    if lengths is None or not q.dtype == d_out.dtype == out.dtype == lse.dtype:
        return None
    window, dilation, causal = band
    offsets = band_offsets(window, dilation, causal)
    return compiled_banded.banded_backward(
        d_out, q, k, v, out, lse, lengths, glob, offsets, causal, scale
    )


def _global_backward(band, d_out, q, k, v, out, lse, scale, dropout, d_q, d_k, d_v):
    """Add the global queries' rows' gradients (in place)."""
    index, rows = band.global_rows, band.glob[band.global_rows]
    row_lse = lse[index, rows][:, None]  # (G, 1)
    finite = np.isfinite(row_lse)
    with np.errstate(invalid="ignore", over="ignore"):
        probabilities = np.exp(
            band.global_scores(q, k, scale) - np.where(finite, row_lse, 0)
        )
    probabilities[~np.broadcast_to(finite, probabilities.shape)] = 0
    row_grad = d_out[index, rows]  # (G, Dv)
    multipliers = None
    if dropout is not None:
        multipliers = band.global_multipliers(dropout, q.dtype)
    dropped = probabilities if multipliers is None else probabilities * multipliers
    d_v[index] += dropped[..., None] * row_grad[:, None, :]
    d_probabilities = np.einsum("gd,gtd->gt", row_grad, v[index])
    if multipliers is not None:
        d_probabilities *= multipliers
    row_term = np.sum(row_grad * out[index, rows], axis=-1, keepdims=True)
    d_scores = probabilities * (d_probabilities - row_term) * scale  # (G, Tk)
    d_q[index, rows] += np.einsum("gt,gtd->gd", d_scores, k[index])
    d_k[index] += d_scores[..., None] * q[index, rows][:, None, :]


class BandedKernels:
    """The banded kernels with their band fixed: the ``pattern`` that
    :func:`~skattn._kernels.multi_head.multi_head_forward` and its backward
    pass take.

    Parameters
    ----------
    window, dilation : int
        The band.
    global_index : array-like of int, default=None
        As :func:`banded_forward`'s.
    """

    def __init__(self, window, dilation=1, global_index=None):
        self.window, self.dilation = window, dilation
        self.global_index = global_index

    def forward(self, q, k, v, *, mask, causal, return_weights, dropout):
        """:func:`banded_forward` of this band."""
        return banded_forward(
            q,
            k,
            v,
            window=self.window,
            dilation=self.dilation,
            mask=mask,
            causal=causal,
            return_weights=return_weights,
            dropout=dropout,
            global_index=self.global_index,
        )

    def backward(self, d_context, q, k, v, context, lse, *, mask, causal, dropout):
        """:func:`banded_backward` of this band."""
        return banded_backward(
            d_context,
            q,
            k,
            v,
            context,
            lse,
            window=self.window,
            dilation=self.dilation,
            mask=mask,
            causal=causal,
            dropout=dropout,
            global_index=self.global_index,
        )
