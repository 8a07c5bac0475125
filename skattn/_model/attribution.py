"""Which tokens drive the model's output: gradients and the pooling's attention.

:func:`input_gradient` runs the model forward on a padded batch in evaluation
mode (no dropout) and backward from weights on its head's outputs, through the
units' own backward passes, down to the tokens as the model reads them: the
rows of the embedding table for token ids, else the input tokens. The
backward passes of the units that read the data (the token standardisation,
the patches, the input projection) return no gradient of their input, which
training does not need; those input gradients are computed here.
:func:`token_attributions` sums gradient x input over each token's features.
:func:`pooling_attention` gives the pooling's own attention over the tokens,
for the poolings that have one.

Pure numpy on arrays, as the rest of the model.

Shape legend: N samples, T tokens (padded length), D token width, E model width,
K outputs of the head.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .._kernels.multi_head import project
from .model import _local
from .pooling import POOLINGS, backward_max, token_statistics_width
from .sequences import model_dtype
from .units import Embedding, InputProjection, Patches, TokenScaler, token_mask


def input_gradient(model, params, x, lengths, d_out):
    """Gradient of ``sum(d_out * head(x))`` with respect to the tokens read.

    The gradient flows through every path from the tokens to the head: the
    encoder and the pooling, and the statistics of the standardised tokens
    that the head reads beside the pooled vector (``config.token_statistics``).

    Parameters
    ----------
    model : Model
        A model with its head (``config.n_outputs > 0``).
    params : dict of str to ndarray
        Its parameters, in the dtype of ``x`` (float64 for token ids).
    x : ndarray of shape (N, T, D)
        Right-padded token batch: vectors, or integer ids of shape (N, T, 1)
        for a model with ``vocabulary_size``.
    lengths : ndarray of shape (N,), dtype int
        Valid tokens of each row.
    d_out : ndarray of shape (N, K)
        Weight of each output of the head: a one-hot row differentiates one
        output.

    Returns
    -------
    read : ndarray of shape (N, T, W)
        The tokens as the model reads them: the embedding rows of the ids (W =
        E), else ``x`` (W = D), in the dtype of ``params``.
    gradient : ndarray of shape (N, T, W)
        The gradient with respect to ``read``; zero on padding.

    Raises
    ------
    ValueError
        For a model without a head.

    Examples
    --------
    >>> import numpy as np
    >>> from skattn._model.model import ModelConfig, build_model
    >>> model = build_model(ModelConfig(n_features=2, d_model=4, n_heads=2,
    ...                                 n_outputs=1))
    >>> params = model.init_params(np.random.RandomState(0), np.float64)
    >>> x = np.random.RandomState(1).standard_normal((1, 3, 2))
    >>> read, gradient = input_gradient(model, params, x, np.array([3]),
    ...                                 np.ones((1, 1)))
    >>> read.shape, gradient.shape
    ((1, 3, 2), (1, 3, 2))
    """
    if model.head is None:
        raise ValueError(
            "input_gradient differentiates the outputs of the model's head, and "
            "this model has none (n_outputs=0)."
        )
    _, pooled, trace = model.forward(params, x, lengths, training=True)
    caches = trace["caches"]
    head_params = _local(params, "", model.head.param_specs())
    d_pooled, _ = model.head.backward(head_params, d_out.astype(model_dtype(x)), pooled)
    n_pooled = model.pooling.n_features_out
    d, _ = model.pooling.backward(
        _local(params, "", model.pooling.param_specs()),
        d_pooled[:, :n_pooled],
        caches[-1],
    )
    d_statistics = d_pooled[:, n_pooled:]
    valid = token_mask(lengths, x.shape[1])[:, :, None]  # (N, T, 1)
    for (prefix, unit), cache in zip(
        reversed(model.units), reversed(caches[:-1]), strict=True
    ):
        local = _local(params, prefix, unit.param_specs())
        if isinstance(unit, Embedding):  # the first unit: the rows read
            read = local["embeddings"][cache[0]]  # (N, T, E)
            return read, np.where(valid, d, 0)
        if isinstance(unit, TokenScaler):
            d = d + _statistics_gradient(
                model, unit.forward(local, x, None)[0], d_statistics, lengths
            )
            d = d / local["token_scale"]
        elif isinstance(unit, Patches):
            d = _patches_input_gradient(unit, d, x.shape[1], lengths)
        elif isinstance(unit, InputProjection):
            d = project(d, local["input"].T)
        else:
            d, _ = unit.backward(local, d, cache)
    if model.scaler is None:  # the statistics are of the input tokens
        d = d + _statistics_gradient(model, x, d_statistics, lengths)
    return x, np.where(valid, d, 0)


def token_attributions(model, params, x, lengths, d_out):
    """Gradient x input of the head's weighted outputs, summed per token.

    ``attributions[i, t] = sum_w read[i, t, w] * gradient[i, t, w]``, with
    ``read`` and ``gradient`` of :func:`input_gradient`.

    Parameters
    ----------
    model, params, x, lengths, d_out
        As for :func:`input_gradient`.

    Returns
    -------
    attributions : ndarray of shape (N, T)
        One score per token; zero on padding.
    """
    read, gradient = input_gradient(model, params, x, lengths, d_out)
    return np.einsum("ntw,ntw->nt", read, gradient)


def pooling_attention(model, params, x, lengths):
    """The attention of the model's pooling over the tokens of each sequence.

    - ``pooling="attention"``: the weights of the learned query over the valid
      tokens, ``softmax(h q / sqrt(E))`` of the last layer's outputs ``h``, as
      the pooling computes them; each row sums to 1.
    - ``pooling="cls"``: the last layer's attention weights of the class token
      over the sequence's tokens, averaged over the heads. The class token's
      weight on itself is left out: a row sums to 1 minus it.

    Each is the :meth:`~skattn._model.pooling.Pooling.token_attention` of the
    model's pooling unit.

    Parameters
    ----------
    model : Model
    params : dict of str to ndarray
        Its parameters, in the dtype of ``x`` (float64 for token ids).
    x : ndarray of shape (N, T, D)
        Right-padded token batch.
    lengths : ndarray of shape (N,), dtype int
        Valid tokens of each row.

    Returns
    -------
    weights : ndarray of shape (N, T')
        One weight per token the encoder reads (a patch is one token; no class
        token); zero on padding.

    Raises
    ------
    ValueError
        For a pooling without attention over the tokens.
    """
    config = model.config
    if not model.pooling.attends:
        raise ValueError(
            f"pooling={config.pooling!r} has no attention over the tokens; "
            f"pooling='attention' (a learned query) and pooling='cls' (the class "
            "token's attention in the last layer) have."
        )
    return model.pooling.token_attention(model, params, x, lengths)


def _statistics_gradient(model, tokens, d_statistics, lengths):
    """Gradient of the statistics of ``tokens`` the head reads, (N, T, D)."""
    d_tokens = np.zeros_like(tokens)
    start = 0
    for name in model.config.token_statistics:
        stop = start + token_statistics_width((name,), *tokens.shape[1:])
        block, start = d_statistics[:, start:stop], stop
        if name == "min":  # min(t) = -max(-t): the signs cancel
            d, _ = backward_max(block, -tokens, lengths, None, None)
        else:
            backward = POOLINGS.get(name).pool_backward
            d, _ = backward(block, tokens, lengths, None, None)
        d_tokens += d
    return d_tokens


def _patches_input_gradient(unit, d_patches, n_tokens, lengths):
    """Gradient of the tokens a :class:`Patches` unit read, (N, T, D).

    Each patch's gradient goes back to the tokens it holds (a token of
    overlapping patches sums them); the zeros that complete the last patch,
    and the padding, get none.
    """
    n_samples, n_patches = d_patches.shape[:2]
    size, stride = unit.size, unit.stride
    d_windows = d_patches.reshape(n_samples, n_patches, size, -1)
    covered = (n_patches - 1) * stride + size
    d_tokens = np.zeros((n_samples, covered, d_windows.shape[-1]), d_patches.dtype)
    for patch in range(n_patches):
        start = patch * stride
        d_tokens[:, start : start + size] += d_windows[:, patch]
    valid = token_mask(lengths, n_tokens)[:, :, None]
    return np.where(valid, d_tokens[:, :n_tokens], 0)
