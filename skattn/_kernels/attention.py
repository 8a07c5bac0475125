"""Scaled dot-product attention in plain numpy: query tiles and the forward pass.

The plain exact tile (:func:`attention_tile`) comes first, then the tiled
forward pass; the faster tile that folds the softmax shift and the row sums
into its two matrix products is in ``folded.py``. The backward pass is in
``attention_backward.py``, the checks of the public kernels' arguments in
``checks.py``; the public :func:`~skattn.scaled_dot_product_attention`, full
or banded, in ``functional.py``; multi-head attention builds on these in
``multi_head.py``.

Pure functions on arrays: nothing here imports scikit-learn or knows about an
estimator. Forward functions return what the backward pass will need (the
per-row log-sum-exp of the scores), so that probabilities can be recomputed tile
by tile instead of being stored. Attention dropout is recomputed the same way:
its masks are a pure function of a stream key per attention and of the (query,
key) indices (see :mod:`skattn._kernels.dropout`).

Shape legend used in the comments: N samples (or any leading batch dimensions),
T tokens (Tq queries, Tk keys), D token width, H heads, Dh head width.

References: Vaswani et al., "Attention is all you need", NeurIPS 2017; Dao et al.,
"FlashAttention", NeurIPS 2022 (the row statistics kept for the backward pass).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from .._parallel import map_parallel
from . import compiled
from .dropout import check_dropout, dropout_multipliers
from .folded import (
    attention_tile_shift_folded,
    fold_keys_values,
    folds_rows,
)

# Scores computed at once per query tile (2**20 float32 are 4 MiB), so that
# memory stays linear in the sequence length; the fastest size measured
# (user guide, "How the defaults were chosen").
TILE_ELEMENTS = 2**20


def compute_dtype(*arrays):
    """Floating dtype in which a kernel computes: the inputs' common dtype.

    Integer and boolean inputs compute in float64, float32 stays float32, and
    float16 computes in float32: its range (6e-5 to 65504) cannot hold the
    exponentials of a softmax, nor its epsilon the row sums.
    """
    dtype = np.result_type(*arrays)
    if not np.issubdtype(dtype, np.floating):
        return np.dtype(np.float64)
    return np.promote_types(dtype, np.float32)


def output_dtype(*arrays):
    """dtype of a kernel's results: the compute dtype, float16 if the inputs are."""
    dtype = np.result_type(*arrays)
    return dtype if dtype == np.float16 else compute_dtype(*arrays)


def default_scale(n_dims):
    """``1 / sqrt(n_dims)``; 1 for empty queries and keys, whose scores are 0."""
    return 1.0 / math.sqrt(n_dims) if n_dims > 0 else 1.0


def mask_with_head_axis(mask):
    """Insert the head axis into a mask broadcastable to ``(..., Tq, Tk)``."""
    if mask is None or mask.ndim < 2:
        return mask
    return np.expand_dims(mask, -3)  # (..., 1, Tq, Tk)


def causal_tile(q_start, q_stop, n_keys):
    """Boolean causal mask for queries ``q_start:q_stop`` against ``n_keys`` keys.

    Query ``i`` may attend to keys ``j <= i`` (top-left alignment, as
    ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``).

    Returns
    -------
    mask : ndarray of shape (q_stop - q_start, n_keys), dtype bool
    """
    return np.arange(n_keys) <= np.arange(q_start, q_stop)[:, None]


