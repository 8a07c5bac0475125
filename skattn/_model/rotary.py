"""Rotary positions (RoFormer, Su et al. 2021): queries and keys rotated.

Nothing is added to the tokens. In every attention, after the projections,
each head's queries and keys are rotated in pairs of features by an angle
proportional to their token's position, so that the score of query ``i`` and
key ``j`` depends on the positions through ``i - j`` only.

Pairing: "rotate half", as GPT-NeoX and Hugging Face's Llama: feature ``m``
of a head of width ``Dh`` pairs with feature ``m + Dh / 2``, for ``m <
Dh / 2``, and the pair at position ``t`` turns by ``t * 10000**(-2m / Dh)``::

    a'[t, m]          = a[t, m] cos - a[t, m + Dh/2] sin
    a'[t, m + Dh/2]   = a[t, m + Dh/2] cos + a[t, m] sin

(the paper pairs neighbouring features ``2m, 2m + 1``: the same scores with
the head's features in another order). Positions are those of the padded
batch, ``0`` for each sequence's first token. Heads of an odd width are
refused.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .units import PositionalEncoding

ROTARY_BASE = 10000.0


def rotary_angles(n_tokens, head_dim):
    """Angle of each pair at each position, ``t * 10000**(-2m / head_dim)``.

    Returns
    -------
    angles : ndarray of shape (n_tokens, head_dim // 2), float64
    """
    frequency = ROTARY_BASE ** (-np.arange(0, head_dim, 2) / head_dim)
    return np.arange(n_tokens, dtype=np.float64)[:, None] * frequency


def rotate_half(a, cos, sin):
    """Pairs ``(m, m + Dh/2)`` of the last axis of ``a`` turned by the angles
    of ``cos`` and ``sin``.

    Parameters
    ----------
    a : ndarray of shape (..., T, Dh)
    cos, sin : ndarray of shape (T, Dh / 2)

    Returns
    -------
    ndarray of shape (..., T, Dh), a new array.
    """
    half = a.shape[-1] // 2
    first, second = a[..., :half], a[..., half:]
    out = np.empty(a.shape, a.dtype)
    out[..., :half] = first * cos - second * sin
    out[..., half:] = second * cos + first * sin
    return out


class Rotation:
    """The query/key transform of rotary positions (see
    :func:`skattn._kernels.multi_head.multi_head_forward`'s ``query_key``)."""

    def forward(self, q, k):
        """``q`` and ``k`` of shape (..., H, T, Dh) rotated; the cache holds
        the cosines and sines."""
        n_tokens, head_dim = q.shape[-2:]
        angles = rotary_angles(n_tokens, head_dim)  # (T, Dh/2)
        cos, sin = np.cos(angles).astype(q.dtype), np.sin(angles).astype(q.dtype)
        return rotate_half(q, cos, sin), rotate_half(k, cos, sin), (cos, sin)

    def backward(self, d_q, d_k, cache):
        """The gradients turned back: a rotation's transpose is its inverse."""
        cos, sin = cache
        return rotate_half(d_q, cos, -sin), rotate_half(d_k, cos, -sin)


class RotaryPositions(PositionalEncoding):
    """Rotary positions: the tokens unchanged, each attention's queries and
    keys rotated (:class:`Rotation`).

    Raises
    ------
    ValueError
        For heads of an odd width, whose features do not pair.
    """

    def __init__(self, n_positions, d_model, n_heads):
        super().__init__(n_positions, d_model, n_heads)
        head_dim = d_model // n_heads
        if head_dim % 2:
            raise ValueError(
                "positional_encoding='rotary' rotates the features of each head "
                f"in pairs: head_dim must be even, got head_dim={head_dim}."
            )

    def query_key_transform(self):
        return Rotation()
