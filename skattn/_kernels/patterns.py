"""Attention patterns as objects: which keys each query reads.

A pattern is plain data, its constructor's parameters, with the
``get_params``/``set_params``, ``repr`` and equality that
:func:`sklearn.base.clone`, grid searches and the check of a fitted model's
structure need (as scikit-learn's Gaussian-process kernels are). The
estimators take one as ``attention_pattern``, the public kernels as
``pattern``. A pattern's ``_kernels_of`` gives the kernels of one call:
``forward``, ``backward`` and ``write_weights``, pure functions on arrays, as
:func:`~skattn._kernels.attention.attention_forward` and
:func:`~skattn._kernels.attention_backward.attention_backward`.

Full and banded attention are here; BigBird's block-sparse pattern is in
``block_sparse.py`` with its kernels.

Shape legend: N samples, H heads, T tokens, Dh head width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .._parallel import CACHE_BYTES, map_parallel
from .attention import attention_forward, causal_tile, mask_with_head_axis
from .attention_backward import attention_backward
from .band import band_covers, band_mask, band_sides
from .banded import BandedKernels
from .checks import check_int
from .sparse import BoundKernels


class AttentionPattern:
    """Base of the attention patterns: a pattern is its parameters.

    A subclass lists its constructor's parameters in ``_param_names`` and
    implements ``_allowed(n_tokens, causal)`` (the pairs of :meth:`mask`)
    and, for the model and the kernels, ``_kernels_of(*, lengths,
    global_index)`` (the kernels of one call: its sequences' lengths and
    global tokens), ``_score_floats(n_heads, causal, n_tokens,
    global_token)`` (the numbers a layer holds per token, for the memory
    estimate) and ``_check()`` (the errors of its parameters).
    """

    _param_names = ()

    def get_params(self, deep=True):
        """The pattern's parameters, as its constructor takes them.

        Parameters
        ----------
        deep : bool, default=True
            Unused: a pattern holds no estimator.

        Returns
        -------
        params : dict
        """
        return {name: getattr(self, name) for name in self._param_names}

    def set_params(self, **params):
        """Set the pattern's parameters.

        Parameters
        ----------
        **params : dict
            New values of the pattern's parameters, by name.

        Returns
        -------
        self : AttentionPattern
            The pattern.

        Raises
        ------
        ValueError
            For a name that is not a parameter of the pattern.
        """
        for name, value in params.items():
            if name not in self._param_names:
                raise ValueError(
                    f"{name!r} is not a parameter of {type(self).__name__}; its "
                    f"parameters are {', '.join(self._param_names) or 'none'}."
                )
            setattr(self, name, value)
        return self

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def __eq__(self, other):
        return type(self) is type(other) and self.get_params() == other.get_params()

    def __hash__(self):
        return hash((type(self).__name__, tuple(self.get_params().items())))

    def _check(self):
        """Raise a ``TypeError`` or ``ValueError`` naming a parameter of a
        value the pattern cannot take; returns the pattern."""
        return self

    def mask(self, n_tokens, *, causal=False):
        """The pairs the pattern allows in a sequence, as a boolean mask.

        Parameters
        ----------
        n_tokens : int
            Tokens of the sequence.
        causal : bool, default=False
            Whether a token attends only to itself and the tokens before it.

        Returns
        -------
        mask : ndarray of bool of shape (n_tokens, n_tokens)
            True where query ``i`` may read key ``j``: the mask the full
            kernel would need to compute what the pattern computes (the
            estimators' global class token aside).
        """
        allowed = self._allowed(int(n_tokens), bool(causal))
        return np.tril(allowed) if causal else allowed


class FullAttention(AttentionPattern):
    """Every query reads every key: the standard attention of Vaswani et al.

    Time quadratic in the length, memory linear (the kernels run in tiles of
    queries).

    Examples
    --------
    >>> from skattn.patterns import FullAttention
    >>> FullAttention().mask(3)
    array([[ True,  True,  True],
           [ True,  True,  True],
           [ True,  True,  True]])
    """

    def _kernels_of(self, *, lengths=None, global_index=None):
        """The kernels of one call (every key reads every key: the lengths
        and the global token change nothing the mask does not)."""
        return FullKernels()

    def _score_floats(self, n_heads, causal, n_tokens, global_token):
        """Numbers per token of the scores while a layer runs on sequences of
        ``n_tokens`` (one row per head: the kernels run in tiles), and the
        extra copies of the queries, keys and values (in units of the model
        width)."""
        return n_heads, 0

    def _allowed(self, n_tokens, causal):
        """The pairs of :meth:`mask`, before ``causal``."""
        return np.ones((n_tokens, n_tokens), dtype=bool)


class FullKernels(BoundKernels):
    """The dense kernels, as a pattern's kernels (no argument to bind)."""

    _forward = staticmethod(attention_forward)
    _backward = staticmethod(attention_backward)

    def arguments(self):
        """None: the dense kernels read the mask alone."""
        return {}

    def write_weights(self, q, k, mask, causal, out):
        """The attention weights (without dropout), written into ``out``
        (see :func:`write_attention_weights`)."""
        write_attention_weights(q, k, mask, causal, out)


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


class BandedAttention(AttentionPattern):
    """Longformer's sliding window, dilated: each query reads ``window`` keys
    around it, every ``dilation``-th token.

    Query ``i`` reads key ``j`` when ``i - j`` is a multiple of ``dilation``
    and ``|i - j| <= (window // 2) * dilation`` (with ``causal``: ``0 <= i -
    j <= (window - 1) * dilation``). Time and memory ``O(T * window)``. In
    the estimators, the class token of ``pooling="cls"`` is global: it reads
    every token and every token reads it.

    Parameters
    ----------
    window : int
        Keys of the band: ``window // 2`` each side and the query (with
        ``causal``: the query and ``window - 1`` before it).
    dilation : int, default=1
        Gap between two keys of the band.

    Examples
    --------
    >>> from skattn.patterns import BandedAttention
    >>> BandedAttention(window=3).mask(4).astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0],
           [0, 1, 1, 1],
           [0, 0, 1, 1]])

    Reference: I. Beltagy, M. E. Peters, A. Cohan, "Longformer: The
    Long-Document Transformer", 2020.
    """

    _param_names = ("window", "dilation")

    def __init__(self, window, dilation=1):
        self.window = window
        self.dilation = dilation

    def _check(self):
        """Raise unless ``window`` and ``dilation`` are ints >= 1."""
        check_int(self.window, "window", 1)
        check_int(self.dilation, "dilation", 1)
        return self

    def _kernels_of(self, *, lengths=None, global_index=None):
        """The banded kernels of one call, with its global tokens (the key
        padding mask holds the lengths)."""
        return BandedKernels(
            int(self.window), int(self.dilation), global_index=global_index
        )

    def _score_floats(self, n_heads, causal, n_tokens, global_token):
        """Numbers per token of the scores and their companions (multipliers,
        gradients) while a layer runs on sequences of ``n_tokens``, and the
        flattened queries, keys and values (in units of the model width,
        returned apart): those of full attention for a band that covers the
        sequence, which the dense kernel computes."""
        band = (self.window, self.dilation, causal, n_tokens, n_tokens)
        if band_covers(*band):
            return FullAttention()._score_floats(n_heads, causal, n_tokens, False)
        before, after, _ = band_sides(*band)
        n_keys = before + after + 1
        return 3 * n_heads * (n_keys + global_token), 3

    def _allowed(self, n_tokens, causal):
        """The pairs of :meth:`mask` (the causal band with ``causal``)."""
        return band_mask(n_tokens, n_tokens, self.window, self.dilation, causal)


def resolve_pattern(pattern, window, dilation, names=("pattern", "window", "dilation")):
    """The pattern of a call: ``pattern``, or the band of ``window`` and
    ``dilation`` (its shorthand), or None for full attention; checked.

    Parameters
    ----------
    pattern : AttentionPattern or None
    window : int or None
    dilation : int
    names : (str, str, str), default=("pattern", "window", "dilation")
        The names of the three arguments in the caller's signature (the
        estimators': ``attention_pattern``, ``attention_window``,
        ``attention_dilation``), for the messages.

    Raises
    ------
    TypeError
        For a ``pattern`` that is not an :class:`AttentionPattern`, or a
        window or dilation that is not an int.
    ValueError
        For a ``pattern`` given with a band, or of parameters it cannot take.
    """
    pattern_name, window_name, dilation_name = names
    check_int(dilation, dilation_name, 1)
    if pattern is None:
        if window is None:
            return None
        check_int(window, window_name, 1, or_none=True)
        return BandedAttention(int(window), int(dilation))
    if not isinstance(pattern, AttentionPattern):
        raise TypeError(
            f"{pattern_name} must be an attention pattern of skattn.patterns "
            f"(such as BandedAttention(window=65)) or None, got {pattern!r}."
        )
    if window is not None or dilation != 1:
        raise ValueError(
            f"{pattern_name}={pattern!r} is given with {window_name}={window!r} "
            f"and {dilation_name}={dilation!r}: those two are the shorthand of "
            f"{pattern_name}=BandedAttention(window, dilation). Set "
            f"{window_name}=None and {dilation_name}=1, or {pattern_name}=None."
        )
    return pattern._check()
