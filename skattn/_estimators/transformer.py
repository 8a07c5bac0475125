"""AttentionTransformer: a transformer encoder as a scikit-learn transformer."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.metaestimators import available_if

from .._input.validation import StrOptions, _fit_context, check_finite_output
from .._model.pooling import TABLE_STATISTIC, token_statistics_width
from .._model.sequences import model_dtype
from .._parallel import single_threaded_blas
from .base import BaseAttention
from .dask import blocked_outputs, is_dask_collection
from .docstrings import fill_docstring


@fill_docstring(
    pooled="what ``transform`` returns, and the training head reads",
    attributes=[
        "n_features_in_",
        "feature_names_in_",
        "model",
        "weights",
        "training head",
        "objective_",
        "classes_",
        "training",
    ],
)
class AttentionTransformer(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseAttention
):
    """Multi-head self-attention over sequences of token embeddings.

    Each sample is a sequence of tokens (vectors of ``n_features`` numbers).
    The transformer projects the tokens to the model width, encodes their
    positions, runs them through ``n_layers`` encoder layers (multi-head
    self-attention, then a feed-forward sublayer, each with a residual
    connection, layer norm and dropout, as
    :class:`torch.nn.TransformerEncoderLayer`) and pools the tokens into one
    vector per sample, for any scikit-learn estimator after it.

    ``fit`` learns all the weights from ``y`` (a linear head on the pooled
    vector is trained with them, then set aside: ``transform`` returns the
    learned representation); with ``objective=None`` or without ``y`` the
    weights stay seeded from ``random_state`` (or given by ``init``).

    Read more in the :ref:`User Guide <model>`.

    Parameters
    ----------
    {parameters}

    Attributes
    ----------
    {attributes}

    See Also
    --------
    AttentionClassifier : The same model, predicting class labels.
    AttentionRegressor : The same model, predicting continuous targets.
    RandomAttentionFeatures : Many seeded models, nothing trained.
    skattn.multi_head_attention : The bare attention layer on arrays.

    Notes
    -----
    .. note::
        ``fit(X, y).transform(X)`` encodes ``y`` into the training features.
        Fit the downstream estimator on a held-out split, or cross-validate
        the whole :class:`~sklearn.pipeline.Pipeline`, so that every test fold
        is transformed by a model that never saw it.

    With the same weights, ``transform_sequences`` equals
    :class:`torch.nn.TransformerEncoder` in evaluation mode (:ref:`model`).

    X is a table, a 3D array, a list of sequences of different lengths
    (padding never changes a result), a DataFrame or a dask array
    (:ref:`input_formats`); memory is linear in the length, and results do
    not depend on the number of cores (:ref:`performance`).

    The parameters that fix the model (``n_heads`` to ``patch_size`` but
    ``dropout``, and ``token_statistics``) take effect at the next ``fit``
    that builds a model: a fitted transformer
    computes with the values it was fitted with, and ``partial_fit`` or a
    ``fit`` with ``warm_start=True`` raises a ``ValueError`` on a changed one
    (``"auto"`` and None mean the fitted value). The parameters of training
    may change between calls.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
    .. [2] Y. Gorishniy et al., "Revisiting Deep Learning Models for Tabular
       Data", NeurIPS 2021 (features as tokens).
    .. [3] D. P. Kingma and J. Ba, "Adam: A Method for Stochastic
       Optimization", ICLR 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from skattn import AttentionTransformer
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((10, 6, 32))  # 10 sequences of 6 tokens of width 32
    >>> attn = AttentionTransformer(n_heads=4, random_state=0).fit(X)
    >>> attn.transform(X).shape  # d_model = 4 x 16, then 5 token statistics x 32
    (10, 224)
    >>> attn.attention_weights(X).shape
    (10, 4, 6, 6)
    >>> ragged = [rng.standard_normal((n, 32)) for n in (3, 7, 5)]
    >>> [t.shape for t in attn.transform_sequences(ragged)]
    [(3, 64), (7, 64), (5, 64)]
    """

    _parameter_constraints: dict = {
        **BaseAttention._parameter_constraints,
        "objective": [StrOptions({"auto", "classification", "regression"}), None],
    }

    def __init__(
        self,
        n_heads=4,
        head_dim=None,
        *,
        n_layers=1,
        ff_dim=128,
        activation="relu",
        feed_forward="mlp",
        dropout=0.0,
        layer_norm="post",
        residual=True,
        causal=False,
        attention_window=None,
        attention_dilation=1,
        attention_pattern=None,
        positional_encoding="sinusoidal",
        pooling="auto",
        vocabulary_size=None,
        features_per_token=None,
        data_format="channels_last",
        scale_tokens=True,
        patch_size="auto",
        objective="auto",
        token_statistics="auto",
        init="random",
        solver="adam",
        max_iter=200,
        learning_rate_init="auto",
        batch_size="auto",
        alpha=0.0001,
        tol=1e-4,
        early_stopping="auto",
        validation_fraction=0.1,
        n_iter_no_change="auto",
        shuffle=True,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        class_weight=None,
        warm_start=False,
        verbose=False,
        random_state=None,
    ):
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.n_layers = n_layers
        self.ff_dim = ff_dim
        self.activation = activation
        self.feed_forward = feed_forward
        self.dropout = dropout
        self.layer_norm = layer_norm
        self.residual = residual
        self.causal = causal
        self.attention_window = attention_window
        self.attention_dilation = attention_dilation
        self.attention_pattern = attention_pattern
        self.positional_encoding = positional_encoding
        self.pooling = pooling
        self.vocabulary_size = vocabulary_size
        self.features_per_token = features_per_token
        self.data_format = data_format
        self.scale_tokens = scale_tokens
        self.patch_size = patch_size
        self.objective = objective
        self.token_statistics = token_statistics
        self.init = init
        self.solver = solver
        self.max_iter = max_iter
        self.learning_rate_init = learning_rate_init
        self.batch_size = batch_size
        self.alpha = alpha
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.shuffle = shuffle
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.verbose = verbose
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None, *, X_val=None, y_val=None):
        """Fit the transformer: seed its weights, then learn them from ``y``.

        .. note::
            ``fit(X, y).transform(X)`` returns features learned on the same
            ``y``: a downstream estimator fitted on them sees an optimistic,
            overfitted view of ``X`` (see the Notes of the class).

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Training sequences (see :ref:`input_formats`).

        y : array-like of shape (n_samples,) or (n_samples, n_outputs), default=None
            Target the weights learn from, see ``objective``; None (with
            ``objective="auto"``) keeps them seeded.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss and the token statistics:
            finite, non-negative, not all zero (a weight of 2 counts as two
            samples); None weighs each 1.

        X_val : array-like of the formats of X, default=None
            Validation sequences of early stopping, read as X, instead of
            holding out ``validation_fraction`` of X (``early_stopping="auto"``
            turns on). Needs ``y_val``; in a Pipeline, request it with
            ``set_fit_request(X_val=True, y_val=True)`` and transform it with
            ``Pipeline(..., transform_input=["X_val"])``.

        y_val : array-like of shape (n_val,) or (n_val, n_outputs), default=None
            Target of ``X_val``, encoded as ``y``.

        Returns
        -------
        self : AttentionTransformer
            Fitted transformer.
        """
        return self._fit(
            X, y, sample_weight, incremental=False, X_val=X_val, y_val=y_val
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None, sample_weight=None, *, X_val=None, y_val=None):
        """Fit the transformer, then transform X.

        .. note::
            The result encodes ``y``: a downstream estimator fitted on it sees an
            overfitted view of ``X`` (see the Notes of the class).

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Training sequences.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs), default=None
            Target, see :meth:`fit`.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples, see :meth:`fit`.

        X_val : array-like of the formats of X, default=None
            Validation sequences of early stopping, see :meth:`fit`.

        y_val : array-like of shape (n_val,) or (n_val, n_outputs), default=None
            Target of ``X_val``.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features_out)
            Pooled representations of X.
        """
        return self._fit(
            X, y, sample_weight, incremental=False, X_val=X_val, y_val=y_val
        ).transform(X)

    @available_if(lambda est: est._check_solver())
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch of Adam on the given samples (``solver="adam"`` only).

        The first call initialises the model like :meth:`fit` (training one
        epoch); later calls continue from the weights and optimizer state.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            A batch of training sequences.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Target of the batch.

        classes : array-like of shape (n_classes,), default=None
            All the classes of a classification, needed at the first call when
            a batch may miss some; later calls take None or the same classes.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss.

        Returns
        -------
        self : AttentionTransformer
            The transformer, trained one more epoch.
        """
        return self._fit(X, y, sample_weight, incremental=True, classes=classes)

    def transform(self, X):
        """Apply the encoder and pool each sequence into one vector.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the kind (table or sequences) and token width of fit.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features_out)
            Pooled representations, in the dtype of X: ``d_model_`` columns
            (``n_tokens * d_model_`` for ``pooling="flatten"``), then with
            each of ``token_statistics`` one per token feature (one per
            column of a table for ``"flatten"``).
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._estimators.dask)
            return blocked_outputs(self, "transform", X)
        sequences = self._check_sequences(X)
        X_new = np.empty(
            (len(sequences), self._n_features_out), dtype=model_dtype(sequences)
        )
        with single_threaded_blas():  # once, not per batch
            for rows, _, pooled in self._forward_batches(sequences):
                X_new[rows] = pooled
        check_finite_output(self, X_new, sequences, self._scales_tokens())
        return X_new

    def get_feature_names_out(self, input_features=None):
        """Output feature names: the model's, then the tokens' statistics.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Only checked against ``feature_names_in_``: the outputs do not
            correspond to input features.

        Returns
        -------
        feature_names_out : ndarray of str objects
            ``attentiontransformer0``, ``attentiontransformer1``, ... for the
            model's outputs, then with ``token_statistics``
            ``attentiontransformer_tokens_{statistic}_{feature}``
            (``attentiontransformer_tokens_flatten_{token}_{feature}`` for a
            table's tokens side by side).
        """
        names = super().get_feature_names_out(input_features)
        config = self._fitted.config
        if not config.token_statistics:
            return names
        width, n_tokens = config.n_features, config.n_positions
        n_model = len(names) - token_statistics_width(
            config.token_statistics, n_tokens, width
        )
        prefix = f"{type(self).__name__.lower()}_tokens"
        tokens = [
            f"{prefix}_{name}_{token}_{feature}"
            if name == TABLE_STATISTIC
            else f"{prefix}_{name}_{feature}"
            for name in config.token_statistics
            for token in range(n_tokens if name == TABLE_STATISTIC else 1)
            for feature in range(width)
        ]
        return np.concatenate([names[:n_model], np.asarray(tokens, dtype=object)])

    @property
    def _n_features_out(self):
        """Number of output features, for ``get_feature_names_out``."""
        config = self._fitted.config
        n_features = self._fitted.model.pooling.n_features_out
        return n_features + token_statistics_width(
            config.token_statistics, config.n_positions, config.n_features
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.target_tags.required = self.objective in ("classification", "regression")
        return tags
