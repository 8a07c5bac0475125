"""Learning the model from y: the loss and gradients, the history, the Adam solver.

One loss/gradient routine (:func:`loss_gradients`: forward, head, weighted
loss, backward, L2 penalty) serves both solvers, as ``_backprop`` does in
scikit-learn's ``neural_network``: :func:`fit_adam` calls it once per
minibatch, :func:`skattn._lbfgs.fit_lbfgs` wraps it with packing of the
parameters into one vector. The solvers work on explicit objects: a
:class:`~skattn._targets.TrainingSet`, the
parameters as a dict of arrays (updated in place), the settings of the
estimator (:class:`AdamSettings`), and a :class:`History` that they own and
that the estimator reads its training attributes from. No solver reads or
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
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import gen_batches

from ._model.encoder import DropoutStreams
from ._model.evaluate import model_row_bytes
from ._model.head import LOSS_FUNCTIONS
from ._model.sequences import map_batches
from ._model.units import SparseRows
from ._optimizers import AdamOptimizer
from ._targets import validation_split
from ._validation import batch_budget


def training_dtype(solver, input_dtype):
    """The dtype a solver computes in: the one place of this choice.

    Adam steps in float32, as torch trains: twice the speed of float64 for
    minibatch gradients that are noisy far above float32's rounding. L-BFGS
    keeps the input's precision for its line searches.
    """
    return np.dtype(np.float32) if solver == "adam" else np.dtype(input_dtype)


@dataclasses.dataclass
class History:
    """What training has done so far: the estimator's training attributes.

    The solvers update it, epoch by epoch; the estimator reads it into its
    attributes (``n_iter_``, ``loss_curve_``, ...) and back, so that a warm
    start, a ``partial_fit`` and the blocked fit of a dask array go on from
    the same record.
    """

    n_iter: int = 0
    t: int = 0
    loss: float | None = None
    loss_curve: list = dataclasses.field(default_factory=list)
    best_loss: float = math.inf
    validation_scores: list | None = None
    validation_loss_curve: list | None = None
    best_validation_score: float | None = None
    no_improvement_count: int = 0

    # field -> fitted attribute
    ATTRIBUTES = {
        "n_iter": "n_iter_",
        "t": "t_",
        "loss": "loss_",
        "loss_curve": "loss_curve_",
        "best_loss": "best_loss_",
        "validation_scores": "validation_scores_",
        "validation_loss_curve": "validation_loss_curve_",
        "best_validation_score": "best_validation_score_",
        "no_improvement_count": "_no_improvement_count",
    }

    @classmethod
    def read(cls, estimator):
        """The history of a fitted estimator (a copy: the lists too)."""
        values = {
            field: getattr(estimator, attribute)
            for field, attribute in cls.ATTRIBUTES.items()
        }
        return cls(**values).copy()

    def write(self, estimator):
        """Set the estimator's training attributes (copies of the lists)."""
        for field, value in dataclasses.asdict(self.copy()).items():
            setattr(estimator, self.ATTRIBUTES[field], value)

    def copy(self):
        """A copy whose lists are new."""
        return dataclasses.replace(
            self,
            loss_curve=list(self.loss_curve),
            validation_scores=_copy_list(self.validation_scores),
            validation_loss_curve=_copy_list(self.validation_loss_curve),
        )

    def assign(self, other):
        """Make this history a copy of ``other`` (in place)."""
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(other.copy(), field.name))

    def start_validation(self):
        """Record validation scores from now on (early stopping is on)."""
        if self.validation_scores is None:
            self.validation_scores, self.best_validation_score = [], -math.inf
        if self.validation_loss_curve is None:
            self.validation_loss_curve = []

    def end_epoch(self, loss, n_samples, tol, score=None, validation_loss=None):
        """Record an epoch's training loss (and validation score and loss).

        Returns
        -------
        best : bool
            Whether ``score`` is above every validation score before it.
        """
        self.n_iter += 1
        self.t += n_samples
        self.loss = loss
        self.loss_curve.append(loss)
        best = False
        if score is not None:
            best = score > self.best_validation_score
            self.validation_scores.append(score)
            self.validation_loss_curve.append(validation_loss)
            if score < self.best_validation_score + tol:
                self.no_improvement_count += 1
            else:
                self.no_improvement_count = 0
            self.best_validation_score = max(self.best_validation_score, score)
        elif loss > self.best_loss - tol:
            self.no_improvement_count += 1
        else:
            self.no_improvement_count = 0
        self.best_loss = min(self.best_loss, loss)
        return best


def _copy_list(values):
    return None if values is None else list(values)


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
    loss_function = LOSS_FUNCTIONS[data.task]
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
            params, x, lengths, dropout=streams, training=True
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
    loss, _ = LOSS_FUNCTIONS[data.task](predictions[rows], data.y[rows], weight)
    total_weight = float(weight.sum())
    for name, spec in model.param_specs().items():
        if spec.penalized:
            value = params[name]
            loss += 0.5 * data.alpha * float(np.sum(value * value)) / total_weight
    if data.task == "classification":
        score = accuracy_score(data.y[rows], predictions[rows].argmax(axis=1))
    else:
        score = r2_score(data.y[rows], predictions[rows])
    return score, loss


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
    classes=None,
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
    classes : ndarray or None, default=None
        The class labels, for the messages of the validation split.
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
                classes=classes,
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


# pool_tokens: the head that reads the tokens' statistics is fitted, once the
# model is trained, with the penalty of scikit-learn's LogisticRegression(C=1)
# and Ridge(alpha=1) (user guide, "How the defaults were chosen").
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
    if data.task == "classification":
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


def print_iteration(name, iteration, loss, start, score=None):
    """One line of the verbose table: iteration, loss, time (and score)."""
    line = f"{iteration:>10d} {loss:>20.6e} {time.time() - start:>10.2f}"
    if score is not None:
        line += f" {score:>12.4f}"
    print(f"[{name}] {line}")


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
