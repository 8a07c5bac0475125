"""AttentionTransformer: multi-head self-attention as a scikit-learn transformer."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from numbers import Integral

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._model import forward, init_params, param_shapes
from ._pooling import POOLINGS
from ._sequences import (
    batch_indices,
    pad_sequences,
    sequence_lengths,
    sequences_dtype,
    token_width,
)
from ._validation import (
    Interval,
    StrOptions,
    _fit_context,
    check_init,
    check_input,
    working_memory_bytes,
)

# Fitted attribute holding each model parameter.
PARAM_ATTRIBUTES = {
    "input": "input_weights_",
    "query": "query_weights_",
    "key": "key_weights_",
    "value": "value_weights_",
    "output": "output_weights_",
    "positions": "position_embeddings_",
    "cls": "cls_token_",
    "pool_query": "pooling_query_",
    "ln_weight": "layer_norm_weight_",
    "ln_bias": "layer_norm_bias_",
}

# Smallest head width the default rule gives: narrower heads attend poorly.
MIN_HEAD_DIM = 8


class AttentionTransformer(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Multi-head self-attention over sequences of token embeddings.

    Each sample is a sequence of tokens (vectors of ``n_features`` numbers). The
    transformer projects the tokens to the model width, adds a positional
    encoding, applies one block of multi-head self-attention (query, key, value
    and output projections, residual connection, layer norm) and pools the
    tokens into one vector per sample, ready for any scikit-learn estimator.

    Its projections are seeded from ``random_state`` (or given by ``init``).

    Parameters
    ----------
    n_heads : int, default=4
        Number of attention heads.

    head_dim : int, default=None
        Width of each head; the model width is ``n_heads * head_dim``. None:
        taken from ``init`` when it gives a projection, otherwise
        ``max(8, ceil(n_features / n_heads))``, so that the model keeps at least
        the width of the tokens and each head at least 8 dimensions. When the
        model width equals the token width and ``init`` has no ``"input"``, the
        tokens enter the attention as they are (no input projection).

    embed_dim : int, default=None
        For 2D input only: the number of consecutive columns that form one token.
        None: 1, each column is a scalar token (as in FT-Transformer). Must divide
        the number of columns.

    objective : {"auto"} or None, default=None
        What the projections learn from ``y``. None: nothing, the projections
        stay seeded and ``y`` is ignored. ``"auto"`` with ``y=None`` is the same.

    init : "random" or dict of str to array-like, default="random"
        Initial weights.

        - ``"random"``: Glorot-uniform projections drawn from ``random_state``.
        - a dict with keys among ``"input"`` of shape (n_features, d_model),
          ``"query"``, ``"key"``, ``"value"`` and ``"output"`` of shape
          (d_model, d_model), with ``d_model = n_heads * head_dim`` (the
          ``x @ W`` convention of :func:`~skattn.multi_head_attention`; heads are
          consecutive column blocks). Missing keys are seeded. The arrays are
          copied, never modified.

    pooling : {"mean", "max", "first", "last", "cls", "attention", "flatten"}, \
            default="mean"
        How the per-token outputs become one vector per sample; all of them read
        only the tokens a sequence has, never its padding.

        - ``"mean"``, ``"max"``: over the tokens, feature-wise.
        - ``"first"``, ``"last"``: the first or last token of each sequence.
        - ``"cls"``: a learned class token is appended after the last token of
          each sequence (without positional encoding, and seen by every token
          under ``causal=True``); its output is the representation.
        - ``"attention"``: a query vector attends over the output tokens.
        - ``"flatten"``: all tokens side by side, ``n_tokens * d_model``
          features; every sequence must have the length seen in fit.

    positional_encoding : {"sinusoidal", "learned"} or None, default="sinusoidal"
        Added to the projected tokens.

        - ``"sinusoidal"``: the fixed encoding of Vaswani et al. (2017).
        - ``"learned"``: a table of one vector per position up to the longest
          sequence seen in fit, initialised from the sinusoidal encoding;
          positions beyond it use the sinusoidal encoding.
        - None: no positions; the output tokens are then permutation-equivariant.

    residual : bool, default=True
        Add the block's input to the attention output.

    layer_norm : bool, default=True
        Normalise each output token (post-norm, with gain and bias).

    causal : bool, default=False
        Token ``i`` attends only to tokens ``j <= i``.

    random_state : int, RandomState instance or None, default=None
        Seed of the random weights. Pass an int for reproducible output across
        calls.

    Attributes
    ----------
    n_features_in_ : int
        Columns of a table seen in fit, or the token width of sequences.

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the columns seen in fit, for a DataFrame with string column
        names.

    head_dim_ : int
        Width of each head.

    d_model_ : int
        Model width, ``n_heads * head_dim_``.

    max_tokens_ : int
        Length of the longest sequence seen in fit (for a table, its number of
        tokens).

    input_weights_ : ndarray of shape (n_tokens_features, d_model_) or None
        Input projection; None when the tokens enter unprojected.

    query_weights_, key_weights_, value_weights_ : ndarray of shape \
            (d_model_, d_model_)
        Projections of the tokens to queries, keys and values.

    output_weights_ : ndarray of shape (d_model_, d_model_)
        Projection of the concatenated heads.

    position_embeddings_ : ndarray of shape (max_tokens_, d_model_) or None
        Learned positional encoding.

    cls_token_ : ndarray of shape (d_model_,) or None
        Class token, for ``pooling="cls"``.

    pooling_query_ : ndarray of shape (d_model_,) or None
        Query of the attention pooling, for ``pooling="attention"``.

    layer_norm_weight_, layer_norm_bias_ : ndarray of shape (d_model_,) or None
        Gain and bias of the layer norm.

    See Also
    --------
    skattn.multi_head_attention : The bare attention layer on arrays.
    sklearn.neighbors.NeighborhoodComponentsAnalysis : A supervised linear
        transformer with the same estimator layout.

    Notes
    -----
    Input formats:

    - a 2D array or DataFrame ``(n_samples, n_features)``: ``n_features /
      embed_dim`` tokens of width ``embed_dim``;
    - a 3D array ``(n_samples, n_tokens, n_features)`` (the tslearn / PyTorch
      order; sktime and aeon store ``(n_samples, n_channels, n_timepoints)``,
      which must be transposed with ``X.transpose(0, 2, 1)``);
    - a list, tuple or 1-D object array of 2D arrays ``(n_tokens_i,
      n_features)``: sequences of different lengths, padded internally and
      masked.

    ``transform`` takes the same kind of input as ``fit`` (a table after a table,
    sequences after sequences). It runs in batches of samples sized so that the
    intermediate arrays fit in scikit-learn's ``working_memory``
    (``sklearn.config_context(working_memory=...)``, in MiB), and the attention
    itself runs in query tiles, so memory stays linear in the sequence length.
    Results do not depend on the batch or tile size beyond float rounding.

    The computation runs in the dtype of ``X``: float32 input gives float32
    output.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
    .. [2] Y. Gorishniy et al., "Revisiting Deep Learning Models for Tabular
       Data", NeurIPS 2021 (features as tokens).

    Examples
    --------
    >>> import numpy as np
    >>> from skattn import AttentionTransformer
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((10, 6, 32))  # 10 sequences of 6 tokens of width 32
    >>> attn = AttentionTransformer(n_heads=4, random_state=0).fit(X)
    >>> attn.transform(X).shape
    (10, 32)
    >>> attn.attention_weights(X).shape
    (10, 4, 6, 6)
    >>> ragged = [rng.standard_normal((n, 32)) for n in (3, 7, 5)]
    >>> [t.shape for t in attn.transform_sequences(ragged)]
    [(3, 32), (7, 32), (5, 32)]
    """

    _parameter_constraints: dict = {
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "head_dim": [Interval(Integral, 1, None, closed="left"), None],
        "embed_dim": [Interval(Integral, 1, None, closed="left"), None],
        "objective": [StrOptions({"auto"}), None],
        "init": [StrOptions({"random"}), dict],
        "pooling": [StrOptions(set(POOLINGS))],
        "positional_encoding": [StrOptions({"sinusoidal", "learned"}), None],
        "residual": ["boolean"],
        "layer_norm": ["boolean"],
        "causal": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_heads=4,
        head_dim=None,
        *,
        embed_dim=None,
        objective=None,
        init="random",
        pooling="mean",
        positional_encoding="sinusoidal",
        residual=True,
        layer_norm=True,
        causal=False,
        random_state=None,
    ):
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.embed_dim = embed_dim
        self.objective = objective
        self.init = init
        self.pooling = pooling
        self.positional_encoding = positional_encoding
        self.residual = residual
        self.layer_norm = layer_norm
        self.causal = causal
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the transformer: seed (or take from ``init``) its weights.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Training sequences (see the class docstring for the formats).

        y : None
            Ignored: with ``objective=None`` (or ``"auto"`` and no ``y``) nothing
            is learned from a target.

        Returns
        -------
        self : AttentionTransformer
            Fitted transformer.
        """
        sequences = check_input(self, X, reset=True, embed_dim=self.embed_dim)
        if self.objective == "auto" and y is not None:
            raise NotImplementedError(
                "Learning the projections from y is not available yet; use "
                "objective=None (seeded projections)."
            )
        lengths = sequence_lengths(sequences)
        if self.pooling == "flatten" and np.any(lengths != lengths[0]):
            raise ValueError(
                "pooling='flatten' needs sequences of one length; got lengths from "
                f"{lengths.min()} to {lengths.max()}. Use another pooling for "
                "sequences of different lengths."
            )
        self._initialize(sequences, lengths)
        return self

    def _initialize(self, sequences, lengths):
        """Resolve the model's width and seed its parameters."""
        n_features = token_width(sequences)
        init = {} if isinstance(self.init, str) else check_init(self.init)
        self.head_dim_ = self._resolve_head_dim(n_features, init)
        self.d_model_ = self.n_heads * self.head_dim_
        self.max_tokens_ = int(lengths.max())
        has_input = "input" in init or n_features != self.d_model_
        shapes = param_shapes(
            n_features, self.d_model_, pooling=self.pooling, has_input=has_input
        )
        for name, value in init.items():  # every key of init is in shapes
            if value.shape != shapes[name]:
                raise ValueError(
                    f"init['{name}'] has shape {value.shape}, expected "
                    f"{shapes[name]} (n_features={n_features}, d_model="
                    f"{self.d_model_})."
                )

        dtype = sequences_dtype(sequences)
        params = init_params(
            check_random_state(self.random_state),
            n_features,
            self.d_model_,
            pooling=self.pooling,
            positional_encoding=self.positional_encoding,
            n_positions=self.max_tokens_,
            layer_norm=self.layer_norm,
            has_input=has_input,
            init=init,
            dtype=dtype,
        )
        for name, attribute in PARAM_ATTRIBUTES.items():
            setattr(self, attribute, params.get(name))

    def _resolve_head_dim(self, n_features, init):
        """Head width: the parameter, else the width ``init`` implies, else the rule."""
        if self.head_dim is not None:
            return self.head_dim
        for name in ("query", "key", "value", "output", "input"):
            if name in init:
                width = np.shape(init[name])[-1]
                if width % self.n_heads:
                    raise ValueError(
                        f"init['{name}'] has {width} columns, which n_heads="
                        f"{self.n_heads} does not divide; its width sets the model "
                        "width n_heads * head_dim."
                    )
                return width // self.n_heads
        return max(MIN_HEAD_DIM, math.ceil(n_features / self.n_heads))

    def _params(self, dtype):
        """The fitted parameters as a dict for the kernels, cast to ``dtype``."""
        return {
            name: getattr(self, attribute).astype(dtype, copy=False)
            for name, attribute in PARAM_ATTRIBUTES.items()
            if getattr(self, attribute) is not None
        }

    def _check_sequences(self, X):
        """Validate X for a fitted transformer; return checked sequences."""
        check_is_fitted(self)
        sequences = check_input(self, X, reset=False, embed_dim=self.embed_dim)
        if self.pooling == "flatten":
            lengths = sequence_lengths(sequences)
            wrong = lengths != self.max_tokens_
            if np.any(wrong):
                raise ValueError(
                    f"pooling='flatten' needs sequences of {self.max_tokens_} tokens, "
                    f"the length seen in fit; got {lengths[wrong][0]}."
                )
        return sequences

    def _forward_batches(self, sequences, *, return_weights=False):
        """Run the block on batches that fit in ``working_memory``.

        Yields
        ------
        rows : ndarray of int
            Indices of the batch's samples.
        tokens : ndarray of shape (batch, T', d_model_)
            Per-token outputs, padded.
        pooled : ndarray of shape (batch, n_features_out)
            Pooled outputs.
        cache : dict
            Forward cache (see :func:`skattn._model.forward`).
        """
        is_array = isinstance(sequences, np.ndarray)
        dtype = sequences_dtype(sequences)
        params = self._params(dtype)
        lengths = sequence_lengths(sequences)
        n_features, width = token_width(sequences), self.d_model_

        def row_bytes(n_tokens):
            n_tokens += self.pooling == "cls"
            # input, about ten (T, d_model) activations, one row of scores per head
            # (the attention tiles' own budget is small and fixed)
            n_values = n_tokens * (n_features + 10 * width)
            n_values += self.n_heads * n_tokens * (n_tokens if return_weights else 1)
            return n_values * dtype.itemsize

        for rows in batch_indices(lengths, row_bytes, working_memory_bytes()):
            if is_array:
                x = sequences[rows]  # (batch, T, D), a copy of this batch only
            else:
                x, _ = pad_sequences([sequences[i] for i in rows], dtype)
            tokens, pooled, cache = forward(
                params,
                x,
                lengths[rows],
                n_heads=self.n_heads,
                pooling=self.pooling,
                positional_encoding=self.positional_encoding,
                residual=self.residual,
                layer_norm=self.layer_norm,
                causal=self.causal,
                return_weights=return_weights,
            )
            yield rows, tokens, pooled, cache

    def transform(self, X):
        """Apply self-attention and pool each sequence into one vector.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the same kind (table or sequences) and token width as in
            fit.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features_out)
            Pooled representations, in the dtype of X (float32 or float64);
            ``n_features_out`` is ``d_model_``, or ``n_tokens * d_model_`` for
            ``pooling="flatten"``.
        """
        sequences = self._check_sequences(X)
        X_new = np.empty(
            (len(sequences), self._n_features_out), dtype=sequences_dtype(sequences)
        )
        for rows, _, pooled, _ in self._forward_batches(sequences):
            X_new[rows] = pooled
        return X_new

    def transform_sequences(self, X):
        """Per-token outputs of the block, before pooling.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences, as for :meth:`transform`.

        Returns
        -------
        tokens : ndarray of shape (n_samples, n_tokens, d_model_) or list of \
                ndarray of shape (n_tokens_i, d_model_)
            An array for table and 3D input, a list for a list of sequences. With
            ``pooling="cls"`` each sequence ends with the class token's output
            (``n_tokens + 1`` rows).
        """
        return self._per_token(X, "tokens")

    def attention_weights(self, X):
        """Attention weights of every head.

        Row ``t`` of a head's matrix gives how much token ``t`` attends to each
        token; rows sum to 1.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences, as for :meth:`transform`.

        Returns
        -------
        weights : ndarray of shape (n_samples, n_heads, n_tokens, n_tokens) or \
                list of ndarray of shape (n_heads, n_tokens_i, n_tokens_i)
            An array for table and 3D input, a list for a list of sequences. With
            ``pooling="cls"`` the class token is the last token (``n_tokens + 1``).
            This holds ``n_heads * n_tokens**2`` numbers per sample.
        """
        return self._per_token(X, "weights")

    def _per_token(self, X, what):
        """Collect per-token outputs ("tokens") or attention weights ("weights")."""
        sequences = self._check_sequences(X)
        is_array = isinstance(sequences, np.ndarray)
        extra = int(self.pooling == "cls")
        results = [None] * len(sequences)
        for rows, tokens, _, cache in self._forward_batches(
            sequences, return_weights=what == "weights"
        ):
            values = tokens if what == "tokens" else cache["attention"]["weights"]
            for row, value in zip(rows, values, strict=True):
                n_tokens = len(sequences[row]) + extra
                if what == "tokens":
                    results[row] = value[:n_tokens].copy()
                else:
                    results[row] = value[:, :n_tokens, :n_tokens].copy()
        return np.stack(results) if is_array else results

    @property
    def _n_features_out(self):
        """Number of output features, for ``get_feature_names_out``."""
        if self.pooling == "flatten":
            return self.max_tokens_ * self.d_model_
        return self.d_model_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
