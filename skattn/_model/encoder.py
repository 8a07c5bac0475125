"""The encoder layer: self-attention and feed-forward sublayers.

An :class:`EncoderLayer` is the layer of ``torch.nn.TransformerEncoderLayer``:
a :class:`Sublayer` around :class:`SelfAttention`, then one around
:class:`FeedForward`, each with its residual connection, layer norm (before or
after, as ``norm_first`` in torch) and dropout in torch's places. Pure numpy on
arrays (and ``scipy.special.erf`` for GELU).

Shape legend: N samples, T tokens (padded length), E model width, F
feed-forward width, H heads, Dh head width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import erf

from .._kernels.dropout import grid_index, keep_scale, stream_keys
from .._kernels.multi_head import (
    LAYER_ARRAYS,
    multi_head_backward,
    multi_head_forward,
    project,
)
from .._kernels.patterns import FullAttention
from .patterns import PatternUnit
from .units import LayerNorm, ParamSpec, Unit

# Dropout sites of one encoder layer (torch's places): the attention weights,
# the attention sublayer's output, the feed-forward hidden activation, the
# feed-forward sublayer's output.
N_DROPOUT_SITES = 4
ATTENTION_WEIGHTS, ATTENTION_OUTPUT, FEED_FORWARD_HIDDEN, FEED_FORWARD_OUTPUT = range(4)


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


@dataclass(frozen=True)
class Activation:
    """An activation of the feed-forward sublayer and its derivative, both
    elementwise functions of the pre-activation."""

    function: object
    derivative: object


RELU = Activation(relu, relu_derivative)
GELU = Activation(gelu, gelu_derivative)


@dataclass(frozen=True)
class NormPlacement:
    """Where the layer norms of an encoder go.

    Attributes
    ----------
    first : bool
        Each sublayer normalises its input (torch's ``norm_first=True``);
        otherwise the residual sum.
    final : bool
        A layer norm after the last layer.
    """

    first: bool
    final: bool


POST_NORM = NormPlacement(first=False, final=False)
PRE_NORM = NormPlacement(first=True, final=True)


class DropoutStreams:
    """The dropout of one training step: rate, seed and the batch's sample ids.

    Each dropout site of the model draws its masks from the keys of
    :func:`skattn._kernels.dropout.stream_keys`, so a sample's masks depend on the
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

    def multipliers(self, site, shape, dtype):
        """Multipliers (0 or ``1 / (1 - p)``) of an (N, T, W) activation."""
        keys = self.keys(site)[:, None, None]  # (N, 1, 1)
        return keep_scale(keys, grid_index(*shape[1:]), self.p, dtype)  # (N, T, W)

    def attention(self, site, n_heads):
        """``(p, keys)`` for the attention kernels, keys of shape (N, H)."""
        heads = np.arange(n_heads, dtype=np.uint64) << np.uint64(42)  # (H,)
        return self.p, self.keys(site)[:, None] ^ heads  # (N, H)


class SelfAttention(Unit):
    """Multi-head self-attention without biases: query, key, value, output.

    The projections, then ``query_key`` (the transform of the queries and keys
    of a positional encoding, or None), the attention of each head with the
    kernels of ``pattern`` (a :class:`~skattn._model.patterns.PatternUnit`:
    which keys each query reads) and the output projection
    (:func:`multi_head_forward`). Padded keys are masked; with dropout, the
    attention weights are dropped as in ``torch.nn.MultiheadAttention``.
    """

    def __init__(self, d_model, n_heads, layer, query_key=None, pattern=None):
        self.d_model, self.n_heads, self.layer = d_model, n_heads, layer
        self.query_key = query_key
        self.pattern = PatternUnit(FullAttention()) if pattern is None else pattern

    def param_specs(self):
        shape = (self.d_model, self.d_model)
        return {
            name: ParamSpec(shape, "glorot", penalized=True)
            for name in ("query", "key", "value", "output")
        }

    def forward(self, params, x, context):
        mask = context.key_mask(x.shape[1])
        dropout = None
        if context.dropout is not None:
            site = self.layer * N_DROPOUT_SITES + ATTENTION_WEIGHTS
            dropout = context.dropout.attention(site, self.n_heads)
        pattern = self.pattern.at(context)
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
            query_key=self.query_key,
            pattern=pattern,
        )  # (N, T, E)
        if context.weights_layer == self.layer:
            pattern.write_weights(
                cache["q"], cache["k"], mask, context.causal, context.weights_out
            )
        flag = context.input_gradient
        return out, (x, cache, mask, context.causal, dropout, pattern, flag)

    def backward(self, params, d_out, cache):
        x, attention_cache, mask, causal, dropout, pattern, input_gradient = cache
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
            query_key=self.query_key,
            pattern=pattern,
            input_gradient=input_gradient,
        )


