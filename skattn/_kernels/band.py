"""The band of banded attention, and the numpy passes over its columns.

Query ``i`` reads key ``j`` when ``j - i`` is one of the band's offsets
(:func:`band_offsets`): ``window // 2`` keys each side of the query, every
``dilation``-th token, or with ``causal`` the query and ``window - 1`` keys
before it; a band of more offsets than the sequence spans is clipped to it
(:func:`band_sides`). :class:`Band` holds one call's band on flattened
batches, and computes the products of each query with its keys, a column of
offsets at a time, for :mod:`skattn._kernels.banded`.

Shape legend: B attentions (the batch axes flattened), Tq queries, Tk keys,
K offsets of the band, D head width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .sparse import SparseLayout

# The offsets of a band are int64: a band reaching further than this is
# clipped to the sequence before any array is made (it adds to row indices).
MAX_REACH = 2**62


def band_sides(window, dilation, causal, n_queries, n_keys):
    """The keys of the band on each side of the query that a call computes.

    The offset ``j - i`` of a query ``i`` and a key ``j`` runs from
    ``-(n_queries - 1)`` to ``n_keys - 1``: the band's offsets beyond hold no
    pair. A band of at most as many offsets as that span is computed as it
    is, its offsets beyond the sequence included (each a column of masked
    scores: so every such band sums its columns in one order, whatever the
    length). A band of more offsets than the span, or reaching beyond
    ``MAX_REACH``, is clipped to the sequence (:func:`clipped_band_sides`):
    its cost is never more than the span's, for a window or a dilation of
    any size (beyond int64's too).

    Parameters
    ----------
    window, dilation : int
        The band (see :func:`band_offsets`), at least 1.
    causal : bool
    n_queries, n_keys : int

    Returns
    -------
    before, after : int
        Keys of the band before and after the query (``after`` is 0 with
        ``causal``).
    step : int
        The gap between them: ``dilation``, or 1 where the query is alone.
    """
    window, dilation = int(window), int(dilation)
    before = window - 1 if causal else window // 2
    after = 0 if causal else window // 2
    span = max(n_queries, 1) + max(n_keys, 1) - 1
    if before + after + 1 <= span and max(before, after) * dilation <= MAX_REACH:
        return before, after, dilation if before or after else 1
    return clipped_band_sides(window, dilation, causal, n_queries, n_keys)


def clipped_band_sides(window, dilation, causal, n_queries, n_keys):
    """The keys of the band on each side of the query that pair some query
    of ``n_queries`` with one of ``n_keys`` keys: at most ``n_queries - 1``
    keys before the query and ``n_keys - 1`` after it, the query alone for a
    dilation beyond both, counted in Python's integers (see
    :func:`band_sides`)."""
    window, dilation = int(window), int(dilation)
    reach_before, reach_after = max(n_queries - 1, 0), max(n_keys - 1, 0)
    before = min(window - 1 if causal else window // 2, reach_before // dilation)
    after = 0 if causal else min(window // 2, reach_after // dilation)
    return before, after, dilation if before or after else 1


def band_covers(window, dilation, causal, n_queries, n_keys):
    """Whether the band holds every pair of ``n_queries`` queries and
    ``n_keys`` keys (with ``causal``, every key up to the query's position):
    then it is full attention."""
    before, after, step = clipped_band_sides(
        window, dilation, causal, n_queries, n_keys
    )
    return (
        step == 1
        and before == max(n_queries - 1, 0)
        and (causal or after == max(n_keys - 1, 0))
    )


def band_offsets(window, dilation=1, causal=False, *, n_queries, n_keys):
    """The key offsets ``j - i`` that a query reads, in increasing order:
    the band's, clipped to those that pair one of ``n_queries`` queries with
    one of ``n_keys`` keys where it holds more offsets than they span
    (:func:`band_sides`).

    Parameters
    ----------
    window : int
        ``window // 2`` keys on each side of the query, and the query; with
        ``causal``, the query and ``window - 1`` keys before it.
    dilation : int, default=1
        Gap between two keys of the band.
    causal : bool, default=False
    n_queries, n_keys : int
        Queries and keys of the attention.

    Returns
    -------
    offsets : ndarray of int64 of shape (K,)
        ``K <= n_queries + n_keys - 1`` (1 where there is no query or key).
    """
    before, after, step = band_sides(window, dilation, causal, n_queries, n_keys)
    return step * np.arange(-before, after + 1, dtype=np.int64)


def band_mask(n_queries, n_keys, window, dilation=1, causal=False):
    """The band as a dense boolean mask of shape ``(n_queries, n_keys)``."""
    offset = np.arange(n_keys)[None, :] - np.arange(n_queries)[:, None]
    offsets = band_offsets(window, dilation, causal, n_queries=n_queries, n_keys=n_keys)
    return np.isin(offset, offsets)


class Band(SparseLayout):
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
        self.offsets = band_offsets(
            window, dilation, causal, n_queries=n_queries, n_keys=n_keys
        )
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
            allowed = self._global_allowed(allowed, keys[None])
        self.allowed = allowed  # (B or 1, Tq, K [+ 1])

    def key_index(self):
        """Each query's key at each offset, clipped to the keys: (Tq, K) int64
        (8 bytes a score: computed where a call needs it, not kept)."""
        keys = np.arange(self.n_queries, dtype=np.int64)[:, None] + self.offsets
        return np.clip(keys, 0, max(self.n_keys - 1, 0), out=keys)

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
            self._global_dots(out, a, b)
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
            self._global_weighted_sum(out, weights, b)
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
            self._global_scatter_sum(out, weights, a, n_keys)
        return out
