"""Sequences as padded batches: the layer between checked input and the model.

A checked input is either one array of shape (n_samples, n_tokens, n_features)
or a list of arrays of shape (n_tokens_i, n_features). The model sees
right-padded batches of shape (batch, max_tokens, n_features) together with
the length of each row. Every pass over the sequences holds a block of them
at a time, within a budget of bytes: the caller's, or for
:func:`token_moments` by default scikit-learn's ``working_memory``. Pure
numpy but for that setting.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np

from .._parallel import CACHE_BYTES, even_chunks, imap_parallel

# Tokens of at most this many features are channels of a series (measurements),
# which patch_size="auto" reads in patches; wider tokens (word vectors, encoder
# states) are not cut into patches.
SERIES_MAX_FEATURES = 8

# The batches of every pass (training, transform, predictions, the random
# features): their activations up to twice CACHE_BYTES, counted with all that
# the backward pass keeps in training; one unit's pass reads a part of them at
# a time. With fewer batches a call pays their fixed cost (the units' Python
# and numpy calls, each batch's start on a thread) fewer times: one thread's
# epochs of 32-token sequences ran 5 to 12 % faster at 8 MiB than at 4 on an
# Intel Xeon and on an AMD Zen 3, and at 32 MiB or more slower on both;
# multi_head_attention's chunks of 8 MiB took 0.94 of the time of 4 MiB's on
# 512 sequences of 32 tokens on the Xeon, and a transform of them 0.92 on the
# Zen 3 (user guide, "How the defaults were chosen").
BATCH_BYTES = 2 * CACHE_BYTES

# token_moments sums the tokens of at most this many consecutive samples at
# once, fewer where their float64 copies would take more than working_memory:
# the same blocks, and so the same moments to the bit, whatever the budget
# that fits them.
MOMENT_GROUP_SAMPLES = 256


def series_median_length(sequences, lengths, sample_weight=None):
    """Median length of sequences of narrow tokens; None for wider tokens.

    Weighted by ``sample_weight`` as if each sequence were repeated that many
    times: ``np.median`` of the repeated lengths for integer weights, and a
    sequence of weight zero counts as absent.

    Parameters
    ----------
    sequences : ndarray of shape (n_samples, n_tokens, n_features) or list
        Checked sequences.
    lengths : ndarray of shape (n_samples,)
        Their lengths.
    sample_weight : ndarray of shape (n_samples,) or None, default=None
        Checked weights (non-negative, some positive); None for equal ones.

    Returns
    -------
    median : float or None
        None when the tokens have more than ``SERIES_MAX_FEATURES`` features.
    """
    if token_width(sequences) > SERIES_MAX_FEATURES:
        return None
    if sample_weight is None:
        return float(np.median(lengths))
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = np.asarray(lengths)[order]
    cumulative = np.cumsum(np.asarray(sample_weight, dtype=np.float64)[order])
    half = cumulative[-1] / 2
    # the two middle values of the repeated lengths (one, for an odd count)
    lower = sorted_lengths[np.searchsorted(cumulative, half, side="left")]
    upper = sorted_lengths[np.searchsorted(cumulative, half, side="right")]
    return (float(lower) + float(upper)) / 2


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


def model_dtype(sequences):
    """The floating dtype the model computes sequences in: theirs, and
    float64 for integer token ids."""
    dtype = sequences_dtype(sequences)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


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
    little padding; a batch padded to ``T`` tokens costs ``row_bytes(T)`` per
    row, and at most ``BATCH_BYTES``.

    Parameters
    ----------
    lengths : ndarray of shape (n_samples,)
        Number of tokens of each sample.
    row_bytes : callable
        ``row_bytes(n_tokens)`` gives the memory one padded row needs.
    budget_bytes : float
        Memory allowed per batch (scikit-learn's ``working_memory``); a batch
        holds at least one row, and a row above it warns that the memory
        cannot be kept within it.

    Returns
    -------
    batches : list of ndarray of int
        Indices of the samples of each batch; together, each index once.
    """
    if len(lengths):
        _warn_if_over_budget(lengths.max(), row_bytes, budget_bytes)
    budget_bytes = min(budget_bytes, BATCH_BYTES)
    order = np.argsort(lengths, kind="stable")
    if len(lengths) and lengths.min() == lengths.max():  # one length: equal batches
        chunks = even_chunks(len(order), row_bytes(lengths[0]), budget_bytes)
        return [order[chunk] for chunk in chunks]
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


def _warn_if_over_budget(n_tokens, row_bytes, budget_bytes):
    """Warn, as scikit-learn's ``get_chunk_n_rows`` does, when one sequence
    alone needs more than ``budget_bytes``."""
    needed = row_bytes(n_tokens)
    if needed > budget_bytes:
        warnings.warn(
            f"Could not adhere to working_memory config: one sequence of "
            f"{n_tokens} tokens needs {needed / 2**20:.3g} MiB, more than "
            f"working_memory={budget_bytes / 2**20:.4g} MiB. It is computed "
            "alone; to stay within the limit, pass shorter sequences (or "
            "patches of them, patch_size) or raise working_memory "
            "(sklearn.set_config).",
            UserWarning,
            stacklevel=2,
        )


