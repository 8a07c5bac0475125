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

Pure numpy; nothing here knows about an estimator.
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
