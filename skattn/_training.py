"""Learning the model from y: the loss and its gradients, and the two solvers.

One loss/gradient routine (:func:`loss_gradients`: forward, head, weighted
loss, backward, L2 penalty) serves both solvers, as ``_backprop`` does in
scikit-learn's ``neural_network``: :func:`fit_adam` calls it once per
minibatch, :func:`fit_lbfgs` wraps it with packing of the parameters into one
vector. The solvers read the estimator's hyper-parameters and write its
training history (``n_iter_``, ``loss_curve_``, ...); the parameters travel as
a dict of arrays and are updated in place.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import time
import warnings

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import train_test_split
from sklearn.utils import gen_batches

from ._head import LOSS_FUNCTIONS
from ._layers import DropoutStreams
from ._optimizers import AdamOptimizer
from ._sequences import BATCH_BYTES, map_batches, sequences_dtype, token_width
from ._validation import working_memory_bytes

# batch_size="auto": min(200, n_samples) as MLPClassifier, but minibatches of
# EARLY_STOPPING_BATCH when early stopping is on: its few epochs then take more,
# smaller steps (text: +0.6 and +1.9 points of accuracy, in less time).
EARLY_STOPPING_BATCH = 32

# n_iter_no_change="auto": epochs without improvement before Adam stops, of the
# validation score with early stopping and of the training loss without. On the
# texts of the real-data benchmark the validation score peaked early, and 3
# epochs kept the test scores in 0.6 of the time on average; the training loss
# of small sets needs MLPClassifier's 10 (5 stopped ArrowHead at 0.61, not 0.75).
VALIDATION_PATIENCE = 3
LOSS_PATIENCE = 10


# learning_rate_init="auto": Adam's step size, MLPClassifier's 1e-3, and twice
# that with early stopping, whose minibatches of 32 and best-epoch weights
# stand a larger step: the four texts of the real-data benchmark, three seeds,
# gained on average and reached their best validation score in fewer epochs.
LEARNING_RATE = 1e-3
EARLY_STOPPING_LEARNING_RATE = 2e-3


def learning_rate(est):
    """Adam's step size for a new optimizer: ``learning_rate_init``, with
    ``"auto"`` resolved (``partial_fit`` goes on with its optimizer's)."""
    if est.learning_rate_init != "auto":
        return est.learning_rate_init
    return EARLY_STOPPING_LEARNING_RATE if est.early_stopping_ else LEARNING_RATE


def patience(est, *, validating):
    """Epochs without improvement before Adam stops (``n_iter_no_change``)."""
    if est.n_iter_no_change != "auto":
        return est.n_iter_no_change
    return VALIDATION_PATIENCE if validating else LOSS_PATIENCE


def batch_budget():
    """Bytes a batch may use: ``working_memory``, and a cache-sized batch at most."""
    return min(working_memory_bytes(), BATCH_BYTES)


def model_row_bytes(model, sequences, *, training):
    """``row_bytes(n_tokens)`` of the model on these sequences."""
    n_features = token_width(sequences)
    itemsize = sequences_dtype(sequences).itemsize

    def row_bytes(n_tokens):
        return model.row_bytes(
            n_tokens,
            n_features=n_features,
            itemsize=itemsize,
            training=training,
        )

    return row_bytes


def loss_gradients(model, params, data, rows, *, task, alpha, dropout=None):
    """Loss and gradients on the samples ``rows``: weighted mean loss + L2.

    Parameters
    ----------
    model : Model
        The model, with its training head.
    params : dict of str to ndarray
        Its parameters.
    data : tuple
        ``(sequences, lengths, y, sample_weight)`` of the whole training set
        (y holds class indices or standardised targets).
    rows : ndarray of int
        Samples of this (mini)batch.
    task : {"classification", "regression"}
        Picks the loss.
    alpha : float
        L2 penalty, relative to the summed sample weight as in scikit-learn's
        MLP.
    dropout : tuple of (float, int) or None, default=None
        ``(p, seed)`` of this step's dropout; None for none.

    Returns
    -------
    loss : float
    grads : dict of str to ndarray
        By name, for every trainable parameter.
    """
    sequences, all_lengths, all_y, all_weights = data
    total_weight = float(all_weights[rows].sum())
    loss_function = LOSS_FUNCTIONS[task]
    head_params = {name: params[name] for name in model.head.param_specs()}

    def batch_loss_grad(batch, x):
        lengths, y, weight = all_lengths[batch], all_y[batch], all_weights[batch]
        if not weight.sum() > 0:
            # samples of weight zero only (a long sequence alone in its batch):
            # nothing to add, and the batch's mean loss would be 0 / 0
            return 0.0, {}
        fraction = float(weight.sum()) / total_weight
        streams = None if dropout is None else DropoutStreams(*dropout, batch)
        _, pooled, trace = model.forward(
            params, x, lengths, dropout=streams, training=True
        )
        out = model.head_forward(head_params, pooled)
        batch_loss, d_out = loss_function(out, y, weight)
        d_out *= fraction
        d_pooled, batch_grads = model.head.backward(head_params, d_out, pooled)
        batch_grads.update(model.backward(params, d_pooled, trace))
        return fraction * batch_loss, batch_grads

    loss = 0.0
    grads = {name: np.zeros_like(params[name]) for name in model.trainable_names()}
    row_bytes = model_row_bytes(model, sequences, training=True)
    for batch_loss, batch_grads in map_batches(
        batch_loss_grad, sequences, all_lengths, rows, row_bytes, batch_budget()
    ):  # summed in the order of the batches, whatever the threads
        loss += batch_loss
        for name, grad in batch_grads.items():
            grads[name] += grad
    for name, spec in model.param_specs().items():
        if spec.penalized:
            value = params[name]
            loss += 0.5 * alpha * float(np.sum(value * value)) / total_weight
            grads[name] += (alpha / total_weight) * value
    return loss, grads


def validation_metrics(model, params, data, rows, task, alpha):
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
    sequences, lengths, y, sample_weight = data

    def predict(batch, x):
        _, pooled, _ = model.forward(params, x, lengths[batch])
        return batch, model.head_forward(params, pooled)

    predictions = np.empty((len(y), model.head.n_outputs))
    row_bytes = model_row_bytes(model, sequences, training=False)
    for batch, batch_predictions in map_batches(
        predict, sequences, lengths, rows, row_bytes, batch_budget()
    ):
        predictions[batch] = batch_predictions
    weight = sample_weight[rows]
    loss, _ = LOSS_FUNCTIONS[task](predictions[rows], y[rows], weight)
    total_weight = float(weight.sum())
    for name, spec in model.param_specs().items():
        if spec.penalized:
            value = params[name]
            loss += 0.5 * alpha * float(np.sum(value * value)) / total_weight
    if task == "classification":
        score = accuracy_score(y[rows], predictions[rows].argmax(axis=1))
    else:
        score = r2_score(y[rows], predictions[rows])
    return score, loss


def fit_adam(est, model, params, data, incremental, *, tasks, alpha, validation=None):
    """Adam on shuffled minibatches, with early stopping (like MLP's).

    A minibatch whose samples all weigh zero holds no sample: it takes no step.

    Parameters
    ----------
    est : AttentionTransformer
        Gives the hyper-parameters, its ``_random_state`` and
        ``_optimizer_state`` (Adam's moments, step count and hyper-parameters as
        plain numbers and arrays, kept between ``partial_fit`` calls); receives
        the training history.
    model : Model
        The model with its head.
    params : dict of str to ndarray
        Updated in place; the best ones with early stopping.
    data : tuple
        ``(sequences, lengths, y, sample_weight)``.
    incremental : bool
        One epoch (``partial_fit``), no validation split.
    alpha : float
        L2 penalty for the weights of ``data`` (``est.alpha`` for the user's
        weights, divided by the power of two that normalised them).
    validation : tuple or None, default=None
        ``(data, alpha)`` of an explicit validation set (``fit``'s ``X_val``
        and ``y_val``) for early stopping, in the layout of ``data``; None: with
        ``est.early_stopping_``, ``validation_fraction`` of ``data`` is held out.
    tasks : FitTasks
        The fit's callback tasks: an ``"epoch"`` task per epoch, then a
        ``"validation"`` task with a validation set; a callback that asks to
        stop ends the training after the epoch.
    """
    sequences, lengths, y, sample_weight = data
    n_samples = len(lengths)
    train = np.arange(n_samples)
    validation_rows = train_rows = held_out = None  # held_out: of the training set
    if est.early_stopping_ and not incremental:
        if validation is None:
            train, validation_rows = validation_split(est, y, sample_weight)
            validation_data, validation_alpha = data, alpha
            train_rows, held_out = np.sort(train), np.sort(validation_rows)
        else:
            validation_data, validation_alpha = validation
            validation_rows = np.arange(len(validation_data[1]))
    n_train = len(train)
    if est.batch_size == "auto":
        auto = 200 if validation_rows is None else EARLY_STOPPING_BATCH
        batch_size = min(auto, n_train)
    else:
        batch_size = min(est.batch_size, n_train)
    if not incremental or not hasattr(est, "_optimizer_state"):
        trainable = {name: params[name] for name in model.trainable_names()}
        optimizer = AdamOptimizer(
            trainable, learning_rate(est), est.beta_1, est.beta_2, est.epsilon
        )
        # the estimator keeps the state (updated in place), not the object
        est._optimizer_state = optimizer.state
    else:
        optimizer = AdamOptimizer.from_state(est._optimizer_state)
    options = dict(task=est.target_type_, alpha=alpha)
    n_iter_no_change = patience(est, validating=validation_rows is not None)
    best_params = None
    start = time.time()
    for _ in range(est.max_iter):
        epoch = tasks.begin("epoch")
        if est.shuffle:
            train = est._random_state.permutation(train)
        epoch_loss = 0.0
        for batch in gen_batches(n_train, batch_size):
            rows = train[batch]
            if not sample_weight[rows].sum() > 0:
                continue  # no sample, no step: its mean loss is 0 / 0
            dropout = None
            if est.dropout:  # one seed per step, drawn only when dropping
                seed = int(est._random_state.randint(np.iinfo(np.int64).max))
                dropout = (est.dropout, seed)
            loss, grads = loss_gradients(
                model, params, data, rows, dropout=dropout, **options
            )
            optimizer.update_params(params, grads)
            epoch_loss += loss * float(sample_weight[rows].sum())
        est.n_iter_ += 1
        est.t_ += n_train
        est.loss_ = epoch_loss / float(sample_weight[train].sum())
        est.loss_curve_.append(est.loss_)
        check_finite(est, params)
        stop = tasks.end(epoch, params, train_rows)

        score = None
        if validation_rows is not None:
            score, validation_loss = validation_metrics(
                model,
                params,
                validation_data,
                validation_rows,
                est.target_type_,
                validation_alpha,
            )
            est.validation_scores_.append(score)
            est.validation_loss_curve_.append(validation_loss)
            if score > est.best_validation_score_:
                best_params = {k: v.copy() for k, v in params.items()}
            stop |= tasks.validate(params, held_out)
        update_no_improvement_count(est, score)
        if est.verbose:
            print_iteration(est, est.loss_, start, score)
        if incremental:
            break
        if stop:
            if est.verbose:
                print(f"[{type(est).__name__}] A callback asked to stop. Stopping.")
            break
        if est._no_improvement_count > n_iter_no_change:
            if est.verbose:
                criterion = (
                    "Validation score"
                    if validation_rows is not None
                    else "Training loss"
                )
                print(
                    f"[{type(est).__name__}] {criterion} did not improve more "
                    f"than tol={est.tol} for {n_iter_no_change} "
                    "consecutive epochs. Stopping."
                )
            break
        if est.n_iter_ == est.max_iter:
            warnings.warn(
                f"Stochastic optimizer: maximum iterations ({est.max_iter}) "
                "reached and the optimization hasn't converged yet.",
                ConvergenceWarning,
                stacklevel=3,
            )
    if best_params is not None:
        params.update(best_params)
    if not incremental:
        warn_if_diverged(est)


def validation_split(est, y, sample_weight):
    """Training and validation rows of early stopping, as ``train_test_split``.

    A ``validation_fraction`` of the samples, stratified with at least one
    sample of each class for classification.

    Raises
    ------
    ValueError
        Naming ``early_stopping`` and ``validation_fraction`` when the split
        cannot be made (``train_test_split`` names its own ``test_size``), or
        when the training rows all weigh zero.
    """
    n_samples = len(y)
    fraction = est.validation_fraction
    n_validation = math.ceil(fraction * n_samples)  # as train_test_split rounds
    stratify, test_size = None, fraction
    setting = f"early_stopping={est.early_stopping!r}"  # True, or "auto" on
    remedy = "pass more samples, lower validation_fraction or set early_stopping=False"
    if est.target_type_ == "classification":
        # stratified, with at least one validation sample per class
        stratify = y
        labels, counts = np.unique(y, return_counts=True)
        single = est.classes_[labels[counts < 2]]
        if len(single):
            raise ValueError(
                f"{setting} holds out a validation split (validation_fraction="
                f"{fraction}) stratified by class, which needs two "
                f"samples of every class; the class(es) {single.tolist()} of y "
                "have only one sample. Pass more samples of them or set "
                "early_stopping=False."
            )
        test_size = n_validation = max(n_validation, len(est.classes_))
        n_train = n_samples - n_validation
        if n_train < len(labels):
            raise ValueError(
                f"{setting} holds out {n_validation} of the {n_samples} "
                f"samples (validation_fraction={fraction}, and at least one sample "
                f"of each of the {len(est.classes_)} classes), which leaves "
                f"{max(n_train, 0)} to train on, fewer than the {len(labels)} "
                f"classes of y: {remedy}."
            )
    elif n_samples - n_validation < 1:
        raise ValueError(
            f"{setting} holds out {n_validation} of the {n_samples} "
            f"sample(s) (validation_fraction={fraction}), which leaves no sample "
            f"to train on: {remedy}."
        )
    train, validation = train_test_split(
        np.arange(n_samples),
        test_size=test_size,
        random_state=est._random_state,
        stratify=stratify,
    )
    if not sample_weight[train].sum() > 0:
        raise ValueError(
            f"{setting} held out every sample of non-zero sample_weight for "
            f"validation (validation_fraction={fraction}): the training "
            f"samples all weigh zero. Give weight to more samples, or {remedy}."
        )
    return train, validation


def check_finite(est, params):
    """Raise, as MLPClassifier does, when the loss or a weight is not finite."""
    finite = math.isfinite(est.loss_) and all(
        np.isfinite(value).all() for value in params.values()
    )
    state = getattr(est, "_optimizer_state", None)
    if finite and est.solver == "adam" and state is not None:
        # a gradient above sqrt(max float) (1.8e19 in float32) makes its
        # second moment inf: the weight then silently never moves again
        stalled = [name for name, v in state["vs"].items() if not np.isfinite(v).all()]
        if stalled:
            raise ValueError(
                f"Adam's gradients of {len(stalled)} weight array(s) (first "
                f"{stalled[0]!r}) overflowed "
                f"{next(iter(params.values())).dtype} after {est.n_iter_} "
                "iteration(s): the loss is badly scaled. A penalty alpha "
                f"({est.alpha}) large against the sum of sample_weight, or "
                "targets far from the first batch's scale, do this: lower alpha, "
                "rescale sample_weight or y, or fit again instead of partial_fit."
            )
    if not finite:
        if est.solver == "adam":
            step = state["learning_rate_init"]
            remedy = f"lower learning_rate_init (now {step})"
        else:
            remedy = f"lower alpha (now {est.alpha})"
        raise ValueError(
            f"Solver produced non-finite parameter weights (loss {est.loss_}) after "
            f"{est.n_iter_} iteration(s) of {est.solver!r}. The tokens may hold very "
            "large values: standardise them (scale_tokens=True, the default) or "
            f"rescale X; or {remedy}."
        )


def warn_if_diverged(est):
    """Warn when Adam's training loss ended above twice its first epoch's."""
    curve = est.loss_curve_
    if len(curve) > 1 and curve[-1] > 2 * curve[0]:
        step = est._optimizer_state["learning_rate_init"]
        warnings.warn(
            f"Adam diverged: the training loss rose from {curve[0]:.4g} in the "
            f"first epoch to {curve[-1]:.4g} after {len(curve)} epochs. Lower "
            f"learning_rate_init (now {step}).",
            ConvergenceWarning,
            stacklevel=3,
        )


def update_no_improvement_count(est, score):
    """Count epochs without improvement of the validation score or the loss."""
    if score is not None:
        if score < est.best_validation_score_ + est.tol:
            est._no_improvement_count += 1
        else:
            est._no_improvement_count = 0
        est.best_validation_score_ = max(est.best_validation_score_, score)
    else:
        if est.loss_curve_[-1] > est.best_loss_ - est.tol:
            est._no_improvement_count += 1
        else:
            est._no_improvement_count = 0
    est.best_loss_ = min(est.best_loss_, est.loss_curve_[-1])


def fit_lbfgs(est, model, params, data, *, tasks, alpha):
    """Full-batch L-BFGS-B on the packed parameter vector (like NCA's ``fit``).

    ``alpha`` is the L2 penalty for the weights of ``data`` (see :func:`fit_adam`).
    ``tasks``: the fit's callback tasks, an ``"iteration"`` task per L-BFGS
    iteration (as scikit-learn's ``LogisticRegression`` reports them: the last
    one begun never runs, and ends empty); a callback that asks to stop ends
    the minimisation after the iteration.
    """
    names = sorted(model.trainable_names())
    shapes = [params[name].shape for name in names]
    sizes = [math.prod(shape) for shape in shapes]
    dtype = params[names[0]].dtype
    rows = np.arange(len(data[1]))
    options = dict(task=est.target_type_, alpha=alpha)
    start = time.time()

    def unpack(theta):
        pieces = np.split(theta, np.cumsum(sizes)[:-1])
        return {
            name: piece.reshape(shape).astype(dtype)
            for name, piece, shape in zip(names, pieces, shapes, strict=True)
        }

    def loss_grad(theta):
        loss, grads = loss_gradients(
            model, {**params, **unpack(theta)}, data, rows, **options
        )
        flat = np.concatenate([grads[name].ravel() for name in names])
        return loss, flat.astype(np.float64)

    first_iteration = est.n_iter_  # n_iter_ counts this fit's only at its end
    task, stopped = tasks.begin("iteration"), False

    def callback(intermediate_result):
        nonlocal task, stopped
        est.loss_curve_.append(float(intermediate_result.fun))
        if est.verbose:
            iteration = first_iteration + len(est.loss_curve_) - n_losses
            print_iteration(est, est.loss_curve_[-1], start, iteration=iteration)
        if tasks.end(task, {**params, **unpack(intermediate_result.x)}):
            task, stopped = None, True
            if est.verbose:
                print(f"[{type(est).__name__}] A callback asked to stop. Stopping.")
            raise StopIteration  # scipy >= 1.11 ends the minimisation there
        task = tasks.begin("iteration")

    n_losses = len(est.loss_curve_)
    theta = np.concatenate([params[name].ravel() for name in names])
    result = scipy.optimize.minimize(
        loss_grad,
        theta.astype(np.float64),
        method="L-BFGS-B",
        jac=True,
        callback=callback,
        options={"maxiter": est.max_iter, "gtol": est.tol},
    )
    tasks.end(task)  # the iteration begun last, which did not run (None if stopped)
    if stopped:  # by a callback, not a failure to converge
        est.n_iter_ += result.nit
    else:
        est.n_iter_ += lbfgs_iterations(result, est.max_iter)
    params.update(unpack(result.x))
    est.loss_ = float(result.fun)
    check_finite(est, params)
    est.best_loss_ = min(est.best_loss_, est.loss_)


def lbfgs_iterations(result, max_iter):
    """Iterations L-BFGS ran; a ``ConvergenceWarning`` when it did not converge."""
    if result.status != 0:
        warnings.warn(
            f"lbfgs failed to converge after {result.nit} iteration(s) (status="
            f"{result.status}): {result.message}. Increase max_iter (now "
            f"{max_iter}) or tol.",
            ConvergenceWarning,
            stacklevel=4,
        )
    return min(result.nit, max_iter)  # scipy's count may pass maxiter


def print_iteration(est, loss, start, score=None, iteration=None):
    """One line of the verbose table: iteration (default ``n_iter_``), loss,
    time (and score)."""
    iteration = est.n_iter_ if iteration is None else iteration
    line = f"{iteration:>10d} {loss:>20.6e} {time.time() - start:>10.2f}"
    if score is not None:
        line += f" {score:>12.4f}"
    print(f"[{type(est).__name__}] {line}")
