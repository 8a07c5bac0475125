"""The linear head fitted on the trained model's pooled outputs and the
tokens' statistics (``token_statistics``): after training, for classes with
the tokens' statistics, and for targets always.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np
from sklearn.linear_model import LogisticRegression, RidgeCV

HEAD_ALPHA = 1.0
HEAD_MAX_ITER = 1000
# The penalties of the targets' ridge head, one chosen by leave-one-out error
# (RidgeCV's, at the cost of one decomposition of the features): a fit that
# stopped on a plateau, or a model whose pooled vector holds more than the
# training set can fix, gets a smaller or a larger one than the default 1.
HEAD_ALPHAS = np.logspace(-3, 3, 13)


def fit_linear_head(features, data):
    """The linear head of fixed features: a logistic regression of penalty
    ``HEAD_ALPHA`` (classes), to convergence, or a ridge regression of the
    penalty among ``HEAD_ALPHAS`` of least leave-one-out error (targets).

    Those of scikit-learn's ``LogisticRegression(C=1 / HEAD_ALPHA)`` and
    ``RidgeCV(alphas=HEAD_ALPHAS)`` given the sample weights as the caller gave
    them (times the class weights): the penalty times half the squared
    weights against the weighted sum of the losses, so that a weight of 2
    counts as two samples, as in the training's objective.

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features)
        The model's pooled outputs of the training samples.
    data : TrainingSet
        Their targets and weights.

    Returns
    -------
    coef : ndarray of shape (n_features, n_outputs)
    intercept : ndarray of shape (n_outputs,)
        The head, ``features @ coef + intercept``: the logits of every class
        (for two, 0 and the log-odds of the second), or the standardised
        targets.
    """
    # the weights as normalised, the penalties scaled by the same power of two
    weight, scale = data.sample_weight, math.ldexp(1.0, -data.weight_exponent)
    if data.objective == "classification":
        head = LogisticRegression(C=1 / (HEAD_ALPHA * scale), max_iter=HEAD_MAX_ITER)
        head.fit(features, data.y, sample_weight=weight)
        coef, intercept = head.coef_.T, head.intercept_
        if coef.shape[1] == 1:  # two classes: the log-odds of the second
            coef = np.hstack([np.zeros_like(coef), coef])
            intercept = np.array([0.0, intercept[0]])
        return coef, intercept
    head = RidgeCV(alphas=HEAD_ALPHAS * scale)
    head.fit(features, data.y, sample_weight=weight)
    n_outputs = data.y.shape[1]
    coef = np.reshape(head.coef_, (n_outputs, -1)).T
    return coef, np.reshape(head.intercept_, n_outputs)
