"""Counter-based dropout masks: the same mask whatever the batching or threads.

A dropout mask drawn from a sequential random generator depends on the order in
which elements are drawn, so it would change with the batch a sample lands in,
the padding of that batch and the tiles of the attention kernel. Here every
element's keep/drop decision is a pure function of three things: a *stream
key* (one per training step, sample and dropout site) and the element's
*index* inside that sample (token and feature, or query and key). A 64-bit
hash of ``key ^ index`` (the splitmix64 finaliser) is compared with
``p * 2**64``. This is what FlashAttention does with a Philox counter on the
GPU: the backward pass recomputes the mask of a tile instead of storing it.

Pure numpy; nothing here knows about an estimator. The attention kernels take
their dropout as ``(p, keys)`` (:func:`check_dropout`) and draw the
multipliers of a query tile with :func:`dropout_multipliers`.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)

# Bits of an element index given to the last axis (a key or a feature) and to
# the axis before it (a query or a token): sequences of up to 2**21 tokens.
INDEX_BITS = 21


def mix64(z):
    """splitmix64's finaliser: a bijective 64-bit hash, element-wise.

    Parameters
    ----------
    z : ndarray of dtype uint64
        Values to hash (integer arithmetic wraps modulo 2**64).

    Returns
    -------
    ndarray of dtype uint64, same shape as ``z``.
    """
    z = np.asarray(z, dtype=np.uint64) + _GOLDEN
    z ^= z >> np.uint64(30)
    z *= _MIX_1
    z ^= z >> np.uint64(27)
    z *= _MIX_2
    z ^= z >> np.uint64(31)
    return z


def stream_keys(seed, sample_ids, site):
    """One key per sample for one dropout site of one training step.

    Parameters
    ----------
    seed : int
        Seed of the training step, in [0, 2**63).
    sample_ids : ndarray of shape (N,), dtype int
        Index of each sample in the training set: the key, hence the mask,
        does not depend on the batch the sample is computed in.
    site : int
        Which dropout of the model this is (layer and place in the layer).

    Returns
    -------
    keys : ndarray of shape (N,), dtype uint64
    """
    base = mix64(mix64(np.array([seed], dtype=np.uint64)) ^ np.uint64(site))
    return mix64(base ^ np.asarray(sample_ids, dtype=np.uint64))


def grid_index(n_rows, n_columns):
    """Element indices of an ``(n_rows, n_columns)`` grid: ``row << 21 | column``.

    Returns
    -------
    index : ndarray of shape (n_rows, n_columns), dtype uint64
    """
    rows = np.arange(n_rows, dtype=np.uint64)[:, None] << np.uint64(INDEX_BITS)
    return rows | np.arange(n_columns, dtype=np.uint64)


def keep_scale(keys, index, p, dtype):
    """Inverted-dropout multipliers: 0 (dropped) or ``1 / (1 - p)`` (kept).

    Parameters
    ----------
    keys : ndarray of dtype uint64
        Stream keys, broadcastable against ``index``.
    index : ndarray of dtype uint64
        Element indices inside one stream (see :func:`grid_index`).
    p : float
        Probability of dropping an element, in [0, 1).
    dtype : dtype
        dtype of the multipliers.

    Returns
    -------
    scale : ndarray of the broadcast shape of ``keys`` and ``index``
        Each element is dropped with probability ``p``, independently.
    """
    threshold = np.uint64(min(int(p * 2.0**64), 2**64 - 1))
    keep = mix64(keys ^ index) >= threshold
    return keep * dtype.type(1.0 / (1.0 - p))


def check_dropout(dropout, n_keys):
    """Attention dropout as ``(p, keys)``, or None when nothing is dropped.

    Parameters
    ----------
    dropout : None or (float, array-like of uint64)
        The probability ``p`` in [0, 1) of dropping an attention weight and the
        stream keys, one per attention (broadcast over its batch axes).
    n_keys : int
        Keys per query: the element indices of the masks
        (:func:`skattn._kernels.dropout.grid_index`) have room for ``2**21`` keys.

    Returns
    -------
    None or (float, ndarray of dtype uint64)
        None for ``dropout=None`` or ``p == 0``: no dropout, and the kernels
        compute exactly what they compute without the argument.
    """
    if dropout is None:
        return None
    p, keys = dropout
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"The dropout probability must be in [0, 1), got {p!r}.")
    if p == 0.0:
        return None
    keys = np.asarray(keys)
    if keys.dtype != np.uint64:
        raise TypeError(f"Dropout keys must be of dtype uint64, got {keys.dtype}.")
    if n_keys > 2**INDEX_BITS:
        raise ValueError(
            f"Attention dropout handles up to 2**{INDEX_BITS} keys, got {n_keys}."
        )
    return p, keys


def dropout_multipliers(dropout, rows, n_keys, batch_shape, dtype):
    """Inverted-dropout multipliers of the attention weights of a query tile.

    Element (query ``i``, key ``j``) of batch element ``b`` is multiplied by
    ``keep_scale(keys[b], i << 21 | j, p)`` (see :mod:`skattn._kernels.dropout`): a
    pure function of the key and the indices, so the same whatever the tiles,
    the batch, the padding after the keys or the threads.

    Parameters
    ----------
    dropout : (float, ndarray of uint64)
        From :func:`check_dropout`; the keys broadcast to ``batch_shape``.
    rows : slice
        The query rows of the tile.
    n_keys : int
        Number of keys.
    batch_shape : tuple
        Leading shape of the attention.
    dtype : dtype
        dtype of the multipliers.

    Returns
    -------
    multipliers : ndarray of shape batch_shape + (tq, Tk)
        0 (dropped) or ``1 / (1 - p)`` (kept).
    """
    p, keys = dropout
    keys = np.broadcast_to(keys, batch_shape)[..., None, None]  # (..., 1, 1)
    # grid_index of rows 0..tq-1, moved to the tile's first row
    index = grid_index(rows.stop - rows.start, n_keys)  # (tq, Tk)
    index += np.uint64(rows.start) << np.uint64(INDEX_BITS)
    return keep_scale(keys, index, p, dtype)
