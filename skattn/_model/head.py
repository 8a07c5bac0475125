"""The training head: a linear layer on the pooled vector, and the losses.

Pure numpy functions. Losses are sample-weighted means, so that a minibatch's
loss does not depend on its size; each returns the gradient with respect to the
head's output as well.

Shape legend: N samples, F pooled features, K outputs (classes or targets).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .units import ParamSpec, Unit


def linear_forward(pooled, coef, intercept):
    """``pooled @ coef + intercept``: (N, F) -> (N, K)."""
    return pooled @ coef + intercept


def linear_backward(d_out, pooled, coef):
    """Gradients of :func:`linear_forward`.

    Returns
    -------
    d_pooled : ndarray of shape (N, F)
    d_coef : ndarray of shape (F, K)
    d_intercept : ndarray of shape (K,)
    """
    return d_out @ coef.T, pooled.T @ d_out, d_out.sum(axis=0)


class LinearHead(Unit):
    """The training head, ``pooled @ head_coef + head_intercept``: (N, F) -> (N, K)."""

    def __init__(self, n_features, n_outputs):
        self.n_features, self.n_outputs = n_features, n_outputs

    def param_specs(self):
        return {
            "head_coef": ParamSpec(
                (self.n_features, self.n_outputs),
                "glorot",
                penalized=True,
                attribute="head_coef_",
            ),
            "head_intercept": ParamSpec(
                (self.n_outputs,),
                "zeros",
                penalized=False,
                attribute="head_intercept_",
            ),
        }

    def forward(self, params, pooled, context=None):
        out = linear_forward(pooled, params["head_coef"], params["head_intercept"])
        return out, pooled

    def backward(self, params, d_out, pooled):
        d_pooled, d_coef, d_intercept = linear_backward(
            d_out, pooled, params["head_coef"]
        )
        return d_pooled, {"head_coef": d_coef, "head_intercept": d_intercept}


def cross_entropy_loss(logits, y, sample_weight):
    """Softmax cross-entropy, weighted mean over samples.

    Parameters
    ----------
    logits : ndarray of shape (N, K)
        Scores of each class.
    y : ndarray of shape (N,), dtype int
        Class index of each sample.
    sample_weight : ndarray of shape (N,)
        Non-negative weights; the loss is ``sum(w * l) / sum(w)``.

    Returns
    -------
    loss : float
    d_logits : ndarray of shape (N, K)
    """
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(shifted).sum(axis=1))  # (N,)
    rows = np.arange(len(y))
    log_likelihood = shifted[rows, y] - log_norm  # (N,)
    total = sample_weight.sum()
    loss = -np.dot(sample_weight, log_likelihood) / total
    # softmax and cross-entropy form a canonical link: the delta is prob - onehot
    d_logits = np.exp(shifted - log_norm[:, None])  # probabilities
    d_logits[rows, y] -= 1
    d_logits *= (sample_weight / total)[:, None]
    return float(loss), d_logits


def squared_loss(predictions, y, sample_weight):
    """Half the squared error averaged over outputs, weighted mean over samples.

    Parameters
    ----------
    predictions : ndarray of shape (N, K)
        Predicted targets.
    y : ndarray of shape (N, K)
        True targets.
    sample_weight : ndarray of shape (N,)
        Non-negative weights.

    Returns
    -------
    loss : float
    d_predictions : ndarray of shape (N, K)
    """
    residual = predictions - y  # (N, K)
    total = sample_weight.sum()
    per_sample = 0.5 * np.mean(residual * residual, axis=1)  # (N,)
    loss = np.dot(sample_weight, per_sample) / total
    d_predictions = residual * (sample_weight / (total * y.shape[1]))[:, None]
    return float(loss), d_predictions


LOSS_FUNCTIONS = {"classification": cross_entropy_loss, "regression": squared_loss}
