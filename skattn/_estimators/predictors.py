"""AttentionClassifier and AttentionRegressor: the transformer with its head.

Both are :class:`~skattn._estimators.base.BaseAttention` with a fixed ``objective``: the
same model, the same training code, and the linear head that
:class:`~skattn.AttentionTransformer` trains and sets aside, here used to
predict.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.metaestimators import available_if

from .._input.validation import _fit_context, batch_budget, check_finite_output
from .._model.evaluate import forward_batches
from .._model.sequences import model_dtype
from .._parallel import single_threaded_blas
from .base import BaseAttention
from .dask import blocked_outputs, is_dask_collection
from .docstrings import fill_docstring

PREDICTOR_ATTRIBUTES = [
    "n_features_in_",
    "feature_names_in_",
    "model",
    "weights",
    "head",
    "training",
]


def head_outputs(estimator, X):
    """The head's outputs on X: logits, or standardised targets.

    The model's forward pass and its head, batched as ``transform``; in the
    dtype of X.
    """
    sequences = estimator._check_sequences(X)
    model = estimator._fitted.model
    dtype = model_dtype(sequences)
    params = estimator._fitted.cast(dtype)
    out = np.empty((len(sequences), model.config.n_outputs), dtype=dtype)
    with single_threaded_blas():
        for rows, _, pooled in forward_batches(
            model, params, sequences, batch_budget()
        ):
            out[rows] = model.head_forward(params, pooled)
    check_finite_output(estimator, out, sequences, estimator._scales_tokens())
    return out


@fill_docstring(
    pooled="what the head predicts from", attributes=["classes_", *PREDICTOR_ATTRIBUTES]
)
class AttentionClassifier(ClassifierMixin, BaseAttention):
    """Transformer encoder classifier: self-attention, pooling, softmax.

    The model and training of :class:`AttentionTransformer` with
    ``objective="classification"``; the linear head on the pooled vector
    predicts (softmax cross-entropy, one logit per class). Its per-token
    outputs and attention weights are those of the trained model, for
    :class:`~skattn.plotting.AttentionDisplay`.

    Read more in the :ref:`User Guide <learning>`.

    Parameters
    ----------
    {parameters}

    Attributes
    ----------
    {attributes}

    See Also
    --------
    AttentionTransformer : The same model, returning the pooled vectors.
    AttentionRegressor : The same model for continuous targets.
    sklearn.neural_network.MLPClassifier : A multi-layer perceptron classifier.

    Notes
    -----
    ``predict`` equals ``classes_[argmax(transform(X) @ head_coef_ +
    head_intercept_)]`` of an :class:`AttentionTransformer` fitted with the
    same parameters and ``objective="classification"``.
    The parameters that fix the model take effect at the next ``fit``, as in
    :class:`AttentionTransformer`.

    Examples
    --------
    >>> import numpy as np
    >>> from skattn import AttentionClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((40, 5, 3))  # 40 sequences of 5 tokens of width 3
    >>> y = (X[:, :, 0].mean(axis=1) > 0).astype(int)
    >>> clf = AttentionClassifier(solver="lbfgs", max_iter=50, random_state=0)
    >>> clf.fit(X, y).predict(X[:4]).shape
    (4,)
    >>> clf.predict_proba(X[:4]).shape
    (4, 2)
    >>> clf.attention_weights(X[:4]).shape  # 4 heads of 5 x 5 weights
    (4, 4, 5, 5)
    >>> clf.score(X, y) > 0.9
    True
    """

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

    objective = "classification"  # not a parameter: BaseAttention reads it

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None):
        """Fit the model and its head to class labels.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Training sequences (see :class:`AttentionTransformer` for the formats).

        y : array-like of shape (n_samples,)
            Class labels.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss; None gives every sample weight 1.

        X_val : array-like of the formats of X, default=None
            Validation sequences of early stopping (Adam), instead of holding
            out ``validation_fraction`` of X; needs ``y_val``.

        y_val : array-like of shape (n_val,), default=None
            Class labels of ``X_val``.

        Returns
        -------
        self : AttentionClassifier
            Fitted classifier.
        """
        y = _column_to_1d(y)
        return self._fit(
            X, y, sample_weight, incremental=False, X_val=X_val, y_val=y_val
        )

    @available_if(lambda est: est._check_solver())
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch of Adam on the given samples (``solver="adam"`` only).

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            A batch of training sequences.

        y : array-like of shape (n_samples,)
            Class labels of the batch.

        classes : array-like of shape (n_classes,), default=None
            All the classes, needed at the first call when a batch may miss
            some of them. None: the classes of the first batch.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss.

        Returns
        -------
        self : AttentionClassifier
            The classifier, trained one more epoch.
        """
        y = _column_to_1d(y)
        return self._fit(X, y, sample_weight, incremental=True, classes=classes)

    def decision_function(self, X):
        """Logits of the head.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the kind seen in fit.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            One logit per class; for two classes, the log-odds of
            ``classes_[1]`` (the difference of its logit and the other's).
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._estimators.dask)
            return blocked_outputs(self, "decision_function", X)
        logits = head_outputs(self, X)
        if logits.shape[1] == 2:
            return logits[:, 1] - logits[:, 0]
        return logits

    def predict(self, X):
        """Class of the largest logit.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the kind seen in fit.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Predicted class labels.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._estimators.dask)
            return blocked_outputs(self, "predict", X)
        logits = head_outputs(self, X)
        return self.classes_[np.argmax(logits, axis=1)]

    def predict_log_proba(self, X):
        """Logarithm of the class probabilities (log-softmax of the logits).

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the kind seen in fit.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Log-probability of each class of ``classes_``.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._estimators.dask)
            return blocked_outputs(self, "predict_log_proba", X)
        logits = head_outputs(self, X)
        shifted = logits - logits.max(axis=1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

    def predict_proba(self, X):
        """Class probabilities (softmax of the logits, as in training).

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the kind seen in fit.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probability of each class of ``classes_``; rows sum to 1.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._estimators.dask)
            return blocked_outputs(self, "predict_proba", X)
        logits = head_outputs(self, X)
        proba = np.exp(logits - logits.max(axis=1, keepdims=True))
        proba /= proba.sum(axis=1, keepdims=True)
        return proba

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