def drop_hidden(hidden, context, layer):
    """Dropout of a feed-forward sublayer's hidden layer, in place, at its
    site of layer ``layer``; returns the multipliers (None without
    dropout), which the backward pass applies to the gradient."""
    if context.dropout is None:
        return None
    site = layer * N_DROPOUT_SITES + FEED_FORWARD_HIDDEN
    scale = context.dropout.multipliers(site, hidden.shape, hidden.dtype)
    hidden *= scale
    return scale


class FeedForward(Unit):
    """``linear2(dropout(activation(linear1(x))))``, with biases.

    ``activation`` is an :class:`Activation`.
    """

    def __init__(self, d_model, ff_dim, activation, layer):
        self.d_model, self.ff_dim = d_model, ff_dim
        self.activation, self.layer = activation, layer

    def param_specs(self):
        d_model, ff_dim = self.d_model, self.ff_dim
        return {
            "linear1": ParamSpec((d_model, ff_dim), "glorot", penalized=True),
            "linear1_bias": ParamSpec((ff_dim,), "zeros", penalized=False),
            "linear2": ParamSpec((ff_dim, d_model), "glorot", penalized=True),
            "linear2_bias": ParamSpec((d_model,), "zeros", penalized=False),
        }

    def forward(self, params, x, context):
        pre = project(x, params["linear1"])  # (N, T, F)
        pre += params["linear1_bias"]
        hidden = self.activation.function(pre)  # (N, T, F)
        scale = drop_hidden(hidden, context, self.layer)
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
        d_pre = d_hidden * self.activation.derivative(pre)  # (N, T, F)
        d_pre_flat = d_pre.reshape(-1, self.ff_dim)  # (N*T, F)
        grads["linear1"] = x.reshape(-1, self.d_model).T @ d_pre_flat
        grads["linear1_bias"] = d_pre_flat.sum(axis=0)
        return project(d_pre, params["linear1"].T), grads  # (N, T, E)

    def kept_floats(self):
        """Numbers per token kept for the backward pass: the pre-activation
        and the hidden layer."""
        return 2 * self.ff_dim


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
        z, pre_cache, inner_context = x, None, context
        if pre_norm is not None:
            z, pre_cache = pre_norm.forward(params, x, context)
            inner_context = context.with_input_gradient(True)  # the norm learns
        out, inner_cache = self.inner.forward(params, z, inner_context)
        scale = None
        if context.dropout is not None:
            scale = context.dropout.multipliers(self.dropout_site, out.shape, out.dtype)
            out *= scale
        if self.residual:
            out = out + x
        post_cache = None
        if post_norm is not None:
            out, post_cache = post_norm.forward(params, out, context)
        cache = (pre_cache, inner_cache, scale, post_cache, context.input_gradient)
        return out, cache

    def backward(self, params, d_out, cache):
        pre_cache, inner_cache, scale, post_cache, input_gradient = cache
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
        if not input_gradient:  # the input is data
            return None, grads
        if self.residual:
            d_x += d_out
        return d_x, grads