def padded_batches(sequences, lengths, rows, row_bytes, budget_bytes, dtype=None):
    """Padded batches of the samples ``rows`` within a memory budget.

    Parameters
    ----------
    sequences : ndarray of shape (n_samples, n_tokens, n_features) or list
        Checked sequences.
    lengths : ndarray of shape (n_samples,)
        Their lengths.
    rows : ndarray of int
        The samples to batch.
    row_bytes : callable
        ``row_bytes(n_tokens)``: memory of one row padded to ``n_tokens``.
    budget_bytes : float
        Memory allowed per batch (see :func:`batch_indices`).
    dtype : dtype or None, default=None
        The dtype of the batches of floating tokens, each cast as it is made
        (no cast copy of all the sequences); None, and for token ids, the
        sequences' own.

    Yields
    ------
    batch : ndarray of int
        The samples of this batch, a subset of ``rows``.
    x : ndarray of shape (len(batch), T, n_features)
        Their tokens, C-ordered, zero-padded to the longest: a view of
        ``sequences`` for consecutive rows of a C-ordered array of ``dtype``,
        never ``sequences`` modified.
    """
    own = sequences_dtype(sequences)
    if dtype is None or own.kind != "f":
        dtype = own
    for batch in batch_indices(lengths[rows], row_bytes, budget_bytes):
        batch = rows[batch]
        if isinstance(sequences, np.ndarray):
            # consecutive rows of a C-ordered array: a view; else a C-ordered
            # copy of these rows only (the transpose of channels-first input
            # too, so that it computes exactly as its contiguous copy)
            if np.all(np.diff(batch) == 1):
                x = sequences[batch[0] : batch[-1] + 1]
                yield batch, np.asarray(x, dtype=dtype, order="C")
            elif dtype == own:
                yield batch, np.ascontiguousarray(sequences[batch])
            else:  # cast row by row: no copy of the rows in their own dtype
                x = np.empty((len(batch), *sequences.shape[1:]), dtype=dtype)
                for out, row in zip(x, batch, strict=True):
                    out[...] = sequences[row]
                yield batch, x
        else:
            yield batch, pad_sequences([sequences[i] for i in batch], dtype)[0]


def map_batches(
    function,
    sequences,
    lengths,
    rows,
    row_bytes,
    budget_bytes,
    dtype=None,
):
    """``function(batch, x)`` for each of :func:`padded_batches`, in order.

    Batches run side by side on the threads the BLAS limit allows, at most as
    many at a time as there are threads, so that memory stays bounded (see
    :func:`skattn._parallel.imap_parallel`); every batch is computed the same
    way whatever the number of threads.

    Yields
    ------
    result
        ``function(batch, x)``, in the order of the batches.
    """
    batches = padded_batches(sequences, lengths, rows, row_bytes, budget_bytes, dtype)
    yield from imap_parallel(lambda item: function(*item), batches)


def first_differences(x):
    """Half of each token's difference from the token before; 0 for the first.

    The first-order differences of a series (as MultiRocket reads them beside
    the series), one per token, so that a sequence keeps its length. Halved,
    ``x[t] / 2 - x[t - 1] / 2``, so that no difference of finite tokens
    overflows (a standardisation after it gives the same values as of the
    whole differences).

    Parameters
    ----------
    x : ndarray of shape (n_samples, n_tokens, n_features)
        Padded sequences (the differences at padded positions are meaningless:
        masked, as the padding).

    Returns
    -------
    differences : ndarray of shape (n_samples, n_tokens, n_features)
        A new array in the dtype of ``x``.
    """
    half = x * x.dtype.type(0.5)  # exact but for subnormal numbers
    differences = np.empty_like(x)
    differences[:, :1] = 0
    np.subtract(half[:, 1:], half[:, :-1], out=differences[:, 1:])
    return differences


