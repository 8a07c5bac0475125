"""WeightedUnionCV: blocks of features side by side, their weights chosen by
cross-validation of the estimator that reads them."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import itertools
from numbers import Integral

import numpy as np
from scipy import sparse
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import check_scoring, get_scorer_names
from sklearn.model_selection import check_cv
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted

from .._input.validation import HasMethods, StrOptions, _fit_context
from .._persistence import VersionedState

__all__ = ["WeightedUnionCV"]

DEFAULT_WEIGHTS = (0.0, 0.25, 0.5, 1.0)


def _estimator_has(method):
    """Whether the fitted estimator (or, unfitted, the given one) has
    ``method``: for ``available_if``."""

    def check(self):
        estimator = getattr(self, "estimator_", self.estimator)
        return hasattr(estimator, method)

    return check


class WeightedUnionCV(VersionedState, MetaEstimatorMixin, BaseEstimator):
    """Blocks of features side by side, each block's weight chosen by
    cross-validation of the estimator that reads them.

    A :class:`~sklearn.pipeline.FeatureUnion` followed by ``estimator``, whose
    ``transformer_weights`` are not guessed but chosen in ``fit`` as
    :class:`~sklearn.linear_model.LogisticRegressionCV` chooses ``C``: each
    candidate set of weights is scored by ``cv``, and ``estimator`` is refitted
    on all the samples with the best. A candidate that gives one block all
    the weight is among them, so the union scores, in cross-validation, at
    least what its best block scores alone: beside TF-IDF, a block of
    token states is kept where it helps and left out where it does not.

    Each transformer is fitted once, on all of ``X`` and without ``y``, so no
    label reaches a block before the cross-validation (a transformer whose
    ``fit`` needs ``y``, a feature selection, fails there). Each block is
    divided by the root mean square norm of its training rows
    (``scale_blocks``), so that a weight of 1 gives every block rows of about
    unit norm whatever its width, as TF-IDF's rows have. Only the estimator is
    fitted per fold and candidate: the cost of ``fit`` is one fit and
    transform of each transformer on the training set, and ``len(candidates)
    x n_splits + 1`` fits of the estimator. A block whose chosen weight is 0
    is left out of the estimator's features and is not computed by
    ``predict``.

    Read more in the :ref:`User Guide <text-start>`.

    Parameters
    ----------
    transformer_list : list of (str, transformer)
        The blocks: a name and a transformer each (its parameters are set as
        ``<name>__<parameter>``, as a FeatureUnion's).
    estimator : estimator
        The classifier or regressor that reads the weighted blocks side by
        side, cloned for each fold and candidate (``estimator_`` is the one
        refitted on all samples).
    weights : array-like of float, default=(0, 0.25, 0.5, 1)
        The weights each block may take. The candidates are every combination
        of these over the blocks in which at least one block has the largest
        weight (7 for two blocks at the default: each block alone, both at
        1, and each at 1 beside the other at 0.25 or 0.5), so that candidates
        differ in the balance of the blocks, not in the scale of the features.
    scale_blocks : bool, default=True
        Divide each block by the root mean square norm of its training rows
        (``block_scales_``) before weighting it.
    cv : int, cross-validation generator or iterable, default=5
        As :func:`~sklearn.model_selection.check_cv` reads it: an int is
        stratified folds for a classifier, folds otherwise.
    scoring : str, callable or None, default=None
        How a candidate is scored on a fold: a name of
        :func:`~sklearn.metrics.get_scorer_names`, a callable
        ``scorer(estimator, X, y)``, or None for the estimator's ``score``.
    n_jobs : int or None, default=None
        Folds fitted in parallel for each candidate (joblib).

    Attributes
    ----------
    transformers_ : list of (str, transformer)
        The fitted transformers of all blocks.
    weights_ : dict of str to float
        The chosen weight of each block.
    block_scales_ : dict of str to float
        What each block is divided by before its weight (1.0 without
        ``scale_blocks``, or for a block of zeros).
    best_score_ : float
        The mean cross-validated score of the chosen weights.
    cv_results_ : dict of ndarray
        Per candidate, in the order the ties are broken (a block alone first,
        then the earlier block heavier): ``params`` (the weights by block),
        ``mean_test_score``, ``std_test_score``, ``rank_test_score`` and
        ``split<k>_test_score``, as :class:`~sklearn.model_selection.GridSearchCV`
        gives them. The first of the candidates of the best mean is chosen.
    estimator_ : estimator
        ``estimator`` fitted on all the samples with the chosen weights.
    classes_ : ndarray of shape (n_classes,)
        The estimator's classes (a classifier's only).
    n_features_in_ : int
        The first transformer's, where it has one (array input).

    See Also
    --------
    sklearn.pipeline.FeatureUnion : Blocks side by side, with fixed weights.
    sklearn.ensemble.StackingClassifier : A model on the predictions of
        several models, one per block.

    Examples
    --------
    >>> from sklearn.datasets import load_wine
    >>> from sklearn.decomposition import PCA
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skattn.compose import WeightedUnionCV
    >>> X, y = load_wine(return_X_y=True)
    >>> model = WeightedUnionCV(
    ...     [("scaled", StandardScaler()), ("pca", PCA(n_components=2))],
    ...     LogisticRegression(max_iter=1000),
    ... ).fit(X, y)
    >>> model.weights_
    {'scaled': 1.0, 'pca': 0.0}
    >>> len(model.cv_results_["params"])
    7
    >>> model.predict(X[:3])
    array([0, 0, 0])
    """

    _parameter_constraints = {
        "transformer_list": [list],
        "estimator": [HasMethods(["fit", "predict"])],
        "weights": ["array-like"],
        "scale_blocks": ["boolean"],
        "cv": ["cv_object"],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        transformer_list,
        estimator,
        *,
        weights=DEFAULT_WEIGHTS,
        scale_blocks=True,
        cv=5,
        scoring=None,
        n_jobs=None,
    ):
        self.transformer_list = transformer_list
        self.estimator = estimator
        self.weights = weights
        self.scale_blocks = scale_blocks
        self.cv = cv
        self.scoring = scoring
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------
    # Parameters of the blocks, as <name>__<parameter>
    # ------------------------------------------------------------------

    def get_params(self, deep=True):
        """The parameters of this estimator, and with ``deep`` those of the
        estimator and of each block (``<name>``, ``<name>__<parameter>``).

        Parameters
        ----------
        deep : bool, default=True
            Include the parameters of the estimator and of the blocks.

        Returns
        -------
        params : dict
        """
        params = super().get_params(deep=deep)
        if not deep or not isinstance(self.transformer_list, list):
            return params
        for name, transformer in _named(self.transformer_list):
            params[name] = transformer
            if hasattr(transformer, "get_params"):
                for key, value in transformer.get_params(deep=True).items():
                    params[f"{name}__{key}"] = value
        return params

    def set_params(self, **params):
        """Set parameters: this estimator's, the estimator's, a block's
        (``<name>__<parameter>``) or a block itself (``<name>``).

        Parameters
        ----------
        **params : dict
            Parameter names and their new values.

        Returns
        -------
        self : WeightedUnionCV
        """
        names = [name for name, _ in _named(self.transformer_list)]
        replaced = {name: params.pop(name) for name in list(params) if name in names}
        if replaced:
            self.transformer_list = [
                (name, replaced.get(name, transformer))
                for name, transformer in self.transformer_list
            ]
        return super().set_params(**params)

    # ------------------------------------------------------------------
    # Fitting
    # ------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Fit the blocks, choose their weights by cross-validation, and fit
        the estimator on all samples with them.

        Parameters
        ----------
        X : any input the transformers take (array-like, list of texts, ...)
            The training samples.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            The targets.

        Returns
        -------
        self : WeightedUnionCV
        """
        self._check_blocks()
        candidates = self._candidates(len(self.transformer_list))
        if y is None:
            raise ValueError(
                "WeightedUnionCV requires y to be passed, but the target y is "
                "None: the weights are chosen by the estimator's score on y."
            )
        y = np.asarray(y)
        if y.ndim == 0 or len(y) < 2:
            raise ValueError(
                f"WeightedUnionCV cross-validates its weights: got {y.size} "
                "sample, give at least 2 per fold."
            )
        if is_classifier(self.estimator):
            check_classification_targets(y)
        self.transformers_, blocks = [], []
        for name, transformer in self.transformer_list:
            transformer = clone(transformer)
            features = _matrix(transformer.fit_transform(X), name, len(y))
            self.transformers_.append((name, transformer))
            blocks.append(features)
        self.block_scales_ = {
            name: _rms_norm(features) if self.scale_blocks else 1.0
            for (name, _), features in zip(self.transformers_, blocks, strict=True)
        }
        scales = list(self.block_scales_.values())
        cv = check_cv(self.cv, y, classifier=is_classifier(self.estimator))
        splits = list(cv.split(np.zeros((len(y), 1)), y))
        scorer = check_scoring(self.estimator, scoring=self.scoring)
        scores = np.empty((len(candidates), len(splits)))
        parallel = Parallel(n_jobs=self.n_jobs)
        for index, weights in enumerate(candidates):
            features = _weighted(blocks, scales, weights)
            scores[index] = parallel(
                delayed(_fit_and_score)(
                    clone(self.estimator), features, y, train, test, scorer
                )
                for train, test in splits
            )
        self.cv_results_ = _cv_results(self.transformers_, candidates, scores)
        best = int(np.argmax(self.cv_results_["mean_test_score"]))
        self.best_score_ = float(self.cv_results_["mean_test_score"][best])
        self.weights_ = dict(self.cv_results_["params"][best])
        features = _weighted(blocks, scales, candidates[best])
        self.estimator_ = clone(self.estimator).fit(features, y)
        return self

    def _check_blocks(self):
        """The blocks are (name, transformer) pairs of distinct names that
        are not parameters of this estimator."""
        pairs = _pairs(self.transformer_list)
        if not pairs:
            raise ValueError(
                "transformer_list is empty: give at least one (name, transformer) pair."
            )
        names = [name for name, _ in pairs]
        own = set(super().get_params(deep=False))
        for name, transformer in pairs:
            if not isinstance(name, str) or "__" in name or name in own:
                raise ValueError(
                    f"The block name {name!r} is not valid: give a str without "
                    f"'__' that is not a parameter of WeightedUnionCV ({sorted(own)})."
                )
            if names.count(name) > 1:
                raise ValueError(f"The block name {name!r} is given twice.")
            if not (hasattr(transformer, "fit") and hasattr(transformer, "transform")):
                raise TypeError(
                    f"The block {name!r} is {transformer!r}, which is not a "
                    "transformer: give an object with fit and transform."
                )

    def _candidates(self, n_blocks):
        """The candidate weights, as tuples over the blocks, in the order ties
        are broken."""
        weights = np.asarray(self.weights, dtype=float)
        if (
            weights.ndim != 1
            or weights.size == 0
            or not np.all(np.isfinite(weights))
            or np.any(weights < 0)
            or not np.any(weights > 0)
        ):
            raise ValueError(
                f"weights={self.weights!r}: give a 1-D sequence of non-negative "
                "numbers with at least one above 0, as (0, 0.25, 0.5, 1)."
            )
        values = sorted({float(w) for w in weights})
        top = values[-1]
        candidates = {
            combination
            for combination in itertools.product(values, repeat=n_blocks)
            if max(combination) == top
        }
        return sorted(
            candidates,
            key=lambda c: (sum(w > 0 for w in c), tuple(-w for w in c)),
        )

    # ------------------------------------------------------------------
    # Prediction
    # ------------------------------------------------------------------

    def _features(self, X):
        """The weighted blocks of ``X`` the estimator reads (the blocks of
        weight 0 are not computed)."""
        check_is_fitted(self)
        blocks, scales, weights = [], [], []
        for name, transformer in self.transformers_:
            weight = self.weights_[name]
            if weight == 0:
                continue
            blocks.append(_matrix(transformer.transform(X), name, None))
            scales.append(self.block_scales_[name])
            weights.append(weight)
        return _weighted(blocks, scales, weights)

    def _delegate(self, method, X):
        """The fitted estimator's ``method`` on the weighted blocks of ``X``."""
        features = self._features(X)
        return getattr(self.estimator_, method)(features)

    def predict(self, X):
        """The estimator's predictions on the weighted blocks of ``X``.

        Parameters
        ----------
        X : any input the transformers take

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        return self._delegate("predict", X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """The estimator's class probabilities on the weighted blocks of ``X``.

        Parameters
        ----------
        X : any input the transformers take

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return self._delegate("predict_proba", X)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """The estimator's log-probabilities on the weighted blocks of ``X``.

        Parameters
        ----------
        X : any input the transformers take

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return self._delegate("predict_log_proba", X)

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X):
        """The estimator's decision function on the weighted blocks of ``X``.

        Parameters
        ----------
        X : any input the transformers take

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        return self._delegate("decision_function", X)

    def score(self, X, y, sample_weight=None):
        """The estimator's ``score`` (accuracy, R^2) on the weighted blocks.

        Parameters
        ----------
        X : any input the transformers take
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        float
        """
        features = self._features(X)
        return self.estimator_.score(features, y, sample_weight=sample_weight)

    @property
    def classes_(self):
        """The classes of the fitted estimator."""
        return self.estimator_.classes_

    @property
    def n_features_in_(self):
        """The number of features of ``X`` the first transformer saw."""
        return self.transformers_[0][1].n_features_in_

    @property
    def feature_names_in_(self):
        """The names of the features of ``X`` the first transformer saw."""
        return self.transformers_[0][1].feature_names_in_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        estimator_tags = get_tags(self.estimator)
        tags.estimator_type = estimator_tags.estimator_type
        tags.classifier_tags = estimator_tags.classifier_tags
        tags.regressor_tags = estimator_tags.regressor_tags
        tags.target_tags.required = True
        tags.target_tags.multi_output = estimator_tags.target_tags.multi_output
        try:
            inputs = [get_tags(block).input_tags for _, block in self.transformer_list]
        except (TypeError, ValueError, AttributeError):
            return tags  # not a list of pairs: fit says why
        if inputs:  # what every block takes
            tags.input_tags.string = all(i.string for i in inputs)
            tags.input_tags.sparse = all(i.sparse for i in inputs)
            tags.input_tags.allow_nan = all(i.allow_nan for i in inputs)
        return tags


