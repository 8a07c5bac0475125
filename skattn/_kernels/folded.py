"""The folded attention tile: the softmax shift and the row sums computed by
the tile's two matrix products.

The plain tile (``attention.attention_tile``) takes a pass over the scores for
each row's maximum and one for its sum. Here an extra column of the queries
(the negated shift, an upper bound of the row's scores) and a row of ones under
the keys make the first product return shifted scores, and a column of ones in
the values makes the second return each row's sum beside its weighted values:
the only pass over the scores is one in-place exponential. Rows whose sum
underflows under the loose shift are left to the plain tile.

Pure functions on arrays, used by the forward pass (``attention.py``) and the
backward pass (``attention_backward.py``).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

# A row sum of exponentials below this may have lost precision to underflow: the
# folded shift (see attention_tile_shift_folded) then hands the tile to the exact
# path.
FOLDED_SUM_FLOOR = math.exp(-60.0)

# Both passes fold their per-row terms into their matrix products (the forward
# pass its shift and row sums, see attention_tile_shift_folded; the backward
# pass -lse and -delta) only with at least this many keys per query dimension:
# the extra column costs copies of the queries, keys and values, worth it only
# against long rows of scores (measured by benchmarks/fold_threshold.py).
FOLD_MIN_KEYS_PER_DIM = 2


def append_column(x, column):
    """``[x, column]`` along the last axis, broadcasting the leading axes.

    Parameters
    ----------
    x : ndarray of shape (..., n, d)
    column : ndarray or scalar, broadcastable to (..., n, 1)

    Returns
    -------
    ndarray of shape (..., n, d + 1), a new array in the dtype of ``x``.
    """
    column = np.asarray(column, dtype=x.dtype)
    lead = np.broadcast_shapes(x.shape[:-1], column.shape[:-1])
    out = np.empty(lead + (x.shape[-1] + 1,), dtype=x.dtype)
    out[..., :-1] = x
    out[..., -1:] = column
    return out


def keys_with_ones(k, scale):
    """Transposed keys times ``scale`` over a row of ones.

    Returns
    -------
    k_aug_t : ndarray of shape (..., Dk + 1, Tk)
        The last row multiplies a column of the queries (a shift per row of
        scores); ``k_aug_t[..., :-1, :]`` is ``scale * k`` transposed.
    """
    k_aug = append_column(k, 1)  # (..., Tk, Dk + 1)
    k_aug[..., :-1] *= scale
    return np.swapaxes(k_aug, -1, -2)


def value_column_exponents(v, keys=None):
    """Powers of two that bring each column of values to a largest magnitude
    of at least 1/2.

    The folded shift (see :func:`attention_tile_shift_folded`) is an upper
    bound of a row's scores, not its largest: its exponentials can be as
    small as ``FOLDED_SUM_FLOOR / Tk``, and their products with values far
    below 1 underflow (in float32, values of 1e-25 against exponentials of
    1e-24). The columns of values multiplied by ``2**exponent`` (exact) keep
    those products in range, and the output is divided back.

    Parameters
    ----------
    v : ndarray of shape (..., Tk, Dv)
    keys : ndarray of bool of shape (..., Tk), default=None
        The keys some query may attend to (None: all): the largest magnitude
        is over them, so that padding does not change it.

    Returns
    -------
    exponent : ndarray of int32 of shape (..., 1, Dv), or None
        ``max(0, -e)``, ``e`` the binary exponent of the largest magnitude of
        each column (``x < 2**e``); None when every column's is at least 1/2
        (the usual case).
    """
    magnitude = np.abs(v)
    if keys is not None:
        magnitude = np.where(keys[..., None], magnitude, 0)
    largest = magnitude.max(axis=-2, keepdims=True, initial=0)  # (..., 1, Dv)
    exponent = np.maximum(-np.frexp(largest)[1], 0)
    return exponent if exponent.any() else None


def fold_keys_values(k, v, scale, keys=None):
    """Keys and values extended so that one product also shifts, one also sums.

    ``keys``: True for the keys some query may attend to, shape ``(..., Tk)``
    (None: all); the largest key norm is over them, so that padding does not
    change it, and so are the values' column exponents.

    Returns
    -------
    k_aug_t : ndarray of shape (..., Dk + 1, Tk)
        Transposed keys times ``scale``, with a row of ones (it multiplies the
        query's shift).
    v_aug : ndarray of shape (..., Tk, Dv + 1)
        Values times ``2**column_exponent``, with a column of ones (it sums the
        probabilities of a row).
    k_norm_max : ndarray of shape (..., 1, 1)
        Largest norm of the scaled keys (times ``|scale|``: a bound of the
        scores for either sign of ``scale``).
    column_exponent : ndarray of int32 of shape (..., 1, Dv), or None
        From :func:`value_column_exponents`.
    """
    column_exponent = value_column_exponents(v, keys)
    if column_exponent is not None:
        v = np.ldexp(v, column_exponent)
    v_aug = append_column(v, 1)  # (..., Tk, Dv + 1)
    k_norm_max = key_norm_max(k, keys)[..., None]
    return keys_with_ones(k, scale), v_aug, k_norm_max * abs(scale), column_exponent


def folds_rows(n_keys, n_dims):
    """Whether a pass folds its per-row terms into its products, as an extra
    column (see FOLD_MIN_KEYS_PER_DIM).

    Parameters
    ----------
    n_keys : int
        Keys per query row.
    n_dims : int
        Width of the queries (and keys).
    """
    return n_keys >= FOLD_MIN_KEYS_PER_DIM * (n_dims + 1)


def key_norm_max(k, keys=None):
    """Largest norm of the keys of each attention, shape ``k.shape[:-2] + (1,)``
    (broadcast with ``keys.shape[:-1]``); ``keys``: True where a key counts
    (None: every key)."""
    norms = np.einsum("...ij,...ij->...i", k, k)  # (..., Tk)
    if keys is not None:
        norms = np.where(keys, norms, 0)
    return np.sqrt(np.max(norms, axis=-1))[..., None]


def attention_tile_shift_folded(
    q, k_aug_t, v_aug, k_norm_max, column_exponent, allowed, batch_shape
):
    """:func:`attention_tile` with the shift and the row sums folded into the
    two matrix products.

    The shift of each row is not its maximum score but an upper bound of its
    scores (Cauchy-Schwarz: ``|scale| * |q| * max |k|``), which needs no pass
    over the scores: an extra column of the queries (the negated shift) times
    a row of ones under the keys makes the first product return shifted
    scores. An extra column of ones in the values makes the second product
    return each row's sum of exponentials next to its weighted values. The
    only pass over the (tq, Tk) scores is one in-place exponential. A loose
    bound can make a row's sum underflow: such rows are left to
    :func:`attention_tile`, each on its own, so that no row's path depends on
    the other rows of its tile.

    Parameters
    ----------
    q : ndarray of shape (..., tq, Dk)
        A tile of queries.
    k_aug_t, v_aug, k_norm_max, column_exponent
        From :func:`fold_keys_values`.
    allowed, batch_shape
        As for :func:`attention_tile` (the scale is in ``k_aug_t``).

    Returns
    -------
    context, lse
        As :func:`attention_tile`.
    folded : ndarray of bool of shape (..., tq)
        The rows whose result is right; the others need the exact path.
    """
    q_norm = np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]  # (..., tq, 1)
    shift = q_norm * k_norm_max  # (..., tq, 1): >= every scaled score of a row
    q_aug = append_column(q, -shift)  # (..., tq, Dk + 1)
    scores = np.matmul(q_aug, k_aug_t)  # (..., tq, Tk): scale * q.k - shift <= 0
    if scores.shape[:-2] != batch_shape:
        scores = np.broadcast_to(scores, batch_shape + scores.shape[-2:]).copy()
    if allowed is not None:
        np.copyto(scores, -np.inf, where=~allowed)
    # scores far above the shift's rounding can overflow: caught below
    with np.errstate(over="ignore", invalid="ignore"):
        np.exp(scores, out=scores)  # (..., tq, Tk)
        context_sum = np.matmul(scores, v_aug)  # (..., tq, Dv + 1)
    # (..., tq, 1), contiguous: numpy 1.26's log rounds otherwise (its scalar
    # loop) where its output is allocated just past a strided input, which
    # would make the result depend on where numpy's temporaries land
    row_sum = np.ascontiguousarray(context_sum[..., -1:])
    # underflow (or an empty row, or overflow): those rows take the exact path
    folded = (row_sum >= FOLDED_SUM_FLOOR) & (row_sum < np.inf)
    if not folded.all():
        row_sum = np.where(folded, row_sum, 1)
    context = context_sum[..., :-1]
    context /= row_sum
    if column_exponent is not None:  # the values were multiplied by 2**column_exponent
        np.ldexp(context, -column_exponent, out=context)
    lse = np.broadcast_to(shift, row_sum.shape) + np.log(row_sum)  # (..., tq, 1)
    return context, lse[..., 0], folded[..., 0]
