"""The training objective: the loss and its gradients, shared by both solvers.

One routine (:func:`loss_gradients`: forward, head, weighted loss, backward,
L2 penalty) serves both solvers, as ``_backprop`` does in scikit-learn's
``neural_network``: :func:`~skattn._training.adam.fit_adam` calls it once per
minibatch, :func:`~skattn._training.lbfgs.fit_lbfgs` wraps it with packing of
the parameters into one vector. The checks of a diverged fit live here too.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import time

import numpy as np
from sklearn.metrics import accuracy_score, r2_score

from .._input.validation import batch_budget
from .._model.encoder import DropoutStreams
from .._model.evaluate import model_row_bytes
from .._model.head import LOSS_FUNCTIONS
from .._model.sequences import map_batches
from .._model.units import SparseRows


def training_dtype(solver, input_dtype):
    """The dtype a solver computes in: the one place of this choice.

    Adam steps in float32, as torch trains: twice the speed of float64 for
    minibatch gradients that are noisy far above float32's rounding. L-BFGS
    keeps the input's precision for its line searches.
    """
    return np.dtype(np.float32) if solver == "adam" else np.dtype(input_dtype)


def loss_gradients(model, params, data, rows, *, dropout=None):
    """Loss and gradients on the samples ``rows``: weighted mean loss + L2.

    Parameters
    ----------
    model : Model
        The model, with its training head.
    params : dict of str to ndarray
        Its parameters.
    data : TrainingSet
        The whole training set.
    rows : ndarray of int
        Samples of this (mini)batch.
    dropout : tuple of (float, int) or None, default=None
        ``(p, seed)`` of this step's dropout; None for none.

    Returns
    -------
    loss : float
    grads : dict of str to ndarray
        By name, for every trainable parameter.
    """
    total_weight = float(data.sample_weight[rows].sum())
    loss_function = LOSS_FUNCTIONS[data.objective]
    head_params = {name: params[name] for name in model.head.param_specs()}

    def batch_loss_grad(batch, x):
        lengths, y, weight = (
            data.lengths[batch],
            data.y[batch],
            data.sample_weight[batch],
        )
        if not weight.sum() > 0:
            # samples of weight zero only (a long sequence alone in its batch):
            # nothing to add, and the batch's mean loss would be 0 / 0
            return 0.0, {}
        fraction = float(weight.sum()) / total_weight
        streams = None if dropout is None else DropoutStreams(*dropout, batch)
        _, pooled, trace = model.forward(
            params, x, lengths, dropout=streams, training=True, input_gradient=False
        )
        out = model.head_forward(head_params, pooled)
        batch_loss, d_out = loss_function(out, y, weight)
        d_out *= fraction
        d_pooled, batch_grads = model.head.backward(head_params, d_out, pooled)
        batch_grads.update(model.backward(params, d_pooled, trace))
        return fraction * batch_loss, batch_grads

    loss = 0.0
    specs = model.param_specs()
    grads = {
        name: (
            SparseRows.empty(specs[name].shape, params[name].dtype)
            if specs[name].sparse
            else np.zeros_like(params[name])
        )
        for name in model.trainable_names()
    }
    row_bytes = model_row_bytes(model, data.sequences, training=True, dtype=data.dtype)
    for batch_loss, batch_grads in map_batches(
        batch_loss_grad,
        data.sequences,
        data.lengths,
        rows,
        row_bytes,
        batch_budget(),
        dtype=data.dtype,
    ):  # summed in the order of the batches, whatever the threads
        loss += batch_loss
        for name, grad in batch_grads.items():
            grads[name] += grad
    for name, spec in model.param_specs().items():
        if spec.penalized:
            value = params[name]
            loss += 0.5 * data.alpha * float(np.sum(value * value)) / total_weight
            grads[name] += (data.alpha / total_weight) * value
    return loss, grads


def validation_metrics(model, params, data, rows):
    """Score and loss of the head on ``rows`` (the early-stopping validation set).

    Returns
    -------
    score : float
        Accuracy (classification) or R^2 (regression) of the head, unweighted.
    loss : float
        The objective of :func:`loss_gradients` on ``rows`` as one batch,
        without dropout: the loss weighted by the rows' ``sample_weight``, plus
        the L2 penalty ``0.5 * alpha * ||W||^2 / sum(sample_weight[rows])``.
    """

    def predict(batch, x):
        _, pooled, _ = model.forward(params, x, data.lengths[batch])
        return batch, model.head_forward(params, pooled)

    predictions = np.empty((len(data), model.head.n_outputs))
    row_bytes = model_row_bytes(model, data.sequences, training=False, dtype=data.dtype)
    for batch, batch_predictions in map_batches(
        predict,
        data.sequences,
        data.lengths,
        rows,
        row_bytes,
        batch_budget(),
        dtype=data.dtype,
    ):
        predictions[batch] = batch_predictions
    weight = data.sample_weight[rows]
    loss, _ = LOSS_FUNCTIONS[data.objective](predictions[rows], data.y[rows], weight)
    total_weight = float(weight.sum())
    for name, spec in model.param_specs().items():
        if spec.penalized:
            value = params[name]
            loss += 0.5 * data.alpha * float(np.sum(value * value)) / total_weight
    if data.objective == "classification":
        score = accuracy_score(data.y[rows], predictions[rows].argmax(axis=1))
    else:
        score = r2_score(data.y[rows], predictions[rows])
    return score, loss


LARGE = 1e4


def largest_weight(params):
    """The largest magnitude among the weights (for :func:`check_finite`)."""
    return max((float(np.max(np.abs(v))) for v in params.values() if v.size), default=0)


def check_finite(params, loss, n_iter, *, optimizer=None, alpha=None, start=None):
    """Raise, as MLPClassifier does, when the loss or a weight is not finite.

    Parameters
    ----------
    params : dict of str to ndarray
    loss : float
    n_iter : int
        Epochs or iterations run, for the message.
    optimizer : AdamOptimizer or None, default=None
        Adam's, whose moments are checked too; None for L-BFGS.
    alpha : float or None, default=None
        The estimator's L2 penalty, for the messages.
    start : tuple of (float, TrainingSet) or None, default=None
        The largest weight the training started from and its training set:
        the message names huge weights (``init``, a warm start) or huge
        tokens the model does not standardise as the cause.
    """
    finite = math.isfinite(loss) and all(
        np.isfinite(value).all() for value in params.values()
    )
    if finite and optimizer is not None:
        # a gradient above sqrt(max float) (1.8e19 in float32) makes its
        # second moment inf: the weight then silently never moves again
        stalled = [
            name
            for name, v in optimizer.state["vs"].items()
            if not np.isfinite(v).all()
        ]
        if stalled:
            raise ValueError(
                f"Adam's gradients of {len(stalled)} weight array(s) (first "
                f"{stalled[0]!r}) overflowed "
                f"{next(iter(params.values())).dtype} after {n_iter} "
                "iteration(s): the loss is badly scaled. A penalty alpha "
                f"({alpha}) large against the sum of sample_weight, or "
                "targets far from the first batch's scale, do this: lower alpha, "
                "rescale sample_weight or y, or fit again instead of partial_fit."
            )
    if not finite:
        if optimizer is not None:
            step = optimizer.state["learning_rate_init"]
            solver, remedy = "adam", f"lower learning_rate_init (now {step})"
        else:
            solver, remedy = "lbfgs", f"lower alpha (now {alpha})"
        causes = []
        weight, data = start if start is not None else (0, None)
        dtype = next(iter(params.values())).dtype
        beyond = f" (beyond {dtype}, in which {solver!r} trains)"
        if weight > LARGE:
            causes.append(
                f"the weights it started from reach {weight:.3g}"
                f"{beyond if math.isinf(weight) else ''} (init, or the weights "
                "of a warm start): start from weights of a usual scale"
            )
        if data is not None and "token_scale" not in params:
            token = max(float(np.max(np.abs(s), initial=0)) for s in data.sequences)
            if token > LARGE:
                outside = token > float(np.finfo(dtype).max)  # inf once cast
                causes.append(
                    f"the tokens reach {token:.3g}{beyond if outside else ''}"
                    " and the model does not standardise them: pass "
                    "scale_tokens=True (the default) or rescale X"
                )
        raise ValueError(
            f"Solver produced non-finite parameter weights (loss {loss}) after "
            f"{n_iter} iteration(s) of {solver!r}: {'; '.join(causes + [remedy])}."
        )


def print_iteration(name, iteration, loss, start, score=None):
    """One line of the verbose table: iteration, loss, time (and score)."""
    line = f"{iteration:>10d} {loss:>20.6e} {time.time() - start:>10.2f}"
    if score is not None:
        line += f" {score:>12.4f}"
    print(f"[{name}] {line}")
