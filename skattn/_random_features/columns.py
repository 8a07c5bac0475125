"""The output columns of RandomAttentionFeatures: their blocks and values.

The columns come in blocks: one per model (``m{index}``), each statistic of
``statistics_`` in turn over the model's width (a statistic compared with
thresholds once per threshold), then, with ``token_statistics_``, the tokens'
own statistics (``tokens``). :func:`column_blocks` lays the blocks out (the
names of ``get_feature_names_out`` and ``n_features_out_``);
:func:`output_columns` fills them, in the same order, a padded batch at a
time (``transform``). Values and arrays in, arrays out: the estimator is in
``estimator.py``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .._model.pooling import STATISTICS
from .._model.sequences import map_batches, sequence_lengths, sequences_dtype
from .._parallel import single_threaded_blas
from .configs import MODEL_POOLING, THRESHOLDED
from .runner import COMPUTE_DTYPE


def column_blocks(models, statistics, thresholds, token_statistics, token_width):
    """Each block of output columns in order: its name (``m{index}`` or
    ``tokens``), its width and the labels of its statistics, ``ppv0``,
    ``ppv1``, ... for a model's PPV (or LSPV) at several thresholds.

    Parameters
    ----------
    models : list of dict
        ``models_``.
    statistics : list of str
        ``statistics_``.
    thresholds : list of ndarray or None
        ``thresholds_``.
    token_statistics : tuple of str
        ``token_statistics_``.
    token_width : int or None
        Features of a token of the fitted input (None without
        ``token_statistics``).
    """
    n_thresholds = 1 if thresholds is None else len(thresholds[0])

    def labels(n_thresholds):
        return [
            f"{name}{t}" if name in THRESHOLDED and n_thresholds > 1 else name
            for name in statistics
            for t in range(n_thresholds if name in THRESHOLDED else 1)
        ]

    blocks = [
        (f"m{index}", config["n_heads"] * config["head_dim"], labels(n_thresholds))
        for index, config in enumerate(models)
    ]
    if token_statistics:
        blocks.append(("tokens", token_width, list(token_statistics)))
    return blocks


def output_columns(
    runner, sequences, statistics, thresholds, token_statistics, n_columns, budget_bytes
):
    """The output columns of ``sequences`` (those of :func:`column_blocks`),
    computed in float32 a padded batch at a time, in the dtype of the
    sequences.

    Parameters
    ----------
    runner : ModelRunner
        The fitted models.
    sequences : ndarray of shape (n_samples, n_tokens, n_features) or list
        Checked sequences.
    statistics, thresholds, token_statistics
        ``statistics_``, ``thresholds_`` and ``token_statistics_``.
    n_columns : int
        ``n_features_out_``.
    budget_bytes : float
        Memory allowed per batch.

    Returns
    -------
    ndarray of shape (n_samples, n_columns)
    """
    dtype = sequences_dtype(sequences)
    lengths = sequence_lengths(sequences)

    def row_bytes(n_tokens):
        return runner.row_bytes(n_tokens) + n_columns * 8

    def run(rows, x):
        """Every model on one padded batch: its statistics side by side."""
        inputs = runner.inputs(x)
        out = np.empty((len(rows), n_columns), dtype=COMPUTE_DTYPE)
        batch_lengths = lengths[rows]
        start = 0
        outputs = runner.outputs(inputs, batch_lengths)
        for index, (tokens, pooled, token_lengths) in enumerate(outputs):
            for name in statistics:
                if name == MODEL_POOLING:  # the model's own pooling
                    values = pooled
                else:
                    params = thresholds[index] if name in THRESHOLDED else None
                    values = STATISTICS[name](tokens, token_lengths, params)[0]
                out[:, start : start + values.shape[1]] = values
                start += values.shape[1]
        for name in token_statistics:
            values = STATISTICS[name](inputs[False], batch_lengths, None)[0]
            out[:, start : start + values.shape[1]] = values
            start += values.shape[1]
        return rows, out

    X_new = np.empty((len(sequences), n_columns), dtype=dtype)
    rows = np.arange(len(sequences))
    with single_threaded_blas():  # once, not per batch
        for batch, out in map_batches(
            run, sequences, lengths, rows, row_bytes, budget_bytes
        ):
            X_new[batch] = out
    return X_new
