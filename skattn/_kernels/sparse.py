"""The numpy passes of sparse attention, over any layout of allowed pairs.

A sparse pattern (a band, BigBird's blocks) gives each query ``K`` candidate
keys: a :class:`SparseLayout` holds which of them one call allows and
computes the products of each query with its keys, as ``(B, Tq, K)`` arrays.
:func:`sparse_forward` and :func:`sparse_backward` are the max-shifted
softmax and its gradients over those arrays, for any layout; the layouts are
:class:`~skattn._kernels.band.Band` and
:class:`~skattn._kernels.block_sparse.BlockLayout`. One token per sequence may
be global (Longformer's global attention, the class token of
``pooling="cls"``): its query reads every allowed key (a row of its own,
computed here), and every query may read its key beside the layout's (a last
column of the scores).

Shape legend: B attentions (the batch axes flattened), Tq queries, Tk keys,
K keys a query reads, G global queries of a call, D head width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import copy
import math

import numpy as np

from .attention import exp_minus_row_max, mask_with_head_axis
from .attention_backward import (
    RECOMPUTE_ERROR_MAX,
    attention_backward,
    recompute_error_bound,
)
from .dropout import INDEX_BITS, check_dropout, keep_scale

# The numpy passes loop over a layout's columns a block of rows at a time, each
# block about BLOCK_BYTES of each operand (its rows of every attention): the
# block stays in the CPU's caches from one column to the next, and each
# product lands in one buffer of that size, where a fresh (B, T, D) product
# per column is paged in anew from about 32 MiB on (131,072 tokens, 4 heads
# of 16, window 65: forward and backward in 2.3 s, 5.4 s in whole columns;
# blocks of 256 KiB or 4 MiB no faster). Each element sums its columns in the
# same order, whatever the block.
BLOCK_BYTES = 2**20


def flatten(array, batch_shape):
    """``array`` (..., a, b) broadcast to the batch shape, as (B, a, b)."""
    full = np.broadcast_to(array, batch_shape + array.shape[-2:])
    return full.reshape((math.prod(batch_shape),) + array.shape[-2:])


def prepare(q, k, v, extra, mask, dropout, *per_sequence):
    """The batch shape of a call and its arrays flattened to (B, T, D); the
    mask, the dropout's stream keys and each ``per_sequence`` array (the
    global token, the sequences' lengths: int, broadcastable to the leading
    batch axes, or None) flattened to the B attentions."""
    batch_shape = np.broadcast_shapes(
        q.shape[:-2], k.shape[:-2], v.shape[:-2], *(a.shape[:-2] for a in extra)
    )
    if mask is not None:
        batch_shape = np.broadcast_shapes(batch_shape, mask.shape[:-2])
    dropout = check_dropout(dropout, k.shape[-2])
    if dropout is not None:
        batch_shape = np.broadcast_shapes(batch_shape, np.shape(dropout[1]))
    n_batch = math.prod(batch_shape)
    flat = [flatten(a, batch_shape) for a in (q, k, v, *extra)]
    if mask is not None:
        mask = flatten(mask, batch_shape)
    if dropout is not None:
        stream = np.broadcast_to(dropout[1], batch_shape).reshape(n_batch)
        dropout = (dropout[0], stream)
    flat_per_sequence = []
    for array in per_sequence:
        if array is not None:
            array = np.asarray(array, dtype=np.int64)
            array = array.reshape(array.shape + (1,) * (len(batch_shape) - array.ndim))
            array = np.broadcast_to(array, batch_shape).reshape(n_batch)
        flat_per_sequence.append(array)
    return batch_shape, flat, mask, dropout, *flat_per_sequence


class SparseLayout:
    """Which of its ``K`` candidate keys each query of one call reads.

    A subclass sets ``n_queries``, ``n_keys``, ``causal``, ``mask`` (bool of
    shape (B, 1 or Tq, Tk), or None), ``glob`` (the global token of each
    attention, int of shape (B,), an index past the keys for none; or None)
    and ``allowed`` (bool of shape (B or 1, Tq, K [+ 1]), the global key's
    column last), gives each query's keys (``key_index``: (B or 1, Tq, K))
    and computes the products of each query with its keys: ``dots``,
    ``weighted_sum`` and ``scatter_sum``. The dropout multipliers, the dense
    weights and the global token's row and column are computed here.
    """

    glob = None

    def _global_allowed(self, allowed, keys):
        """``allowed`` (B or 1, Tq, K) of the layout's keys ``keys`` (B or 1,
        Tq, K): without the global key (its own column) and the global
        queries' rows (their own rows), with the global key's column last."""
        glob = self.glob
        allowed = np.broadcast_to(allowed, (len(glob), *allowed.shape[1:])).copy()
        allowed &= keys != glob[:, None, None]
        self.global_rows = np.flatnonzero(glob < self.n_queries)
        allowed[self.global_rows, glob[self.global_rows]] = False  # whole rows
        return np.concatenate([allowed, self._global_column()], axis=-1)

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

    def row_dots(self, a, b):
        """``sum(a * b, axis=-1)`` of (B, Tq, D) arrays, a block of rows at a
        time: (B, Tq)."""
        out = np.empty(a.shape[:-1], np.result_type(a, b))
        for r0, r1 in self._blocks(a.shape[1], a):
            out[:, r0:r1] = np.sum(a[:, r0:r1] * b[:, r0:r1], axis=-1)
        return out

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

    def multipliers(self, dropout, dtype):
        """The dense kernel's dropout multipliers of each query and its keys
        (those of :meth:`key_index`), the global key's column last where
        there is one: (B, Tq, K [+ 1])."""
        p, stream = dropout
        keys = self.key_index()
        keys = np.broadcast_to(keys, (len(stream), self.n_queries, keys.shape[-1]))
        if self.glob is not None:
            glob = np.broadcast_to(
                self.glob[:, None, None], (len(stream), self.n_queries, 1)
            )
            keys = np.concatenate([keys, glob], axis=-1)
        rows = np.arange(self.n_queries, dtype=np.uint64)[:, None] << np.uint64(
            INDEX_BITS
        )
        index = rows | keys.astype(np.uint64)
        return keep_scale(stream[:, None, None], index, p, dtype)

    def dense(self, weights):
        """The weights of the layout's pairs as a dense (B, Tq, Tk) array
        (zero elsewhere)."""
        n_batch = len(weights)
        dense = np.zeros((n_batch, self.n_queries, self.n_keys), weights.dtype)
        allowed = np.broadcast_to(self.allowed, weights.shape)
        n_read = allowed.shape[-1] - (self.glob is not None)
        batch, rows, columns = np.nonzero(allowed[..., :n_read])
        keys = np.broadcast_to(self.key_index(), (n_batch, self.n_queries, n_read))
        dense[batch, rows, keys[batch, rows, columns]] = weights[batch, rows, columns]
        if self.glob is not None:
            batch, rows = np.nonzero(allowed[..., -1])
            dense[batch, rows, self.glob[batch]] = weights[batch, rows, -1]
        return dense

    # The global key's column of dots, weighted_sum and scatter_sum
    # --------------------------------------------------------------

    def _global_dots(self, out, a, b):
        """Write ``a_i . b_glob`` into the last column of ``out``."""
        out[..., -1] = np.einsum("btd,bd->bt", a, self._global_key(b))

    def _global_weighted_sum(self, out, weights, b):
        """Add the global key's column of ``weights`` times its row of ``b``."""
        out += weights[..., -1, None] * self._global_key(b)[:, None, :]

    def _global_scatter_sum(self, out, weights, a, n_keys):
        """Add to the global key's row of ``out`` the sum of ``a`` weighted by
        the global key's column of ``weights``."""
        total = np.einsum("bt,btd->bd", weights[..., -1], a)
        rows = np.flatnonzero(self.glob < n_keys)
        out[rows, self.glob[rows]] += total[rows]


