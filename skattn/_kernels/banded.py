"""Banded attention: Longformer's sliding window, with its dilation.

Query ``i`` attends key ``j`` only when ``i - j`` is a multiple of
``dilation`` and ``|i - j| <= (window // 2) * dilation``; with ``causal``, only
when ``0 <= i - j <= (window - 1) * dilation``. Each query reads its keys at
``K`` fixed offsets from its own position
(:func:`~skattn._kernels.band.band_offsets`), so the scores are an
``(B, Tq, K)`` array, one column per offset: time and memory ``O(T * K)``,
never ``O(T**2)``. A band of more offsets than the ``Tq + Tk - 1`` that pair
a query with a key is clipped to those, so that ``K <= Tq + Tk - 1``
whatever the window and the dilation; a band that holds every pair is full
attention, and the dense kernel computes it
(:func:`~skattn._kernels.band.band_covers`).

One token per sequence may be global (Longformer's global attention, the class
token of ``pooling="cls"``): its query reads every allowed key, and every
query may read its key beside the band (a last column of the scores).

The result equals the dense kernel
(:func:`~skattn._kernels.attention.attention_forward`) given the band (with
the global token's row and column) as its boolean mask, to float rounding:
the same max-shifted softmax, the same dropout multipliers (a pure function
of the stream key and the (query, key) indices), zeros and ``lse = inf`` for
a row with no allowed key, the same powers of two that divide scores beyond
the dtype's range and values whose sums would overflow
(:func:`~skattn._kernels.attention.score_exponents`). Numpy on arrays; where
numba is installed, compiled kernels compute the cases the model runs (key
padding, the global token, no dropout, no weights returned, scores and sums
within the dtype's range) to float rounding of the same
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
from .attention import (
    attention_forward,
    default_scale,
    exp_minus_row_max,
    score_exponents,
    value_exponent,
)
from .attention_backward import (
    RECOMPUTE_ERROR_MAX,
    attention_backward,
    recompute_error_bound,
)
from .band import Band, band_covers, band_offsets
from .dropout import check_dropout


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
    allows (``mask`` key padding or None, no dropout, no weights returned)
    and the scores and the values' sums are within the dtype's range; a band
    that holds every pair (:func:`~skattn._kernels.band.band_covers`) runs the
    dense kernel.

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
    if band_covers(window, dilation, causal, n_queries, n_keys):
        # full attention, a global token's row and column included
        return attention_forward(
            q,
            k,
            v,
            mask=mask,
            causal=causal,
            scale=scale,
            return_weights=return_weights,
            dropout=dropout,
        )
    batch_shape, (q, k, v), mask, dropout, glob = _prepare(
        q, k, v, (), mask, dropout, global_index
    )
    n_batch = len(q)
    scale = dtype.type(default_scale(q.shape[-1]) if scale is None else scale)
    shape = batch_shape + (n_queries,)
    # scores beyond the dtype's range, values whose sum overflows: divided by
    # powers of two on the numpy path, as the dense kernel divides them
    exponent = score_exponents(q, k, scale)  # (B, Tq, 1) or None
    v_exponent = value_exponent(v, n_keys)
    lengths = None
    if exponent is None and not v_exponent:
        lengths = compiled_banded.banded_lengths(
            q, k, v, mask, dropout, return_weights, glob
        )
    if lengths is not None:
        offsets = band_offsets(
            window, dilation, causal, n_queries=n_queries, n_keys=n_keys
        )
        result = compiled_banded.banded_forward(
            q, k, v, lengths, glob, offsets, causal, scale
        )
        if result is not None:  # None: numba failed to compile it
            out, lse = result
            return out.reshape(shape + (v.shape[-1],)), lse.reshape(shape), None
    band = Band(n_queries, n_keys, window, dilation, causal, mask, glob)
    if exponent is not None:
        q = np.ldexp(q, -exponent)
    if v_exponent:
        v = np.ldexp(v, -v_exponent)
    scores = band.dots(q, k, scale)
    np.copyto(scores, -np.inf, where=~band.allowed)
    # scores: exp, in place; row_max multiplied back by 2**exponent
    row_max, empty, row_sum = exp_minus_row_max(scores, exponent)
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
        _global_forward(band, q, k, v, scale, dropout, exponent, out, lse, weights)
    if v_exponent:
        np.ldexp(out, v_exponent, out=out)
    out = out.reshape(shape + (v.shape[-1],))
    if weights is not None:
        weights = weights.reshape(shape + (n_keys,))
    return out, lse.reshape(shape), weights


def _global_forward(band, q, k, v, scale, dropout, exponent, out, lse, weights):
    """Write the global queries' rows (every allowed key) into the results;
    ``q`` divided by ``2**exponent`` (B, Tq, 1) where it is not None."""
    index, rows = band.global_rows, band.glob[band.global_rows]
    scores = band.global_scores(q, k, scale)  # (G, Tk)
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
    FlashAttention's backward pass, dropout included). The rows whose
    recomputed ``exp(scores - lse)`` would be inaccurate are normalised from
    their own scores, and scores beyond the dtype's range divided by a power
    of two, on the numpy path, as the dense kernel's backward pass does
    (:func:`~skattn._kernels.attention_backward.attention_backward`). Runs
    compiled where :func:`banded_forward` does, the arrays of one dtype and
    no row normalised anew; a band that holds every pair runs the dense
    kernel.

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
    if band_covers(window, dilation, causal, n_queries, n_keys):
        # full attention, of the gradients' batch shape (lse's): none summed
        batch = lse.shape[:-1]
        q, k, v = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))
        return attention_backward(
            d_out,
            q,
            k,
            v,
            out,
            lse,
            mask=mask,
            causal=causal,
            scale=scale,
            dropout=dropout,
        )
    lse = lse[..., None]
    batch_shape, (q, k, v, d_out, out, lse), mask, dropout, glob = _prepare(
        q, k, v, (d_out, out, lse), mask, dropout, global_index
    )
    n_batch = len(q)
    lse = lse[..., 0]  # (B, Tq)
    scale = dtype.type(default_scale(q.shape[-1]) if scale is None else scale)
    exponent = score_exponents(q, k, scale)  # (B, Tq, 1) or None
    renormalise = _renormalised_rows(q, k, lse, scale, exponent)  # (B, Tq, 1)
    if exponent is None and renormalise is None:
        grads = _compiled_backward(
            d_out,
            q,
            k,
            v,
            out,
            lse,
            mask,
            dropout,
            glob,
            (window, dilation, causal),
            scale,
        )
        if grads is not None:
            return tuple(g.reshape(batch_shape + g.shape[1:]) for g in grads)
    band = Band(n_queries, n_keys, window, dilation, causal, mask, glob)
    q_scaled = q if exponent is None else np.ldexp(q, -exponent)
    probabilities = band.dots(q_scaled, k, scale)
    own = None
    if renormalise is not None:  # those rows normalised from their own scores
        own = np.where(band.allowed, probabilities, -np.inf)  # (B, Tq, K [+ 1])
        _, empty, row_sum = exp_minus_row_max(own, exponent)
        np.divide(own, row_sum, out=own, where=~empty)
    refused = ~band.allowed | ~np.isfinite(lse)[..., None]  # (B, Tq, K [+ 1])
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
        scaled = (q_scaled, exponent, renormalise)
        _global_backward(
            band, d_out, q, k, v, out, lse, scale, dropout, scaled, (d_q, d_k, d_v)
        )
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
    offsets = band_offsets(
        window, dilation, causal, n_queries=q.shape[1], n_keys=k.shape[1]
    )
    return compiled_banded.banded_backward(
        d_out, q, k, v, out, lse, lengths, glob, offsets, causal, scale
    )


def _renormalised_rows(q, k, lse, scale, exponent):
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


def _global_backward(band, d_out, q, k, v, out, lse, scale, dropout, scaled, grads):
    """Add the global queries' rows' gradients to ``grads`` (in place);
    ``scaled``: the queries divided by ``2**exponent``, the exponent and the
    rows normalised anew (see :func:`banded_backward`)."""
    q_scaled, exponent, renormalise = scaled
    d_q, d_k, d_v = grads
    index, rows = band.global_rows, band.glob[band.global_rows]
    row_lse = lse[index, rows][:, None]  # (G, 1)
    finite = np.isfinite(row_lse)
    scores = band.global_scores(q_scaled, k, scale)  # (G, Tk)
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