def _named(transformer_list):
    """The well-formed (name, transformer) pairs of ``transformer_list``,
    whatever it holds (for ``get_params`` and ``set_params``, which do not
    validate: ``fit`` does)."""
    if not isinstance(transformer_list, list):
        return []
    return [tuple(item) for item in transformer_list if _is_pair(item)]


def _is_pair(item):
    return isinstance(item, tuple | list) and len(item) == 2


def _pairs(transformer_list):
    """The (name, transformer) pairs of ``transformer_list``; a malformed item
    is refused."""
    pairs = _named(transformer_list)
    if len(pairs) != len(transformer_list):
        bad = next(item for item in transformer_list if not _is_pair(item))
        raise ValueError(
            f"transformer_list holds {bad!r}: give (name, transformer) "
            "pairs, as FeatureUnion takes them."
        )
    return pairs


def _matrix(features, name, n_samples):
    """A block's output as a 2-D array or CSR matrix of ``n_samples`` rows
    (any number for None)."""
    if sparse.issparse(features):
        features = features.tocsr()
    else:
        features = np.asarray(features)
    if features.ndim != 2 or (n_samples is not None and features.shape[0] != n_samples):
        raise ValueError(
            f"The block {name!r} returned features of shape {features.shape}: a "
            f"block must give one row per sample ({n_samples} here)."
        )
    return features


