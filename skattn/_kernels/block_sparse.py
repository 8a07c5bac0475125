"""Block-sparse attention with random blocks: BigBird's pattern.

The tokens are cut into blocks of ``block_size``. The queries of block ``n``
read the keys of the blocks of a window around it (``window_blocks // 2``
each side, or with ``causal`` the block and the ``window_blocks - 1`` before
it) and of ``n_random_blocks`` more blocks drawn at random from the rest of
the sequence (with ``causal``, from the blocks before the window), combined
with ``mask`` and, with ``causal``, with ``j <= i``. One token per sequence
may be global, as in the banded kernels (the class token of
``pooling="cls"``: :mod:`skattn._kernels.sparse`). Each query reads ``K =
(window + n_random_blocks) * block_size`` keys: time and memory ``O(T * K)``.

The random blocks are a pure function of the ``seed``, the query block, the
draw and the number of blocks of the sequence's own length
(:func:`key_blocks`): the same whatever the batch, its padding, the heads or
the layers, and for any length. A sequence of no more blocks than a query
reads is read whole: full attention over its valid keys, which the dense
kernel computes.

The result equals the dense kernel
(:func:`~skattn._kernels.attention.attention_forward`) given the layout (with
the global token's row and column) as its boolean mask, to float rounding.
Numpy on arrays (:func:`~skattn._kernels.sparse.sparse_forward`): the products
of a query block and the key blocks it reads are batched matrix products.

Shape legend: B attentions (the batch axes flattened), T tokens (queries and
keys), n blocks of ``b = block_size`` tokens, m key blocks a query block
reads, K = m * b, D head width.

Reference: M. Zaheer et al., "Big Bird: Transformers for Longer Sequences",
NeurIPS 2020.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from .attention import attention_forward, default_scale, score_exponents, value_exponent
from .checks import check_int
from .dropout import mix64
from .patterns import AttentionPattern
from .sparse import (
    BLOCK_BYTES,
    BoundKernels,
    SparseLayout,
    dense_backward,
    prepare,
    renormalised_rows,
    sparse_backward,
    sparse_forward,
)

# Bits of a query block's index in the hash of a random draw.
_DRAW_BITS = 16


def window_sides(window_blocks, causal):
    """Blocks of the window before and after a query's own block."""
    if causal:
        return window_blocks - 1, 0
    return window_blocks // 2, window_blocks // 2


