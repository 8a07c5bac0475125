"""Attention patterns: which keys each query reads, and the kernels for it.

A pattern is the attention step of :class:`~skattn._model.encoder.SelfAttention`,
between the projections (and a positional encoding's query/key transform) and
the output projection. ``at(context)`` gives the pattern of one batch, with
the kernels of that step, pure functions on arrays (``forward`` and
``backward``, as
:func:`~skattn._kernels.attention.attention_forward` and
:func:`~skattn._kernels.attention_backward.attention_backward`), and
``write_weights``, the dense weights behind ``attention_weights``. The
patterns are listed in the registry ``ATTENTION_PATTERNS`` of ``options.py``.

Shape legend: N samples, H heads, T tokens, Dh head width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .._kernels.attention import attention_forward, causal_tile
from .._kernels.attention_backward import attention_backward
from .._kernels.band import band_covers, band_sides
from .._kernels.banded import BandedKernels, banded_forward
from .._kernels.multi_head import mask_with_head_axis
from .._parallel import CACHE_BYTES, map_parallel


class FullAttention:
    """Every query reads every (valid, and with ``causal`` earlier) key:
    time quadratic in the length, memory linear (the kernels run in tiles)."""

    def forward(self, q, k, v, *, mask, causal, return_weights, dropout):
        """See :func:`~skattn._kernels.attention.attention_forward`."""
        return attention_forward(
            q,
            k,
            v,
            mask=mask,
            causal=causal,
            return_weights=return_weights,
            dropout=dropout,
        )

    def backward(self, d_context, q, k, v, context, lse, *, mask, causal, dropout):
        """See :func:`~skattn._kernels.attention_backward.attention_backward`."""
        return attention_backward(
            d_context, q, k, v, context, lse, mask=mask, causal=causal, dropout=dropout
        )

    def write_weights(self, q, k, mask, causal, out):
        """The attention weights (without dropout), written into ``out``
        (see :func:`write_attention_weights`)."""
        write_attention_weights(q, k, mask, causal, out)

    def at(self, context):
        """The pattern of one batch: the same for every batch."""
        return self

    def score_floats(self, n_heads, causal, n_tokens):
        """Numbers per token of the scores while a layer runs on sequences of
        ``n_tokens`` (one row per head: the kernels run in tiles), and extra
        copies of the queries, keys and values (in units of the model
        width)."""
        return n_heads, 0


def write_attention_weights(q, k, mask, causal, out):
    """Attention weights of self-attention (without dropout), written into ``out``.

    A block of query rows at a time: the weights of one long sequence are as
    large as ``out`` (``H * T**2`` numbers), so computing them whole and then
    copying them took twice its memory. A block holds at most about
    ``CACHE_BYTES``; as many blocks run at once as the kernel runs tiles.

    Parameters
    ----------
    q, k : ndarray of shape (N, H, T, Dh)
        Queries and keys of the heads (as :func:`multi_head_forward` caches them).
    mask : ndarray of bool of shape (N, 1, T) or None
        Key-padding mask, True for the valid keys of each row.
    causal : bool
        Whether query ``i`` attends only to keys ``j <= i``.
    out : ndarray of shape (N, H, T, T) or list of N ndarray of shape (H, T_i, T_i)
        Where each row's weights go: all of them, or those of its first
        ``T_i`` tokens (its valid tokens: those of padding are not written).
    """
    n_samples, n_heads, n_tokens = q.shape[:3]
    block_rows = max(1, CACHE_BYTES // (n_samples * n_heads * n_tokens * q.itemsize))
    key_mask = mask_with_head_axis(mask)  # (N, 1, 1, T) or None
    no_values = k[..., :0]  # only the weights are wanted

    def write_block(start):
        stop = min(start + block_rows, n_tokens)
        allowed = key_mask
        if causal:  # causal_tile of the block's own rows, as the kernel tiles it
            block_causal = causal_tile(start, stop, n_tokens)
            allowed = block_causal if mask is None else key_mask & block_causal
        _, _, weights = attention_forward(
            q[:, :, start:stop], k, no_values, mask=allowed, return_weights=True
        )  # (N, H, stop - start, T)
        if isinstance(out, np.ndarray):
            out[:, :, start:stop] = weights
            return
        for row_out, row_weights in zip(out, weights, strict=True):
            n_valid = row_out.shape[-1]
            if start < n_valid:
                rows = slice(start, min(stop, n_valid))
                row_out[:, rows] = row_weights[:, : rows.stop - start, :n_valid]

    # blocks side by side, as the kernel's tiles: each writes its own rows
    map_parallel(write_block, range(0, n_tokens, block_rows))


class BandedAttention:
    """Longformer's sliding window, dilated: each query reads ``window`` keys
    around it (every ``dilation``-th token), in time and memory ``O(T *
    window)`` (see :mod:`skattn._kernels.banded`).

    Parameters
    ----------
    window : int
        Keys of the band: ``window // 2`` each side and the query (with
        ``causal``: the query and ``window - 1`` before it).
    dilation : int, default=1
        Gap between two keys of the band.
    global_token : bool, default=False
        Whether the last valid token of each sequence (the class token) is
        global: it reads every token, and every token reads it.
    """

    def __init__(self, window, dilation=1, global_token=False):
        self.window, self.dilation = window, dilation
        self.global_token = global_token

    def at(self, context):
        """The pattern of one batch (its class tokens' positions)."""
        glob = None
        if self.global_token:
            glob = (np.asarray(context.lengths) - 1)[:, None]  # (N, 1): every head
        return _BandedCall(self.window, self.dilation, glob)

    def score_floats(self, n_heads, causal, n_tokens):
        """Numbers per token of the scores and their companions (multipliers,
        gradients) while a layer runs on sequences of ``n_tokens``, and the
        flattened queries, keys and values (in units of the model width,
        returned apart): those of full attention for a band that covers the
        sequence, which the dense kernel computes."""
        band = (self.window, self.dilation, causal, n_tokens, n_tokens)
        if band_covers(*band):
            return FullAttention().score_floats(n_heads, causal, n_tokens)
        before, after, _ = band_sides(*band)
        n_keys = before + after + 1
        return 3 * n_heads * (n_keys + self.global_token), 3


class _BandedCall(BandedKernels):
    """A banded pattern with the global tokens of one batch."""

    def write_weights(self, q, k, mask, causal, out):
        """The dense weights (zero outside the band), one sequence at a time,
        written into ``out`` (see :func:`write_attention_weights`)."""
        key_mask = mask_with_head_axis(mask)
        no_values = k[..., :0]
        for row in range(len(q)):
            glob = self.global_index
            _, _, weights = banded_forward(
                q[row : row + 1],
                k[row : row + 1],
                no_values[row : row + 1],
                window=self.window,
                dilation=self.dilation,
                mask=None if key_mask is None else key_mask[row : row + 1],
                causal=causal,
                return_weights=True,
                global_index=None if glob is None else glob[row : row + 1],
            )  # (1, H, T, T)
            if isinstance(out, np.ndarray):
                out[row] = weights[0]
            else:
                n_valid = out[row].shape[-1]
                out[row][...] = weights[0, :, :n_valid, :n_valid]
