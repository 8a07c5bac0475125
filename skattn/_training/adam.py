"""The Adam solver: minibatch epochs, early stopping and its settings.

The solver works on explicit objects: a :class:`~skattn._input.targets.TrainingSet`,
the parameters as a dict of arrays (updated in place), the settings of the
estimator (:class:`AdamSettings`), and a
:class:`~skattn._training.state.History` that it updates. No solver reads or
writes an estimator.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import math
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import gen_batches

from .._input.targets import validation_split
from .loss import (
    check_finite,
    largest_weight,
    loss_gradients,
    print_iteration,
    validation_metrics,
)
from .optimizers import AdamOptimizer


@dataclasses.dataclass(frozen=True)
class AdamSettings:
    """The hyper-parameters of :func:`fit_adam`, resolved by the estimator.

    Attributes
    ----------
    max_iter : int
        Epochs at most (one for ``partial_fit``).
    batch_size : int or "auto"
        ``"auto"``: ``min(200, n_samples)``, or ``EARLY_STOPPING_BATCH`` with
        early stopping.
    learning_rate, beta_1, beta_2, epsilon : float
        Adam's, for a new optimizer.
    shuffle : bool
        Shuffle the samples before each epoch.
    dropout : float
        Training-time dropout rate.
    tol : float
        Improvement below which an epoch counts as none.
    patience : int
        Epochs without improvement before stopping.
    early_stopping : bool or "auto"
        Hold out a validation set and keep the best epoch's weights when true;
        the estimator's value (True, or "auto" resolved on), for messages.
    validation_fraction : float
        Share of the samples held out with early stopping.
    alpha : float
        The estimator's L2 penalty, for messages.
    incremental : bool
        One epoch of ``partial_fit``: no validation, no stopping rule.
    verbose : bool
        Print a line per epoch.
    name : str
        The estimator's class name, for messages.
    """

    max_iter: int
    batch_size: object
    learning_rate: float
    beta_1: float
    beta_2: float
    epsilon: float
    shuffle: bool
    dropout: float
    tol: float
    patience: int
    early_stopping: object
    validation_fraction: float
    alpha: float
    incremental: bool
    verbose: bool
    name: str


# The "auto" values of Adam's settings (user guide, "How the defaults were
# chosen"): with early stopping, minibatches of 32 (its few epochs take more,
# smaller steps), twice MLPClassifier's step size and a patience of 3 epochs of
# the validation score; without, min(200, n_samples), MLPClassifier's step and
# its patience of 10 epochs of the training loss.
EARLY_STOPPING_BATCH = 32
LEARNING_RATE = 1e-3
EARLY_STOPPING_LEARNING_RATE = 2e-3
VALIDATION_PATIENCE = 3
LOSS_PATIENCE = 10


def resolve_learning_rate(learning_rate_init, early_stopping):
    """Adam's step size for a new optimizer, ``"auto"`` resolved."""
    if learning_rate_init != "auto":
        return learning_rate_init
    return EARLY_STOPPING_LEARNING_RATE if early_stopping else LEARNING_RATE


def resolve_patience(n_iter_no_change, *, validating):
    """Epochs without improvement before Adam stops, ``"auto"`` resolved: of
    the validation score when ``validating``, of the training loss without."""
    if n_iter_no_change != "auto":
        return n_iter_no_change
    return VALIDATION_PATIENCE if validating else LOSS_PATIENCE


