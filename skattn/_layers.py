"""The units the model is built from, each owning its parameters.

A unit declares its parameters (:meth:`Unit.param_specs`: name, shape, how it
is seeded, whether the L2 penalty applies, which fitted attribute holds it) and
computes a forward pass and its backward pass::

    out, cache = unit.forward(params, x, context)
    d_x, grads = unit.backward(params, d_out, cache)

``params`` holds the unit's own parameters by their local names; ``context``
(a :class:`Context`) carries what the whole batch shares: the lengths of the
sequences, their key-padding mask, the causal switch and the dropout streams.
The model (``_model.py``) is a list of units; an encoder layer is two
:class:`Sublayer` units (self-attention, then feed-forward), with the semantics
of ``torch.nn.TransformerEncoderLayer``.

Pure numpy functions on arrays (and ``scipy.special.erf`` for GELU): nothing
here imports scikit-learn or knows about an estimator.

Shape legend: N samples, T tokens (padded length), D token width, E model width
(``n_heads * head_dim``), F feed-forward width, H heads.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import erf

from ._attention import attention_forward, causal_tile
from ._dropout import grid_index, keep_scale, stream_keys
from ._multi_head import (
    mask_with_head_axis,
    multi_head_backward,
    multi_head_forward,
    project,
)
from ._parallel import map_parallel
from ._sequences import BATCH_BYTES

LAYER_NORM_EPS = 1e-5

# Dropout sites of one encoder layer (torch's places): the attention weights,
# the attention sublayer's output, the feed-forward hidden activation, the
# feed-forward sublayer's output.
N_DROPOUT_SITES = 4
ATTENTION_WEIGHTS, ATTENTION_OUTPUT, FEED_FORWARD_HIDDEN, FEED_FORWARD_OUTPUT = range(4)


@dataclass(frozen=True)
class ParamSpec:
    """What a unit says about one of its parameters.

    Attributes
    ----------
    shape : tuple of int
    init : {"glorot", "normal", "ones", "zeros", "sinusoidal"}
        How it is seeded (see ``Model.init_params``).
    penalized : bool
        Whether the L2 penalty ``alpha`` applies: weights yes; biases, gains and
        positions (which start from the sinusoidal table, not from zero) no.
    attribute : str or None
        Fitted attribute of the estimator holding it; None for the parameters
        of an encoder layer, which live in ``layers_``.
    trainable : bool
        Whether training changes it; statistics of the data (the token
        standardisation) are fixed in fit, not learned.
    """

    shape: tuple
    init: str
    penalized: bool
    attribute: str | None = None
    trainable: bool = True


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


def token_mask(lengths, n_tokens):
    """Boolean mask of the valid tokens, ``mask[i, t] = t < lengths[i]``.

    Returns
    -------
    mask : ndarray of shape (n_samples, n_tokens), dtype bool
    """
    return np.arange(n_tokens) < np.asarray(lengths)[:, None]


def layer_norm_forward(x, weight, bias, eps=LAYER_NORM_EPS):
    """Layer normalisation over the last axis.

    Rows of finite numbers whose mean or squares overflow (tokens of 1e300, or
    1e20 in float32) are normalised divided by a power of two near their
    largest entry: exact, where the plain formula gave ``inv_std = 0`` (a row
    of zeros) or NaN.

    Returns
    -------
    out : ndarray, same shape as ``x``
    cache : dict
        ``x_hat`` (normalised input) and ``inv_std`` of shape (..., 1).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # recomputed below
        mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
        centred = x - mean
        variance = np.mean(centred * centred, axis=-1, keepdims=True)  # (..., 1)
    if np.isfinite(variance).all():
        inv_std = 1.0 / np.sqrt(variance + x.dtype.type(eps))  # (..., 1)
        x_hat = centred * inv_std
    else:
        # x / 2**e, e the exponent of each overflowing row's largest |x|:
        # x_hat = centred' / sqrt(var' + eps / 4**e), inv_std = that / 2**e
        largest = np.maximum(
            x.max(axis=-1, keepdims=True), -x.min(axis=-1, keepdims=True)
        )
        exponent = np.where(np.isfinite(variance), 0, np.frexp(largest)[1])
        exponent = exponent.astype(np.int32)
        x_scaled = np.ldexp(x, -exponent)
        centred = x_scaled - x_scaled.mean(axis=-1, keepdims=True)
        variance = np.mean(centred * centred, axis=-1, keepdims=True)
        eps_scaled = np.ldexp(x.dtype.type(eps), -2 * exponent)  # may underflow
        inv_std_scaled = 1.0 / np.sqrt(variance + eps_scaled)
        x_hat = centred * inv_std_scaled
        inv_std = np.ldexp(inv_std_scaled, -exponent)  # may underflow to 0
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