def query_tiles(n_queries, n_keys, batch_shape, tile_elements):
    """Slices of about ``tile_elements`` scores each (at least one query row)."""
    n_scores_per_row = max(1, math.prod(batch_shape) * n_keys)
    tile_rows = int(max(1, min(n_queries, tile_elements // n_scores_per_row)))
    for start in range(0, n_queries, tile_rows):
        yield slice(start, min(start + tile_rows, n_queries))


def forward_tiles(n_queries, n_keys, batch_shape, tile_elements):
    """Tiles of about ``tile_elements`` scores: (sequences, query rows).

    The query rows of a tile depend on one sequence's attention only (its
    rows of every attention beyond the first batch axis), never on how many
    sequences the batch holds: the products of a sequence, and so its
    rounding, are the same in any batch. Whole sequences of the first batch
    axis are grouped to fill a tile.

    Yields
    ------
    sequences : slice or None
        Of the first batch axis (None: no batch axis).
    rows : slice
        Query rows.
    """
    if not batch_shape:
        for rows in query_tiles(n_queries, n_keys, (), tile_elements):
            yield None, rows
        return
    n_sequences, per_sequence = batch_shape[0], batch_shape[1:]
    row_tiles = list(query_tiles(n_queries, n_keys, per_sequence, tile_elements))
    if not row_tiles:  # no query
        return
    if len(row_tiles) > 1:  # a sequence in several tiles
        for sequence in range(n_sequences):
            for rows in row_tiles:
                yield slice(sequence, sequence + 1), rows
        return
    scores = max(1, math.prod(per_sequence) * n_keys * n_queries)
    group = max(1, tile_elements // scores)
    for start in range(0, n_sequences, group):
        yield slice(start, min(start + group, n_sequences)), row_tiles[0]


def tile_mask(mask, causal, rows, n_keys):
    """Allowed (query, key) pairs of the query rows ``rows``, or None for all."""
    allowed = None if mask is None else mask[..., rows, :]
    if causal:
        tile_causal = causal_tile(rows.start, rows.stop, n_keys)
        allowed = tile_causal if allowed is None else allowed & tile_causal
    return allowed


def masked_scores(q, k_t, allowed, scale, batch_shape):
    """Scaled scores of a query tile, -inf where a key is not allowed.

    Returns
    -------
    scores : ndarray of shape batch_shape + (tq, Tk)
        A new array, safe to modify in place.
    """
    scores = np.matmul(q, k_t)  # (..., tq, Tk)
    if scores.shape[:-2] != batch_shape:
        # q and k are broadcast over fewer dimensions than the mask
        scores = np.broadcast_to(scores, batch_shape + scores.shape[-2:]).copy()
    scores *= scale
    if allowed is not None:
        np.copyto(scores, -np.inf, where=~allowed)
    return scores


def exp_minus_row_max(scores, exponent=None):
    """Exponentiate scores in place, each row shifted by its maximum.

    Parameters
    ----------
    scores : ndarray of shape (..., tq, Tk)
        Scaled scores, -inf where a key is not allowed; overwritten by the
        unnormalised probabilities (each row's largest is 1; rows with no
        allowed key are 0).
    exponent : ndarray of int, broadcastable to (..., tq, 1), default=None
        The scores are divided by ``2**exponent``: the shifted scores are
        multiplied back before the exponential (to -inf where that
        overflows: a probability of 0), and so is the shift (inf where it
        overflows).

    Returns
    -------
    row_max : ndarray of shape (..., tq, 1)
        The shift of each row; 0 for a row with no allowed key.
    empty : ndarray of bool, shape (..., tq, 1)
        Rows with no allowed key.
    row_sum : ndarray of shape (..., tq, 1)
        Sum of each row of ``scores`` after the exponential: at least 1, or 0
        for an empty row.
    """
    row_max = scores.max(axis=-1, keepdims=True)  # (..., tq, 1)
    empty = np.isneginf(row_max)  # rows with no allowed key
    row_max[empty] = 0.0
    scores -= row_max
    if exponent is not None:
        with np.errstate(over="ignore"):
            np.ldexp(scores, exponent, out=scores)
            row_max = np.ldexp(row_max, exponent)
    np.exp(scores, out=scores)
    return row_max, empty, scores.sum(axis=-1, keepdims=True)


def score_exponents(q, k, scale):
    """Powers of two that keep each row of scores far from overflow.

    ``|scale * q_i . k_j| < 2**(e(max|q_i|) + e(max|k|) + e(|scale|) +
    e(d))``, with ``e`` the binary exponent (``x < 2**e(x)``): computed on
    exponents, the bound itself cannot overflow. The scores of a row whose
    bound exceeds a quarter of the dtype's largest number are computed
    divided by a power of two (see :func:`attention_tile`).

    Parameters
    ----------
    q : ndarray of shape (..., Tq, Dk)
    k : ndarray of shape (..., Tk, Dk)
    scale : scalar

    Returns
    -------
    exponent : ndarray of int of shape (..., Tq, 1), or None
        ``max(0, bound - limit)`` for each row; None when no row needs it (the
        usual case: scores below about 1e307 in float64, 8e37 in float32).
    """
    limit = np.finfo(q.dtype).maxexp - 2
    fixed = math.frexp(abs(float(scale)))[1] + math.frexp(q.shape[-1])[1]
    # one bound for every row first, from the largest |q| and |k| of all (two
    # contiguous passes each, not one reduction per row): no row's bound is
    # larger, so below the limit no row needs an exponent (the usual case);
    # NaN or inf take the row by row path below
    if q.size and k.size:
        q_all = max(float(q.max()), -float(q.min()))
        k_all = max(float(k.max()), -float(k.min()))
        finite = math.isfinite(q_all) and math.isfinite(k_all)
        bound_all = math.frexp(max(q_all, 0.0))[1] + math.frexp(max(k_all, 0.0))[1]
        if finite and bound_all + fixed <= limit:
            return None
    q_max = np.maximum(
        q.max(axis=-1, keepdims=True, initial=0),
        -q.min(axis=-1, keepdims=True, initial=0),
    )  # (..., Tq, 1), without a temporary |q|
    k_max = np.maximum(
        k.max(axis=(-2, -1), keepdims=True, initial=0),
        -k.min(axis=(-2, -1), keepdims=True, initial=0),
    )  # (..., 1, 1)
    bound = np.frexp(q_max)[1] + np.frexp(k_max)[1] + fixed
    if not np.any(bound > limit):
        return None
    return np.maximum(bound - limit, 0).astype(np.int32)


def attention_tile(
    q,
    k_t,
    v,
    allowed,
    scale,
    batch_shape,
    *,
    return_weights,
    multipliers=None,
    exponent=None,
):
    """Attention of one tile of queries against all keys: the exact softmax.

    Scores, minus each row's maximum, exponentiated; the row sums normalise
    the ``(tq, Dv)`` weighted values rather than the ``(tq, Tk)``
    probabilities. :func:`attention_tile_shift_folded` computes the same
    faster, and hands the tiles it cannot compute accurately back to this one.

    Parameters
    ----------
    q : ndarray of shape (..., tq, Dk)
        A tile of queries.
    k_t : ndarray of shape (..., Dk, Tk)
        Transposed keys.
    v : ndarray of shape (..., Tk, Dv)
        Values.
    allowed : ndarray of bool, broadcastable to (..., tq, Tk), or None
        True where a query may attend to a key.
    scale : scalar of the compute dtype
        Multiplier of the scores.
    batch_shape : tuple
        Broadcast leading shape of q, k, v and the mask.
    return_weights : bool
        Also return the normalised probabilities.
    multipliers : ndarray, broadcastable to (..., tq, Tk), default=None
        Dropout multipliers of the probabilities (see
        :func:`dropout_multipliers`), applied after their row sums are taken;
        the weights returned are then the dropped ones.
    exponent : ndarray of int, broadcastable to (..., tq, 1), default=None
        Scores that would overflow (see :func:`score_exponents`): each row's
        scores are computed divided by ``2**exponent`` (exact: a power of
        two), shifted by their maximum, then multiplied back, so that the
        differences that the softmax needs stay finite.

    Returns
    -------
    context : ndarray of shape (..., tq, Dv)
    lse : ndarray of shape (..., tq)
        Of the scores, whatever the dropout (inf where it overflows).
    weights : ndarray of shape (..., tq, Tk) or None
    """
    if exponent is not None:
        q = np.ldexp(q, -exponent)
    scores = masked_scores(q, k_t, allowed, scale, batch_shape)  # (..., tq, Tk)
    # unnormalised probabilities, each row's max is 1; row_sum >= 1, or 0 if empty
    row_max, empty, row_sum = exp_minus_row_max(scores, exponent)  # (..., tq, 1)
    if multipliers is not None:
        scores *= multipliers  # dropout of the weights, after the softmax's sums
    context = np.matmul(scores, v)  # (..., tq, Dv)
    np.divide(context, row_sum, out=context, where=~empty)

    with np.errstate(divide="ignore"):
        lse = row_max + np.log(row_sum)  # (..., tq, 1)
    lse[empty] = np.inf
    if return_weights:
        np.divide(scores, row_sum, out=scores, where=~empty)
    return context, lse[..., 0], scores if return_weights else None


def attention_forward(
    q,
    k,
    v,
    *,
    mask=None,
    causal=False,
    scale=None,
    tile_elements=TILE_ELEMENTS,
    return_weights=False,
    dropout=None,
):
    """Scaled dot-product attention computed in query tiles.

    The scores of at most about ``tile_elements`` (query, key) pairs exist at
    once, so memory is linear in the number of keys. Each tile is a max-shifted
    softmax; the normalisation is applied once to the ``(Tq, Dv)`` output rather
    than to the ``(Tq, Tk)`` probabilities.

    The compiled kernels compute it instead where they apply (numba, key
    padding, no weights or dropout) and the scores and values are within
    their range (a quarter of the dtype's largest number), to float rounding.

    Dropout, when set, drops attention weights where
    ``torch.nn.MultiheadAttention(dropout=p)`` does: after the softmax, before
    the product with the values, keeping the others times ``1 / (1 - p)``.

    Parameters
    ----------
    q : ndarray of shape (..., Tq, Dk)
        Queries, already in the compute dtype.
    k : ndarray of shape (..., Tk, Dk)
        Keys.
    v : ndarray of shape (..., Tk, Dv)
        Values.
    mask : ndarray of bool, broadcastable to (..., Tq, Tk), default=None
        True where a query may attend to a key.
    causal : bool, default=False
        Also forbid keys after the query (see :func:`causal_tile`).
    scale : float, default=None
        Multiplier of the scores; None means ``1 / sqrt(Dk)``.
    tile_elements : int, default=TILE_ELEMENTS
        Budget of scores per tile; results do not depend on it.
    return_weights : bool, default=False
        Also return the normalised attention weights (this costs Tq * Tk memory).
    dropout : None or (float, ndarray of uint64), default=None
        ``(p, keys)``: drop each attention weight with probability ``p`` in
        [0, 1). ``keys`` (stream keys, see :func:`skattn._kernels.dropout.stream_keys`)
        broadcast to the batch shape, one key per attention; element (query
        ``i``, key ``j``) of batch element ``b`` is multiplied by
        ``keep_scale(keys[b], i << 21 | j, p)``, whatever the tiles (see
        :func:`dropout_multipliers`). None or ``p == 0``: no dropout.

    Returns
    -------
    out : ndarray of shape (..., Tq, Dv)
        Weighted values; zeros for a query row with no allowed key.
    lse : ndarray of shape (..., Tq)
        Log-sum-exp of each row of scaled scores over the allowed keys; +inf for a
        row with no allowed key, so that ``exp(scores - lse)`` is 0 there. It
        does not depend on the dropout.
    weights : ndarray of shape (..., Tq, Tk) or None
        Attention weights, when ``return_weights`` is True; with dropout, the
        dropped and rescaled weights that multiplied the values (as
        ``torch.nn.MultiheadAttention`` returns them).
    """
    dtype = q.dtype
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    batch_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    dropout = check_dropout(dropout, n_keys)
    if dropout is not None:
        batch_shape = np.broadcast_shapes(batch_shape, dropout[1].shape)
    if scale is None:
        scale = default_scale(q.shape[-1])
    scale = dtype.type(scale)  # a float64 scalar would promote float32 arrays
    lengths = compiled_lengths(q, k, v, mask, batch_shape, dropout, return_weights)
    if lengths is not None:
        result = compiled.forward(q, k, v, lengths, causal, scale)
        # None: scores or values beyond the kernels' range, or numba failed
        if result is not None:
            return (*result, None)
    # scores beyond the dtype's range: rows computed divided by a power of two,
    # on the exact path (the folded shift would overflow)
    exponent = score_exponents(q, k, scale)
    # values so large that a sum of Tk of them overflows: divided by a power
    # of two, and the output multiplied back (a weighted mean of them is finite)
    v_exponent = value_exponent(v, n_keys)
    keys = None  # the keys some query may attend to, before the broadcast
    if mask is not None:
        keys = mask[..., 0, :] if mask.shape[-2] == 1 else mask.any(axis=-2)
        batch_shape = np.broadcast_shapes(batch_shape, mask.shape[:-2])
        mask = np.broadcast_to(mask, batch_shape + (n_queries, n_keys))

    out = np.empty(batch_shape + (n_queries, v.shape[-1]), dtype=dtype)
    lse = np.empty(batch_shape + (n_queries,), dtype=dtype)
    weights = None
    if return_weights:
        weights = np.empty(batch_shape + (n_queries, n_keys), dtype=dtype)
    if n_keys == 0:  # every row has no allowed key
        out[...], lse[...] = 0, np.inf
        return out, lse, weights

    if v_exponent:
        v = np.ldexp(v, -v_exponent)
    k_t = np.swapaxes(k, -1, -2)  # (..., Dk, Tk)
    # weights and dropout take the exact tile; so do the rows whose folded
    # shift underflows, each row on its own, so that a row's result does not
    # depend on the rows batched or tiled with it
    fold = not return_weights and dropout is None and exponent is None
    fold = fold and folds_rows(n_keys, q.shape[-1])
    if fold:
        folded_keys = fold_keys_values(k, v, scale, keys)

    if exponent is not None:
        exponent = np.broadcast_to(exponent, batch_shape + exponent.shape[-2:])
    n_batch_axes = len(batch_shape)

    def part(array, sequences):
        """The sequences of ``array`` (of 2 trailing axes), unless it is
        broadcast along the first batch axis."""
        if sequences is None or array is None:
            return array
        if array.ndim - 2 < n_batch_axes or array.shape[0] == 1:
            return array
        return array[sequences]

    def run_tile(tile):
        sequences, rows = tile
        tile_batch = batch_shape
        if sequences is not None:
            tile_batch = (sequences.stop - sequences.start,) + batch_shape[1:]
        q_tile = part(q, sequences)[..., rows, :]
        allowed = tile_mask(part(mask, sequences), causal, rows, n_keys)
        folded = None
        if fold:
            context, tile_lse, folded = attention_tile_shift_folded(
                q_tile, *(part(a, sequences) for a in folded_keys), allowed, tile_batch
            )
        if folded is None or not folded.all():  # rows the folded shift lost
            multipliers = None
            if dropout is not None:
                p, keys = dropout
                keys = np.broadcast_to(keys, batch_shape)
                if sequences is not None:
                    keys = keys[sequences]
                multipliers = dropout_multipliers(
                    (p, keys), rows, n_keys, tile_batch, dtype
                )
            exact = attention_tile(
                q_tile,
                part(k_t, sequences),
                part(v, sequences),
                allowed,
                scale,
                tile_batch,
                return_weights=return_weights,
                multipliers=multipliers,
                exponent=None
                if exponent is None
                else part(exponent, sequences)[..., rows, :],
            )
            if folded is None:
                context, tile_lse, tile_weights = exact
                if return_weights:
                    part(weights, sequences)[..., rows, :] = tile_weights
            else:  # the rows of the folded tile that underflowed, exactly
                context = np.where(folded[..., None], context, exact[0])
                tile_lse = np.where(folded, tile_lse, exact[1])
        part(out, sequences)[..., rows, :] = context
        lse_part = lse if sequences is None else lse[sequences]
        lse_part[..., rows] = tile_lse

    tiles = forward_tiles(n_queries, n_keys, batch_shape, tile_elements)
    map_parallel(run_tile, tiles)
    if v_exponent:
        np.ldexp(out, v_exponent, out=out)
    return out, lse, weights


def compiled_lengths(
    q, k, v, mask, batch_shape, dropout, return_weights, backward=False
):
    """Valid keys of each attention if the compiled kernels compute its
    forward (or, with ``backward``, its backward) pass, else None."""
    if not compiled.applies(q, k, v, dropout, return_weights, backward):
        return None
    mask_batch = batch_shape if mask is None else mask.shape[:-2]
    if np.broadcast_shapes(batch_shape, mask_batch) != batch_shape:  # more axes
        return None
    return compiled.prefix_lengths(mask, batch_shape, k.shape[-2])


def value_exponent(v, n_keys):
    """Power of two by which to divide values whose sum over the keys could
    overflow (each unnormalised probability is at most 1, or ``1 / (1 - p)``
    with dropout); 0 for the usual values."""
    if v.size == 0:
        return 0
    v_max = max(float(v.max()), -float(v.min()))
    limit = np.finfo(v.dtype).maxexp - 2
    bound = math.frexp(v_max)[1] + math.frexp(n_keys)[1]
    return max(0, bound - limit)