class EncoderLayer(Unit):
    """One ``torch.nn.TransformerEncoderLayer``: self-attention, then feed-forward.

    A :class:`Sublayer` around :class:`SelfAttention` (with ``norm1``), then,
    when ``ff_dim > 0``, one around the feed-forward unit (with ``norm2``).

    Parameters
    ----------
    index : int
        Place of the layer in the encoder (its dropout sites, and the layer
        whose attention weights ``Context.weights_layer`` asks for).
    d_model, n_heads, ff_dim
        The width, heads and feed-forward width (0: none).
    activation : Activation
        The feed-forward sublayer's activation.
    feed_forward : type, default=FeedForward
        The feed-forward unit, a kind of the ``feed_forward`` registry of
        ``options.py``, built as ``feed_forward(d_model, ff_dim, activation,
        index)``.
    residual : bool
        Add each sublayer's input to its output.
    layer_norm : NormPlacement or None
        Where each sublayer normalises: after the residual sum (torch's
        ``norm_first=False``), before the sublayer (``norm_first=True``); None:
        nowhere.
    query_key : object or None, default=None
        The transform of the attention's queries and keys (see
        :class:`SelfAttention`).
    pattern : PatternUnit or None, default=None
        The attention pattern (see :class:`SelfAttention`); None: full.
    """

    def __init__(
        self,
        index,
        d_model,
        *,
        n_heads,
        ff_dim,
        activation,
        residual,
        layer_norm,
        feed_forward=None,
        query_key=None,
        pattern=None,
    ):
        self.d_model, self.n_heads, self.ff_dim = d_model, n_heads, ff_dim
        feed_forward = FeedForward if feed_forward is None else feed_forward
        self.pattern = PatternUnit(FullAttention()) if pattern is None else pattern
        norm_first = layer_norm is not None and layer_norm.first
        options = dict(residual=residual, norm_first=norm_first)
        site = index * N_DROPOUT_SITES
        self.sublayers = [
            Sublayer(
                SelfAttention(d_model, n_heads, index, query_key, self.pattern),
                None if layer_norm is None else LayerNorm(d_model, "norm1"),
                dropout_site=site + ATTENTION_OUTPUT,
                **options,
            )
        ]
        self.feed_forward = None
        if ff_dim:
            self.feed_forward = feed_forward(d_model, ff_dim, activation, index)
            self.sublayers.append(
                Sublayer(
                    self.feed_forward,
                    None if layer_norm is None else LayerNorm(d_model, "norm2"),
                    dropout_site=site + FEED_FORWARD_OUTPUT,
                    **options,
                )
            )

    def param_specs(self):
        specs = {}
        for sublayer in self.sublayers:
            specs.update(sublayer.param_specs())
        return specs

    def forward(self, params, x, context):
        caches = []
        for sublayer in self.sublayers:
            x, cache = sublayer.forward(params, x, context)
            caches.append(cache)
            context = context.with_input_gradient(True)  # the next one's input learns
        return x, caches

    def backward(self, params, d_out, caches):
        grads = {}
        for sublayer, cache in zip(
            reversed(self.sublayers), reversed(caches), strict=True
        ):
            d_out, sublayer_grads = sublayer.backward(params, d_out, cache)
            grads.update(sublayer_grads)
        return d_out, grads

    def activation_floats(self, n_tokens):
        # the attention's arrays (LAYER_ARRAYS of (T, E)); the feed-forward's
        # (its kept_floats: of (T, F)); the scores of the pattern (one row
        # per head for full attention's tiles, the band's columns)
        scores, copies = self.pattern.score_floats(
            self.n_heads, causal=False, n_tokens=n_tokens
        )
        kept = LAYER_ARRAYS * self.d_model
        if self.feed_forward is not None:
            kept += self.feed_forward.kept_floats()
        return kept, scores + copies * self.d_model
