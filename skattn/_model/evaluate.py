"""The model run over many sequences: batches within a memory budget.

:func:`forward_batches` runs a model over checked sequences a padded batch at
a time (side by side on the threads the BLAS limit allows, see
``skattn._parallel``), each batch within a budget of bytes the caller sets;
:func:`per_token_outputs` writes each sequence's per-token outputs, or one
layer's attention weights, into arrays allocated once. Pure numpy: the
estimators give the model, its parameters and the budget.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .._parallel import single_threaded_blas
from .sequences import (
    map_batches,
    model_dtype,
    sequence_lengths,
    token_width,
)


def model_row_bytes(model, sequences, *, training, dtype=None):
    """``row_bytes(n_tokens)`` of the model on these sequences (see
    ``Model.row_bytes``), computed in ``dtype`` (None: their
    :func:`~skattn._model.sequences.model_dtype`)."""
    n_features = token_width(sequences)
    itemsize = np.dtype(model_dtype(sequences) if dtype is None else dtype).itemsize

    def row_bytes(n_tokens):
        return model.row_bytes(
            n_tokens, n_features=n_features, itemsize=itemsize, training=training
        )

    return row_bytes


def forward_batches(
    model,
    params,
    sequences,
    budget_bytes,
    *,
    layer=None,
    weights_out=None,
):
    """Run the model on batches of at most ``budget_bytes``, in order.

    Parameters
    ----------
    model : Model
    params : dict of str to ndarray
        Its parameters, in the dtype of the sequences.
    sequences : ndarray of shape (n_samples, n_tokens, n_features) or list
        Checked sequences.
    budget_bytes : float
        Memory allowed per batch.
    layer : int or None, default=None
        Encoder layer whose attention weights to write into ``weights_out``.
    weights_out : ndarray or list of ndarray, default=None
        With ``layer``, the attention weights of all the samples: an array
        of shape (n_samples, H, T', T'), or one array of shape (H, T'_i, T'_i)
        per sample. Each batch writes its rows.

    Yields
    ------
    rows : ndarray of int
        Indices of the batch's samples.
    tokens : ndarray of shape (batch, T', E)
        Per-token outputs, padded.
    pooled : ndarray of shape (batch, n_pooled)
        Pooled outputs (see ``Model.forward``).
    """
    lengths = sequence_lengths(sequences)
    # the weights go straight to weights_out: a batch holds a block of them
    row_bytes = model_row_bytes(model, sequences, training=False)

    def run(rows, x):
        rows_out = None if layer is None else rows_of(weights_out, rows)
        tokens, pooled, _ = model.forward(
            params, x, lengths[rows], layer=layer, weights_out=rows_out
        )
        return rows, tokens, pooled

    rows = np.arange(len(lengths))
    yield from map_batches(run, sequences, lengths, rows, row_bytes, budget_bytes)


def per_token_outputs(model, params, sequences, budget_bytes, *, layer=None):
    """Per-token outputs, or the attention weights of ``layer``.

    The result is allocated once, each sequence's own tokens only, and the
    batches write into it: the weights of a long sequence are the largest
    array of the call, and copies of it (per row, then stacked) would triple
    its memory.

    Parameters
    ----------
    model, params, sequences, budget_bytes
        As for :func:`forward_batches`.
    layer : int or None, default=None
        Encoder layer whose attention weights to return; None for the
        per-token outputs.

    Returns
    -------
    out : ndarray or list of ndarray
        For an array of sequences, an array of shape (n_samples, T', E) (or
        (n_samples, H, T', T')); for a list, one array per sequence of its own
        tokens (``T'_i`` from ``Model.token_lengths``).
    """
    dtype = model_dtype(sequences)
    config = model.config
    n_tokens = model.token_lengths(sequence_lengths(sequences))
    if layer is None:
        shapes = [(n, config.d_model) for n in n_tokens]
    else:
        shapes = [(config.n_heads, n, n) for n in n_tokens]
    if isinstance(sequences, np.ndarray):  # one length
        out = np.empty((len(sequences), *shapes[0]), dtype=dtype)
    else:
        out = [np.empty(shape, dtype=dtype) for shape in shapes]
    with single_threaded_blas():  # once, not per batch
        batches = forward_batches(
            model, params, sequences, budget_bytes, layer=layer, weights_out=out
        )
        for rows, tokens, _ in batches:
            if layer is not None:  # the forward pass wrote the weights
                continue
            if isinstance(out, np.ndarray):
                out[rows] = tokens
                continue
            for row, row_tokens in zip(rows, tokens, strict=True):
                out[row][...] = row_tokens[: len(out[row])]
    return out


def rows_of(out, rows):
    """The part of ``out`` (an array or a list of per-sample arrays) of ``rows``.

    A view for consecutive rows of an array (batches of one length are), else
    a list of each row's array.
    """
    if isinstance(out, np.ndarray) and np.all(np.diff(rows) == 1):
        return out[rows[0] : rows[-1] + 1]
    return [out[row] for row in rows]