def relu(a):
    """``max(a, 0)``."""
    return np.maximum(a, 0)


def relu_derivative(a):
    """1 where ``a > 0``, else 0, in the dtype of ``a``."""
    return (a > 0).astype(a.dtype)


def gelu(a):
    """Exact GELU, ``a * Phi(a)`` with the Gaussian CDF ``Phi`` (torch's default)."""
    return 0.5 * a * (1.0 + erf(a / math.sqrt(2.0)))


def gelu_derivative(a):
    """``Phi(a) + a * phi(a)``, with the Gaussian density ``phi``."""
    cdf = 0.5 * (1.0 + erf(a / math.sqrt(2.0)))
    density = np.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)
    return cdf + a * density


ACTIVATIONS = {"relu": relu, "gelu": gelu}
DERIVATIVES = {"relu": relu_derivative, "gelu": gelu_derivative}


class DropoutStreams:
    """The dropout of one training step: rate, seed and the batch's sample ids.

    Each dropout site of the model draws its masks from the keys of
    :func:`skattn._dropout.stream_keys`, so a sample's masks depend on the
    step's seed, its index in the training set and the site only: never on
    the batch it is computed in, its padding or the threads.

    Parameters
    ----------
    p : float
        Dropout rate, in (0, 1).
    seed : int
        Seed of the training step.
    sample_ids : ndarray of shape (N,), dtype int
        Index of each sample of the batch in the training set.
    """

    def __init__(self, p, seed, sample_ids):
        self.p = p
        self.seed = seed
        self.sample_ids = sample_ids

    def keys(self, site):
        """Stream keys of one site, shape (N,), dtype uint64."""
        return stream_keys(self.seed, self.sample_ids, site)

    def token_scale(self, site, shape, dtype):
        """Multipliers (0 or ``1 / (1 - p)``) of an (N, T, W) activation."""
        keys = self.keys(site)[:, None, None]  # (N, 1, 1)
        return keep_scale(keys, grid_index(*shape[1:]), self.p, dtype)  # (N, T, W)

    def attention(self, site, n_heads):
        """``(p, keys)`` for the attention kernels, keys of shape (N, H)."""
        heads = np.arange(n_heads, dtype=np.uint64) << np.uint64(42)  # (H,)
        return self.p, self.keys(site)[:, None] ^ heads  # (N, H)


class Context:
    """What the units of one forward pass share.

    Parameters
    ----------
    lengths : ndarray of shape (N,), dtype int
        Valid tokens of each row of the padded batch (the class token unit
        adds one).
    causal : bool
        Whether token ``i`` attends only to tokens ``j <= i``.
    dropout : DropoutStreams or None, default=None
        Training-time dropout; None in evaluation.
    weights_layer : int or None, default=None
        Encoder layer whose attention weights to write into ``weights_out``.
    weights_out : ndarray or list of ndarray, default=None
        Where that layer writes them (see :func:`write_attention_weights`):
        an array of shape (N, H, T, T), or one array of shape (H, T_i, T_i)
        per row, for the row's own tokens.
    """

    def __init__(
        self, lengths, *, causal, dropout=None, weights_layer=None, weights_out=None
    ):
        self.lengths = lengths
        self.causal = causal
        self.dropout = dropout
        self.weights_layer = weights_layer
        self.weights_out = weights_out
        self._mask = None

    def key_mask(self, n_tokens):
        """Key-padding mask of shape (N, 1, T), or None when no row is padded."""
        if self._mask is None or self._mask[0] is not self.lengths:
            mask = None
            if np.any(self.lengths != n_tokens):
                mask = token_mask(self.lengths, n_tokens)[:, None, :]  # (N, 1, T)
            self._mask = (self.lengths, mask)
        return self._mask[1]


