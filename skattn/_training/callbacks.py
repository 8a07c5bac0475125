"""scikit-learn's fit callbacks (``set_callbacks``, scikit-learn 1.9 and later).

A fit reports its progress as a tree of tasks (``sklearn.callback``): the root
task is the fit, or the partial_fit, and its subtasks are what the solver
repeats, one ``"epoch"`` of Adam or one ``"iteration"`` of L-BFGS each. With a
validation set (early stopping, or ``fit``'s ``X_val`` and ``y_val``), each
epoch is followed by a ``"validation"`` task whose ``X`` and ``y`` are the
validation set: ``ScoringMonitor`` then scores the model after every epoch on
the training data (the rows of ``"epoch"`` tasks) and on the validation set
(the rows of ``"validation"`` tasks), and ``ProgressBar`` shows the epochs.

The callbacks receive the caller's own ``X``, ``y`` and ``sample_weight`` (the
rows the solver trains on), and, when they ask for it, a copy of the estimator
with the parameters of that moment (``fitted_estimator``), ready to predict.
Both are computed only for a callback that asks, so that a fit without
callbacks pays nothing.

On scikit-learn 1.6 to 1.8, which have no callbacks, the estimators have no
``set_callbacks`` and :class:`FitTasks` does nothing.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

try:  # scikit-learn >= 1.9
    from sklearn.callback import CallbackSupportMixin
except ImportError:  # pragma: no cover - exercised on the lowest versions
    CallbackSupportMixin = None

from .._input.validation import _safe_indexing

__all__ = ["CALLBACK_BASES", "FitTasks"]

# The base classes that give the estimators ``set_callbacks``: none before 1.9.
CALLBACK_BASES = () if CallbackSupportMixin is None else (CallbackSupportMixin,)


class FitTasks:
    """The callback tasks of one ``fit`` or ``partial_fit`` call.

    Parameters
    ----------
    estimator : BaseAttention
        The estimator being fitted.
    X, y, sample_weight : object
        The caller's training data, as passed to ``fit``.
    X_val, y_val : object, default=None
        The caller's validation set, as passed to ``fit``.

    Attributes
    ----------
    fitted_state : callable or None
        Maps the solver's parameter dict to the fitted state that a callback's
        ``fitted_estimator`` (a shallow copy of the estimator) gets: a dict of
        attributes holding copies; set by the fit once the model is built.
    """

    def __init__(self, estimator, X, y, sample_weight, X_val=None, y_val=None):
        self._estimator = estimator
        self._training = (X, y, sample_weight)
        self._validation = (X_val, y_val, None)
        self._root = None
        self.fitted_state = None

    def start(self, task_name, *, max_subtasks):
        """Begin the root task (the fit) with room for ``max_subtasks``.

        Parameters
        ----------
        task_name : {"fit", "partial_fit"}
            The root task's name.
        max_subtasks : int
            The most subtasks the solver will start; 0 when nothing is learned.
        """
        if not hasattr(self._estimator, "_init_callback_context"):
            return  # scikit-learn < 1.9
        self._root = self._estimator._init_callback_context(
            task_name=task_name, max_subtasks=max_subtasks
        )
        self._root.call_on_fit_task_begin(
            estimator=self._estimator, **self._hook_data(self._training)
        )

    def begin(self, task_name):
        """Begin a subtask of the root task; returns its context (or None)."""
        if self._root is None:
            return None
        context = self._root.subcontext(task_name=task_name)
        context.call_on_fit_task_begin(
            estimator=self._estimator, **self._hook_data(self._training)
        )
        return context

    def end(self, context, params=None, rows=None):
        """End a subtask on the training data; True if a callback asks to stop.

        Parameters
        ----------
        context : CallbackContext or None
            What :meth:`begin` returned.
        params : dict of str to ndarray, default=None
            The parameters at the end of the task (for ``fitted_estimator``);
            None for a task that did not run (the left-over one of L-BFGS).
        rows : ndarray of int, default=None
            The training rows, when early stopping holds some out; None: all.
        """
        if context is None:
            return False
        if params is None:
            return context.call_on_fit_task_end(estimator=self._estimator)
        return context.call_on_fit_task_end(
            estimator=self._estimator,
            **self._hook_data(self._training, rows),
            reconstruction_attributes=lambda: self.fitted_state(params),
        )

    def validate(self, params, rows=None):
        """A ``"validation"`` task on the validation set; True to stop.

        ``rows``: the held-out rows of the training data (early stopping's
        ``validation_fraction``); None for ``fit``'s ``X_val`` and ``y_val``.
        """
        if self._root is None:
            return False
        context = self._root.subcontext(task_name="validation")
        data = self._validation if rows is None else self._training
        context.call_on_fit_task_begin(
            estimator=self._estimator, **self._hook_data(data, rows)
        )
        return context.call_on_fit_task_end(
            estimator=self._estimator,
            **self._hook_data(data, rows),
            reconstruction_attributes=lambda: self.fitted_state(params),
        )

    def finish(self):
        """End the root task: the estimator itself is now fitted."""
        if self._root is not None:
            self._root.call_on_fit_task_end(
                estimator=self._estimator,
                **self._hook_data(self._training),
                reconstruction_attributes={},
            )

    @staticmethod
    def _hook_data(data, rows=None):
        """The hooks' X, y and metadata, computed only if a hook asks for them."""
        X, y, sample_weight = data

        def take(values):
            if values is None or rows is None:
                return values
            return _safe_indexing(values, rows)

        def metadata():
            if sample_weight is None:
                return None
            return {"sample_weight": take(sample_weight)}

        return dict(X=lambda: take(X), y=lambda: take(y), metadata=metadata)