def sparse_forward(layout, q, k, v, *, scale, dropout, exponent, v_exponent, weights):
    """The attention of flattened arrays over ``layout``, on the numpy path.

    Parameters
    ----------
    layout : SparseLayout
    q, k, v : ndarray of shape (B, Tq, D), (B, Tk, D), (B, Tk, Dv)
    scale : float of q's dtype
    dropout : None or (float, ndarray of uint64 of shape (B,))
    exponent : ndarray of int of shape (B, Tq, 1) or None
        Powers of two that divide the scores beyond the dtype's range
        (:func:`~skattn._kernels.attention.score_exponents`).
    v_exponent : int
        The power of two that divides values whose sums would overflow.
    weights : bool
        Also return the dense weights.

    Returns
    -------
    out : ndarray of shape (B, Tq, Dv)
    lse : ndarray of shape (B, Tq)
    weights : ndarray of shape (B, Tq, Tk) or None
    """
    if exponent is not None:
        q = np.ldexp(q, -exponent)
    if v_exponent:
        v = np.ldexp(v, -v_exponent)
    scores = layout.dots(q, k, scale)
    np.copyto(scores, -np.inf, where=~layout.allowed)
    # scores: exp, in place; row_max multiplied back by 2**exponent
    row_max, empty, row_sum = exp_minus_row_max(scores, exponent)
    if dropout is not None:
        scores *= layout.multipliers(dropout, q.dtype)
    out = layout.weighted_sum(scores, v)
    np.divide(out, row_sum, out=out, where=~empty)
    with np.errstate(divide="ignore"):
        lse = (row_max + np.log(row_sum))[..., 0]
    lse[empty[..., 0]] = np.inf
    dense = None
    if weights:
        np.divide(scores, row_sum, out=scores, where=~empty)
        dense = layout.dense(scores)
    if layout.glob is not None and len(layout.global_rows):
        _global_forward(layout, q, k, v, scale, dropout, exponent, out, lse, dense)
    if v_exponent:
        np.ldexp(out, v_exponent, out=out)
    return out, lse, dense