class Unit:
    """A piece of the model: its parameters, a forward and a backward pass."""

    def param_specs(self):
        """Parameters of the unit by local name, in the order they are seeded.

        Returns
        -------
        specs : dict of str to ParamSpec
        """
        return {}

    def forward(self, params, x, context):
        """Returns ``(out, cache)``."""
        raise NotImplementedError

    def backward(self, params, d_out, cache):
        """Returns ``(d_x, grads)``: gradients by local name."""
        raise NotImplementedError


class TokenScaler(Unit):
    """Standardised tokens, ``(x - token_mean) / token_scale``.

    The statistics are fixed in fit (see ``skattn._sequences.token_moments``),
    never trained: per feature of the tokens, shape ``(D,)``, or per position and
    feature, ``(T, D)``, for the columns of a table. The first unit of a model:
    its backward pass returns no gradient for the tokens (None).
    """

    def __init__(self, shape):
        self.shape = tuple(shape)

    def param_specs(self):
        return {
            "token_mean": ParamSpec(self.shape, "zeros", False, "token_mean_", False),
            "token_scale": ParamSpec(self.shape, "ones", False, "token_scale_", False),
        }

    def forward(self, params, x, context):
        return (x - params["token_mean"]) / params["token_scale"], None

    def backward(self, params, d_out, cache):
        return None, {}


