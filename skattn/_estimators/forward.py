"""The attention estimators' fitted model on new sequences.

:class:`ForwardPass` is a mixin of
:class:`~skattn._estimators.base.BaseAttention`: the checks of new sequences
against the fitted model (``_check_sequences``, ``_check_lengths``), the
batched forward pass within ``working_memory`` behind the methods of every
kind of estimator, and the per-token methods every attention estimator has,
``transform_sequences`` and ``attention_weights``. It reads the fitted model
``_fitted`` that fitting (``base.py``) leaves, and the fitted attributes of
``attributes.py``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._input.formats import check_input
from .._input.validation import (
    batch_budget,
    check_finite_output,
    check_max_bytes,
    format_bytes,
)
from .._model.evaluate import forward_batches, per_token_outputs
from .._model.sequences import model_dtype, sequence_lengths
from .dask import blocked_outputs, is_dask_collection
from .resolve import check_lengths

# Default limit of the size of what attention_weights returns (its max_bytes):
# 1 GiB, as scikit-learn's default working_memory.
ATTENTION_WEIGHTS_MAX_BYTES = 2**30


class ForwardPass:
    """Mixin of the attention estimators: the fitted model on new sequences,
    their checks and the per-token methods."""

    # The forward pass
    # ----------------

    def _check_lengths(self, lengths, reset=False):
        """With a pooling of one length (``"flatten"``), every sequence has
        fit's length."""
        if reset:
            check_lengths(self.pooling, lengths)
        else:
            check_lengths(self._fitted.config.pooling, lengths, self.max_tokens_)

    def _check_sequences(self, X):
        """Validate X for a fitted estimator; return checked sequences."""
        check_is_fitted(self)
        sequences = check_input(self, X, reset=False)
        self._check_lengths(sequence_lengths(sequences))
        return sequences

    def _forward_batches(self, sequences):
        """The fitted model on batches within ``working_memory``: ``(rows,
        tokens, pooled)`` of each (see
        :func:`~skattn._model.evaluate.forward_batches`)."""
        params = self._fitted.cast(model_dtype(sequences))
        return forward_batches(self._fitted.model, params, sequences, batch_budget())

    def _per_token(self, X, layer=None, max_bytes=None):
        """Per-token outputs, or the attention weights of ``layer`` (checked),
        of at most ``max_bytes`` (see ``attention_weights``)."""
        check_max_bytes(max_bytes)
        sequences = self._check_sequences(X)
        model = self._fitted.model
        dtype = model_dtype(sequences)
        if layer is not None:
            n_tokens = model.token_lengths(sequence_lengths(sequences))
            self._check_weights_bytes(n_tokens, dtype, max_bytes)
        params = self._fitted.cast(dtype)
        out = per_token_outputs(model, params, sequences, batch_budget(), layer=layer)
        check_finite_output(self, out, sequences, self._scales_tokens())
        return out

    def _scales_tokens(self):
        """Whether the fitted model standardises its tokens."""
        return self._fitted.config.token_scale_shape is not None

    def _check_weights_bytes(self, n_tokens, dtype, max_bytes):
        """Raise before computing attention weights larger than ``max_bytes``."""
        n_bytes = self.n_heads_ * int(np.sum(n_tokens.astype(np.int64) ** 2))
        n_bytes *= dtype.itemsize
        if max_bytes is None or n_bytes <= max_bytes:
            return
        raise ValueError(
            f"attention_weights would return {format_bytes(n_bytes)} for "
            f"{len(n_tokens)} sequence(s) ({self.n_heads_} heads x n_tokens**2 "
            f"weights each, n_tokens up to {n_tokens.max()}, {dtype}), more than "
            f"max_bytes={max_bytes} ({format_bytes(max_bytes)}). Pass a larger "
            "max_bytes, or max_bytes=None for no limit, if the memory is there; "
            "or pass fewer or shorter sequences."
        )

    def _check_layer(self, layer):
        """The index in ``range(n_layers)`` of ``layer`` (negative counts back)."""
        check_is_fitted(self)
        n_layers = self._fitted.config.n_layers
        if not isinstance(layer, Integral) or not -n_layers <= layer < n_layers:
            raise ValueError(
                f"layer must be an integer in [-{n_layers}, {n_layers}) for a model "
                f"of {n_layers} layer(s), got {layer!r}."
            )
        return int(layer) % n_layers

    # The per-token methods of every attention estimator
    # --------------------------------------------------

    def transform_sequences(self, X):
        """Per-token outputs of the last layer (and final norm), before pooling.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the kind seen in fit.

        Returns
        -------
        tokens : ndarray of shape (n_samples, n_tokens, ``d_model_``) or list \
                of ndarray of shape (n_tokens_i, ``d_model_``)
            An array for table and 3D input, a list for a list of sequences. With
            ``pooling="cls"`` each sequence ends with the class token's output
            (``n_tokens + 1`` rows); with patches, one row per patch. One row
            per token whatever ``data_format``: with ``"channels_first"``, one
            per time point.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._estimators.dask)
            return blocked_outputs(self, "transform_sequences", X)
        return self._per_token(X)

    def attention_weights(self, X, *, layer=-1, max_bytes=ATTENTION_WEIGHTS_MAX_BYTES):
        """Attention weights of every head of one encoder layer.

        Row ``t`` of a head's matrix gives how much token ``t`` attends to each
        token; rows sum to 1.

        The result holds ``n_heads_ * n_tokens**2`` numbers per sequence: 12 GiB
        for one sequence of 20,000 tokens with 4 heads in float64. Its size is
        checked against ``max_bytes`` before anything is computed, and the
        weights are written straight into it, a block of rows at a time: the
        call needs little more memory than its result.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the kind seen in fit.

        layer : int, default=-1
            Which encoder layer, counted from 0 (negative values count from the
            last).

        max_bytes : int, float or None, default=2**30
            The largest result allowed, in bytes (1 GiB by default, as
            scikit-learn's default ``working_memory``): a larger one raises a
            ``ValueError`` naming its size before any work. Raise it when the
            memory is there; None for no limit.

        Returns
        -------
        weights : ndarray of shape (n_samples, n_heads, n_tokens, n_tokens) or \
                list of ndarray of shape (n_heads, n_tokens_i, n_tokens_i)
            An array for table and 3D input, a list for a list of sequences. With
            ``pooling="cls"`` the class token is the last token (``n_tokens + 1``);
            with patches, ``n_tokens`` counts patches. With
            ``data_format="channels_first"`` the tokens are the time points.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._estimators.dask)
            return blocked_outputs(
                self, "attention_weights", X, layer=layer, max_bytes=max_bytes
            )
        layer = self._check_layer(layer)
        return self._per_token(X, layer=layer, max_bytes=max_bytes)