def _global_forward(layout, q, k, v, scale, dropout, exponent, out, lse, weights):
    """Write the global queries' rows (every allowed key) into the results;
    ``q`` divided by ``2**exponent`` (B, Tq, 1) where it is not None."""
    index, rows = layout.global_rows, layout.glob[layout.global_rows]
    scores = layout.global_scores(q, k, scale)  # (G, Tk)
    row_max = scores.max(axis=-1, keepdims=True, initial=-np.inf)
    empty = np.isneginf(row_max)
    row_max[empty] = 0
    scores = scores - row_max
    if exponent is not None:  # multiplied back (see exp_minus_row_max)
        row_exponent = exponent[index, rows]  # (G, 1)
        with np.errstate(over="ignore"):
            np.ldexp(scores, row_exponent, out=scores)
            row_max = np.ldexp(row_max, row_exponent)
    np.exp(scores, out=scores)
    row_sum = scores.sum(axis=-1, keepdims=True)
    if dropout is not None:
        scores *= layout.global_multipliers(dropout, q.dtype)
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


def sparse_backward(
    layout, d_out, q, k, v, out, lse, *, scale, dropout, exponent, renormalise
):
    """Gradients of :func:`sparse_forward` with respect to ``q``, ``k``, ``v``.

    The probabilities are recomputed from ``lse``; ``sum_j p_ij dp_ij =
    d_out_i . out_i`` is the row term of the softmax's gradient (as in
    FlashAttention's backward pass, dropout included).

    Parameters
    ----------
    layout : SparseLayout
    d_out, q, k, v, out : ndarray of shape (B, T, D)
    lse : ndarray of shape (B, Tq)
    scale, dropout, exponent
        As :func:`sparse_forward`'s.
    renormalise : ndarray of bool of shape (B, Tq, 1) or None
        The rows normalised from their own scores
        (:func:`renormalised_rows`).

    Returns
    -------
    d_q, d_k, d_v : ndarray of shape (B, Tq, D), (B, Tk, D), (B, Tk, Dv)
    """
    n_keys = layout.n_keys
    q_scaled = q if exponent is None else np.ldexp(q, -exponent)
    probabilities = layout.dots(q_scaled, k, scale)
    own = None
    if renormalise is not None:  # those rows normalised from their own scores
        own = np.where(layout.allowed, probabilities, -np.inf)  # (B, Tq, K [+ 1])
        _, empty, row_sum = exp_minus_row_max(own, exponent)
        np.divide(own, row_sum, out=own, where=~empty)
    refused = ~layout.allowed | ~np.isfinite(lse)[..., None]  # (B, Tq, K [+ 1])
    with np.errstate(invalid="ignore", over="ignore"):
        probabilities -= np.where(np.isfinite(lse), lse, 0)[..., None]
        np.exp(probabilities, out=probabilities)
    np.copyto(probabilities, 0, where=refused)
    del refused
    if own is not None:
        np.copyto(probabilities, own, where=renormalise)
        del own
    multipliers = None
    if dropout is not None:
        multipliers = layout.multipliers(dropout, q.dtype)
    dropped = probabilities if multipliers is None else probabilities * multipliers
    d_v = layout.scatter_sum(dropped, d_out, n_keys)
    d_scores = layout.dots(d_out, v)  # d_out_i . v_j
    if multipliers is not None:
        d_scores *= multipliers
    d_scores -= layout.row_dots(d_out, out)[..., None]
    d_scores *= probabilities
    d_scores *= scale
    d_q = layout.weighted_sum(d_scores, k)
    d_k = layout.scatter_sum(d_scores, q, n_keys)
    if layout.glob is not None and len(layout.global_rows):
        scaled = (q_scaled, exponent, renormalise)
        _global_backward(
            layout, d_out, q, k, v, out, lse, scale, dropout, scaled, (d_q, d_k, d_v)
        )
    return d_q, d_k, d_v


