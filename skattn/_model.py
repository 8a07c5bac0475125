"""The attention block as pure functions: parameters, forward pass, pieces.

``forward`` runs, one layer per function, the block that
:class:`~skattn.AttentionTransformer` applies::

    tokens (N, T, D)
      -> input projection (D -> E), when the model has one
      -> + positional encoding
      -> [class token appended, for pooling="cls"]
      -> multi-head self-attention with output projection
      -> + residual
      -> layer norm
      -> pooling over the valid tokens

and returns the intermediate arrays in a cache for the backward pass.

Shape legend: N samples, T tokens (padded length), D token width, E model width
(``n_heads * head_dim``), H heads.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from ._attention import multi_head_backward, multi_head_forward
from ._pooling import POOLING_BACKWARD, POOLINGS, token_mask

LAYER_NORM_EPS = 1e-5


def sinusoidal_positions(n_tokens, width, dtype=np.float64):
    """Sinusoidal positional encoding of Vaswani et al. (2017).

    ``P[t, 2i] = sin(t / 10000^(2i / width))`` and
    ``P[t, 2i + 1] = cos(t / 10000^(2i / width))``.

    Returns
    -------
    positions : ndarray of shape (n_tokens, width)
    """
    position = np.arange(n_tokens, dtype=np.float64)[:, None]  # (T, 1)
    frequency = 10000.0 ** (-np.arange(0, width, 2, dtype=np.float64) / width)
    angles = position * frequency  # (T, ceil(width / 2))
    encoding = np.empty((n_tokens, width), dtype=np.float64)
    encoding[:, 0::2] = np.sin(angles)
    encoding[:, 1::2] = np.cos(angles[:, : width // 2])
    return encoding.astype(dtype, copy=False)


def glorot_uniform(rng, fan_in, fan_out, dtype):
    """Weights drawn from U(-b, b), ``b = sqrt(6 / (fan_in + fan_out))``."""
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-bound, bound, size=(fan_in, fan_out)).astype(dtype)


def param_shapes(n_features, width, *, pooling, has_input):
    """Shapes of the parameters, in the order they are seeded.

    Parameters
    ----------
    n_features : int
        Token width D of the input.
    width : int
        Model width E.
    pooling : str
        Pooling method; "cls" and "attention" own a vector of width E.
    has_input : bool
        Whether the model projects the input tokens (D -> E).

    Returns
    -------
    shapes : dict of str to tuple
    """
    shapes = {}
    if has_input:
        shapes["input"] = (n_features, width)
    for name in ("query", "key", "value", "output"):
        shapes[name] = (width, width)
    if pooling == "cls":
        shapes["cls"] = (width,)
    if pooling == "attention":
        shapes["pool_query"] = (width,)
    return shapes


def init_params(
    rng,
    n_features,
    width,
    *,
    pooling,
    positional_encoding,
    n_positions,
    layer_norm,
    has_input,
    init=None,
    dtype=np.float64,
):
    """Seed the parameters of the block.

    Projections are Glorot-uniform from ``rng`` (drawn in a fixed order, so each
    depends only on its own shape and ``rng``), unless ``init`` gives them. The
    class token and the pooling query are N(0, 1/E). Learned positions start
    from the sinusoidal table; layer norm from the identity.

    Parameters
    ----------
    rng : numpy.random.RandomState
        Source of the seeded weights.
    n_features : int
        Token width D.
    width : int
        Model width E.
    pooling : str
        Pooling method.
    positional_encoding : {"sinusoidal", "learned"} or None
        Positional encoding; "learned" owns a table of ``n_positions`` rows.
    n_positions : int
        Longest sequence the learned table covers.
    layer_norm : bool
        Whether the model owns layer-norm gain and bias.
    has_input : bool
        Whether the model projects the input tokens.
    init : dict of str to ndarray, default=None
        User-given weights (already checked), copied.
    dtype : dtype, default=np.float64
        dtype of the parameters.

    Returns
    -------
    params : dict of str to ndarray
    """
    init = {} if init is None else init
    params = {}
    for name, shape in param_shapes(
        n_features, width, pooling=pooling, has_input=has_input
    ).items():
        if len(shape) == 2:
            seeded = glorot_uniform(rng, *shape, dtype)
        else:
            seeded = (rng.standard_normal(shape) / math.sqrt(width)).astype(dtype)
        params[name] = np.array(init[name], dtype=dtype) if name in init else seeded
    if positional_encoding == "learned":
        params["positions"] = sinusoidal_positions(n_positions, width, dtype)
    if layer_norm:
        params["ln_weight"] = np.ones(width, dtype=dtype)
        params["ln_bias"] = np.zeros(width, dtype=dtype)
    return params


def add_positions(h, params, positional_encoding):
    """``h`` of shape (N, T, E) plus its positional encoding, as a new array.

    Returns ``h`` itself when there is no positional encoding. A learned table
    covers the lengths seen in fit; positions beyond it use the sinusoidal
    encoding the table was initialised from.
    """
    if positional_encoding is None:
        return h
    n_tokens, width = h.shape[1:]
    if positional_encoding == "learned":
        table = params["positions"][:n_tokens]  # (min(T, T_fit), E)
        if n_tokens > table.shape[0]:
            beyond = sinusoidal_positions(n_tokens, width, h.dtype)[table.shape[0] :]
            table = np.concatenate([table, beyond])  # (T, E)
    else:
        table = sinusoidal_positions(n_tokens, width, h.dtype)  # (T, E)
    return h + table


def append_class_token(h, lengths, cls):
    """Put the class token right after the last valid token of each sequence.

    After the sequence rather than before it, so that with a causal mask the
    class token still attends to every token.

    Returns
    -------
    h : ndarray of shape (N, T + 1, E)
    lengths : ndarray of shape (N,)
        The lengths plus one.
    """
    n_samples, n_tokens, width = h.shape
    extended = np.zeros((n_samples, n_tokens + 1, width), dtype=h.dtype)
    extended[:, :n_tokens] = h
    extended[np.arange(n_samples), lengths] = cls
    return extended, lengths + 1


def layer_norm_forward(x, weight, bias, eps=LAYER_NORM_EPS):
    """Layer normalisation over the last axis.

    Returns
    -------
    out : ndarray, same shape as ``x``
    cache : dict
        ``x_hat`` (normalised input) and ``inv_std`` of shape (..., 1).
    """
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    centred = x - mean
    variance = np.mean(centred * centred, axis=-1, keepdims=True)  # (..., 1)
    inv_std = 1.0 / np.sqrt(variance + x.dtype.type(eps))  # (..., 1)
    x_hat = centred * inv_std
    return x_hat * weight + bias, {"x_hat": x_hat, "inv_std": inv_std}


def layer_norm_backward(d_out, weight, cache):
    """Gradients of :func:`layer_norm_forward`.

    Returns
    -------
    d_x : ndarray, same shape as ``d_out``
    d_weight, d_bias : ndarray of shape (E,)
    """
    x_hat, inv_std = cache["x_hat"], cache["inv_std"]
    width = x_hat.shape[-1]
    d_weight = (d_out * x_hat).reshape(-1, width).sum(axis=0)
    d_bias = d_out.reshape(-1, width).sum(axis=0)
    d_x_hat = d_out * weight
    d_x = d_x_hat - d_x_hat.mean(axis=-1, keepdims=True)
    d_x -= x_hat * np.mean(d_x_hat * x_hat, axis=-1, keepdims=True)
    d_x *= inv_std
    return d_x, d_weight, d_bias


def forward(
    params,
    x,
    lengths,
    *,
    n_heads,
    pooling,
    positional_encoding,
    residual,
    layer_norm,
    causal,
    return_weights=False,
):
    """Forward pass of the block on a right-padded batch.

    Parameters
    ----------
    params : dict of str to ndarray
        Parameters from :func:`init_params`, in the dtype of ``x``.
    x : ndarray of shape (N, T, D)
        Right-padded token batch; padded positions may hold anything finite.
    lengths : ndarray of shape (N,), dtype int
        Number of valid tokens of each row.
    n_heads : int
        Number of heads.
    pooling : str
        Key of :data:`~skattn._pooling.POOLINGS`.
    positional_encoding : {"sinusoidal", "learned"} or None
        Positional encoding.
    residual, layer_norm, causal : bool
        The shape of the block.
    return_weights : bool, default=False
        Keep the attention weights in the cache (T^2 memory per sequence).

    Returns
    -------
    tokens : ndarray of shape (N, T', E)
        Per-token outputs; ``T' = T + 1`` for ``pooling="cls"``, the class token
        following each sequence's last token.
    pooled : ndarray of shape (N, n_features_out)
        Pooled representation.
    cache : dict
        Intermediate arrays for the backward pass (``"attention"`` holds the
        attention cache, whose ``"weights"`` are set when ``return_weights``).
    """
    h = x @ params["input"] if "input" in params else x  # (N, T, E)
    h = add_positions(h, params, positional_encoding)  # never modifies x
    token_lengths = lengths
    if pooling == "cls":
        h, lengths = append_class_token(h, lengths, params["cls"])
    n_tokens = h.shape[1]
    mask = None
    if np.any(lengths != n_tokens):
        mask = token_mask(lengths, n_tokens)[:, None, :]  # (N, 1, T): key padding
    attended, attention_cache = multi_head_forward(
        h,
        params["query"],
        params["key"],
        params["value"],
        params["output"],
        n_heads=n_heads,
        mask=mask,
        causal=causal,
        return_weights=return_weights,
    )  # (N, T, E)

    out = attended + h if residual else attended  # (N, T, E)
    ln_cache = None
    if layer_norm:
        out, ln_cache = layer_norm_forward(out, params["ln_weight"], params["ln_bias"])
    pooled, pool_cache = POOLINGS[pooling](out, lengths, params)
    cache = dict(
        h=h,
        token_lengths=token_lengths,
        lengths=lengths,
        mask=mask,
        attention=attention_cache,
        layer_norm=ln_cache,
        tokens=out,
        pooling=pool_cache,
    )
    return out, pooled, cache


def backward(
    d_pooled,
    params,
    x,
    cache,
    *,
    n_heads,
    pooling,
    positional_encoding,
    residual,
    layer_norm,
    causal,
):
    """Gradients of the block's parameters, in reverse order of :func:`forward`.

    Parameters
    ----------
    d_pooled : ndarray of shape (N, n_features_out)
        Gradient of the loss with respect to the pooled output.
    params, x, n_heads, pooling, positional_encoding, residual, layer_norm, causal
        As given to :func:`forward`.
    cache : dict
        The cache :func:`forward` returned.

    Returns
    -------
    grads : dict of str to ndarray
        One gradient per parameter, same keys and shapes as ``params``.
    """
    h, lengths, tokens = cache["h"], cache["lengths"], cache["tokens"]
    d_tokens, grads = POOLING_BACKWARD[pooling](
        d_pooled, tokens, lengths, params, cache["pooling"]
    )  # (N, T, E)
    if layer_norm:
        d_tokens, grads["ln_weight"], grads["ln_bias"] = layer_norm_backward(
            d_tokens, params["ln_weight"], cache["layer_norm"]
        )
    d_h, attention_grads = multi_head_backward(
        d_tokens,
        h,
        params["query"],
        params["key"],
        params["value"],
        params["output"],
        cache["attention"],
        n_heads=n_heads,
        mask=cache["mask"],
        causal=causal,
    )  # (N, T, E)
    grads.update(attention_grads)
    if residual:
        d_h += d_tokens

    n_samples, n_tokens = x.shape[:2]
    if pooling == "cls":
        token_lengths = cache["token_lengths"]
        grads["cls"] = d_h[np.arange(n_samples), token_lengths].sum(axis=0)
        d_h = d_h[:, :n_tokens]  # (N, T, E)
        # the class token of a shorter sequence sat in another's padding
        d_h = np.where(token_mask(token_lengths, n_tokens)[:, :, None], d_h, 0)
    if positional_encoding == "learned":
        table = params["positions"]
        n_learned = min(n_tokens, table.shape[0])
        grads["positions"] = np.zeros_like(table)
        grads["positions"][:n_learned] = d_h[:, :n_learned].sum(axis=0)
    if "input" in params:
        grads["input"] = x.reshape(-1, x.shape[2]).T @ d_h.reshape(-1, d_h.shape[2])
    return grads
