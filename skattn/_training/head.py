"""The linear head fitted on the trained model's pooled outputs and the
tokens' statistics (``token_statistics``): after training, for classes with
the tokens' statistics, and for targets always.

With a validation set (early stopping's held-out samples, or ``X_val``) the
head is chosen on it among penalties and between the whole head and the
statistics alone: where the attention adds nothing that the held-out samples
show, the head is the linear model of the tokens' statistics.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np
from scipy.special import log_softmax
from sklearn.linear_model import LogisticRegression, Ridge, RidgeCV

from .._input.validation import batch_budget
from .._model.evaluate import forward_batches
from .._parallel import single_threaded_blas

HEAD_ALPHA = 1.0
HEAD_MAX_ITER = 1000
# The penalties of the targets' ridge head, one chosen by leave-one-out error
# (RidgeCV's, at the cost of one decomposition of the features): a fit that
# stopped on a plateau, or a model whose pooled vector holds more than the
# training set can fix, gets a smaller or a larger one than the default 1.
HEAD_ALPHAS = np.logspace(-3, 3, 13)
# The penalties a validation set chooses among for classes (HEAD_ALPHA's
# neighbours a decade apart); targets choose among HEAD_ALPHAS.
HEAD_VALIDATION_ALPHAS = HEAD_ALPHA * np.logspace(-2, 2, 5)


def fit_head(model, params, train, validation=None, held_out=None):
    """The head of the trained ``model`` on the training set: its pooled
    vectors and the tokens' statistics, by :func:`fit_linear_head`.

    Parameters
    ----------
    model : Model
        The whole model (its head reads the statistics).
    params : dict of str to ndarray
        Its parameters, in the dtype of the sequences.
    train : TrainingSet
    validation : TrainingSet or None, default=None
        The validation set passed to ``fit`` (``X_val``): the head is chosen
        on it, among candidates fitted on all of ``train``.
    held_out : ndarray of int or None, default=None
        Without ``validation``, the rows of ``train`` early stopping held
        out: the head is chosen on them, among candidates fitted on the
        other rows.

    Returns
    -------
    coef, intercept : ndarray
        As :func:`fit_linear_head` returns them.
    """

    def features(sequences):
        out = np.empty((len(sequences), model.head.n_features))
        with single_threaded_blas():
            for rows, _, pooled in forward_batches(
                model, params, sequences, batch_budget()
            ):
                out[rows] = pooled
        return out

    features_train, choice = features(train.sequences), None
    if validation is not None:
        choice = (slice(None), features(validation.sequences), validation)
    elif held_out is not None:
        fit_rows = np.setdiff1d(np.arange(len(train)), held_out)
        choice = (fit_rows, features_train[held_out], rows_of(train, held_out))
    n_pooled = model.pooled_head_only().head.n_features
    return fit_linear_head(features_train, train, n_pooled=n_pooled, validation=choice)


def fit_linear_head(features, data, *, n_pooled=None, validation=None):
    """The linear head of fixed features.

    Without ``validation``: a logistic regression of penalty ``HEAD_ALPHA``
    (classes), to convergence, or a ridge regression of the penalty among
    ``HEAD_ALPHAS`` of least leave-one-out error (targets). With it: the head,
    among the penalties ``HEAD_VALIDATION_ALPHAS`` (classes) or
    ``HEAD_ALPHAS`` (targets), on all the features or on the statistics
    after the first ``n_pooled`` columns alone, of least loss on the
    validation set (the weighted log-loss, or the squared error of the
    standardised targets); fitted on the training rows to be scored, then
    on all of ``features``. A tie keeps the whole head at the default
    penalty.

    Those of scikit-learn's ``LogisticRegression(C=1 / alpha)``,
    ``Ridge(alpha)`` and ``RidgeCV(alphas=HEAD_ALPHAS)`` given the sample
    weights as the caller gave them (times the class weights): the penalty
    times half the squared weights against the weighted sum of the losses,
    so that a weight of 2 counts as two samples, as in the training's
    objective.

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features)
        The model's pooled outputs of the training samples, then the tokens'
        statistics.
    data : TrainingSet
        Their targets and weights.
    n_pooled : int or None, default=None
        How many columns of ``features`` are the pooled outputs; the rest
        are the tokens' statistics. With ``validation``.
    validation : tuple or None, default=None
        ``(fit_rows, validation_features, validation_data)``: the rows of
        ``features`` the candidates are fitted on (those early stopping
        trained on), the validation samples' features and their
        ``TrainingSet``.

    Returns
    -------
    coef : ndarray of shape (n_features, n_outputs)
    intercept : ndarray of shape (n_outputs,)
        The head, ``features @ coef + intercept``: the logits of every class
        (for two, 0 and the log-odds of the second), or the standardised
        targets.
    """
    if validation is None:
        if data.objective == "classification":
            return _fit(features, data, HEAD_ALPHA)
        return _fit(features, data, None)
    alpha, start = choose_head(features, data, n_pooled, *validation)
    coef, intercept = _fit(features[:, start:], data, alpha)
    if start:  # the statistics alone: the pooled outputs' rows at zero
        coef = np.vstack([np.zeros((start, coef.shape[1]), coef.dtype), coef])
    return coef, intercept


def choose_head(features, data, n_pooled, fit_rows, val_features, val_data):
    """The penalty and the first column of the head of least validation loss
    (see :func:`fit_linear_head`): ``(alpha, 0)`` for the whole head,
    ``(alpha, n_pooled)`` for the statistics alone."""
    classes = data.objective == "classification"
    alphas = HEAD_VALIDATION_ALPHAS if classes else HEAD_ALPHAS
    default = HEAD_ALPHA if classes else 1.0
    statistics = 0 < (n_pooled or 0) < features.shape[1]
    train = rows_of(data, fit_rows)
    best, best_loss = (default, 0), math.inf
    if classes and len(np.unique(train.y)) < len(np.unique(data.y)):
        return best  # a class held out whole: no candidate scores it
    for start in (0, n_pooled) if statistics else (0,):
        for alpha in sorted(alphas, key=lambda a: (a != default, a)):
            head = _fit(features[fit_rows, start:], train, alpha)
            loss = _loss(val_features[:, start:], val_data, *head)
            if loss < best_loss:
                best, best_loss = (alpha, start), loss
    return best


def rows_of(data, rows):
    """The targets and weights of ``rows`` of ``data`` (a ``TrainingSet``), as
    :func:`fit_linear_head` reads them."""
    return _Targets(
        data.y[rows], data.sample_weight[rows], data.objective, data.weight_exponent
    )


class _Targets:
    """What a head's fit reads of a ``TrainingSet``."""

    def __init__(self, y, sample_weight, objective, weight_exponent):
        self.y, self.sample_weight = y, sample_weight
        self.objective, self.weight_exponent = objective, weight_exponent


