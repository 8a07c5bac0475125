"""The L-BFGS solver: full-batch L-BFGS-B on the packed parameter vector.

The other solver of :mod:`skattn._training.adam`, on the same loss and gradients
(:func:`skattn._training.loss.loss_gradients`), training set and history; like
scikit-learn's ``NeighborhoodComponentsAnalysis.fit``, through
``scipy.optimize.minimize``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import time
import warnings

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning

from .._model.units import SparseRows
from .loss import check_finite, largest_weight, loss_gradients, print_iteration


def fit_lbfgs(
    model, params, data, *, max_iter, tol, alpha, history, tasks, verbose, name
):
    """Full-batch L-BFGS-B on the packed parameter vector (like NCA's ``fit``).

    ``tasks``: the fit's callback tasks, an ``"iteration"`` task per L-BFGS
    iteration (as scikit-learn's ``LogisticRegression`` reports them: the last
    one begun never runs, and ends empty); a callback that asks to stop ends
    the minimisation after the iteration. ``history`` gets one loss per
    iteration and the iterations run; ``alpha`` is the estimator's penalty,
    for messages.
    """
    names = sorted(model.trainable_names())
    shapes = [params[name].shape for name in names]
    sizes = [math.prod(shape) for shape in shapes]
    dtype = params[names[0]].dtype
    rows = np.arange(len(data))
    start_scale = largest_weight(params), data
    start = time.time()

    def unpack(theta):
        pieces = np.split(theta, np.cumsum(sizes)[:-1])
        return {
            name: piece.reshape(shape).astype(dtype)
            for name, piece, shape in zip(names, pieces, shapes, strict=True)
        }

    def loss_grad(theta):
        loss, grads = loss_gradients(model, {**params, **unpack(theta)}, data, rows)
        grads = {
            name: grad.toarray() if isinstance(grad, SparseRows) else grad
            for name, grad in grads.items()
        }
        flat = np.concatenate([grads[name].ravel() for name in names])
        return loss, flat.astype(np.float64)

    first_iteration = history.n_iter  # n_iter counts this fit's only at its end
    n_losses = len(history.loss_curve)
    task, stopped = tasks.begin("iteration"), False
    last = None  # the last iteration's weights and loss

    def callback(intermediate_result):
        nonlocal task, stopped, last
        # a copy: scipy's line search goes on in the same array
        last = intermediate_result.x.copy(), float(intermediate_result.fun)
        history.loss_curve.append(float(intermediate_result.fun))
        if verbose:
            iteration = first_iteration + len(history.loss_curve) - n_losses
            print_iteration(name, iteration, history.loss_curve[-1], start)
        if tasks.end(task, {**params, **unpack(intermediate_result.x)}):
            task, stopped = None, True
            if verbose:
                print(f"[{name}] A callback asked to stop. Stopping.")
            raise StopIteration  # scipy >= 1.11 ends the minimisation there
        task = tasks.begin("iteration")

    theta = np.concatenate([params[name].ravel() for name in names])
    try:
        result = scipy.optimize.minimize(
            loss_grad,
            theta.astype(np.float64),
            method="L-BFGS-B",
            jac=True,
            callback=callback,
            options={"maxiter": max_iter, "gtol": tol},
        )
    except BaseException:  # interrupted: the weights of the last iteration
        if last is not None:
            params.update(unpack(last[0]))
            history.n_iter += len(history.loss_curve) - n_losses
            history.loss = last[1]
            history.best_loss = min(history.best_loss, history.loss)
        raise
    tasks.end(task)  # the iteration begun last, which did not run (None if stopped)
    if stopped:  # by a callback, not a failure to converge
        history.n_iter += result.nit
    else:
        history.n_iter += lbfgs_iterations(result, max_iter)
    params.update(unpack(result.x))
    history.loss = float(result.fun)
    check_finite(params, history.loss, history.n_iter, alpha=alpha, start=start_scale)
    history.best_loss = min(history.best_loss, history.loss)


def lbfgs_iterations(result, max_iter):
    """Iterations L-BFGS ran; a ``ConvergenceWarning`` when it did not converge."""
    if result.status != 0:
        warnings.warn(
            f"lbfgs failed to converge after {result.nit} iteration(s) (status="
            f"{result.status}): {result.message}. Increase max_iter (now "
            f"{max_iter}) or tol.",
            ConvergenceWarning,
            stacklevel=6,
        )
    return min(result.nit, max_iter)  # scipy's count may pass maxiter
