"""What the attention estimators share: fitting and the fitted state.

:class:`BaseAttention` holds the parameter constraints, ``fit`` and
``partial_fit`` as a sequence of named steps (check the input and the target,
make the training set, resolve the model's :class:`~skattn._model.model.ModelConfig`
and seed it, train it with a solver of ``_training``) and the fitted state (one
:class:`~skattn._training.state.FittedModel`, which the fitted attributes
read: see ``attributes.py``). The batched forward pass behind the per-token
methods is its mixin :class:`~skattn._estimators.forward.ForwardPass`
(``forward.py``). The public estimators add their docstrings and the methods
of their kind.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._input.formats import (
    CHANNELS_FIRST,
    CHANNELS_LAST,
    IDS,
    TABLE,
    check_input,
    input_format,
)
from .._input.targets import TargetEncoding, check_classes, training_set, validation_set
from .._input.validation import (
    Interval,
    StrOptions,
    batch_budget,
    check_init,
    check_sample_weight,
    check_target,
    option_constraint,
)
from .._model.evaluate import forward_batches
from .._model.model import build_model
from .._model.options import ATTENTION_PATTERNS, REGISTRIES
from .._model.sequences import (
    SERIES_MAX_FEATURES,
    model_dtype,
    sequence_lengths,
    token_moments,
    token_width,
)
from .._parallel import single_threaded_blas
from .._persistence import VersionedState
from .._training.adam import (
    AdamSettings,
    fit_adam,
    new_optimizer,
    resolve_learning_rate,
    resolve_patience,
)
from .._training.callbacks import CALLBACK_BASES, FitTasks
from .._training.head import fit_linear_head
from .._training.lbfgs import fit_lbfgs
from .._training.loss import training_dtype
from .._training.state import FittedModel, History
from .attributes import FittedAttributes
from .dask import blocked_fit, is_dask_collection
from .forward import ForwardPass
from .resolve import (
    check_lengths,
    check_structure,
    continued_pattern,
    fitted_structure,
    pattern_as_given,
    reads_table_row,
    resolve_config,
)

_STOCHASTIC_SOLVERS = ("adam",)

# early_stopping="auto" holds out validation_fraction of training sets of at
# least this many samples, and for wide tokens when the validation split holds
# at least AUTO_EARLY_STOPPING_VALIDATION samples (1,000 training samples at
# the default fraction): a smaller split ranks the epochs by noise and stops
# after a few of them. A table whose head reads its row stops early from a
# split of AUTO_EARLY_STOPPING_TABLE_VALIDATION (wine, the smallest table
# measured, has 133 samples): trained to its last epoch the model memorises
# small noisy tables; stopped early, without the row it underfits.
AUTO_EARLY_STOPPING_SAMPLES = 2000
AUTO_EARLY_STOPPING_VALIDATION = 100
AUTO_EARLY_STOPPING_TABLE_VALIDATION = 10


class BaseAttention(
    VersionedState, FittedAttributes, ForwardPass, *CALLBACK_BASES, BaseEstimator
):
    """Base class of the attention estimators (not for direct use)."""

    _parameter_constraints: dict = {
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "head_dim": [Interval(Integral, 1, None, closed="left"), None],
        "n_layers": [Interval(Integral, 1, None, closed="left")],
        "ff_dim": [Interval(Integral, 0, None, closed="left")],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "residual": ["boolean"],
        "causal": ["boolean"],
        "attention_window": [Interval(Integral, 1, None, closed="left"), None],
        "attention_dilation": [Interval(Integral, 1, None, closed="left")],
        "attention_pattern": [*ATTENTION_PATTERNS.values(), None],
        **{name: option_constraint(each) for name, each in REGISTRIES.items()},
        "pooling": [StrOptions({*REGISTRIES["pooling"].names(), "auto"})],
        "vocabulary_size": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            None,
        ],
        "features_per_token": [Interval(Integral, 1, None, closed="left"), None],
        "data_format": [StrOptions({CHANNELS_LAST, CHANNELS_FIRST})],
        "scale_tokens": ["boolean"],
        "patch_size": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            None,
        ],
        "token_statistics": [StrOptions({"auto"}), list, tuple, None],
        "init": [StrOptions({"random"}), dict],
        "solver": [StrOptions({"adam", "lbfgs"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate_init": [
            StrOptions({"auto"}),
            Interval(Real, 0, None, closed="neither"),
        ],
        "batch_size": [
            StrOptions({"auto"}),
            Interval(Integral, 1, None, closed="left"),
        ],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "early_stopping": ["boolean", StrOptions({"auto"})],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [
            StrOptions({"auto"}),
            Interval(Integral, 1, None, closed="left"),
        ],
        "shuffle": ["boolean"],
        "beta_1": [Interval(Real, 0, 1, closed="left")],
        "beta_2": [Interval(Real, 0, 1, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
    }

    def _check_solver(self):
        if self.solver not in _STOCHASTIC_SOLVERS:
            raise AttributeError(
                f"partial_fit is only available for stochastic optimizers; "
                f"{self.solver!r} is not stochastic."
            )
        return True

    # Fitting
    # -------

    def _fit(
        self, X, y, sample_weight, *, incremental, classes=None, X_val=None, y_val=None
    ):
        """Shared body of fit and partial_fit."""
        if is_dask_collection(
            X
        ):  # Adam streamed over the blocks (skattn._estimators.dask)
            fitted, fresh = blocked_fit(
                self,
                X,
                y,
                sample_weight,
                incremental=incremental,
                classes=classes,
                X_val=X_val,
                y_val=y_val,
            )
            return self._adopt(fitted, fresh)
        # the input format a first pass reads goes into the fitted model;
        # a call that fails before leaves the fitted model's in force
        try:
            tasks = FitTasks(self, X, y, sample_weight, X_val, y_val)
            first_pass = not hasattr(self, "_fitted") or not (
                self.warm_start or incremental
            )
            if X_val is not None or y_val is not None:
                self._check_validation_request(X_val, y_val)
            params = self.get_params()
            if not first_pass:  # from here on, the model is the fitted one
                structure = fitted_structure(self._fitted.config, input_format(self))
                fitted_pattern = structure["attention_pattern"]
                given = {"attention_pattern": pattern_as_given(params, fitted_pattern)}
                continued = {
                    **params,
                    "attention_pattern": continued_pattern(params, fitted_pattern),
                }
                check_structure(continued, structure, incremental, given)
            role = "partial_fit" if incremental else "warm_start"
            sequences = check_input(self, X, reset=first_pass, role=role)
            lengths = sequence_lengths(sequences)
            self._check_lengths(lengths, reset=first_pass)
            objective, y = check_target(self, y, len(sequences))
            self._check_objective(objective, first_pass, classes)
            train, user_weight = self._training_set(
                sequences, lengths, y, sample_weight, objective, first_pass, classes
            )
            validation = None
            if X_val is not None:
                validation = self._validation_set(X_val, y_val, train, first_pass)
            self.early_stopping_ = self._uses_early_stopping(
                objective, incremental, validation, sequences, params
            )
            tasks.start(
                "partial_fit" if incremental else "fit",
                max_subtasks=self._max_subtasks(objective, incremental),
            )
            if first_pass:
                self._random_state = check_random_state(self.random_state)
                self._initialize(sequences, lengths, train, user_weight, params)
            if objective is not None:
                self._train(train, validation, incremental, tasks)
            tasks.finish()
            return self
        finally:
            vars(self).pop("_input_format", None)

    def _adopt(self, fitted, fresh):
        """Take the fitted state ``fitted`` (a dict of fitted attributes,
        ``_fitted`` among them) as this estimator's; with ``fresh``, the
        attributes of a former fit that it lacks go, as a new fit resets them."""
        if fresh:
            for key in list(vars(self)):
                stale = key.endswith("_") or key == "_fitted"
                if stale and key not in fitted and key not in self.get_params():
                    delattr(self, key)
        vars(self).update(fitted)
        return self

    def _check_validation_request(self, X_val, y_val):
        """X_val and y_val together, for Adam's early stopping (as in
        HistGradientBoostingClassifier)."""
        if y_val is None:
            raise ValueError("X_val is provided, but y_val was not provided.")
        if X_val is None:
            raise ValueError("y_val is provided, but X_val was not provided.")
        if self.early_stopping is False:
            raise ValueError(
                "X_val and y_val are passed to fit while early_stopping=False: "
                "they are the validation set of early stopping. Set "
                "early_stopping to True or 'auto', or drop X_val and y_val."
            )
        if self.solver != "adam":
            raise ValueError(
                f"X_val and y_val are the validation set of early stopping, "
                f"which needs solver='adam' (got {self.solver!r})."
            )

    def _check_objective(self, objective, first_pass, classes):
        """The objective of this call against the fitted one, ``classes`` and the
        solver."""
        if not first_pass and objective != self.objective_:
            fitted_for = self.objective_ or "no target (seeded weights)"
            raise ValueError(
                f"This call's target asks for {objective or 'no training'}, but "
                f"{type(self).__name__} was fitted for {fitted_for}; fit it anew "
                "(without warm_start) to change the objective."
            )
        fitted_classes = None if first_pass else getattr(self, "classes_", None)
        check_classes(classes, objective, self.objective, fitted_classes)
        if objective is not None and self.dropout and self.solver == "lbfgs":
            raise ValueError(
                f"dropout={self.dropout} needs solver='adam': L-BFGS minimises one "
                "fixed objective, and dropout draws new masks at every step. Set "
                "dropout=0 or solver='adam'."
            )

    def _training_set(
        self, sequences, lengths, y, sample_weight, objective, first_pass, classes
    ):
        """The training set: encoded target, weights of the loss, penalty.

        Returns
        -------
        train : TrainingSet or None
            None when nothing is learned.
        user_weight : ndarray or None
            The caller's checked weights (without the class weights), for the
            median length of ``patch_size="auto"`` and, when nothing is
            learned, the token statistics.
        """
        if objective is None and sample_weight is None:
            return None, None
        dtype = model_dtype(sequences)
        # checked even when unused, so that a wrong one is never silent;
        # normalised: the user's weights are sample_weight * 2**weight_exponent
        user_weight, weight_exponent = check_sample_weight(
            sample_weight, len(sequences), dtype, return_exponent=True
        )
        if objective is None:
            return None, user_weight
        if first_pass:
            encoding = TargetEncoding.fit(y, objective, classes, user_weight)
        else:  # the fitted model's
            encoding = self._fitted.target
        train = training_set(
            sequences,
            lengths,
            y,
            user_weight,
            weight_exponent,
            encoding,
            class_weight=self.class_weight,
            alpha=self.alpha,
            dtype=training_dtype(self.solver, dtype),
        )
        return train, user_weight

    def _validation_set(self, X_val, y_val, train, first_pass):
        """``X_val`` checked as X, ``y_val`` encoded as y."""
        if train is None:
            raise ValueError(
                "X_val and y_val are the validation set of early stopping, "
                "but nothing is learned (no y, or objective=None): pass y, "
                "or drop X_val and y_val."
            )
        try:
            sequences = check_input(self, X_val, reset=False, role="X_val")
        except ValueError as exc:
            raise ValueError(f"X_val: {exc}") from exc
        lengths = sequence_lengths(sequences)
        pooling = self.pooling if first_pass else self._fitted.config.pooling
        try:
            check_lengths(pooling, lengths, train.lengths[0], "the length of X's")
        except ValueError as exc:
            raise ValueError(f"X_val: {exc}") from exc
        return validation_set(
            sequences,
            lengths,
            y_val,
            train,
            train.encoding,
            class_weight=self.class_weight,
            alpha=self.alpha,
            dtype=training_dtype(self.solver, model_dtype(sequences)),
        )

    def _uses_early_stopping(
        self, objective, incremental, validation, sequences, params
    ):
        """Whether this call holds out a validation set (``early_stopping_``),
        for the estimator's ``params`` (``get_params()``).

        ``"auto"``: with ``X_val``, for training sets of
        ``AUTO_EARLY_STOPPING_SAMPLES`` or more, for tokens of more than
        ``SERIES_MAX_FEATURES`` features (word vectors, encoder states) when
        ``validation_fraction`` of the samples is at least
        ``AUTO_EARLY_STOPPING_VALIDATION`` samples, and for a table whose
        head reads its row when it is at least
        ``AUTO_EARLY_STOPPING_TABLE_VALIDATION``.
        """
        if objective is None or incremental:
            return False
        if self.early_stopping != "auto":
            return bool(self.early_stopping)
        kind = input_format(self)["kind"]
        wide = kind != IDS and token_width(sequences) > SERIES_MAX_FEATURES
        n_samples = len(sequences)
        held_out = n_samples * self.validation_fraction
        return (
            validation is not None
            or (wide and held_out >= AUTO_EARLY_STOPPING_VALIDATION)
            or (
                held_out >= AUTO_EARLY_STOPPING_TABLE_VALIDATION
                and reads_table_row(params, kind, objective)
            )
            or n_samples >= AUTO_EARLY_STOPPING_SAMPLES
        )

    def _max_subtasks(self, objective, incremental):
        """The most subtasks of the fit, for scikit-learn's callbacks."""
        if objective is None:
            return 0
        if self.solver == "lbfgs":
            return self.max_iter + 1  # one left over, not run
        n_epochs = 1 if incremental else self.max_iter
        return n_epochs * (2 if self.early_stopping_ else 1)  # + validation

    def _initialize(self, sequences, lengths, train, user_weight, params):
        """Resolve the model of the estimator's ``params`` (``get_params()``),
        seed its parameters, reset the training state."""
        objective = None if train is None else train.objective
        init = {}
        if not isinstance(self.init, str):
            init = check_init(self.init, self.n_layers)
        n_outputs = 0
        if objective == "classification":
            n_outputs = len(train.encoding.classes)
        elif objective == "regression":
            n_outputs = train.y.shape[1]
        kind = input_format(self)["kind"]
        config = resolve_config(
            params,
            kind,
            sequences,
            lengths,
            user_weight,
            init,
            n_outputs,
            objective,
            self._random_state,
        )
        self.max_tokens_ = int(lengths.max())
        model = build_model(config)
        flat, _ = model.flat_init(init)
        params = model.init_params(self._random_state, model_dtype(sequences), flat)
        if config.token_scale_shape is not None:
            weight = user_weight if train is None else train.sample_weight
            params["token_mean"], params["token_scale"] = token_moments(
                sequences,
                weight,
                per_position=input_format(self)["kind"] == TABLE,
                budget_bytes=batch_budget(),
            )
        history = History()
        if self.early_stopping_:
            history.start_validation()
        self._fitted = FittedModel.of(
            model,
            params,
            history,
            target=None if train is None else train.encoding,
            input_format=vars(self).pop("_input_format"),
        )

    def _train(self, train, validation, incremental, tasks):
        """Train the fitted model on ``train`` with the solver.

        With the tokens' statistics (``token_statistics``) the head reads the pooled
        vector alone while the model trains; ``fit`` then fits the whole head,
        statistics included (:meth:`_fit_head`).
        """
        fitted = self._fitted
        model = fitted.model.pooled_head_only()  # the model as it trains
        input_dtype = model_dtype(train.sequences)
        dtype = training_dtype(self.solver, input_dtype)
        fitted_train, train = train, train.astype(dtype)
        if validation is not None:
            validation = validation.astype(dtype)
        params = fitted.cast(dtype, model.param_specs(), copy=True)
        n_pooled = model.head.n_features
        params["head_coef"] = params["head_coef"][:n_pooled].copy()
        history = fitted.history.copy()
        trainable = set(model.trainable_names())

        def stored(params):
            """The solver's parameters as the fitted model holds them: the
            learned ones in the input's dtype, the head's rows of the tokens'
            statistics after the trained rows, the token statistics as fit
            measured them."""
            out = {
                name: value.astype(input_dtype)
                if name in trainable
                else fitted.params[name]
                for name, value in params.items()
            }
            full = fitted.params["head_coef"]
            if len(full) > n_pooled:
                out["head_coef"] = full.astype(input_dtype)  # a copy
                out["head_coef"][:n_pooled] = params["head_coef"]
            return fitted.replace(params=out)

        tasks.fitted_state = lambda params: {"_fitted": stored(params)}
        optimizer = settings = None
        if self.solver == "adam":
            settings = self._adam_settings(incremental)
            state = fitted.optimizer_state if incremental else None
            optimizer = new_optimizer(params, model, settings, state)
        n_iter = history.n_iter
        self._print_header()
        start = time.time()
        # one BLAS thread: on the small matrix products of a minibatch, two
        # threads ran many times slower on a busy 2-core machine
        try:
            with single_threaded_blas():
                self._solve(
                    model,
                    params,
                    train,
                    validation,
                    history,
                    tasks,
                    settings,
                    optimizer,
                )
        finally:  # trained, or as far as an interrupted fit went (one epoch's state)
            result = stored(params).replace(history=history)
            if optimizer is not None and history.n_iter > n_iter:
                result = result.replace(optimizer_state=optimizer.state)
            self._fitted = result
        if self.verbose:
            print(f"[{type(self).__name__}] Training took {time.time() - start:.2f}s.")
        if not incremental and (
            fitted.config.token_statistics or fitted_train.objective == "regression"
        ):
            self._fit_head(fitted_train)

    def _print_header(self):
        """The verbose table's header."""
        if not self.verbose:
            return
        name = type(self).__name__
        header = f"{'Iteration':>10} {'Objective Value':>20} {'Time(s)':>10}"
        if self.early_stopping_:
            header += f" {'Validation':>12}"
        print(f"[{name}]\n[{name}] {header}")
        print(f"[{name}] {'-' * len(header)}")

    def _solve(
        self, model, params, train, validation, history, tasks, settings, optimizer
    ):
        """Run the solver on ``params``, ``history`` and ``optimizer`` (in place)."""
        if self.solver == "lbfgs":
            fit_lbfgs(
                model,
                params,
                train,
                max_iter=self.max_iter,
                tol=self.tol,
                alpha=self.alpha,
                history=history,
                tasks=tasks,
                verbose=self.verbose,
                name=type(self).__name__,
            )
            return
        fit_adam(
            model,
            params,
            train,
            settings,
            history=history,
            optimizer=optimizer,
            rng=self._random_state,
            tasks=tasks,
            validation=validation,
        )

    def discard_optimizer_state(self):
        """Forget the state of Adam that :meth:`partial_fit` continues from.

        Adam's two moment arrays are the size of the weights: about half of a
        pickle (see the user guide, "Persistence"). Without them the model
        transforms and predicts the same, and a later ``partial_fit`` starts
        Adam afresh from the fitted weights.

        Returns
        -------
        self : object
        """
        check_is_fitted(self)
        self._fitted = self._fitted.replace(optimizer_state=None)
        return self

    def _fit_head(self, train):
        """Fit the head on the trained model's pooled vectors and the tokens'
        statistics (see :func:`~skattn._training.head.fit_linear_head`)."""
        fitted = self._fitted
        model = fitted.model
        params = fitted.cast(model_dtype(train.sequences))
        features = np.empty((len(train), model.head.n_features))
        with single_threaded_blas():
            for rows, _, pooled in forward_batches(
                model, params, train.sequences, batch_budget()
            ):
                features[rows] = pooled
        coef, intercept = fit_linear_head(features, train)
        dtype = fitted.params["head_coef"].dtype
        head = {
            "head_coef": np.ascontiguousarray(coef, dtype=dtype),
            "head_intercept": np.asarray(intercept, dtype=dtype),
        }
        self._fitted = fitted.replace(params={**fitted.params, **head})

    def _adam_settings(self, incremental):
        """The solver's hyper-parameters, ``"auto"`` resolved."""
        return AdamSettings(
            max_iter=self.max_iter,
            batch_size=self.batch_size,
            learning_rate=resolve_learning_rate(
                self.learning_rate_init, self.early_stopping_
            ),
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            shuffle=self.shuffle,
            dropout=self.dropout,
            tol=self.tol,
            patience=resolve_patience(
                self.n_iter_no_change, validating=self.early_stopping_
            ),
            early_stopping=self.early_stopping if self.early_stopping_ else False,
            validation_fraction=self.validation_fraction,
            alpha=self.alpha,
            incremental=incremental,
            verbose=self.verbose,
            name=type(self).__name__,
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        return tags