def dense_backward(d_out, q, k, v, out, lse, *, mask, causal, scale, dropout):
    """The dense kernel's gradients where a sparse pattern holds every pair,
    of the gradients' batch shape (``lse``'s: none summed over a broadcast
    axis)."""
    batch = lse.shape[:-1]
    q, k, v = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))
    return attention_backward(
        d_out, q, k, v, out, lse, mask=mask, causal=causal, scale=scale, dropout=dropout
    )


def renormalised_rows(q, k, lse, scale, exponent):
    """The rows whose probabilities are normalised from their own scores in
    the backward pass, as the dense kernel's
    (:data:`~skattn._kernels.attention_backward.RECOMPUTE_ERROR_MAX`), and
    those of scores beyond the dtype's range: (B, Tq, 1) bool, or None for
    none."""
    if k.shape[-2] == 0:
        return None
    neg_lse = -np.where(np.isinf(lse), 0, lse)[..., None]  # (B, Tq, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        rows = recompute_error_bound(q, k, neg_lse, scale) > RECOMPUTE_ERROR_MAX
    if exponent is not None:
        rows |= exponent > 0
    return rows if rows.any() else None


def _global_backward(layout, d_out, q, k, v, out, lse, scale, dropout, scaled, grads):
    """Add the global queries' rows' gradients to ``grads`` (in place);
    ``scaled``: the queries divided by ``2**exponent``, the exponent and the
    rows normalised anew (see :func:`banded_backward`)."""
    q_scaled, exponent, renormalise = scaled
    d_q, d_k, d_v = grads
    index, rows = layout.global_rows, layout.glob[layout.global_rows]
    row_lse = lse[index, rows][:, None]  # (G, 1)
    finite = np.isfinite(row_lse)
    scores = layout.global_scores(q_scaled, k, scale)  # (G, Tk)
    with np.errstate(invalid="ignore", over="ignore"):
        probabilities = np.exp(scores - np.where(finite, row_lse, 0))
    probabilities[~np.broadcast_to(finite, probabilities.shape)] = 0
    if renormalise is not None and renormalise[index, rows].any():
        anew = renormalise[index, rows, 0]  # (G,)
        own = scores[anew]  # (G', Tk)
        own_exponent = None if exponent is None else exponent[index, rows][anew]
        _, empty, row_sum = exp_minus_row_max(own, own_exponent)
        np.divide(own, row_sum, out=own, where=~empty)
        probabilities[anew] = own
    row_grad = d_out[index, rows]  # (G, Dv)
    multipliers = None
    if dropout is not None:
        multipliers = layout.global_multipliers(dropout, q.dtype)
    dropped = probabilities if multipliers is None else probabilities * multipliers
    d_v[index] += dropped[..., None] * row_grad[:, None, :]
    d_probabilities = np.einsum("gd,gtd->gt", row_grad, v[index])
    if multipliers is not None:
        d_probabilities *= multipliers
    row_term = np.sum(row_grad * out[index, rows], axis=-1, keepdims=True)
    d_scores = probabilities * (d_probabilities - row_term) * scale  # (G, Tk)
    d_q[index, rows] += np.einsum("gt,gtd->gd", d_scores, k[index])
    d_k[index] += d_scores[..., None] * q[index, rows][:, None, :]