def _loss(features, data, coef, intercept):
    """The head's weighted mean loss on ``data``: log-loss of the classes, or
    squared error of the standardised targets."""
    out = features @ coef + intercept
    weight = np.asarray(data.sample_weight, dtype=np.float64)
    if data.objective == "classification":
        per_sample = -np.take_along_axis(log_softmax(out, axis=1), data.y[:, None], 1)
        per_sample = per_sample[:, 0]
    else:
        per_sample = np.mean((out - data.y) ** 2, axis=1)
    return float(np.sum(weight * per_sample) / max(np.sum(weight), 1e-300))


def _fit(features, data, alpha):
    """The head of penalty ``alpha`` (None: RidgeCV's among ``HEAD_ALPHAS``)."""
    # the weights as normalised, the penalties scaled by the same power of two
    weight, scale = data.sample_weight, math.ldexp(1.0, -data.weight_exponent)
    if data.objective == "classification":
        head = LogisticRegression(C=1 / (alpha * scale), max_iter=HEAD_MAX_ITER)
        head.fit(features, data.y, sample_weight=weight)
        coef, intercept = head.coef_.T, head.intercept_
        if coef.shape[1] == 1:  # two classes: the log-odds of the second
            coef = np.hstack([np.zeros_like(coef), coef])
            intercept = np.array([0.0, intercept[0]])
        return coef, intercept
    if alpha is None:
        head = RidgeCV(alphas=HEAD_ALPHAS * scale)
    else:
        head = Ridge(alpha=alpha * scale)
    head.fit(features, data.y, sample_weight=weight)
    n_outputs = data.y.shape[1]
    coef = np.reshape(head.coef_, (n_outputs, -1)).T
    return coef, np.reshape(head.intercept_, n_outputs)