class _Moment:
    """The training at the end of an epoch: the parameters, Adam's state, the
    history and the best epoch's parameters so far, copied.

    An interrupted fit (a callback that raises, ``KeyboardInterrupt``) goes
    back to the last of these, so that weights, history and optimizer always
    describe the same epoch.
    """

    def __init__(self, params, optimizer, history, best_params):
        self.take(params, optimizer, history, best_params)

    def take(self, params, optimizer, history, best_params):
        """Copy the training as it is now."""
        self.params = {name: value.copy() for name, value in params.items()}
        state = optimizer.state
        self.t = state["t"]
        self.ms = {name: m.copy() for name, m in state["ms"].items()}
        self.vs = {name: v.copy() for name, v in state["vs"].items()}
        self.history = history.copy()
        self.best_params = best_params

    def restore(self, params, optimizer, history):
        """Put this moment back into ``params``, ``optimizer`` and ``history``
        (in place), with the best epoch's parameters as a stopped fit keeps
        them; returns nothing."""
        for name, value in (self.best_params or self.params).items():
            params[name][...] = value
        state = optimizer.state
        state["t"] = self.t
        for name in state["ms"]:
            state["ms"][name][...] = self.ms[name]
            state["vs"][name][...] = self.vs[name]
        history.assign(self.history)


def fit_adam(
    model,
    params,
    data,
    settings,
    *,
    history,
    optimizer,
    rng,
    tasks,
    validation=None,
):
    """Adam on shuffled minibatches, with early stopping (like MLP's).

    With early stopping the best epoch's weights are kept; a warm start's
    weights count as its first candidate, scored on this fit's validation
    set. Interrupted (by an exception, ``KeyboardInterrupt`` included), the
    training goes back to the end of its last epoch, as a fit stopped there
    would leave it, and the exception goes on: ``params``, ``optimizer`` and
    ``history`` always describe the same epoch.

    Parameters
    ----------
    model : Model
        The model with its head.
    params : dict of str to ndarray
        Updated in place; the best ones with early stopping.
    data : TrainingSet
        The training set.
    settings : AdamSettings
    history : History
        Updated epoch by epoch.
    optimizer : AdamOptimizer
        Updates ``params`` (its state goes on from where it is).
    rng : numpy.random.RandomState
        Draws the validation split, the shuffles and the dropout seeds.
    tasks : FitTasks
        The fit's callback tasks: an ``"epoch"`` task per epoch, then a
        ``"validation"`` task with a validation set; a callback that asks to
        stop ends the training after the epoch.
    validation : TrainingSet or None, default=None
        An explicit validation set (``fit``'s ``X_val`` and ``y_val``) for
        early stopping; None: with ``settings.early_stopping``,
        ``validation_fraction`` of ``data`` is held out.
    """
    n_samples = len(data)
    train = np.arange(n_samples)
    validation_rows = train_rows = held_out = None  # held_out: of the training set
    if settings.early_stopping and not settings.incremental:
        if validation is None:
            train, validation_rows = validation_split(
                data,
                settings.validation_fraction,
                rng,
                setting=settings.early_stopping,
            )
            validation = data
            train_rows, held_out = np.sort(train), np.sort(validation_rows)
        else:
            validation_rows = np.arange(len(validation))
        history.start_validation()
    n_train = len(train)
    if settings.batch_size == "auto":
        auto = 200 if validation_rows is None else EARLY_STOPPING_BATCH
        batch_size = min(auto, n_train)
    else:
        batch_size = min(settings.batch_size, n_train)
    best_params = None
    if validation_rows is not None and math.isfinite(history.best_validation_score):
        # a warm start: the weights it starts from are the best so far, on
        # this fit's validation set, until an epoch beats them
        best_params = {k: v.copy() for k, v in params.items()}
        history.best_validation_score, _ = validation_metrics(
            model, params, validation, validation_rows
        )
    moment = _Moment(params, optimizer, history, best_params)
    start_scale = largest_weight(params), data
    start = time.time()
    try:
        n_iter = 0  # epochs of this fit
        for _ in range(settings.max_iter):
            epoch = tasks.begin("epoch")
            if settings.shuffle:
                train = rng.permutation(train)
            loss = adam_epoch(
                model, params, data, train, batch_size, optimizer, rng, settings.dropout
            )
            check_finite(
                params,
                loss,
                history.n_iter + 1,
                optimizer=optimizer,
                alpha=settings.alpha,
                start=start_scale,
            )
            score = validation_loss = None
            if validation_rows is not None:
                score, validation_loss = validation_metrics(
                    model, params, validation, validation_rows
                )
            if history.end_epoch(loss, n_train, settings.tol, score, validation_loss):
                best_params = {k: v.copy() for k, v in params.items()}
            n_iter += 1
            moment.take(params, optimizer, history, best_params)
            stop = tasks.end(epoch, params, train_rows)
            if validation_rows is not None:
                stop |= tasks.validate(params, held_out)
            if settings.verbose:
                print_iteration(settings.name, history.n_iter, loss, start, score)
            if settings.incremental:
                break
            if stop:
                if settings.verbose:
                    print(f"[{settings.name}] A callback asked to stop. Stopping.")
                break
            if history.no_improvement_count > settings.patience:
                if settings.verbose:
                    criterion = (
                        "Validation score"
                        if validation_rows is not None
                        else "Training loss"
                    )
                    print(
                        f"[{settings.name}] {criterion} did not improve more "
                        f"than tol={settings.tol} for {settings.patience} "
                        "consecutive epochs. Stopping."
                    )
                break
            if n_iter == settings.max_iter:
                warnings.warn(
                    f"Stochastic optimizer: maximum iterations ({settings.max_iter}) "
                    "reached and the optimization hasn't converged yet.",
                    ConvergenceWarning,
                    stacklevel=5,
                )
    except BaseException:  # back to the end of the last epoch, then raise
        moment.restore(params, optimizer, history)
        raise
    if best_params is not None:
        params.update(best_params)
    if not settings.incremental:
        warn_if_diverged(history, optimizer.state["learning_rate_init"], stacklevel=6)


