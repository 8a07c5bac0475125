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

from . import compiled_banded
from .attention import (
    attention_forward,
    default_scale,
    score_exponents,
    value_exponent,
)
from .band import Band, band_covers, band_offsets
from .sparse import (
    BoundKernels,
    dense_backward,
    prepare,
    renormalised_rows,
    sparse_backward,
    sparse_forward,
)


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
    batch_shape, (q, k, v), mask, dropout, glob = prepare(
        q, k, v, (), mask, dropout, global_index
    )
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
    out, lse, weights = sparse_forward(
        band,
        q,
        k,
        v,
        scale=scale,
        dropout=dropout,
        exponent=exponent,
        v_exponent=v_exponent,
        weights=return_weights,
    )
    out = out.reshape(shape + (v.shape[-1],))
    if weights is not None:
        weights = weights.reshape(shape + (n_keys,))
    return out, lse.reshape(shape), weights


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
        return dense_backward(  # full attention
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
    batch_shape, (q, k, v, d_out, out, lse), mask, dropout, glob = prepare(
        q, k, v, (d_out, out, lse), mask, dropout, global_index
    )
    lse = lse[..., 0]  # (B, Tq)
    scale = dtype.type(default_scale(q.shape[-1]) if scale is None else scale)
    exponent = score_exponents(q, k, scale)  # (B, Tq, 1) or None
    renormalise = renormalised_rows(q, k, lse, scale, exponent)  # (B, Tq, 1)
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
    grads = sparse_backward(
        band,
        d_out,
        q,
        k,
        v,
        out,
        lse,
        scale=scale,
        dropout=dropout,
        exponent=exponent,
        renormalise=renormalise,
    )
    return tuple(g.reshape(batch_shape + g.shape[1:]) for g in grads)


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


class BandedKernels(BoundKernels):
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

    per_sequence = ("global_index",)
    _forward = staticmethod(banded_forward)
    _backward = staticmethod(banded_backward)

    def __init__(self, window, dilation=1, global_index=None):
        self.window, self.dilation = window, dilation
        self.global_index = global_index

    def arguments(self):
        """``window``, ``dilation`` and ``global_index``."""
        return dict(
            window=self.window, dilation=self.dilation, global_index=self.global_index
        )
