"""The linear head fitted on the trained model's pooled outputs and the
tokens' statistics (``token_statistics``).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge

HEAD_ALPHA = 1.0
HEAD_MAX_ITER = 1000


def fit_linear_head(features, data):
    """The linear head of fixed features: a logistic regression (classes) or a
    ridge regression (targets) of penalty ``HEAD_ALPHA``, to convergence.

    The penalty of scikit-learn's defaults, ``LogisticRegression(C=1)`` and
    ``Ridge(alpha=1)``: ``HEAD_ALPHA`` times half the squared weights against
    the summed losses, the sample weights scaled to a mean of 1 (their scale
    does not matter, only their ratios).

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
    weight = data.sample_weight / np.mean(data.sample_weight)
    if data.objective == "classification":
        head = LogisticRegression(C=1 / HEAD_ALPHA, max_iter=HEAD_MAX_ITER)
        head.fit(features, data.y, sample_weight=weight)
        coef, intercept = head.coef_.T, head.intercept_
        if coef.shape[1] == 1:  # two classes: the log-odds of the second
            coef = np.hstack([np.zeros_like(coef), coef])
            intercept = np.array([0.0, intercept[0]])
        return coef, intercept
    head = Ridge(alpha=HEAD_ALPHA).fit(features, data.y, sample_weight=weight)
    n_outputs = data.y.shape[1]
    coef = np.reshape(head.coef_, (n_outputs, -1)).T
    return coef, np.reshape(head.intercept_, n_outputs)
