"""Sequences as padded batches: the layer between checked input and the model.

A checked input is either one array of shape (n_samples, n_tokens, n_features)
or a list of arrays of shape (n_tokens_i, n_features). The model sees
right-padded batches of shape (batch, max_tokens, n_features) together with
the length of each row. Pure numpy.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np


def sequence_lengths(sequences):
    """Number of tokens of each sequence.

    Parameters
    ----------
    sequences : ndarray of shape (n_samples, n_tokens, n_features) or list of ndarray
        Checked sequences.

    Returns
    -------
    lengths : ndarray of shape (n_samples,), dtype intp
    """
    if isinstance(sequences, np.ndarray):
        return np.full(sequences.shape[0], sequences.shape[1], dtype=np.intp)
    return np.array([len(seq) for seq in sequences], dtype=np.intp)


def token_width(sequences):
    """Number of features of each token of checked sequences."""
    return (
        sequences.shape[2]
        if isinstance(sequences, np.ndarray)
        else (sequences[0].shape[1])
    )


def sequences_dtype(sequences):
    """dtype of checked sequences (all sequences of a list share it)."""
    return (
        sequences.dtype if isinstance(sequences, np.ndarray) else (sequences[0].dtype)
    )


def pad_sequences(sequences, dtype):
    """Stack sequences of different lengths into a zero-padded batch.

    Parameters
    ----------
    sequences : list of ndarray of shape (n_tokens_i, n_features)
        Non-empty sequences of one token width.
    dtype : dtype
        dtype of the batch.

    Returns
    -------
    batch : ndarray of shape (n_sequences, max_i n_tokens_i, n_features)
        Sequence ``i`` in ``batch[i, :n_tokens_i]``, zeros after it.
    lengths : ndarray of shape (n_sequences,), dtype intp
    """
    lengths = sequence_lengths(sequences)
    batch = np.zeros(
        (len(sequences), lengths.max(), sequences[0].shape[1]), dtype=dtype
    )
    for row, seq in zip(batch, sequences, strict=True):
        row[: len(seq)] = seq
    return batch, lengths


def batch_indices(lengths, row_bytes, budget_bytes):
    """Split samples into batches whose activations fit in ``budget_bytes``.

    Samples are grouped by length (shortest first) so that ragged batches carry
    little padding; a batch padded to ``T`` tokens costs ``row_bytes(T)`` per row.

    Parameters
    ----------
    lengths : ndarray of shape (n_samples,)
        Number of tokens of each sample.
    row_bytes : callable
        ``row_bytes(n_tokens)`` gives the memory one padded row needs.
    budget_bytes : float
        Memory allowed per batch; a batch holds at least one row.

    Returns
    -------
    batches : list of ndarray of int
        Indices of the samples of each batch; together, each index once.
    """
    order = np.argsort(lengths, kind="stable")
    if len(lengths) and lengths.min() == lengths.max():  # one length: equal batches
        n_rows = max(1, int(budget_bytes // row_bytes(lengths[0])))
        n_batches = math.ceil(len(order) / n_rows)
        n_rows = math.ceil(len(order) / n_batches)  # even: 16 + 16, not 24 + 8
        return [order[start : start + n_rows] for start in range(0, len(order), n_rows)]
    batches = []
    start = 0
    while start < len(order):
        # rows are sorted by length, so the longest row of a batch is its last
        stop = start + 1
        while (
            stop < len(order)
            and (stop + 1 - start) * row_bytes(lengths[order[stop]]) <= budget_bytes
        ):
            stop += 1
        batches.append(order[start:stop])
        start = stop
    return batches