def key_blocks(n_blocks, lengths, layout, causal):
    """The key blocks each query block of each sequence reads.

    Parameters
    ----------
    n_blocks : int
        Blocks of the padded length.
    lengths : ndarray of int of shape (B,)
        Valid tokens of each sequence: its random blocks are drawn among its
        own ``ceil(length / block_size)`` blocks.
    layout : (int, int, int, int)
        ``block_size``, ``window_blocks``, ``n_random_blocks`` and the seed.
    causal : bool

    Returns
    -------
    blocks : ndarray of int64 of shape (B, n_blocks, m)
        The window's blocks (in order), then the random ones; -1 where a
        block is outside the sequence or there are fewer blocks to draw from
        than ``n_random_blocks``. The blocks of a row are distinct.
    """
    block_size = layout[0]
    valid = -(-np.asarray(lengths, dtype=np.int64) // block_size)
    distinct, inverse = np.unique(valid, return_inverse=True)
    table = np.stack(
        [_sequence_blocks(n_blocks, int(n), layout, causal) for n in distinct]
    )
    return table[inverse.reshape(-1)]


def _sequence_blocks(n_blocks, n_valid, layout, causal):
    """:func:`key_blocks` of a sequence of ``n_valid`` blocks: (n_blocks, m).

    The random blocks of query block ``i`` are a uniform draw without
    replacement of ``r`` of its ``c`` candidates (Floyd's algorithm: draw
    ``s`` picks ``t`` in ``[0, c - r + s]``, or ``c - r + s`` itself if ``t``
    was picked), ``t`` the hash of (seed, ``i``, ``s``)."""
    _, window_blocks, n_random, seed = layout
    before, after = window_sides(window_blocks, causal)
    query = np.arange(n_blocks, dtype=np.int64)[:, None]  # (n, 1)
    window = query + np.arange(-before, after + 1)  # (n, W)
    window = np.where((window >= 0) & (window < n_valid), window, -1)
    low = np.maximum(query[:, 0] - before, 0)
    high = np.minimum(query[:, 0] + after, n_valid - 1)
    width = np.maximum(high - low + 1, 0)  # window blocks inside the sequence
    # candidates: the sequence's blocks outside the window (causal: before it)
    n_candidates = np.minimum(low, n_valid) if causal else n_valid - width
    key = mix64(np.array([seed], dtype=np.uint64))
    chosen = np.full((n_blocks, n_random), -1, dtype=np.int64)
    for draw in range(n_random):
        top = n_candidates - n_random + draw  # draw in [0, top]
        counter = (query[:, 0].astype(np.uint64) << np.uint64(_DRAW_BITS)) | np.uint64(
            draw
        )
        hashed = mix64(key ^ counter)
        pick = (hashed % np.maximum(top + 1, 1).astype(np.uint64)).astype(np.int64)
        taken = (chosen[:, :draw] == pick[:, None]).any(axis=1)
        chosen[:, draw] = np.where(top < 0, -1, np.where(taken, top, pick))
    if not causal:  # candidate t is block t before the window, t + width after
        chosen = np.where(chosen >= low[:, None], chosen + width[:, None], chosen)
    random = np.where(chosen >= 0, chosen, -1)
    return np.concatenate([window, random], axis=1)


def reads_whole(n_tokens, block_size, window_blocks, n_random_blocks, causal):
    """Whether each query block reads every block of a sequence of
    ``n_tokens`` (every block up to its own with ``causal``): then the
    pattern is full attention over the valid keys."""
    before, after = window_sides(window_blocks, causal)
    n_blocks = -(-n_tokens // block_size)
    return n_blocks <= before + after + 1 + n_random_blocks


class BlockLayout(SparseLayout):
    """One block-sparse call on flattened batches.

    Parameters
    ----------
    n_tokens : int
    block_size : int
    blocks : ndarray of int64 of shape (B, n, m)
        The key blocks of each query block (:func:`key_blocks`).
    lengths : ndarray of int of shape (B,)
        Valid keys of each attention: no key at or past it is read.
    causal : bool
    mask : ndarray of bool of shape (B, 1 or T, T), or None
    glob : ndarray of int of shape (B,), or None
        The global token of each attention (an index past the keys: none).
    """

    def __init__(self, n_tokens, block_size, blocks, lengths, causal, mask, glob):
        self.n_queries = self.n_keys = n_tokens
        self.block_size = block_size
        self.causal, self.mask, self.glob = causal, mask, glob
        n_batch, n_blocks, _ = blocks.shape
        # a trash block past the last one stands for the slots of no block
        self.blocks = np.where(blocks >= 0, blocks, n_blocks)
        keys = self.key_index(clip=False)  # (B, T, K)
        # the keys of the slots that hold a block, before each sequence's length
        inside = (blocks >= 0).repeat(block_size, axis=-1)  # (B, n, K)
        allowed = inside[:, np.arange(n_tokens) // block_size]  # (B, T, K)
        allowed &= keys < np.minimum(np.asarray(lengths), n_tokens)[:, None, None]
        np.clip(keys, 0, max(n_tokens - 1, 0), out=keys)
        if mask is not None:
            rows = 0 if mask.shape[1] == 1 else np.arange(n_tokens)[:, None]
            allowed &= mask[np.arange(n_batch)[:, None, None], rows, keys]
        if causal:
            allowed &= keys <= np.arange(n_tokens)[:, None]
        if glob is not None:
            allowed = self._global_allowed(allowed, keys)
        self.allowed = allowed  # (B, T, K [+ 1])

    def key_index(self, clip=True):
        """Each query's keys (with ``clip``, clipped to the sequence): (B, T,
        K) int64 (8 bytes a score: computed where a call needs it, not
        kept)."""
        size = self.block_size
        keys = self.blocks[..., None] * size + np.arange(size)  # (B, n, m, b)
        keys = keys.reshape(keys.shape[0], keys.shape[1], -1)  # (B, n, K)
        keys = keys[:, np.arange(self.n_queries) // size]
        if clip:
            np.clip(keys, 0, max(self.n_keys - 1, 0), out=keys)
        return keys

    def _as_blocks(self, array):
        """``array`` (B, T, D) as blocks (B, n + 1, b, D), zero past the
        sequence and in the trash block."""
        n_batch, n_tokens, width = array.shape
        n_blocks = self.blocks.shape[1]
        padded = np.zeros(
            (n_batch, (n_blocks + 1) * self.block_size, width), array.dtype
        )
        padded[:, :n_tokens] = array
        return padded.reshape(n_batch, n_blocks + 1, self.block_size, width)

    def _chunks(self, n_batch, width, itemsize):
        """Query blocks ``(n0, n1)`` whose gathered keys hold about
        ``BLOCK_BYTES`` at a time, at least one block."""
        n_blocks, n_slots = self.blocks.shape[1:]
        block_bytes = n_batch * n_slots * self.block_size * width * itemsize
        size = max(1, BLOCK_BYTES // max(block_bytes, 1))
        return [(n, min(n + size, n_blocks)) for n in range(0, n_blocks, size)]

    def _gathered(self, blocks_of_b, n0, n1):
        """The key blocks query blocks ``n0:n1`` read: (B, n1 - n0, K, D)."""
        n_batch = len(blocks_of_b)
        index = self.blocks[:, n0:n1]  # (B, c, m)
        gathered = blocks_of_b[np.arange(n_batch)[:, None, None], index]
        n_read = index.shape[-1] * self.block_size
        return gathered.reshape(n_batch, n1 - n0, n_read, blocks_of_b.shape[-1])

    def _rows(self, array, n0, n1):
        """Rows of query blocks ``n0:n1`` of ``array`` (B, T, X) as (B, c, b,
        X), zero past the sequence."""
        size, n_tokens = self.block_size, self.n_queries
        r0, r1 = n0 * size, min(n1 * size, n_tokens)
        rows = array[:, r0:r1]
        if r1 - r0 < (n1 - n0) * size:  # the last block, cut by the sequence
            shape = (len(array), (n1 - n0) * size - (r1 - r0)) + array.shape[2:]
            rows = np.concatenate([rows, np.zeros(shape, array.dtype)], axis=1)
        return rows.reshape(len(array), n1 - n0, size, *array.shape[2:])

    def _put_rows(self, out, values, n0, n1):
        """Write (B, c, b, X) ``values`` into rows of query blocks ``n0:n1``."""
        size = self.block_size
        r0, r1 = n0 * size, min(n1 * size, self.n_queries)
        flat = values.reshape(len(values), (n1 - n0) * size, values.shape[-1])
        out[:, r0:r1, : flat.shape[-1]] = flat[:, : r1 - r0]

    def dots(self, a, b, scale=1.0):
        """``scale * a_i . b_j`` of each query and its keys: (B, T, K [+ 1])."""
        n_batch = len(a)
        out = np.zeros((n_batch, self.n_queries, self.allowed.shape[-1]), a.dtype)
        b_blocks = self._as_blocks(b)
        for n0, n1 in self._chunks(n_batch, b.shape[-1], b.itemsize):
            keys = self._gathered(b_blocks, n0, n1)  # (B, c, K, D)
            products = self._rows(a, n0, n1) @ keys.swapaxes(-1, -2)  # (B, c, b, K)
            self._put_rows(out, products, n0, n1)
        if self.glob is not None:
            self._global_dots(out, a, b)
        out *= scale
        return out

    def weighted_sum(self, weights, b):
        """``sum over a query's keys j of weights[:, i, j] * b[:, j]``: (B, T,
        D)."""
        n_batch, n_keys = len(weights), self.blocks.shape[-1] * self.block_size
        out = np.zeros((n_batch, self.n_queries, b.shape[-1]), b.dtype)
        b_blocks = self._as_blocks(b)
        for n0, n1 in self._chunks(n_batch, b.shape[-1], b.itemsize):
            values = self._gathered(b_blocks, n0, n1)  # (B, c, K, D)
            rows = self._rows(weights[..., :n_keys], n0, n1)  # (B, c, b, K)
            self._put_rows(out, rows @ values, n0, n1)
        if self.glob is not None:
            self._global_weighted_sum(out, weights, b)
        return out

    def scatter_sum(self, weights, a, n_keys):
        """``out[:, j] = sum over the queries i that read key j of
        weights[:, i, j] * a[:, i]``: (B, Tk, D)."""
        n_batch, n_blocks, n_slots = len(weights), *self.blocks.shape[1:]
        size, width = self.block_size, a.shape[-1]
        out = np.zeros((n_batch, n_blocks + 1, size, width), a.dtype)
        batch = np.arange(n_batch)[:, None]
        n_read = self.blocks.shape[-1] * size
        for n0, n1 in self._chunks(n_batch, width, a.itemsize):
            rows = self._rows(weights[..., :n_read], n0, n1)  # (B, c, b, K)
            sums = rows.swapaxes(-1, -2) @ self._rows(a, n0, n1)  # (B, c, K, D)
            sums = sums.reshape(
                n_batch, n1 - n0, n_slots, size, width
            )  # (B, c, m, b, D)
            for slot in range(self.blocks.shape[-1]):
                np.add.at(out, (batch, self.blocks[:, n0:n1, slot]), sums[:, :, slot])
        out = out.reshape(n_batch, (n_blocks + 1) * size, width)[:, :n_keys]
        if self.glob is not None:
            self._global_scatter_sum(out, weights, a, n_keys)
        return out


def block_sparse_forward(
    q,
    k,
    v,
    *,
    layout,
    lengths=None,
    mask=None,
    causal=False,
    scale=None,
    return_weights=False,
    dropout=None,
    global_index=None,
):
    """BigBird's block-sparse attention, keeping what the backward pass needs.

    Parameters
    ----------
    q, k : ndarray of shape (..., T, D)
    v : ndarray of shape (..., T, Dv)
        Queries, keys and values of self-attention, in one floating dtype.
    layout : (int, int, int, int)
        ``block_size``, ``window_blocks``, ``n_random_blocks`` and the seed of
        the random blocks.
    lengths : array-like of int, default=None
        Valid tokens of each sequence, broadcastable to the leading batch
        axes: the random blocks are drawn among its own blocks, and no key at
        or past it is read. None: every token of every sequence.
    mask : ndarray of bool, broadcastable to (..., T, T), default=None
        True where a query may attend to a key; combined with the layout.
    causal : bool, default=False
    scale : float, default=None
        None: ``1 / sqrt(D)``.
    return_weights : bool, default=False
        Also return the dense weights ``(..., T, T)``, zero outside the layout.
    dropout : None or (float, ndarray of uint64), default=None
        As :func:`~skattn._kernels.attention.attention_forward`'s.
    global_index : array-like of int, default=None
        The global token of each attention, broadcastable to the leading batch
        axes; an index past the keys: none.

    Returns
    -------
    out : ndarray of shape (..., T, Dv)
    lse : ndarray of shape (..., T)
    weights : ndarray of shape (..., T, T) or None
    """
    call = _Call(q, k, v, (), layout, lengths, mask, causal, dropout, global_index)
    if call.whole:
        return attention_forward(
            q,
            k,
            v,
            mask=call.whole_mask(mask),
            causal=causal,
            scale=scale,
            return_weights=return_weights,
            dropout=dropout,
        )
    q, k, v = call.flat
    scale = q.dtype.type(default_scale(q.shape[-1]) if scale is None else scale)
    out, lse, weights = sparse_forward(
        call.layout(),
        q,
        k,
        v,
        scale=scale,
        dropout=call.dropout,
        exponent=score_exponents(q, k, scale),
        v_exponent=value_exponent(v, k.shape[1]),
        weights=return_weights,
    )
    shape = call.batch_shape + (q.shape[1],)
    out = out.reshape(shape + (v.shape[-1],))
    if weights is not None:
        weights = weights.reshape(shape + (k.shape[1],))
    return out, lse.reshape(shape), weights


def block_sparse_backward(
    d_out,
    q,
    k,
    v,
    out,
    lse,
    *,
    layout,
    lengths=None,
    mask=None,
    causal=False,
    scale=None,
    dropout=None,
    global_index=None,
):
    """Gradients of :func:`block_sparse_forward` with respect to ``q``, ``k``,
    ``v``: the recomputed probabilities of
    :func:`~skattn._kernels.sparse.sparse_backward`.

    Parameters
    ----------
    d_out : ndarray of shape (..., T, Dv)
        Gradient of the loss with respect to ``out``.
    q, k, v, out, lse
        The inputs and results of :func:`block_sparse_forward`.
    layout, lengths, mask, causal, scale, dropout, global_index
        As given to :func:`block_sparse_forward`.

    Returns
    -------
    d_q, d_k, d_v : ndarray of shape batch + (T, D), batch + (T, D), batch +
        (T, Dv), with batch the broadcast batch shape.
    """
    extra = (d_out, out, lse[..., None])
    call = _Call(q, k, v, extra, layout, lengths, mask, causal, dropout, global_index)
    if call.whole:
        return dense_backward(
            d_out,
            q,
            k,
            v,
            out,
            lse,
            mask=call.whole_mask(mask),
            causal=causal,
            scale=scale,
            dropout=dropout,
        )
    q, k, v, d_out, out, lse = call.flat
    lse = lse[..., 0]
    scale = q.dtype.type(default_scale(q.shape[-1]) if scale is None else scale)
    exponent = score_exponents(q, k, scale)
    grads = sparse_backward(
        call.layout(),
        d_out,
        q,
        k,
        v,
        out,
        lse,
        scale=scale,
        dropout=call.dropout,
        exponent=exponent,
        renormalise=renormalised_rows(q, k, lse, scale, exponent),
    )
    return tuple(g.reshape(call.batch_shape + g.shape[1:]) for g in grads)


class _Call:
    """The arguments of one block-sparse call, flattened to B attentions."""

    def __init__(self, q, k, v, extra, layout, lengths, mask, causal, dropout, glob):
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                "Block-sparse attention is self-attention: it needs as many "
                f"queries as keys, got {q.shape[-2]} and {k.shape[-2]}."
            )
        self.n_tokens, self.causal = k.shape[-2], causal
        self.layout_args = layout
        self.whole = reads_whole(self.n_tokens, *layout[:3], causal)
        self.lengths = lengths
        if self.whole:
            return
        prepared = prepare(q, k, v, extra, mask, dropout, glob, lengths)
        self.batch_shape, self.flat, self.mask, self.dropout = prepared[:4]
        self.glob, flat_lengths = prepared[4:]
        if flat_lengths is None:
            flat_lengths = np.full(len(self.flat[0]), self.n_tokens, dtype=np.int64)
        self.flat_lengths = np.minimum(flat_lengths, self.n_tokens)

    def whole_mask(self, mask):
        """The dense kernel's mask of a sequence read whole: ``mask`` and the
        keys before each sequence's length."""
        if self.lengths is None:
            return mask
        lengths = np.asarray(self.lengths, dtype=np.int64)
        valid = np.arange(self.n_tokens) < lengths[..., None]  # (..., T)
        valid = valid[..., None, :]  # (..., 1, T): every query
        return valid if mask is None else mask & valid

    def layout(self):
        """The :class:`BlockLayout` of the call."""
        block_size = self.layout_args[0]
        n_blocks = math.ceil(self.n_tokens / block_size)
        blocks = key_blocks(n_blocks, self.flat_lengths, self.layout_args, self.causal)
        return BlockLayout(
            self.n_tokens,
            block_size,
            blocks,
            self.flat_lengths,
            self.causal,
            self.mask,
            self.glob,
        )


class BlockSparseKernels(BoundKernels):
    """The block-sparse kernels with their layout fixed: the ``pattern`` that
    :func:`~skattn._kernels.multi_head.multi_head_forward` and its backward
    pass take.

    Parameters
    ----------
    layout : (int, int, int, int)
        As :func:`block_sparse_forward`'s.
    lengths, global_index : array-like of int, default=None
        As :func:`block_sparse_forward`'s.
    """

    per_sequence = ("lengths", "global_index")
    _forward = staticmethod(block_sparse_forward)
    _backward = staticmethod(block_sparse_backward)

    def __init__(self, layout, lengths=None, global_index=None):
        self.layout = layout
        self.lengths, self.global_index = lengths, global_index

    def arguments(self):
        """``layout``, ``lengths`` and ``global_index``."""
        return dict(
            layout=self.layout, lengths=self.lengths, global_index=self.global_index
        )


class BigBirdAttention(AttentionPattern):
    """BigBird's block-sparse pattern: a window of blocks and random blocks.

    The tokens are cut into blocks of ``block_size``. The queries of a block
    read the keys of ``window_blocks`` blocks around it (``window_blocks //
    2`` each side; with ``causal``, the block and the ``window_blocks - 1``
    before it) and of ``n_random_blocks`` blocks drawn at random from the
    rest of the sequence (with ``causal``, from the blocks before the
    window). Time and memory ``O(T * (window_blocks + n_random_blocks) *
    block_size)``: linear in the length. In the estimators, the class token
    of ``pooling="cls"`` is global: it reads every token and every token
    reads it (BigBird's global tokens). A sequence of no more blocks than a
    query reads is read whole (full attention).

    The random blocks of a query block depend on ``seed``, its index and the
    number of blocks of its sequence's own length, never on the batch, its
    padding, the head or the layer.

    Parameters
    ----------
    block_size : int, default=64
        Tokens of a block.
    window_blocks : int, default=3
        Blocks of the window around a query's block, its own included.
    n_random_blocks : int, default=3
        Blocks each query block reads at random.
    seed : int or None, default=None
        Seed of the random blocks. None: the estimators draw it from their
        ``random_state`` at ``fit`` (kept in the fitted model); the public
        kernels use 0.

    Examples
    --------
    >>> from skattn.patterns import BigBirdAttention
    >>> pattern = BigBirdAttention(block_size=2, window_blocks=1,
    ...                            n_random_blocks=1, seed=1)
    >>> pattern.mask(8).astype(int)
    array([[1, 1, 0, 0, 0, 0, 1, 1],
           [1, 1, 0, 0, 0, 0, 1, 1],
           [0, 0, 1, 1, 1, 1, 0, 0],
           [0, 0, 1, 1, 1, 1, 0, 0],
           [0, 0, 0, 0, 1, 1, 1, 1],
           [0, 0, 0, 0, 1, 1, 1, 1],
           [0, 0, 1, 1, 0, 0, 1, 1],
           [0, 0, 1, 1, 0, 0, 1, 1]])

    Reference: M. Zaheer et al., "Big Bird: Transformers for Longer
    Sequences", NeurIPS 2020.
    """

    _param_names = ("block_size", "window_blocks", "n_random_blocks", "seed")

    def __init__(self, block_size=64, window_blocks=3, n_random_blocks=3, seed=None):
        self.block_size = block_size
        self.window_blocks = window_blocks
        self.n_random_blocks = n_random_blocks
        self.seed = seed

    def _check(self):
        """Raise unless the sizes are ints (``block_size`` and
        ``window_blocks`` >= 1, ``n_random_blocks`` >= 0) and ``seed`` is
        None or an int in ``[0, 2**63)``."""
        check_int(self.block_size, "block_size", 1)
        check_int(self.window_blocks, "window_blocks", 1)
        check_int(self.n_random_blocks, "n_random_blocks", 0)
        if self.seed is not None:
            check_int(self.seed, "seed", 0)
            if self.seed >= 2**63:
                raise ValueError(f"seed must be < 2**63, got {self.seed}.")
        return self

    def _layout(self):
        """``(block_size, window_blocks, n_random_blocks, seed)`` as ints."""
        seed = 0 if self.seed is None else self.seed
        return (
            int(self.block_size),
            int(self.window_blocks),
            int(self.n_random_blocks),
            int(seed),
        )

    def _kernels_of(self, *, lengths=None, global_index=None):
        """The block-sparse kernels of one call, with each sequence's length
        and global token."""
        return BlockSparseKernels(self._layout(), lengths, global_index)

    def _score_floats(self, n_heads, causal, n_tokens, global_token):
        """Numbers per token of the scores, their companions and the keys'
        indices while a layer runs on sequences of ``n_tokens``, and the
        copies of the queries, keys and values (in units of the model width):
        those of full attention for a sequence read whole."""
        block_size, window_blocks, n_random, _ = self._layout()
        if reads_whole(n_tokens, block_size, window_blocks, n_random, causal):
            return n_heads, 0
        before, after = window_sides(window_blocks, causal)
        n_keys = (before + after + 1 + n_random) * block_size
        return 4 * n_heads * (n_keys + global_token), 4

    def _allowed(self, n_tokens, causal):
        """The pairs of :meth:`mask`, before ``causal``."""
        layout = self._layout()
        block_size = layout[0]
        if reads_whole(n_tokens, *layout[:3], causal):
            return np.ones((n_tokens, n_tokens), dtype=bool)
        n_blocks = -(-n_tokens // block_size)
        blocks = key_blocks(n_blocks, np.array([n_tokens]), layout, causal)[0]
        allowed = np.zeros((n_blocks, n_blocks + 1), dtype=bool)
        np.put_along_axis(allowed, np.where(blocks >= 0, blocks, n_blocks), True, 1)
        allowed = allowed[:, :n_blocks].repeat(block_size, 0).repeat(block_size, 1)
        return allowed[:n_tokens, :n_tokens]