@fill_docstring(pooled="what the head predicts from", attributes=PREDICTOR_ATTRIBUTES)
class AttentionRegressor(RegressorMixin, BaseAttention):
    """Transformer encoder regressor: self-attention, pooling, linear head.

    The model and training of :class:`AttentionTransformer` with
    ``objective="regression"`` (squared error on the standardised target);
    the linear head on the pooled vector predicts, in the units of ``y``.

    Read more in the :ref:`User Guide <learning>`.

    Parameters
    ----------
    {parameters}

    Attributes
    ----------
    {attributes}

    See Also
    --------
    AttentionTransformer : The same model, returning the pooled vectors.
    AttentionClassifier : The same model for class labels.
    sklearn.neural_network.MLPRegressor : A multi-layer perceptron regressor.

    Notes
    -----
    ``predict`` equals ``(transform(X) @ head_coef_ + head_intercept_) * scale +
    mean`` of an :class:`AttentionTransformer` fitted with the same
    parameters and ``objective="regression"``,
    ``mean`` and ``scale`` being the weighted moments of ``y`` in fit.
    ``class_weight`` applies to classification only: any value but None
    raises an error in fit.

    Examples
    --------
    >>> import numpy as np
    >>> from skattn import AttentionRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((40, 5, 3))  # 40 sequences of 5 tokens of width 3
    >>> y = 10 + 3 * X[:, :, 0].mean(axis=1)
    >>> reg = AttentionRegressor(solver="lbfgs", max_iter=50, random_state=0)
    >>> reg.fit(X, y).predict(X[:4]).shape
    (4,)
    >>> reg.score(X, y) > 0.9
    True
    """

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

    objective = "regression"  # not a parameter: BaseAttention reads it

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None):
        """Fit the model and its head to continuous targets.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Training sequences (see :class:`AttentionTransformer` for the formats).

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets, standardised internally.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss; None gives every sample weight 1.

        X_val : array-like of the formats of X, default=None
            Validation sequences of early stopping (Adam), instead of holding
            out ``validation_fraction`` of X; needs ``y_val``.

        y_val : array-like of shape (n_val,) or (n_val, n_outputs), default=None
            Targets of ``X_val``.

        Returns
        -------
        self : AttentionRegressor
            Fitted regressor.
        """
        return self._fit(
            X, y, sample_weight, incremental=False, X_val=X_val, y_val=y_val
        )

    @available_if(lambda est: est._check_solver())
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None):
        """One epoch of Adam on the given samples (``solver="adam"`` only).

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            A batch of training sequences.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets of the batch.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss.

        Returns
        -------
        self : AttentionRegressor
            The regressor, trained one more epoch.
        """
        return self._fit(X, y, sample_weight, incremental=True)

    def predict(self, X):
        """Predicted targets, in the units of ``y``.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the kind seen in fit.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_outputs)
            1-D for a single target (``y`` of shape (n_samples,) or
            (n_samples, 1)).
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._estimators.dask)
            return blocked_outputs(self, "predict", X)
        outputs = head_outputs(self, X)  # checks that the regressor is fitted
        mean, scale = self._target_scaling()
        y_pred = outputs * scale + mean
        if y_pred.shape[1] == 1:
            return y_pred[:, 0]
        return y_pred

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        return tags


def _column_to_1d(y):
    """A column vector ``y`` of shape (n, 1) flattened, with scikit-learn's warning."""
    if getattr(y, "ndim", None) == 2 and y.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please "
            "change the shape of y to (n_samples, ), for example using ravel().",
            DataConversionWarning,
            stacklevel=3,
        )
    return y