def patch_count(n_tokens, size, stride=None):
    """Patches of ``size`` tokens in ``n_tokens`` tokens, one every ``stride``.

    Without ``stride`` (non-overlapping patches): ``ceil(n_tokens / size)``.
    With it: ``1 + ceil(max(n_tokens - size, 0) / stride)``, the patches
    starting at tokens ``0, stride, 2 * stride, ...`` until one reaches the
    last token (the same count for ``stride == size``).

    Parameters
    ----------
    n_tokens : int or ndarray of int
        Sequence length(s), at least 1.
    size : int
        Tokens per patch.
    stride : int or None, default=None
        Tokens from the start of a patch to the start of the next; None:
        ``size``.

    Returns
    -------
    int or ndarray of int, as ``n_tokens``.
    """
    if stride is None or stride == size:
        return -(-n_tokens // size)
    return 1 - (-np.maximum(n_tokens - size, 0) // stride)


class Patches(Unit):
    """Patches of ``size`` consecutive tokens, one every ``stride``, as tokens.

    ``(N, T, D) -> (N, patch_count(T, size, stride), size * D)``, as PatchTST
    reads a time series: patch ``j`` holds tokens ``j * stride`` to ``j *
    stride + size - 1`` side by side. Without ``stride`` (or ``stride ==
    size``) the patches do not overlap, a sequence of ``L`` tokens gives
    ``ceil(L / size)`` of them; a smaller ``stride`` makes them overlap, as a
    convolution slides its kernel. The last patch is completed with zeros
    (after the token standardisation: the mean). No parameters; its backward
    pass returns no gradient for the tokens (None): only the fixed
    standardisation may come before it.
    """

    def __init__(self, size, stride=None):
        self.size = size
        self.stride = size if stride is None else stride

    def forward(self, params, x, context):
        n_samples, n_tokens, n_features = x.shape
        size, stride = self.size, self.stride
        n_patches = patch_count(n_tokens, size, stride)
        n_covered = (n_patches - 1) * stride + size  # at least n_tokens
        padded = np.zeros((n_samples, n_covered, n_features), x.dtype)
        valid = token_mask(context.lengths, n_tokens)[:, :, None]  # (N, T, 1)
        np.copyto(padded[:, :n_tokens], x, where=valid)  # padding becomes zeros
        context.lengths = patch_count(context.lengths, size, stride)
        if stride == size:  # side by side: a view
            return padded.reshape(n_samples, n_patches, size * n_features), None
        # (N, n_patches, D, size): a window every stride tokens, made token-major
        windows = np.lib.stride_tricks.sliding_window_view(padded, size, axis=1)
        windows = windows[:, ::stride]
        patches = np.ascontiguousarray(windows.transpose(0, 1, 3, 2))
        return patches.reshape(n_samples, n_patches, size * n_features), None

    def backward(self, params, d_out, cache):
        return None, {}


class InputProjection(Unit):
    """Tokens of width D projected to the model width E: ``x @ W``.

    Its backward pass returns no gradient for the tokens (None), which are
    data, or standardised data.
    """

    def __init__(self, n_features, d_model):
        self.n_features, self.d_model = n_features, d_model

    def param_specs(self):
        shape = (self.n_features, self.d_model)
        return {"input": ParamSpec(shape, "glorot", True, "input_weights_")}

    def forward(self, params, x, context):
        return x @ params["input"], x  # (N, T, E)

    def backward(self, params, d_out, x):
        grad = x.reshape(-1, x.shape[2]).T @ d_out.reshape(-1, d_out.shape[2])
        return None, {"input": grad}


class Positions(Unit):
    """Positional encoding added to the tokens.

    ``"sinusoidal"``: the fixed table of Vaswani et al.; ``"learned"``: a table
    of ``n_positions`` rows initialised from it. Positions beyond the learned
    table use the sinusoidal encoding.
    """

    def __init__(self, kind, n_positions, d_model):
        self.kind, self.n_positions, self.d_model = kind, n_positions, d_model

    def param_specs(self):
        if self.kind != "learned":
            return {}
        shape = (self.n_positions, self.d_model)
        return {
            "positions": ParamSpec(shape, "sinusoidal", False, "position_embeddings_")
        }

    def forward(self, params, x, context):
        n_tokens, d_model = x.shape[1:]
        if self.kind == "learned":
            table = params["positions"][:n_tokens]  # (min(T, T_fit), E)
            if n_tokens > table.shape[0]:
                beyond = sinusoidal_positions(n_tokens, d_model, x.dtype)
                table = np.concatenate([table, beyond[table.shape[0] :]])  # (T, E)
        else:
            table = sinusoidal_positions(n_tokens, d_model, x.dtype)  # (T, E)
        return x + table, n_tokens  # a new array: never modifies x

    def backward(self, params, d_out, n_tokens):
        if self.kind != "learned":
            return d_out, {}
        table = params["positions"]
        n_learned = min(n_tokens, table.shape[0])
        grad = np.zeros_like(table)
        grad[:n_learned] = d_out[:, :n_learned].sum(axis=0)
        return d_out, {"positions": grad}


class ClassToken(Unit):
    """A learned token put right after the last valid token of each sequence.

    After the sequence rather than before it, so that with a causal mask the
    class token still attends to every token. Adds one to each length.
    """

    def __init__(self, d_model):
        self.d_model = d_model

    def param_specs(self):
        return {"cls": ParamSpec((self.d_model,), "normal", True, "cls_token_")}

    def forward(self, params, x, context):
        lengths = context.lengths
        out, context.lengths = append_class_token(x, lengths, params["cls"])
        return out, lengths  # (N, T + 1, E)

    def backward(self, params, d_out, lengths):
        n_samples, n_tokens = d_out.shape[0], d_out.shape[1] - 1
        grad = d_out[np.arange(n_samples), lengths].sum(axis=0)
        d_x = d_out[:, :n_tokens]  # (N, T, E)
        # the class token of a shorter sequence sat in another's padding
        d_x = np.where(token_mask(lengths, n_tokens)[:, :, None], d_x, 0)
        return d_x, {"cls": grad}


def append_class_token(h, lengths, cls):
    """``h`` with ``cls`` right after the last valid token of each row.

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


class LayerNorm(Unit):
    """Layer normalisation with gain ``{name}_weight`` and bias ``{name}_bias``."""

    def __init__(self, d_model, name, attributes=False):
        self.d_model, self.name, self.attributes = d_model, name, attributes

    def param_specs(self):
        names = (f"{self.name}_weight", f"{self.name}_bias")
        return {
            name: ParamSpec(
                (self.d_model,), init, False, f"{name}_" if self.attributes else None
            )
            for name, init in zip(names, ("ones", "zeros"), strict=True)
        }

    def forward(self, params, x, context):
        weight, bias = params[f"{self.name}_weight"], params[f"{self.name}_bias"]
        return layer_norm_forward(x, weight, bias)

    def backward(self, params, d_out, cache):
        d_x, d_weight, d_bias = layer_norm_backward(
            d_out, params[f"{self.name}_weight"], cache
        )
        return d_x, {f"{self.name}_weight": d_weight, f"{self.name}_bias": d_bias}


class SelfAttention(Unit):
    """Multi-head self-attention without biases: query, key, value, output.

    Padded keys are masked; with dropout, the attention weights are dropped
    as in ``torch.nn.MultiheadAttention``.
    """

    def __init__(self, d_model, n_heads, layer):
        self.d_model, self.n_heads, self.layer = d_model, n_heads, layer

    def param_specs(self):
        shape = (self.d_model, self.d_model)
        return {
            name: ParamSpec(shape, "glorot", True)
            for name in ("query", "key", "value", "output")
        }

    def forward(self, params, x, context):
        mask = context.key_mask(x.shape[1])
        dropout = None
        if context.dropout is not None:
            site = self.layer * N_DROPOUT_SITES + ATTENTION_WEIGHTS
            dropout = context.dropout.attention(site, self.n_heads)
        out, cache = multi_head_forward(
            x,
            params["query"],
            params["key"],
            params["value"],
            params["output"],
            n_heads=self.n_heads,
            mask=mask,
            causal=context.causal,
            dropout=dropout,
        )  # (N, T, E)
        if context.weights_layer == self.layer:
            write_attention_weights(
                cache["q"], cache["k"], mask, context.causal, context.weights_out
            )
        return out, (x, cache, mask, context.causal, dropout)

    def backward(self, params, d_out, cache):
        x, attention_cache, mask, causal, dropout = cache
        return multi_head_backward(
            d_out,
            x,
            params["query"],
            params["key"],
            params["value"],
            params["output"],
            attention_cache,
            n_heads=self.n_heads,
            mask=mask,
            causal=causal,
            dropout=dropout,
        )


def write_attention_weights(q, k, mask, causal, out):
    """Attention weights of self-attention (without dropout), written into ``out``.

    A block of query rows at a time: the weights of one long sequence are as
    large as ``out`` (``H * T**2`` numbers), so computing them whole and then
    copying them took twice its memory. A block holds at most about
    ``BATCH_BYTES``; as many blocks run at once as the kernel runs tiles.

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
    block_rows = max(1, BATCH_BYTES // (n_samples * n_heads * n_tokens * q.itemsize))
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


class FeedForward(Unit):
    """``linear2(dropout(activation(linear1(x))))``, with biases."""

    def __init__(self, d_model, ff_dim, activation, layer):
        self.d_model, self.ff_dim = d_model, ff_dim
        self.activation, self.layer = activation, layer

    def param_specs(self):
        d_model, ff_dim = self.d_model, self.ff_dim
        return {
            "linear1": ParamSpec((d_model, ff_dim), "glorot", True),
            "linear1_bias": ParamSpec((ff_dim,), "zeros", False),
            "linear2": ParamSpec((ff_dim, d_model), "glorot", True),
            "linear2_bias": ParamSpec((d_model,), "zeros", False),
        }

    def forward(self, params, x, context):
        pre = project(x, params["linear1"])  # (N, T, F)
        pre += params["linear1_bias"]
        hidden = ACTIVATIONS[self.activation](pre)  # (N, T, F)
        scale = None
        if context.dropout is not None:
            site = self.layer * N_DROPOUT_SITES + FEED_FORWARD_HIDDEN
            scale = context.dropout.token_scale(site, hidden.shape, hidden.dtype)
            hidden *= scale
        out = project(hidden, params["linear2"])  # (N, T, E)
        out += params["linear2_bias"]
        return out, (x, pre, hidden, scale)

    def backward(self, params, d_out, cache):
        x, pre, hidden, scale = cache
        d_flat = d_out.reshape(-1, self.d_model)  # (N*T, E)
        grads = {
            "linear2": hidden.reshape(-1, self.ff_dim).T @ d_flat,
            "linear2_bias": d_flat.sum(axis=0),
        }
        d_hidden = project(d_out, params["linear2"].T)  # (N, T, F)
        if scale is not None:
            d_hidden *= scale
        d_pre = d_hidden * DERIVATIVES[self.activation](pre)  # (N, T, F)
        d_pre_flat = d_pre.reshape(-1, self.ff_dim)  # (N*T, F)
        grads["linear1"] = x.reshape(-1, self.d_model).T @ d_pre_flat
        grads["linear1_bias"] = d_pre_flat.sum(axis=0)
        return project(d_pre, params["linear1"].T), grads  # (N, T, E)


class Sublayer(Unit):
    """A residual block around ``inner`` (self-attention or feed-forward).

    Post-norm (``norm_first=False``): ``norm(x + dropout(inner(x)))``;
    pre-norm: ``x + dropout(inner(norm(x)))``; as in
    ``torch.nn.TransformerEncoderLayer``. Without ``residual`` the ``x +`` goes,
    without ``norm`` the normalisation.

    Parameters
    ----------
    inner : Unit
        The sublayer's function.
    norm : LayerNorm or None
        Its layer norm.
    residual, norm_first : bool
        The shape of the block.
    dropout_site : int
        Site of the dropout on the inner output.
    """

    def __init__(self, inner, norm, *, residual, norm_first, dropout_site):
        self.inner, self.norm = inner, norm
        self.residual, self.norm_first = residual, norm_first
        self.dropout_site = dropout_site

    def param_specs(self):
        specs = dict(self.inner.param_specs())
        if self.norm is not None:
            specs.update(self.norm.param_specs())
        return specs

    def forward(self, params, x, context):
        pre_norm = self.norm if self.norm_first else None
        post_norm = None if self.norm_first else self.norm
        z, pre_cache = x, None
        if pre_norm is not None:
            z, pre_cache = pre_norm.forward(params, x, context)
        out, inner_cache = self.inner.forward(params, z, context)
        scale = None
        if context.dropout is not None:
            scale = context.dropout.token_scale(self.dropout_site, out.shape, out.dtype)
            out *= scale
        if self.residual:
            out = out + x
        post_cache = None
        if post_norm is not None:
            out, post_cache = post_norm.forward(params, out, context)
        return out, (pre_cache, inner_cache, scale, post_cache)

    def backward(self, params, d_out, cache):
        pre_cache, inner_cache, scale, post_cache = cache
        grads = {}
        if post_cache is not None:
            d_out, norm_grads = self.norm.backward(params, d_out, post_cache)
            grads.update(norm_grads)
        d_inner = d_out if scale is None else d_out * scale
        d_x, inner_grads = self.inner.backward(params, d_inner, inner_cache)
        grads.update(inner_grads)
        if pre_cache is not None:
            d_x, norm_grads = self.norm.backward(params, d_x, pre_cache)
            grads.update(norm_grads)
        if self.residual:
            d_x += d_out
        return d_x, grads


def encoder_layer(
    index, d_model, *, n_heads, ff_dim, activation, residual, layer_norm, norm_first
):
    """The sublayers of one ``torch.nn.TransformerEncoderLayer``.

    Returns
    -------
    sublayers : list of Sublayer
        Self-attention (with ``norm1``), then, when ``ff_dim > 0``, the
        feed-forward sublayer (with ``norm2``).
    """
    options = dict(residual=residual, norm_first=norm_first)
    site = index * N_DROPOUT_SITES
    sublayers = [
        Sublayer(
            SelfAttention(d_model, n_heads, index),
            LayerNorm(d_model, "norm1") if layer_norm else None,
            dropout_site=site + ATTENTION_OUTPUT,
            **options,
        )
    ]
    if ff_dim:
        sublayers.append(
            Sublayer(
                FeedForward(d_model, ff_dim, activation, index),
                LayerNorm(d_model, "norm2") if layer_norm else None,
                dropout_site=site + FEED_FORWARD_OUTPUT,
                **options,
            )
        )
    return sublayers
