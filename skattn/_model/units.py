"""The units the model is built from, each owning its parameters.

A unit declares its parameters (:meth:`Unit.param_specs`: name, shape, how it
is seeded, whether the L2 penalty applies, which fitted attribute holds it),
computes a forward pass and its backward pass::

    out, cache = unit.forward(params, x, context)
    d_x, grads = unit.backward(params, d_out, cache)

and describes what it does to the tokens: how many it returns for sequences of
given lengths (:meth:`Unit.lengths`), how wide (:meth:`Unit.width`), and the
activations it holds (:meth:`Unit.activation_floats`). ``params`` holds the
unit's own parameters by their local names; ``context`` (a :class:`Context`)
carries what the whole batch shares: the lengths of the sequences the unit
receives, their key-padding mask, the causal switch and the dropout streams.
Units read the context and never change it. The model (``model.py``) is a
list of units; the encoder layer is in ``encoder.py``.

Numpy functions on arrays (the layer norm runs compiled where numba is
installed, see ``skattn._kernels.compiled``): nothing here imports
scikit-learn or knows about an estimator.

Shape legend: N samples, T tokens (padded length), D token width, E model width
(``n_heads * head_dim``).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import copy
import functools
import math
from dataclasses import KW_ONLY, dataclass

import numpy as np

from .._kernels import compiled
from .._kernels.multi_head import project

LAYER_NORM_EPS = 1e-5


@dataclass(frozen=True)
class ParamSpec:
    """What a unit says about one of its parameters.

    Attributes
    ----------
    shape : tuple of int
    init : {"glorot", "normal", "embedding", "ones", "zeros", "sinusoidal"}
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
    sparse : bool
        Whether its gradient is :class:`SparseRows`: a table of which a batch
        uses a few rows (the token embeddings).
    """

    shape: tuple
    init: str
    _: KW_ONLY
    penalized: bool
    attribute: str | None = None
    trainable: bool = True
    sparse: bool = False


class SparseRows:
    """The gradient of a table of which a batch uses a few rows.

    Zero but on ``rows``, where it adds ``values`` (a row may come several
    times: its values add up). ``+=`` another gathers both, summed once per
    row when the entries outnumber the table's rows: a gradient over many
    batches (all of X, for L-BFGS) holds at most the table's rows and the
    last batch's tokens.

    Parameters
    ----------
    rows : ndarray of int of shape (k,)
    values : ndarray of shape (k, E)
    shape : tuple of int
        Shape of the table, ``(V, E)``.
    """

    def __init__(self, rows, values, shape):
        self.rows, self.values, self.shape = rows, values, tuple(shape)

    @classmethod
    def empty(cls, shape, dtype):
        """No row."""
        return cls(np.empty(0, np.intp), np.empty((0, shape[1]), dtype), shape)

    @property
    def dtype(self):
        return self.values.dtype

    def __iadd__(self, other):
        self.rows = np.concatenate([self.rows, other.rows])
        self.values = np.concatenate([self.values, other.values])
        if len(self.rows) > self.shape[0]:
            # each row's values are added in the order they came, as
            # coalesced() and toarray() add them: the same sums to the bit
            self.rows, self.values = self.coalesced()
        return self

    def coalesced(self):
        """The rows once each, sorted, and the sum of their values.

        Returns
        -------
        rows : ndarray of int of shape (k',)
        values : ndarray of shape (k', E)
        """
        rows, inverse = np.unique(self.rows, return_inverse=True)
        values = np.zeros((len(rows), self.shape[1]), dtype=self.values.dtype)
        np.add.at(values, inverse, self.values)
        return rows, values

    def toarray(self):
        """The gradient as a dense array of ``shape``."""
        dense = np.zeros(self.shape, dtype=self.values.dtype)
        np.add.at(dense, self.rows, self.values)
        return dense


def sinusoidal_positions(n_tokens, width, dtype=np.float64):
    """Sinusoidal positional encoding of Vaswani et al. (2017).

    ``P[t, 2i] = sin(t / 10000^(2i / width))`` and
    ``P[t, 2i + 1] = cos(t / 10000^(2i / width))``.

    Returns
    -------
    positions : ndarray of shape (n_tokens, width)
        Read-only: tables of up to 2**20 values are computed once and shared
        by every batch (each batch of a fit would recompute it).
    """
    if n_tokens * width <= 2**20:
        return _shared_positions(n_tokens, width, np.dtype(dtype).str)
    return _positions(n_tokens, width, dtype)


@functools.lru_cache(maxsize=8)
def _shared_positions(n_tokens, width, dtype):
    table = _positions(n_tokens, width, dtype)
    table.flags.writeable = False
    return table


def _positions(n_tokens, width, dtype):
    """The table of :func:`sinusoidal_positions`, a new array."""
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

    Where numba is installed, a compiled pass computes the same to float
    rounding (:func:`skattn._kernels.compiled.layer_norm_forward`); rows it
    cannot hold come here.

    Returns
    -------
    out : ndarray, same shape as ``x``
    cache : dict
        ``x_hat`` (normalised input) and ``inv_std`` of shape (..., 1).
    """
    if compiled.layer_norm_applies(x, weight, bias):
        result = compiled.layer_norm_forward(x, weight, bias, eps)
        if result is not None:
            out, x_hat, inv_std = result
            return out, {"x_hat": x_hat, "inv_std": inv_std}
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
    if compiled.layer_norm_applies(d_out, weight, x_hat, inv_std):
        return compiled.layer_norm_backward(d_out, weight, x_hat, inv_std)
    width = x_hat.shape[-1]
    d_weight = (d_out * x_hat).reshape(-1, width).sum(axis=0)
    d_bias = d_out.reshape(-1, width).sum(axis=0)
    d_x_hat = d_out * weight
    d_x = d_x_hat - d_x_hat.mean(axis=-1, keepdims=True)
    d_x -= x_hat * np.mean(d_x_hat * x_hat, axis=-1, keepdims=True)
    d_x *= inv_std
    return d_x, d_weight, d_bias


class Context:
    """What the units of one forward pass share; read, never changed.

    The model gives each unit the context of the lengths that unit receives
    (:meth:`with_lengths`), so that a unit that adds or merges tokens (a class
    token, patches) says so through :meth:`Unit.lengths` instead of writing
    the lengths here.

    Parameters
    ----------
    lengths : ndarray of shape (N,), dtype int
        Valid tokens of each row of the padded batch.
    causal : bool
        Whether token ``i`` attends only to tokens ``j <= i``.
    dropout : DropoutStreams or None, default=None
        Training-time dropout; None in evaluation.
    weights_layer : int or None, default=None
        Encoder layer whose attention weights to write into ``weights_out``.
    weights_out : ndarray or list of ndarray, default=None
        Where that layer writes them (see
        :func:`skattn._model.patterns.write_attention_weights`): an array of
        shape (N, H, T, T), or one array of shape (H, T_i, T_i) per row, for
        the row's own tokens.
    input_gradient : bool, default=True
        Whether the unit's backward pass must return the gradient with
        respect to its input. False where the input is data that nothing
        learns from (the first unit that learns, in training): the unit may
        then return None for it and skip its products.
    """

    def __init__(
        self,
        lengths,
        *,
        causal,
        dropout=None,
        weights_layer=None,
        weights_out=None,
        input_gradient=True,
    ):
        self.lengths = lengths
        self.causal = causal
        self.dropout = dropout
        self.weights_layer = weights_layer
        self.weights_out = weights_out
        self.input_gradient = input_gradient
        self._mask = []  # the key mask once computed; copies share it

    def with_lengths(self, lengths):
        """This context for a unit that receives sequences of ``lengths``
        (itself when they are the same array)."""
        if lengths is self.lengths:
            return self
        return Context(
            lengths,
            causal=self.causal,
            dropout=self.dropout,
            weights_layer=self.weights_layer,
            weights_out=self.weights_out,
            input_gradient=self.input_gradient,
        )

    def with_input_gradient(self, input_gradient):
        """This context for a unit whose input does (or does not) need its
        gradient (itself when it says the same); the key mask is shared."""
        if input_gradient == self.input_gradient:
            return self
        context = copy.copy(self)
        context.input_gradient = input_gradient
        return context

    def key_mask(self, n_tokens):
        """Key-padding mask of shape (N, 1, T), or None when no row is padded.

        Computed once per context (the layers of a model share it).
        """
        if not self._mask:
            mask = None
            if np.any(self.lengths != n_tokens):
                mask = token_mask(self.lengths, n_tokens)[:, None, :]  # (N, 1, T)
            self._mask.append(mask)
        return self._mask[0]


class Unit:
    """A piece of the model: its parameters, a forward and a backward pass,
    and what it does to the lengths, the width and the memory of the tokens."""

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
        """Returns ``(d_x, grads)``: gradients by local name. ``d_x`` may be
        None where nothing before the unit learns: always for a unit that
        reads data (the input projection, the embeddings), and for any unit
        whose forward pass's context said ``input_gradient=False``."""
        raise NotImplementedError

    def lengths(self, lengths):
        """Tokens the unit returns for sequences of ``lengths`` tokens
        (``lengths`` itself when it keeps them)."""
        return lengths

    def width(self, width):
        """Features of the tokens it returns for tokens of ``width``."""
        return width

    def activation_floats(self, n_tokens):
        """``(kept, transient)``: numbers per token the unit holds on
        sequences of ``n_tokens`` (as the encoder reads them), for its
        backward pass and only while it runs (see ``Model.row_bytes``); the
        units around the encoder layers hold too little to count."""
        return 0, 0


class TokenScaler(Unit):
    """Standardised tokens, ``(x - token_mean) / token_scale``.

    The statistics are fixed in fit (see ``skattn._model.sequences.token_moments``),
    never trained: per feature of the tokens, shape ``(D,)``, or per position and
    feature, ``(T, D)``, for the columns of a table. The first unit of a model:
    its backward pass returns no gradient for the tokens (None).
    """

    def __init__(self, shape):
        self.shape = tuple(shape)

    def param_specs(self):
        return {
            "token_mean": ParamSpec(
                self.shape,
                "zeros",
                penalized=False,
                attribute="token_mean_",
                trainable=False,
            ),
            "token_scale": ParamSpec(
                self.shape,
                "ones",
                penalized=False,
                attribute="token_scale_",
                trainable=False,
            ),
        }

    def forward(self, params, x, context):
        return standardise(x, params["token_mean"], params["token_scale"]), None

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
        if stride == size:  # side by side: a view
            return padded.reshape(n_samples, n_patches, size * n_features), None
        # (N, n_patches, D, size): a window every stride tokens, made token-major
        windows = np.lib.stride_tricks.sliding_window_view(padded, size, axis=1)
        windows = windows[:, ::stride]
        patches = np.ascontiguousarray(windows.transpose(0, 1, 3, 2))
        return patches.reshape(n_samples, n_patches, size * n_features), None

    def backward(self, params, d_out, cache):
        return None, {}

    def lengths(self, lengths):
        return patch_count(lengths, self.size, self.stride)

    def width(self, width):
        return width * self.size


class Embedding(Unit):
    """Integer token ids looked up in a learned table: ``(N, T, 1) -> (N, T, E)``.

    Ids from 0 to ``vocabulary_size - 1``; larger ones (unseen in fit) read as
    0, the id of unknown tokens. Seeded N(0, 1) as ``torch.nn.Embedding``;
    its gradient holds the rows of the batch's valid tokens only
    (:class:`SparseRows`), and no L2 penalty applies to it. The first unit of
    a model: the ids are data (no gradient, None).
    """

    def __init__(self, vocabulary_size, d_model):
        self.vocabulary_size, self.d_model = vocabulary_size, d_model

    def param_specs(self):
        shape = (self.vocabulary_size, self.d_model)
        spec = ParamSpec(
            shape,
            "embedding",
            penalized=False,
            attribute="token_embeddings_",
            sparse=True,
        )
        return {"embeddings": spec}

    def forward(self, params, x, context):
        ids = x[..., 0]  # (N, T)
        ids = np.where(ids < self.vocabulary_size, ids, 0)
        return params["embeddings"][ids], (ids, context.lengths)  # (N, T, E)

    def backward(self, params, d_out, cache):
        ids, lengths = cache
        valid = token_mask(lengths, ids.shape[1])  # (N, T)
        grad = SparseRows(ids[valid], d_out[valid], params["embeddings"].shape)
        return None, {"embeddings": grad}

    def width(self, width):
        return self.d_model


class InputProjection(Unit):
    """Tokens of width D projected to the model width E: ``x @ W``.

    Its backward pass returns no gradient for the tokens (None), which are
    data, or standardised data.
    """

    def __init__(self, n_features, d_model):
        self.n_features, self.d_model = n_features, d_model

    def param_specs(self):
        shape = (self.n_features, self.d_model)
        return {
            "input": ParamSpec(
                shape, "glorot", penalized=True, attribute="input_weights_"
            )
        }

    def forward(self, params, x, context):
        return project(x, params["input"]), x  # (N, T, E): one matrix product

    def backward(self, params, d_out, x):
        grad = x.reshape(-1, x.shape[2]).T @ d_out.reshape(-1, d_out.shape[2])
        return None, {"input": grad}

    def width(self, width):
        return self.d_model


class PositionalEncoding(Unit):
    """A positional encoding: what it adds to the tokens, and what it does to
    the queries and keys of every attention.

    The base class adds nothing and transforms nothing; a kind of the
    ``positional_encoding`` registry (``options.py``) overrides
    :meth:`forward` and :meth:`backward` to add positions to the tokens, or
    :meth:`query_key_transform` to move them into the attention.

    Parameters
    ----------
    n_positions : int
        Model tokens of fit's longest sequence.
    d_model : int
        Model width E.
    n_heads : int
        Attention heads (the head width is ``d_model // n_heads``).

    Attributes
    ----------
    trainable : bool
        Whether training changes the encoding (a learned table): a model that
        is never trained, as those of
        :class:`~skattn.RandomAttentionFeatures`, would keep its initial
        values.
    """

    trainable = False

    def __init__(self, n_positions, d_model, n_heads):
        self.n_positions, self.d_model, self.n_heads = n_positions, d_model, n_heads

    def forward(self, params, x, context):
        return x, None

    def backward(self, params, d_out, cache):
        return d_out, {}

    def query_key_transform(self):
        """What each attention does to its queries and keys after their
        projections, or None for nothing (see
        :func:`skattn._kernels.multi_head.multi_head_forward`'s
        ``query_key``)."""
        return None


class SinusoidalPositions(PositionalEncoding):
    """The fixed table of Vaswani et al. (:func:`sinusoidal_positions`) added
    to the tokens."""

    def forward(self, params, x, context):
        n_tokens, d_model = x.shape[1:]
        return x + sinusoidal_positions(n_tokens, d_model, x.dtype), None  # (N, T, E)


class LearnedPositions(PositionalEncoding):
    """A learned table of ``n_positions`` rows, initialised from the
    sinusoidal one, added to the tokens; positions beyond it use the
    sinusoidal encoding."""

    trainable = True

    def param_specs(self):
        shape = (self.n_positions, self.d_model)
        spec = ParamSpec(
            shape, "sinusoidal", penalized=False, attribute="position_embeddings_"
        )
        return {"position_embeddings": spec}

    def forward(self, params, x, context):
        n_tokens, d_model = x.shape[1:]
        table = params["position_embeddings"][:n_tokens]  # (min(T, T_fit), E)
        if n_tokens > table.shape[0]:
            beyond = sinusoidal_positions(n_tokens, d_model, x.dtype)
            table = np.concatenate([table, beyond[table.shape[0] :]])  # (T, E)
        return x + table, n_tokens  # a new array: never modifies x

    def backward(self, params, d_out, n_tokens):
        table = params["position_embeddings"]
        n_learned = min(n_tokens, table.shape[0])
        grad = np.zeros_like(table)
        grad[:n_learned] = d_out[:, :n_learned].sum(axis=0)
        return d_out, {"position_embeddings": grad}


class ClassToken(Unit):
    """A learned token put right after the last valid token of each sequence.

    After the sequence rather than before it, so that with a causal mask the
    class token still attends to every token (and no token to it, as torch's
    causal mask has it for a last token). Adds one to each length.
    """

    def __init__(self, d_model):
        self.d_model = d_model

    def param_specs(self):
        spec = ParamSpec(
            (self.d_model,), "normal", penalized=True, attribute="cls_token_"
        )
        return {"cls_token": spec}

    def forward(self, params, x, context):
        lengths = context.lengths
        return append_class_token(x, lengths, params["cls_token"]), lengths

    def lengths(self, lengths):
        return lengths + 1

    def backward(self, params, d_out, lengths):
        n_samples, n_tokens = d_out.shape[0], d_out.shape[1] - 1
        grad = d_out[np.arange(n_samples), lengths].sum(axis=0)
        d_x = d_out[:, :n_tokens]  # (N, T, E)
        # the class token of a shorter sequence sat in another's padding
        d_x = np.where(token_mask(lengths, n_tokens)[:, :, None], d_x, 0)
        return d_x, {"cls_token": grad}


def standardise(x, mean, scale):
    """Tokens ``(x - mean) / scale``: a new array."""
    return (x - mean) / scale


def append_class_token(h, lengths, cls):
    """``h`` with ``cls`` right after the last valid token of each row.

    Returns
    -------
    h : ndarray of shape (N, T + 1, E)
    """
    n_samples, n_tokens, width = h.shape
    extended = np.zeros((n_samples, n_tokens + 1, width), dtype=h.dtype)
    extended[:, :n_tokens] = h
    extended[np.arange(n_samples), lengths] = cls
    return extended


class LayerNorm(Unit):
    """Layer normalisation with gain ``{name}_weight`` and bias ``{name}_bias``."""

    def __init__(self, d_model, name, attributes=False):
        self.d_model, self.name, self.attributes = d_model, name, attributes

    def param_specs(self):
        names = (f"{self.name}_weight", f"{self.name}_bias")
        return {
            name: ParamSpec(
                (self.d_model,),
                init,
                penalized=False,
                attribute=f"{name}_" if self.attributes else None,
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