def token_moments(
    sequences,
    sample_weight=None,
    *,
    per_position=False,
    differences=False,
    budget_bytes,
):
    """Mean and standard deviation of the token features over the valid tokens.

    Every token of sample ``i`` counts with weight ``sample_weight[i]``, so that
    a weight of 2 is a repeated sample. Accumulated in float64, a block of
    samples at a time: the groups of ``MOMENT_GROUP_SAMPLES`` consecutive
    samples, each cut into even blocks where its float64 copies would take
    more than ``budget_bytes`` (the sums of a cut group are added in another
    order, which can change the last bits of the moments).

    Parameters
    ----------
    sequences : ndarray of shape (n_samples, n_tokens, n_features) or list
        Checked sequences.
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights; None weighs every sample 1.
    per_position : bool, default=False
        Statistics per position and feature, of shape ``(n_tokens, n_features)``
        (the columns of a table; every sequence has one length), instead of per
        feature over all positions, ``(n_features,)``.
    differences : bool, default=False
        The moments of the tokens' :func:`first_differences` instead of the
        tokens' (the first token of a sequence counts, with difference 0).
    budget_bytes : float
        Memory a block may use (scikit-learn's ``working_memory``, from the
        estimator). A block holds at least one sample, and a sample above it warns (see
        :func:`batch_indices`).

    Returns
    -------
    mean, scale : ndarray of shape (n_features,) or (n_tokens, n_features)
        In the dtype of the sequences; a feature that does not vary gets scale
        1, as in :class:`~sklearn.preprocessing.StandardScaler` (a variance
        within the rounding of its mean's sums; a feature of tiny values that
        vary keeps its tiny scale).
    """
    n_samples = len(sequences)
    weights = np.ones(n_samples) if sample_weight is None else sample_weight
    weights = np.asarray(weights, dtype=np.float64)
    lengths = sequence_lengths(sequences)
    n_features = token_width(sequences)

    def row_bytes(n_tokens):
        """A sample's float64 tokens while its block is summed: the tokens
        (and, as their differences are made, their halves and the
        differences), and each token's weight."""
        copies = 3 if differences else 1
        return n_tokens * (copies * n_features + 1) * 8

    spans = []  # (start, stop) of each block
    for group in range(0, n_samples, MOMENT_GROUP_SAMPLES):
        stop = min(group + MOMENT_GROUP_SAMPLES, n_samples)
        longest = lengths[group:stop].max()
        _warn_if_over_budget(longest, row_bytes, budget_bytes)
        chunks = even_chunks(stop - group, row_bytes(longest), budget_bytes)
        spans += [(group + chunk.start, group + chunk.stop) for chunk in chunks]

    def block_of(start, stop):
        """Float64 block of the samples' valid tokens (no padding), a new
        array, with the weight of each: ``(n_tokens, n_features)`` and
        ``(n_tokens, 1)``, or for ``per_position`` ``(b, T, n_features)`` and
        ``(b, 1, 1)``; the weights are None without ``sample_weight`` (all 1)."""
        w = weights[start:stop]
        if isinstance(sequences, np.ndarray):
            # C order: sums over a transposed view (channels-first input)
            # are those of its contiguous copy, to the bit
            block = sequences[start:stop].astype(np.float64, order="C")
            if differences:
                block = first_differences(block)
            if per_position:
                return block, None if sample_weight is None else w[:, None, None]
            block = block.reshape(-1, n_features)
        else:  # each sequence's tokens after the last one's, in C order
            block_lengths = lengths[start:stop]
            block = np.empty((int(block_lengths.sum()), n_features))
            np.concatenate(sequences[start:stop], out=block)
            if differences:  # 0 at the first token of each sequence
                block = first_differences(block[None])[0]
                block[np.cumsum(block_lengths) - block_lengths] = 0
        if sample_weight is None:
            return block, None
        return block, np.repeat(w, lengths[start:stop])[:, None]

    def each_block(function):
        """``function(block, w)`` of each block in order, which may change
        the block (one block exists at a time)."""
        for start, stop in spans:
            yield function(*block_of(start, stop))

    # the moments of x / 2**e, e the exponent of each feature's largest |x|:
    # the sums and squares of tokens beyond 1e154 overflow (and the squares
    # of tokens below 1e-154 lose digits as subnormal numbers), but a power
    # of two scales every operation exactly. Only when some |x| is beyond
    # 2**400 (1e120: a sum of 2**200 squares still fits) or every |x| of a
    # feature below 2**-400; otherwise the scaling changes no digit of the
    # result, and costs a pass over the tokens
    largest = 0.0
    for block_largest in each_block(
        lambda block, w: np.max(np.abs(block, out=block), axis=0)
    ):
        largest = np.maximum(largest, block_largest)
    exponent = np.frexp(largest)[1]
    scaled = np.any(np.abs(exponent) > 400)
    if not scaled:
        exponent = np.zeros_like(exponent)

    def weighted_sum(values, w):
        """Sum of ``w * values`` over the block's tokens (``values`` changed)."""
        if w is not None:
            values *= w
        return np.sum(values, axis=0)

    def scaled_sum(block, w):
        if scaled:
            np.ldexp(block, -exponent, out=block)
        return weighted_sum(block, w)

    # two passes, so that a large mean does not cancel the variance's digits
    total = sum(each_block(scaled_sum))
    count = np.sum(weights) if per_position else np.sum(weights * lengths)
    mean = total / count  # of the scaled tokens

    def squares_sum(block, w):
        if scaled:
            np.ldexp(block, -exponent, out=block)
        block -= mean
        return weighted_sum(np.square(block, out=block), w)

    variance = sum(each_block(squares_sum))
    variance /= count
    # constant: a variance within the rounding of the sums of a constant
    # feature, relative to its mean (scikit-learn's _is_constant_feature)
    eps = np.finfo(np.float64).eps
    constant = variance <= count * eps * variance + (count * mean * eps) ** 2
    scale = np.sqrt(variance)
    mean, scale = np.ldexp(mean, exponent), np.ldexp(scale, exponent)
    scale[constant] = 1.0
    dtype = sequences_dtype(sequences)
    return mean.astype(dtype), scale.astype(dtype)