class BoundKernels:
    """The forward and backward kernels of a pattern with its layout's
    arguments bound: the ``pattern`` that
    :func:`~skattn._kernels.multi_head.multi_head_forward` and its backward
    pass take. A subclass sets ``_forward`` and ``_backward`` (the kernels,
    as static methods), ``arguments()`` (their keyword arguments of the
    layout) and ``per_sequence`` (the names of those with one value per
    sequence); the dense weights are computed a sequence at a time."""

    per_sequence = ()
    _forward = _backward = None

    def arguments(self):
        """The keyword arguments of the layout, by name."""
        raise NotImplementedError

    def forward(self, q, k, v, *, mask, causal, return_weights, dropout, scale=None):
        """The forward kernel of this layout (see
        :func:`~skattn._kernels.attention.attention_forward`)."""
        return self._forward(
            q,
            k,
            v,
            mask=mask,
            causal=causal,
            scale=scale,
            return_weights=return_weights,
            dropout=dropout,
            **self.arguments(),
        )

    def backward(self, d_context, q, k, v, context, lse, *, mask, causal, dropout):
        """The backward kernel of this layout (see
        :func:`~skattn._kernels.attention_backward.attention_backward`)."""
        return self._backward(
            d_context,
            q,
            k,
            v,
            context,
            lse,
            mask=mask,
            causal=causal,
            dropout=dropout,
            **self.arguments(),
        )

    def write_weights(self, q, k, mask, causal, out):
        """The dense weights (zero outside the pattern), one sequence at a
        time, written into ``out`` (see
        :func:`~skattn._kernels.attention.write_attention_weights`).

        Parameters
        ----------
        q, k : ndarray of shape (N, H, T, Dh)
        mask : ndarray of bool of shape (N, 1, T) or None
        causal : bool
        out : ndarray of shape (N, H, T, T) or list of N ndarray of shape (H, T_i, T_i)
        """
        key_mask = mask_with_head_axis(mask)
        no_values = k[..., :0]
        for row in range(len(q)):
            one = slice(row, row + 1)
            row_kernels = copy.copy(self)
            for name in self.per_sequence:
                value = getattr(self, name)
                setattr(row_kernels, name, None if value is None else value[one])
            _, _, weights = row_kernels.forward(
                q[one],
                k[one],
                no_values[one],
                mask=None if key_mask is None else key_mask[one],
                causal=causal,
                return_weights=True,
                dropout=None,
            )  # (1, H, T, T)
            if isinstance(out, np.ndarray):
                out[row] = weights[0]
            else:
                n_valid = out[row].shape[-1]
                out[row][...] = weights[0, :, :n_valid, :n_valid]
