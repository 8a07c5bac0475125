"""Pooling of per-token outputs into one vector per sequence.

Numpy functions, and the units of the model's poolings (:class:`Pooling`),
registered in :data:`POOLINGS`: a new pooling is a subclass and one line
there. Every pooling reads only the tokens a sequence really has:
``lengths[i]`` gives the number of valid tokens of row ``i`` of a right-padded
batch, so padding never changes the result.

Shape legend: N samples, T tokens (padded length), E model width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from .._kernels import compiled
from .._kernels.attention import attention_forward
from .._kernels.attention_backward import attention_backward
from .registry import Registry
from .sequences import model_dtype
from .units import ParamSpec, Unit, token_mask


def pool_mean(tokens, lengths, params):
    """Mean over the valid tokens: ``(N, T, E) -> (N, E)``.

    Every pooling returns ``(pooled, cache)``; its ``*_backward`` twin takes
    ``(d_pooled, tokens, lengths, params, cache)`` and returns ``(d_tokens,
    grads)``, the gradients of the pooling's own parameters.
    """
    n_tokens = tokens.shape[1]
    if np.all(lengths == n_tokens):
        return token_sums(tokens) / tokens.dtype.type(n_tokens), {}
    mask = token_mask(lengths, n_tokens)[:, :, None]  # (N, T, 1)
    total = token_sums(np.where(mask, tokens, 0))  # (N, E)
    return total / lengths[:, None].astype(tokens.dtype), {}


def token_sums(tokens):
    """Sum over the tokens: ``(N, T, E) -> (N, E)``, the numbers of
    ``tokens.sum(axis=1)``.

    For more than one feature, ``np.einsum``, which adds each feature's
    tokens in their order as that reduction over the middle axis does, but
    2 to 5 times as fast on short sequences (batches of 43 x 32 x 64 and
    1,000 x 8 x 16 float32): the reduction runs its loop over the features
    once per sample and token. One feature is a contiguous reduction, which
    numpy sums pairwise (more accurately than in order over long series).
    """
    if tokens.shape[2] == 1:
        return tokens.sum(axis=1)
    return np.einsum("nte->ne", tokens)


def pool_max(tokens, lengths, params):
    """Feature-wise maximum over the valid tokens: ``(N, T, E) -> (N, E)``."""
    n_tokens = tokens.shape[1]
    if np.all(lengths == n_tokens):
        return tokens.max(axis=1), {}
    mask = token_mask(lengths, n_tokens)[:, :, None]  # (N, T, 1)
    return np.where(mask, tokens, -np.inf).max(axis=1), {}


def pool_min(tokens, lengths, params):
    """Feature-wise minimum over the valid tokens: ``(N, T, E) -> (N, E)``
    (the maximum of the negated tokens, negated: exact)."""
    return -pool_max(-tokens, lengths, params)[0], {}


def pool_first(tokens, lengths, params):
    """The first token: ``(N, T, E) -> (N, E)``."""
    return tokens[:, 0].copy(), {}


def pool_last(tokens, lengths, params):
    """The last valid token of each sequence: ``(N, T, E) -> (N, E)``.

    Also the output of the class token, which follows each sequence.
    """
    return tokens[np.arange(tokens.shape[0]), lengths - 1], {}


def pool_attention(tokens, lengths, params):
    """Attention pooling: a learned query attends over the valid tokens.

    ``pooled = softmax(tokens q / sqrt(E)) tokens`` with ``q = params["pooling_query"]``
    of shape (E,).
    """
    query = params["pooling_query"][None, None, :]  # (1, 1, E)
    mask = token_mask(lengths, tokens.shape[1])[:, None, :]  # (N, 1, T)
    pooled, lse, _ = attention_forward(
        query, tokens, tokens, mask=mask, scale=1.0 / math.sqrt(tokens.shape[-1])
    )  # (N, 1, E)
    return pooled[:, 0], {"pooled": pooled, "lse": lse, "mask": mask}


def pool_flatten(tokens, lengths, params):
    """All tokens side by side: ``(N, T, E) -> (N, T * E)``; one fixed length."""
    return tokens.reshape(tokens.shape[0], -1), {}


def pool_ppv(tokens, lengths, params=None):
    """Proportion of positive values over the valid tokens: ``(N, T, E) -> (N, K * E)``.

    The PPV statistic of ROCKET (Dempster et al., 2020): for each feature, the
    share of the sequence's tokens where it is above a threshold, in the dtype
    of ``tokens``. ``params`` holds the thresholds (the negated biases of
    ROCKET's kernels): None for zero, a scalar, one value per feature ``(E,)``
    (K = 1), or ``K`` values per feature ``(K, E)``, as MiniRocket gives each
    kernel several biases; the output is then ``K`` blocks of ``E`` columns,
    one per row of ``params``. A step function, so it has no backward pass and
    is no pooling of the trained model (not in :data:`POOLINGS`).
    """
    compiled_counts = _compiled_statistic(tokens, lengths, params, False)
    if compiled_counts is not None:
        return compiled_counts / lengths[:, None].astype(tokens.dtype), {}
    counts = [
        positive.sum(axis=1, dtype=tokens.dtype)  # (N, E)
        for positive in _positives(tokens, lengths, params)
    ]
    return _blocks(counts) / lengths[:, None].astype(tokens.dtype), {}


def pool_lspv(tokens, lengths, params=None):
    """Longest stretch of positive values: ``(N, T, E) -> (N, K * E)``.

    The LSPV statistic of MultiRocket (Tan et al., 2022): for each feature,
    the largest number of consecutive valid tokens where it is above a
    threshold, divided by the sequence's number of valid tokens (in [0, 1],
    as the PPV), in the dtype of ``tokens``. Unlike the PPV it depends on the
    order of the tokens: a pattern held for a while is told from the same
    share of scattered tokens. ``params``: the thresholds, as for
    :func:`pool_ppv`. A step function, with no backward pass.
    """
    compiled_longest = _compiled_statistic(tokens, lengths, params, True)
    if compiled_longest is not None:
        return compiled_longest / lengths[:, None].astype(tokens.dtype), {}
    n_tokens = tokens.shape[1]
    index_dtype = np.int16 if n_tokens < 2**15 else np.int64
    positions = np.arange(n_tokens, dtype=index_dtype)[None, :, None]  # (1, T, 1)
    longest = []
    for positive in _positives(tokens, lengths, params):
        # the last token at or before each one that is not positive (-1: none);
        # the stretch ending at token t is t minus that
        last_break = np.maximum.accumulate(
            np.where(positive, index_dtype(-1), positions), axis=1
        )
        longest.append((positions - last_break).max(axis=1).astype(tokens.dtype))
    return _blocks(longest) / lengths[:, None].astype(tokens.dtype), {}


def _compiled_statistic(tokens, lengths, params, longest_stretch):
    """PPV counts or LSPV runs ``(N, K * E)`` from the compiled kernels
    (:func:`skattn._kernels.compiled.threshold_statistics`), or None where
    they do not run."""
    if not compiled.enabled() or tokens.dtype not in (np.float32, np.float64):
        return None
    given = 0 if params is None else params
    # compared in the dtype in which numpy compares ``tokens > given``
    dtype = np.result_type(tokens, given)
    thresholds = np.asarray(given, dtype)
    if thresholds.ndim < 2:  # one row: (E,) or a scalar
        thresholds = np.broadcast_to(thresholds, tokens.shape[-1:])[None]
    thresholds = np.ascontiguousarray(thresholds)  # (K, E)
    values = compiled.threshold_statistics(
        tokens, lengths, thresholds, longest_stretch
    )  # (N, K, E)
    return values.reshape(len(tokens), -1)


def _positives(tokens, lengths, params):
    """Where each valid token is above each row of thresholds ``params`` (see
    :func:`pool_ppv`): one boolean ``(N, T, E)`` array at a time, False on
    padding."""
    thresholds = 0 if params is None else params
    rows = thresholds if np.ndim(thresholds) == 2 else [thresholds]
    valid = None
    if not np.all(lengths == tokens.shape[1]):
        valid = token_mask(lengths, tokens.shape[1])[:, :, None]
    for threshold in rows:
        positive = tokens > threshold
        if valid is not None:
            positive &= valid
        yield positive


def _blocks(columns):
    """``(N, E)`` arrays side by side, ``(N, K * E)``."""
    return columns[0] if len(columns) == 1 else np.concatenate(columns, axis=1)


def column_quantiles(values, levels):
    """Quantile ``levels[..., j]`` of each column ``j`` of ``values``,
    interpolated linearly between order statistics (``np.quantile``'s
    default); the columns are sorted once, whatever the number of levels.

    Parameters
    ----------
    values : ndarray of shape (n_values, n_columns)
        At least one row.
    levels : ndarray of shape (n_columns,) or (n_levels, n_columns)
        In [0, 1].

    Returns
    -------
    ndarray of the shape of ``levels``, in the dtype of ``values``.
    """
    ordered = np.sort(values, axis=0)
    position = levels * (len(ordered) - 1)
    below = np.floor(position).astype(int)
    above = np.minimum(below + 1, len(ordered) - 1)
    weight = (position - below).astype(values.dtype)
    columns = np.arange(values.shape[1])
    low, high = ordered[below, columns], ordered[above, columns]
    return low + weight * (high - low)


def backward_mean(d_pooled, tokens, lengths, params, cache):
    """Each valid token receives ``d_pooled / length``."""
    mask = token_mask(lengths, tokens.shape[1])[:, :, None]  # (N, T, 1)
    share = d_pooled / lengths[:, None].astype(tokens.dtype)  # (N, E)
    return np.where(mask, share[:, None, :], 0), {}


def backward_max(d_pooled, tokens, lengths, params, cache):
    """The gradient goes to the (first) maximal valid token of each feature."""
    mask = token_mask(lengths, tokens.shape[1])[:, :, None]  # (N, T, 1)
    winner = np.argmax(np.where(mask, tokens, -np.inf), axis=1)  # (N, E)
    d_tokens = np.zeros_like(tokens)
    np.put_along_axis(d_tokens, winner[:, None, :], d_pooled[:, None, :], axis=1)
    return d_tokens, {}


def backward_min(d_pooled, tokens, lengths, params, cache):
    """The gradient goes to the (first) minimal valid token of each feature
    (the maximum of the negated tokens, as :func:`pool_min` computes it)."""
    d_negated, grads = backward_max(-d_pooled, -tokens, lengths, params, cache)
    return -d_negated, grads


def _backward_pick(d_pooled, tokens, positions):
    d_tokens = np.zeros_like(tokens)
    d_tokens[np.arange(tokens.shape[0]), positions] = d_pooled
    return d_tokens


def backward_first(d_pooled, tokens, lengths, params, cache):
    """The gradient goes to token 0."""
    return _backward_pick(d_pooled, tokens, 0), {}


def backward_last(d_pooled, tokens, lengths, params, cache):
    """The gradient goes to the last valid token."""
    return _backward_pick(d_pooled, tokens, lengths - 1), {}


def backward_attention(d_pooled, tokens, lengths, params, cache):
    """Tokens are both the keys and the values; the query is learned."""
    query = params["pooling_query"][None, None, :]  # (1, 1, E)
    d_query, d_keys, d_values = attention_backward(
        d_pooled[:, None, :],
        query,
        tokens,
        tokens,
        cache["pooled"],
        cache["lse"],
        mask=cache["mask"],
        scale=1.0 / math.sqrt(tokens.shape[-1]),
    )
    return d_keys + d_values, {"pooling_query": d_query.reshape(-1)}


def backward_flatten(d_pooled, tokens, lengths, params, cache):
    """Reshape back to tokens."""
    return d_pooled.reshape(tokens.shape), {}


# The statistics of the (standardised) tokens themselves that a transformer
# puts beside its model's outputs on wide tokens (``token_statistics``): what a
# linear model on the tokens' mean and extremes knows (the signed features of
# a word vector say as much by their lows as by their highs), and the first and
# last tokens (a BERT-style encoder's [CLS] and [SEP] states).
TOKEN_STATISTICS = ("mean", "max", "min", "first", "last")
# ... and for a table's tokens (its columns, one count of them), the tokens
# themselves side by side: what a linear model on the table's standardised
# rows knows.
TABLE_STATISTIC = "flatten"


def pool_statistics(tokens, lengths, names):
    """The statistics ``names`` (of ``STATISTIC_POOLINGS``, or
    ``TABLE_STATISTIC``) of ``tokens`` side by side: ``(N, T, E) -> (N,
    token_statistics_width(names, T, E))``, one block per name, in order."""
    poolings = {**STATISTIC_POOLINGS, TABLE_STATISTIC: pool_flatten}
    return _blocks([poolings[name](tokens, lengths, None)[0] for name in names])


def token_statistics_width(names, n_tokens, n_features):
    """Columns of the statistics ``names`` of ``n_tokens`` tokens of
    ``n_features`` (:func:`pool_statistics`): ``n_features`` a statistic,
    ``n_tokens * n_features`` for ``TABLE_STATISTIC``."""
    return sum(
        n_tokens * n_features if name == TABLE_STATISTIC else n_features
        for name in names
    )


class Pooling(Unit):
    """A pooling of the model: the per-token outputs as one vector per sequence.

    Each value of the ``pooling`` registry (:data:`POOLINGS`) is a subclass,
    which gives its pooling function and backward pass (:meth:`pool`,
    :meth:`pool_backward`) and, as class attributes, what it asks of the rest
    of the model: callers ask the unit, never compare its name.

    Parameters
    ----------
    n_positions : int
        Model tokens of fit's longest sequence: the one length of a pooling
        that ``needs_fixed_length``.
    d_model : int
        Model width E.

    Attributes
    ----------
    appends_class_token : bool
        A learned class token (:class:`~skattn._model.units.ClassToken`)
        follows each sequence through the encoder, and the pooling reads its
        output.
    needs_fixed_length : bool
        Every sequence has one length, fit's (``n_positions``).
    attends : bool
        The pooling weighs the tokens with attention, which
        :meth:`token_attention` gives.
    """

    appends_class_token = False
    needs_fixed_length = False
    attends = False

    def __init__(self, n_positions, d_model):
        self.n_positions, self.d_model = n_positions, d_model

    @staticmethod
    def pool(tokens, lengths, params):
        """``(pooled, cache)`` of a batch: one of the ``pool_*`` functions."""
        raise NotImplementedError

    @staticmethod
    def pool_backward(d_pooled, tokens, lengths, params, cache):
        """``(d_tokens, grads)``: one of the ``backward_*`` functions."""
        raise NotImplementedError

    @property
    def n_features_out(self):
        """Width F of the pooled vector."""
        return self.d_model

    def forward(self, params, tokens, context):
        pooled, cache = self.pool(tokens, context.lengths, params)
        return pooled, (tokens, context.lengths, cache)

    def backward(self, params, d_pooled, cache):
        tokens, lengths, pool_cache = cache
        return self.pool_backward(d_pooled, tokens, lengths, params, pool_cache)

    def token_attention(self, model, params, x, lengths):
        """The pooling's attention over the tokens of each sequence, for a
        pooling that ``attends`` (see
        :func:`skattn._model.attribution.pooling_attention`).

        Parameters
        ----------
        model : Model
            The model this unit pools.
        params : dict of str to ndarray
            Its parameters, in the dtype of ``x`` (float64 for token ids).
        x : ndarray of shape (N, T, D)
            Right-padded token batch.
        lengths : ndarray of shape (N,), dtype int
            Valid tokens of each row.

        Returns
        -------
        weights : ndarray of shape (N, T')
            One weight per token the encoder reads (no class token); zero on
            padding.
        """
        raise NotImplementedError


class MeanPooling(Pooling):
    """The mean of the valid tokens (:func:`pool_mean`)."""

    pool = staticmethod(pool_mean)
    pool_backward = staticmethod(backward_mean)


class MaxPooling(Pooling):
    """The feature-wise maximum of the valid tokens (:func:`pool_max`)."""

    pool = staticmethod(pool_max)
    pool_backward = staticmethod(backward_max)


class MinPooling(Pooling):
    """The feature-wise minimum of the valid tokens (:func:`pool_min`)."""

    pool = staticmethod(pool_min)
    pool_backward = staticmethod(backward_min)


class FirstPooling(Pooling):
    """The first token (:func:`pool_first`)."""

    pool = staticmethod(pool_first)
    pool_backward = staticmethod(backward_first)


class LastPooling(Pooling):
    """The last valid token (:func:`pool_last`)."""

    pool = staticmethod(pool_last)
    pool_backward = staticmethod(backward_last)


class ClassTokenPooling(LastPooling):
    """The output of a learned class token appended after each sequence's
    last token: the last valid token of the encoder's output.

    Its attention over the tokens is the class token's in the last layer.
    """

    appends_class_token = True
    attends = True

    def token_attention(self, model, params, x, lengths):
        """The last layer's attention weights of the class token over the
        sequence's tokens, averaged over the heads. The class token's weight
        on itself is left out: a row sums to 1 minus it."""
        config = model.config
        n_model = int(model.token_lengths(x.shape[1]))  # with the class token
        out = np.empty((len(x), config.n_heads, n_model, n_model), dtype=model_dtype(x))
        model.forward(params, x, lengths, layer=config.n_layers - 1, weights_out=out)
        class_rows = model.token_lengths(lengths) - 1  # the class token of each row
        rows = out[np.arange(len(x)), :, class_rows]  # (N, H, T' + 1)
        weights = rows.mean(axis=1)[:, :-1]  # (N, T')
        return np.where(token_mask(class_rows, n_model - 1), weights, 0)


class AttentionPooling(Pooling):
    """A learned query ``pooling_query`` of the model width attending over
    the valid tokens (:func:`pool_attention`)."""

    attends = True
    pool = staticmethod(pool_attention)
    pool_backward = staticmethod(backward_attention)

    def param_specs(self):
        spec = ParamSpec(
            (self.d_model,), "normal", penalized=True, attribute="pooling_query_"
        )
        return {"pooling_query": spec}

    def token_attention(self, model, params, x, lengths):
        """The weights of the learned query over the valid tokens, ``softmax(h
        q / sqrt(E))`` of the last layer's outputs ``h``, as the pooling
        computes them; each row sums to 1."""
        tokens, _, _ = model.forward(params, x, lengths)  # (N, T', E)
        model_lengths = model.token_lengths(lengths)
        query = params["pooling_query"][None, None, :]  # (1, 1, E)
        mask = token_mask(model_lengths, tokens.shape[1])[:, None, :]  # (N, 1, T')
        _, _, weights = attention_forward(
            query,
            tokens,
            tokens[..., :0],  # only the weights are wanted
            mask=mask,
            scale=1.0 / math.sqrt(tokens.shape[-1]),
            return_weights=True,
        )  # (N, 1, T')
        return weights[:, 0]


class FlattenPooling(Pooling):
    """All ``n_positions`` tokens side by side (:func:`pool_flatten`):
    ``n_positions * d_model`` features, from sequences of one length."""

    needs_fixed_length = True
    pool = staticmethod(pool_flatten)
    pool_backward = staticmethod(backward_flatten)

    @property
    def n_features_out(self):
        return self.d_model * self.n_positions


# The poolings of the model, each a unit.
POOLINGS = (
    Registry("pooling")
    .add("mean", MeanPooling, "their mean;")
    .add("max", MaxPooling, "feature-wise maximum;")
    .add("min", MinPooling, "feature-wise minimum;")
    .add("first", FirstPooling, "the first token;")
    .add("last", LastPooling, "the last;")
    .add("cls", ClassTokenPooling, "a learned class token appended after the last;")
    .add("attention", AttentionPooling, "a learned query attending over them;")
    .add("flatten", FlattenPooling, "all side by side (one length: fit's).")
)


# Statistics: the poolings without parameters that read sequences of any
# length, without a class token (mean, max, min, first, last): of the tokens
# (pool_statistics), and of RandomAttentionFeatures' models.
STATISTIC_POOLINGS = {
    name: unit.pool
    for name, unit in zip(POOLINGS.names(), POOLINGS.values(), strict=True)
    if not (unit.appends_class_token or unit.needs_fixed_length)
    and not unit(1, 1).param_specs()
}

# The statistics RandomAttentionFeatures pools each model's outputs into:
# those, and the proportion and the longest stretch of positive values.
STATISTICS = {**STATISTIC_POOLINGS, "ppv": pool_ppv, "lspv": pool_lspv}


def needs_fixed_length(pooling):
    """Whether the pooling named ``pooling`` reads sequences of one length
    only, fit's.

    Parameters
    ----------
    pooling : str
        A value of :data:`POOLINGS`.

    Returns
    -------
    bool
    """
    return POOLINGS.get(pooling).needs_fixed_length
