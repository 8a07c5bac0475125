"""The fitted models of RandomAttentionFeatures, run over padded batches.

Each model (a seeded encoder of ``skattn._model``) reads the standardised
tokens, and with ``difference`` each token beside its standardised first-order
difference, in float32. :class:`ModelRunner` builds those inputs for a padded
batch, runs the models on it one at a time and says how much memory a row
takes; :func:`output_quantiles` takes quantiles of the models' outputs on a
sample of sequences (the PPV thresholds). Arrays in, arrays out: the estimator
is in ``estimator.py``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .._model.pooling import column_quantiles
from .._model.sequences import first_differences, map_batches, sequence_lengths
from .._model.units import standardise, token_mask
from .._parallel import single_threaded_blas

# The models compute in float32 whatever the dtype of X: random features need
# no more precision, and float32 runs several times faster than float64.
COMPUTE_DTYPE = np.dtype(np.float32)


class ModelRunner:
    """Fitted models and the token statistics they read a batch with.

    Parameters
    ----------
    models : list of (model, params, difference)
        Each model (see ``skattn._model.model.build_model``, without token
        standardisation), its weights, and whether it reads the differences.
    token_stats, difference_stats : (mean, scale) or (None, None)
        Standardisation of the tokens and of their differences, in the dtype
        of the sequences (None: unstandardised).
    n_features : int
        Features of a token.
    dtype : numpy dtype
        Of the sequences.
    """

    def __init__(self, models, token_stats, difference_stats, n_features, dtype):
        self.models = models
        self.token_stats = token_stats
        self.difference_stats = difference_stats
        self.differences = any(difference for _, _, difference in models)
        self.n_features = n_features
        self.dtype = dtype

    def inputs(self, x):
        """The padded batch ``x`` as the models read it, float32, by value of
        ``difference``: the standardised tokens (False) and, when a model
        reads them, the tokens beside their differences (True).

        The tokens are standardised in the dtype of X, before the cast to
        float32: float64 tokens beyond float32's range (1e300) then enter the
        models finite, as AttentionTransformer's do.
        """
        inputs = {False: standardised(x, *self.token_stats)}
        if self.differences:  # each token beside its difference
            dx = standardised(first_differences(x), *self.difference_stats)
            inputs[True] = np.concatenate([inputs[False], dx], axis=2)
        return inputs

    def outputs(self, inputs, lengths):
        """Each model's per-token outputs on one batch, one model at a time.

        Yields
        ------
        tokens : ndarray of shape (n_samples, n_model_tokens, model_width)
        pooled : ndarray of shape (n_samples, model_width)
            Their mean over the valid tokens.
        token_lengths : ndarray of shape (n_samples,)
            Valid tokens of each row (fewer than ``lengths`` with patches).
        """
        for model, params, difference in self.models:
            tokens, pooled, _ = model.forward(params, inputs[difference], lengths)
            yield tokens, pooled, model.token_lengths(lengths)

    def row_bytes(self, n_tokens):
        """Memory of one row padded to ``n_tokens`` while the models run, one
        at a time."""
        activations = max(
            model.row_bytes(
                n_tokens,
                n_features=self.n_features,
                itemsize=COMPUTE_DTYPE.itemsize,
                training=False,
            )
            for model, _, _ in self.models
        )
        # the padded row, its standardised float32 copy; with differences,
        # theirs (twice in X's dtype) and the tokens beside them (float32)
        token_bytes = self.dtype.itemsize + COMPUTE_DTYPE.itemsize
        if self.differences:
            token_bytes += 2 * self.dtype.itemsize + 2 * COMPUTE_DTYPE.itemsize
        return activations + n_tokens * self.n_features * token_bytes


def output_quantiles(runner, sequences, rows, levels, tokens_per_row, budget_bytes):
    """Quantiles of each model's outputs on the sequences ``rows``.

    Parameters
    ----------
    runner : ModelRunner
    sequences : ndarray of shape (n_samples, n_tokens, n_features) or list
        Checked sequences.
    rows : ndarray of int
        The sample of sequences the models run on.
    levels : list of ndarray of shape (model width,) or (n_levels, model width)
        Each model's quantile levels per feature, in [0, 1].
    tokens_per_row : int
        Valid output tokens kept per sequence of a batch on average (evenly
        spaced), which bounds the memory of the sample.
    budget_bytes : float
        Memory allowed per batch.

    Returns
    -------
    list of ndarray of the shapes of ``levels``
        Feature ``j`` of model ``m``: quantiles ``levels[m][..., j]`` of its
        outputs over the valid tokens kept, in float32.
    """
    lengths = sequence_lengths(sequences)

    def run(batch, x):
        """Every model on one padded batch: a sample of its valid tokens."""
        found = []
        for tokens, _, token_lengths in runner.outputs(
            runner.inputs(x), lengths[batch]
        ):
            valid = tokens[token_mask(token_lengths, tokens.shape[1])]  # (n, E)
            step = max(1, len(valid) // (tokens_per_row * len(batch)))
            # a copy: a view of the kept tokens would hold all the valid ones
            found.append(valid[::step].copy())
        return found

    collected = [[] for _ in runner.models]
    with single_threaded_blas():
        for found in map_batches(
            run, sequences, lengths, rows, runner.row_bytes, budget_bytes
        ):
            for values, model_values in zip(found, collected, strict=True):
                model_values.append(values)
    return [
        column_quantiles(np.concatenate(values), level)
        for values, level in zip(collected, levels, strict=True)
    ]


def model_width(config, n_features):
    """Features of a model's tokens: twice the tokens' with their differences."""
    return 2 * n_features if config["difference"] else n_features


def standardised(x, mean, scale):
    """Tokens ``(x - mean) / scale`` (a new array: never X) in float32."""
    if mean is not None:
        x = standardise(x, mean, scale)
    return x.astype(COMPUTE_DTYPE, copy=False)
