"""The backward pass of scaled dot-product attention, in query tiles.

Recomputes the probabilities of each tile from the log-sum-exp the forward
pass (:func:`skattn._kernels.attention.attention_forward`) kept, so that memory stays
linear in the number of keys, and sums the gradients over the axes the inputs
were broadcast along. Pure functions on arrays, as the forward pass.

Reference: Dao et al., "FlashAttention", NeurIPS 2022 (the softmax identity
``rowsum(dP * P) = rowsum(dO * O)`` and the recomputation from row statistics).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .._parallel import single_threaded_blas
from . import compiled
from .attention import (
    TILE_ELEMENTS,
    compiled_lengths,
    default_scale,
    exp_minus_row_max,
    masked_scores,
    query_tiles,
    tile_mask,
)
from .dropout import check_dropout, dropout_multipliers
from .folded import append_column, folds_rows, key_norm_max, keys_with_ones

# The backward pass recomputes each probability as exp(scale * q.k - lse). A
# dot product of d terms is exact to about d * eps * |scale| * |q| * |k|
# (Higham, "Accuracy and Stability of Numerical Algorithms", section 3.1), and
# the recomputed product need not round as the forward pass's did (other tile
# shapes, a folded column): where that bound, in units of the exponent,
# exceeds RECOMPUTE_ERROR_MAX (0.1 % of a probability), a tile's probabilities
# are normalised again from its own scores, as the forward pass's exact tile
# does (a pass more). Scores of 1e10 in float32 are off by hundreds: exp(scores
# - lse) overflowed. In float32 at head width 16 the bound is reached by scores
# (and lse) of about 450; trained models stay far below it.
RECOMPUTE_ERROR_MAX = 2.0**-10


def sum_to_shape(grad, shape):
    """Sum a gradient over the dimensions its array was broadcast along."""
    if grad.shape == shape:
        return grad
    n_extra = grad.ndim - len(shape)
    axes = tuple(range(n_extra)) + tuple(
        n_extra + i
        for i, size in enumerate(shape)
        if size == 1 and grad.shape[n_extra + i] != 1
    )
    return grad.sum(axis=axes).reshape(shape)


def matmul_add_rows(a, b_t, rows, fold):
    """``a @ b_t + rows``: a matrix product plus one value per row.

    Parameters
    ----------
    a : ndarray of shape (..., n, d)
    b_t : ndarray of shape (..., d, m), or (..., d + 1, m) when ``fold``
        ``b`` transposed; when ``fold``, over a row of ones (see
        :func:`keys_with_ones`).
    rows : ndarray of shape (..., n, 1)
        Added to each row of the product.
    fold : bool
        Add ``rows`` inside the product (``[a, rows] @ b_t``: no pass over the
        (n, m) result, but a copy of ``a``), or after it.

    Returns
    -------
    ndarray of shape (..., n, m), a new array.
    """
    if fold:
        return np.matmul(append_column(a, rows), b_t)
    product = np.matmul(a, b_t)
    if product.shape[:-2] != rows.shape[:-2]:  # a broadcasts: a new array
        return product + rows
    product += rows
    return product


def recompute_error_bound(q, k, neg_lse, scale):
    """Bound of the error of ``scale * q.k - lse`` recomputed in the backward pass.

    Parameters
    ----------
    q : ndarray of shape (..., Tq, Dk)
    k : ndarray of shape (..., Tk, Dk)
    neg_lse : ndarray of shape (..., Tq, 1)
        Minus the forward pass's log-sum-exp (0 for rows with no allowed key).
    scale : scalar

    Returns
    -------
    bound : ndarray of shape (..., Tq, 1)
        ``(Dk + 2) * eps * (|scale| |q| max|k| + |lse|)``: the terms of the
        product and its partial sums are bounded by the parenthesis (see
        RECOMPUTE_ERROR_MAX).
    """
    q_norm = np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]  # (..., Tq, 1)
    largest = q_norm * (key_norm_max(k)[..., None] * abs(scale)) + np.abs(neg_lse)
    return (q.shape[-1] + 2) * np.finfo(q.dtype).eps * largest


def attention_backward(
    d_out,
    q,
    k,
    v,
    out,
    lse,
    *,
    mask=None,
    causal=False,
    scale=None,
    tile_elements=TILE_ELEMENTS,
    dropout=None,
):
    """Gradients of :func:`attention_forward` with respect to q, k and v.

    Recomputes the probabilities tile by tile from the kept log-sum-exp, so that
    memory stays linear in the number of keys; tiles whose scores are too large
    for that recomputation to be accurate (see RECOMPUTE_ERROR_MAX) are
    normalised from their own scores instead. Uses the identity
    ``rowsum(dP * P) = rowsum(dO * O)`` (Dao et al., 2022) for the softmax.

    The compiled kernels compute it where they computed the forward pass and
    the recomputation is accurate (:mod:`skattn._kernels.compiled`).

    With dropout, the multipliers ``M`` of a tile are recomputed from the keys:
    ``O = (P * M) V`` gives ``dV = (P * M)^T dO`` and ``dP = (dO V^T) * M``,
    and the identity still holds with the dropped output ``O``.

    Parameters
    ----------
    d_out : ndarray of shape (..., Tq, Dv)
        Gradient of the loss with respect to the output.
    q, k, v, mask, causal, scale, tile_elements, dropout
        As given to :func:`attention_forward`.
    out : ndarray of shape (..., Tq, Dv)
        Output of :func:`attention_forward`.
    lse : ndarray of shape (..., Tq)
        Log-sum-exp kept by :func:`attention_forward`.

    Returns
    -------
    d_q : ndarray, shape of ``q``
    d_k : ndarray, shape of ``k``
    d_v : ndarray, shape of ``v``
    """
    dtype = q.dtype
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    batch_shape = lse.shape[:-1]
    dropout = check_dropout(dropout, n_keys)
    if scale is None:
        scale = default_scale(q.shape[-1])
    scale = dtype.type(scale)
    # rowsum(dO * O) is rowsum(dP * P), the softmax's correction term
    delta = np.einsum("...i,...i->...", d_out, out)  # (..., Tq)
    if n_keys:
        lengths = compiled_lengths(
            q, k, v, mask, batch_shape, dropout, False, backward=True
        )
        if lengths is not None and d_out.shape == out.shape:
            grads = compiled.backward(
                d_out, q, k, v, lse, delta, lengths, causal, scale, RECOMPUTE_ERROR_MAX
            )
            if grads is not None:  # None: numba failed, or some row's bound
                return grads  # exceeds RECOMPUTE_ERROR_MAX (renormalised here)
        # a row with no allowed key has lse = inf, and is masked anyway
        neg_lse = -np.where(np.isinf(lse), 0, lse)[..., None]  # (..., Tq, 1)
        bound = recompute_error_bound(q, k, neg_lse, scale)
        renormalise = bound > RECOMPUTE_ERROR_MAX  # exp(scores - lse) unsafe
    delta = delta[..., None]  # (..., Tq, 1)
    if mask is not None:
        mask = np.broadcast_to(mask, batch_shape + (n_queries, n_keys))

    d_q = np.empty(batch_shape + q.shape[-2:], dtype=dtype)
    d_k = np.zeros(batch_shape + k.shape[-2:], dtype=dtype)
    d_v = np.zeros(batch_shape + v.shape[-2:], dtype=dtype)
    if n_keys == 0:  # the output is 0 whatever the queries
        d_q[...] = 0
        return tuple(
            sum_to_shape(grad, array.shape)
            for grad, array in ((d_q, q), (d_k, k), (d_v, v))
        )
    # scale * q.k - lse and dP - delta, each one product; a row with no
    # allowed key has lse = inf, and is masked anyway
    fold = dropout is None and folds_rows(n_keys, q.shape[-1])
    if fold:  # transposed keys and values over a row of ones
        k_t = keys_with_ones(k, scale)  # (..., Dk + 1, Tk)
        k_scaled = np.swapaxes(k_t[..., :-1, :], -1, -2)  # (..., Tk, Dk): scale * k
        v_t = np.swapaxes(append_column(v, 1), -1, -2)  # (..., Dv + 1, Tk)
    else:
        k_scaled = k * scale  # (..., Tk, Dk)
        k_t = np.swapaxes(k_scaled, -1, -2)  # (..., Dk, Tk)
        v_t = np.swapaxes(v, -1, -2)  # (..., Dv, Tk)
    with single_threaded_blas():
        for rows in query_tiles(n_queries, n_keys, batch_shape, tile_elements):
            q_tile = q[..., rows, :]  # (..., tq, Dk)
            allowed = tile_mask(mask, causal, rows, n_keys)
            if np.any(renormalise[..., rows, :]):  # exp(scores - lse) unsafe
                probs = masked_scores(
                    q_tile, np.swapaxes(k_scaled, -1, -2), allowed, 1, batch_shape
                )
                _, empty, row_sum = exp_minus_row_max(probs)
                np.divide(probs, row_sum, out=probs, where=~empty)
            else:
                # (..., tq, Tk), of the full batch shape: lse has it
                probs = matmul_add_rows(q_tile, k_t, neg_lse[..., rows, :], fold)
                if allowed is not None:
                    np.copyto(probs, -np.inf, where=~allowed)
                np.exp(probs, out=probs)  # (..., tq, Tk); empty rows are 0

            d_tile = d_out[..., rows, :]  # (..., tq, Dv)
            if dropout is None:
                d_v += np.matmul(np.swapaxes(probs, -1, -2), d_tile)  # (..., Tk, Dv)
                d_scores = matmul_add_rows(d_tile, v_t, -delta[..., rows, :], fold)
            else:
                multipliers = dropout_multipliers(
                    dropout, rows, n_keys, batch_shape, dtype
                )  # (..., tq, Tk)
                dropped = probs * multipliers  # (..., tq, Tk)
                d_v += np.matmul(np.swapaxes(dropped, -1, -2), d_tile)  # (..., Tk, Dv)
                d_scores = np.matmul(d_tile, v_t) * multipliers  # (..., tq, Tk)
                d_scores -= delta[..., rows, :]
            d_scores *= probs  # (..., tq, Tk): gradient of the scaled scores
            d_q[..., rows, :] = np.matmul(d_scores, k_scaled)  # (..., tq, Dk)
            d_k += np.matmul(np.swapaxes(d_scores, -1, -2), q_tile)  # (..., Tk, Dk)
    d_k *= scale
    return (
        sum_to_shape(d_q, q.shape),
        sum_to_shape(d_k, k.shape),
        sum_to_shape(d_v, v.shape),
    )