def _rms_norm(features):
    """The root mean square of the rows' Euclidean norms (1.0 for zeros)."""
    if sparse.issparse(features):
        total = float(features.multiply(features).sum())
    else:
        total = float(np.einsum("ij,ij->", features, features, dtype=np.float64))
    norm = np.sqrt(total / max(features.shape[0], 1))
    return norm if norm > 0 and np.isfinite(norm) else 1.0


def _weighted(blocks, scales, weights):
    """The blocks of non-zero weight side by side, each times its weight over
    its scale; a CSR matrix if any block is sparse."""
    parts = [
        block * (weight / scale)
        for block, scale, weight in zip(blocks, scales, weights, strict=True)
        if weight > 0
    ]
    if any(sparse.issparse(part) for part in parts):
        return sparse.hstack(parts, format="csr")
    return np.hstack(parts)


def _fit_and_score(estimator, features, y, train, test, scorer):
    estimator.fit(features[train], y[train])
    return scorer(estimator, features[test], y[test])


def _cv_results(transformers, candidates, scores):
    """GridSearchCV's ``cv_results_`` keys for the candidates' fold scores."""
    names = [name for name, _ in transformers]
    mean = scores.mean(axis=1)
    results = {
        "params": [dict(zip(names, weights, strict=True)) for weights in candidates],
        "mean_test_score": mean,
        "std_test_score": scores.std(axis=1),
        # as GridSearchCV ranks: ties share the smaller rank
        "rank_test_score": rankdata(-mean, method="min").astype(np.int32),
    }
    for split in range(scores.shape[1]):
        results[f"split{split}_test_score"] = scores[:, split]
    return results