def adam_epoch(model, params, data, train, batch_size, optimizer, rng, dropout):
    """One pass of Adam over the samples ``train``, in their order, in
    minibatches of ``batch_size``; returns the epoch's mean loss.

    A minibatch whose samples all weigh zero holds no sample: it takes no
    step. With ``dropout``, each step draws its seed from ``rng``.
    """
    epoch_loss = 0.0
    for batch in gen_batches(len(train), batch_size):
        rows = train[batch]
        if not data.sample_weight[rows].sum() > 0:
            continue  # no sample, no step: its mean loss is 0 / 0
        step_dropout = None
        if dropout:  # one seed per step, drawn only when dropping
            step_dropout = (dropout, int(rng.randint(np.iinfo(np.int64).max)))
        loss, grads = loss_gradients(model, params, data, rows, dropout=step_dropout)
        optimizer.update_params(params, grads)
        epoch_loss += loss * float(data.sample_weight[rows].sum())
    return epoch_loss / float(data.sample_weight[train].sum())


# Weights or tokens beyond this magnitude are named as a cause of non-finite
# training (the seeded weights are about 1 / sqrt(width), standardised tokens
# a few units).
def warn_if_diverged(history, learning_rate, *, stacklevel):
    """Warn when Adam's training loss ended above twice its first epoch's
    (``stacklevel``: of ``warnings.warn``, to name the estimator's method)."""
    curve = history.loss_curve
    if len(curve) > 1 and curve[-1] > 2 * curve[0]:
        warnings.warn(
            f"Adam diverged: the training loss rose from {curve[0]:.4g} in the "
            f"first epoch to {curve[-1]:.4g} after {len(curve)} epochs. Lower "
            f"learning_rate_init (now {learning_rate}).",
            ConvergenceWarning,
            stacklevel=stacklevel,
        )


# token_statistics: the head that reads the tokens' statistics is fitted, once the
# model is trained, with the penalty of scikit-learn's LogisticRegression(C=1)
# and Ridge(alpha=1) (user guide, "How the defaults were chosen").
def new_optimizer(params, model, settings, state=None):
    """Adam over the trainable parameters: a new one, or the one of ``state``
    (an optimizer's ``state`` dict, kept between ``partial_fit`` calls)."""
    if state is not None:
        return AdamOptimizer.from_state(state)
    trainable = {name: params[name] for name in model.trainable_names()}
    return AdamOptimizer(
        trainable,
        settings.learning_rate,
        settings.beta_1,
        settings.beta_2,
        settings.epsilon,
    )
