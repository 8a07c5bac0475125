"""What the attention estimators share: fitting, fitted state and the forward pass.

:class:`BaseAttention` holds the parameter constraints, the body of
``fit``/``partial_fit`` (validation, the target and weights of ``_targets.py``,
seeding, then a solver of ``_training.py``), the translation between the
model's parameter dict and the fitted attributes, and the batched forward pass
behind ``transform`` and the per-token methods. The public estimators add their
docstrings and methods.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._callbacks import CALLBACK_BASES, FitTasks
from ._dask import blocked_fit, is_dask_collection
from ._layers import ACTIVATIONS, TokenScaler, patch_count
from ._model import (
    attributes_to_params,
    build_model,
    flat_init,
    params_to_attributes,
)
from ._parallel import single_threaded_blas
from ._pooling import POOLINGS, TOKEN_STATISTICS, pool_statistics
from ._sequences import (
    SERIES_MAX_FEATURES,
    astype_sequences,
    map_batches,
    sequence_lengths,
    sequences_dtype,
    series_median_length,
    token_moments,
    token_width,
)
from ._targets import TargetMixin
from ._training import batch_budget, fit_adam, fit_lbfgs, model_row_bytes
from ._validation import (
    CHANNELS_FIRST,
    CHANNELS_LAST,
    TABLE,
    Interval,
    StrOptions,
    check_finite_output,
    check_init,
    check_input,
    check_sample_weight,
    check_target,
)

_STOCHASTIC_SOLVERS = ("adam",)

# Model width of head_dim=None: 64, as the one-layer torch encoder we measure
# against. A 384-wide token made a 384-wide model that trained 7x slower and
# scored lower on text (benchmarks/README.md, "Real data").
DEFAULT_D_MODEL = 64

# patch_size="auto": series (tokens of at most SERIES_MAX_FEATURES features)
# whose median length exceeds AUTO_PATCH_MIN_LENGTH are read in about
# AUTO_PATCHES patches (measured on the real-data benchmark's series).
AUTO_PATCHES = 32
AUTO_PATCH_MIN_LENGTH = 64

# early_stopping="auto" holds out validation_fraction of training sets of at
# least this many samples: on text (2000 and 4291 samples) the test score
# peaked within 5 to 15 epochs, and 200 epochs took 10 minutes; on digits
# (1347 samples) holding out a tenth cost 1.3 points of accuracy.
AUTO_EARLY_STOPPING_SAMPLES = 2000

# The parameters that fix the model's structure. The fit that builds the model
# records their values (``_fitted_structure``, and ``n_heads_``); the model is
# then always built from those, as scikit-learn's convention has a fitted
# estimator predict with what it fitted, whatever set_params changed since.
# partial_fit and a warm start refuse a changed one: the fitted weights have the
# recorded structure.
STRUCTURE_PARAMETERS = (
    "n_heads",
    "head_dim",
    "features_per_token",
    "data_format",
    "scale_tokens",
    "patch_size",
    "n_layers",
    "ff_dim",
    "activation",
    "norm_first",
    "pooling",
    "positional_encoding",
    "residual",
    "layer_norm",
    "causal",
)

# Default limit of the size of what attention_weights returns (its max_bytes):
# the weights grow with the square of the length, 12 GiB for one sequence of
# 20,000 tokens with 4 heads in float64. 1 GiB, as scikit-learn's default
# working_memory.
ATTENTION_WEIGHTS_MAX_BYTES = 2**30


class BaseAttention(TargetMixin, *CALLBACK_BASES, BaseEstimator):
    """Base class of the attention estimators (not for direct use)."""

    # recorded at fit in _fitted_structure (a subclass may add its own)
    _structure_parameters = STRUCTURE_PARAMETERS

    _parameter_constraints: dict = {
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "head_dim": [Interval(Integral, 1, None, closed="left"), None],
        "features_per_token": [Interval(Integral, 1, None, closed="left"), None],
        "data_format": [StrOptions({CHANNELS_LAST, CHANNELS_FIRST})],
        "scale_tokens": ["boolean"],
        "patch_size": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            None,
        ],
        "n_layers": [Interval(Integral, 1, None, closed="left")],
        "ff_dim": [Interval(Integral, 0, None, closed="left")],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "norm_first": ["boolean"],
        "objective": [StrOptions({"auto", "classification", "regression"}), None],
        "init": [StrOptions({"random"}), dict],
        "pooling": [StrOptions(set(POOLINGS))],
        "positional_encoding": [StrOptions({"sinusoidal", "learned"}), None],
        "residual": ["boolean"],
        "layer_norm": ["boolean"],
        "causal": ["boolean"],
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
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "class_weight": [dict, StrOptions({"balanced"}), None],
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
        if is_dask_collection(X):  # Adam streamed over the blocks (skattn._dask)
            return blocked_fit(
                self,
                X,
                y,
                sample_weight,
                incremental=incremental,
                classes=classes,
                X_val=X_val,
                y_val=y_val,
            )
        tasks = FitTasks(self, X, y, sample_weight, X_val, y_val)
        if X_val is not None or y_val is not None:
            self._check_validation_request(X_val, y_val)
        fitted = hasattr(self, "layers_")
        first_pass = not fitted or not (self.warm_start or incremental)
        if not first_pass:  # from here on, the parameters are the fitted ones
            self._check_structure(incremental)
        sequences = check_input(
            self,
            X,
            reset=first_pass,
            features_per_token=self.features_per_token,
            data_format=self.data_format,
        )
        lengths = sequence_lengths(sequences)
        self._check_lengths(lengths, reset=first_pass)
        task, y = check_target(self, y, len(sequences))
        if not first_pass and task != self.target_type_:
            fitted_for = self.target_type_ or "no target (seeded weights)"
            raise ValueError(
                f"This call's target asks for {task or 'no training'}, but "
                f"{type(self).__name__} was fitted for {fitted_for}; fit it anew "
                "(without warm_start) to change the task."
            )
        self._check_classes(classes, task, first_pass)
        if task is not None and self.dropout and self.solver == "lbfgs":
            raise ValueError(
                f"dropout={self.dropout} needs solver='adam': L-BFGS minimises one "
                "fixed objective, and dropout draws new masks at every step. Set "
                "dropout=0 or solver='adam'."
            )
        weight_exponent = 0
        if task is not None or sample_weight is not None:
            # checked even when unused, so that a wrong one is never silent;
            # normalised: the user's weights are sample_weight * 2**weight_exponent
            sample_weight, weight_exponent = check_sample_weight(
                sample_weight,
                len(sequences),
                sequences_dtype(sequences),
                return_exponent=True,
            )
        user_weight = sample_weight  # the median length's (no class weights)
        if task is not None:
            y = self._encode_target(y, task, first_pass, classes, sample_weight)
            sample_weight, exponent = self._class_weights(y, task, sample_weight)
            weight_exponent += exponent
            alpha = self._penalty(
                sample_weight, weight_exponent, sequences_dtype(sequences)
            )
        validation = None
        if X_val is not None:
            if task is None:
                raise ValueError(
                    "X_val and y_val are the validation set of early stopping, "
                    "but nothing is learned (no y, or objective=None): pass y, "
                    "or drop X_val and y_val."
                )
            validation = self._check_validation_set(
                X_val, y_val, task, y, lengths[0], first_pass
            )

        self.early_stopping_ = (
            task is not None
            and not incremental
            and (
                validation is not None or len(sequences) >= AUTO_EARLY_STOPPING_SAMPLES
                if self.early_stopping == "auto"
                else bool(self.early_stopping)
            )
        )
        max_subtasks = 0  # the fit's tasks, for scikit-learn's callbacks
        if task is not None:
            max_subtasks = self.max_iter + 1  # L-BFGS: one left over, not run
            if self.solver == "adam":
                max_subtasks = 1 if incremental else self.max_iter
                max_subtasks *= 2 if self.early_stopping_ else 1  # + validation
        tasks.start("partial_fit" if incremental else "fit", max_subtasks=max_subtasks)
        if first_pass:
            self._random_state = check_random_state(self.random_state)
            self._initialize(sequences, lengths, task, y, sample_weight, user_weight)
        if task is None:
            tasks.finish()
            return self
        if self.early_stopping_ and self.validation_scores_ is None:
            # a warm start that turns early stopping on
            self.validation_scores_, self.best_validation_score_ = [], -np.inf
        if (
            self.early_stopping_
            and getattr(self, "validation_loss_curve_", None) is None
        ):
            # also an estimator fitted before validation_loss_curve_ existed
            self.validation_loss_curve_ = []
        model = self._model(n_outputs=len(self.head_intercept_))
        input_dtype = dtype = sequences_dtype(sequences)
        if self.solver == "adam":
            # Adam steps in float32, as torch trains: twice the speed of float64
            # for minibatch gradients that are noisy far above float32's rounding.
            # L-BFGS keeps the input's precision for its line searches.
            dtype = np.dtype(np.float32)
            sequences = astype_sequences(sequences, dtype)
            sample_weight = sample_weight.astype(dtype)
            if task == "regression":
                y = y.astype(dtype)
            if validation is not None:
                (val_sequences, *val_rest), val_alpha = validation
                val_sequences = astype_sequences(val_sequences, dtype)
                val_lengths, val_y, val_weight = val_rest
                if task == "regression":
                    val_y = val_y.astype(dtype)
                val_data = (val_sequences, val_lengths, val_y, val_weight.astype(dtype))
                validation = val_data, val_alpha
        params = self._fitted_params(dtype, model)
        tasks.to_attributes = lambda params: params_to_attributes(
            self._trained_params(params, model, input_dtype),
            model.param_specs(),
            self._fitted_structure["n_layers"],
        )
        data = (sequences, lengths, y, sample_weight)
        start = time.time()
        if self.verbose:
            header = f"{'Iteration':>10} {'Objective Value':>20} {'Time(s)':>10}"
            if self.early_stopping_:
                header += f" {'Validation':>12}"
            print(f"[{type(self).__name__}]\n[{type(self).__name__}] {header}")
            print(f"[{type(self).__name__}] {'-' * len(header)}")
        # one BLAS thread: on the small matrix products of a minibatch, two
        # threads ran up to 16x slower on a busy 2-core machine
        with single_threaded_blas():
            if self.solver == "lbfgs":
                fit_lbfgs(self, model, params, data, alpha=alpha, tasks=tasks)
            else:
                fit_adam(
                    self,
                    model,
                    params,
                    data,
                    incremental,
                    alpha=alpha,
                    validation=validation,
                    tasks=tasks,
                )
        if self.verbose:
            print(f"[{type(self).__name__}] Training took {time.time() - start:.2f}s.")
        self._store_params(self._trained_params(params, model, input_dtype), model)
        tasks.finish()
        return self

    def _check_structure(self, incremental):
        """Refuse to continue training a model whose structure a parameter changed.

        Raises
        ------
        ValueError
            Naming the first parameter of ``_structure_parameters`` whose value
            differs from the fitted one, both values, and the remedies.
        """
        for name, fitted in self._fitted_structure.items():
            value = getattr(self, name)
            if value != fitted:
                call = "partial_fit" if incremental else "fit with warm_start=True"
                raise ValueError(
                    f"Cannot continue training ({call}) with {name}={value!r}: the "
                    f"model was fitted with {name}={fitted!r}, which fixes its "
                    "structure. Call fit with warm_start=False to fit a new model, "
                    f"or set it back with set_params({name}={fitted!r})."
                )

    def _check_lengths(self, lengths, reset=False):
        """With pooling="flatten", every sequence has one length (fit's)."""
        pooling = self.pooling if reset else self._fitted_structure["pooling"]
        if pooling != "flatten":
            return
        if reset and np.any(lengths != lengths[0]):
            raise ValueError(
                "pooling='flatten' needs sequences of one length; got lengths from "
                f"{lengths.min()} to {lengths.max()}. Use another pooling for "
                "sequences of different lengths."
            )
        if not reset and np.any(wrong := lengths != self.max_tokens_):
            raise ValueError(
                f"pooling='flatten' needs sequences of {self.max_tokens_} tokens, "
                f"the length seen in fit; got {lengths[wrong][0]}."
            )

    def _initialize(
        self,
        sequences,
        lengths,
        task=None,
        y=None,
        sample_weight=None,
        user_weight=None,
    ):
        """Resolve the model's width, seed its parameters, reset training state.

        ``sample_weight`` is the training's (with the class weights),
        ``user_weight`` the caller's (for the median length of ``patch_size``).
        """
        self._fitted_structure = {
            name: getattr(self, name) for name in self._structure_parameters
        }
        self.n_heads_ = self.n_heads
        self.patch_size_ = self._resolve_patch_size(sequences, lengths, user_weight)
        n_features = token_width(sequences) * (self.patch_size_ or 1)  # model tokens
        init, labels = {}, {}
        if not isinstance(self.init, str):
            init, labels = flat_init(check_init(self.init, self.n_layers))
        self.head_dim_ = self._resolve_head_dim(n_features, init, labels)
        self.d_model_ = self.n_heads_ * self.head_dim_
        self.max_tokens_ = int(lengths.max())
        self.target_type_ = task
        if task == "regression":
            self.classes_ = None
        n_outputs = 0
        if task is not None:
            n_outputs = len(self.classes_) if task == "classification" else y.shape[1]
        projects_input = "input" in init or n_features != self.d_model_
        model = self._model(n_outputs=n_outputs, projects_input=projects_input)
        specs = model.param_specs()
        for name, value in init.items():
            if name not in specs:
                known = [
                    _init_key(name)
                    for name in specs
                    if name == "input" or name.startswith("layers.")
                ]
                raise ValueError(
                    f"{labels[name]} is not a parameter of this model; its "
                    f"parameters are {known}."
                )
            if value.shape != specs[name].shape:
                raise ValueError(
                    f"{labels[name]} has shape {value.shape}, expected "
                    f"{specs[name].shape} (n_features={n_features}, d_model="
                    f"{self.d_model_})."
                )
        params = model.init_params(self._random_state, sequences_dtype(sequences), init)
        if self.scale_tokens:
            params["token_mean"], params["token_scale"] = token_moments(
                sequences, sample_weight, per_position=self._input_kind == TABLE
            )
        self._store_params(params, model)
        self.n_iter_ = 0
        self.t_ = 0
        self.loss_ = None
        self.loss_curve_ = []
        self.best_loss_ = np.inf
        self.validation_scores_ = [] if self.early_stopping_ else None
        self.validation_loss_curve_ = [] if self.early_stopping_ else None
        self.best_validation_score_ = -np.inf if self.early_stopping_ else None
        self._no_improvement_count = 0
        if hasattr(self, "_optimizer_state"):
            del self._optimizer_state

    def _resolve_head_dim(self, n_features, init, labels):
        """Head width: the parameter, else the width ``init`` implies, else the rule."""
        if self.head_dim is not None:
            return self.head_dim
        for name in ("query", "key", "value", "output", "input"):
            name = name if name == "input" else f"layers.0.{name}"
            if name in init:
                width = init[name].shape[-1]
                if width % self.n_heads:
                    raise ValueError(
                        f"{labels[name]} has {width} columns, which n_heads="
                        f"{self.n_heads} does not divide; its width sets the model "
                        "width n_heads * head_dim."
                    )
                return width // self.n_heads
        return math.ceil(DEFAULT_D_MODEL / self.n_heads)

    def _resolve_patch_size(self, sequences, lengths, sample_weight):
        """Tokens per patch: the parameter, or the "auto" rule (from the
        median length, weighted); None for none."""
        if self.patch_size != "auto":
            return self.patch_size
        median = None
        if self._input_kind != TABLE:
            median = series_median_length(sequences, lengths, sample_weight)
        if median is None or median <= AUTO_PATCH_MIN_LENGTH:
            return None
        return math.ceil(median / AUTO_PATCHES)

    # The model and its parameters
    # ----------------------------

    def _model(self, n_outputs=0, projects_input=None):
        """The model of the fitted structure (see :func:`skattn._model.build_model`).

        Built from the fitted attributes and the parameter values recorded when
        the model was built, never from parameters changed since.

        Parameters
        ----------
        n_outputs : int, default=0
            Outputs of the training head; 0 for none.
        projects_input : bool, default=None
            Whether the tokens are projected; None: whether the fitted model
            has an input projection.
        """
        if projects_input is None:
            projects_input = self.input_weights_ is not None
        structure = self._fitted_structure
        n_features = self._token_width()
        token_shape = None
        if structure["scale_tokens"]:  # per column of a table, per token feature
            token_shape = (n_features,)
            if self._input_kind == TABLE:
                token_shape = (self.max_tokens_, n_features)
        return build_model(
            n_features=n_features,
            d_model=self.d_model_,
            n_heads=self.n_heads_,
            n_layers=structure["n_layers"],
            ff_dim=structure["ff_dim"],
            activation=structure["activation"],
            norm_first=structure["norm_first"],
            residual=structure["residual"],
            layer_norm=structure["layer_norm"],
            causal=structure["causal"],
            pooling=structure["pooling"],
            positional_encoding=structure["positional_encoding"],
            n_positions=self._n_model_tokens(self.max_tokens_),
            patch_size=self.patch_size_,
            projects_input=projects_input,
            token_shape=token_shape,
            n_outputs=n_outputs,
        )

    def _fitted_params(self, dtype, model):
        """The fitted parameters of ``model`` as a dict, cast to ``dtype``."""
        params = attributes_to_params(self, model.param_specs())
        return {name: value.astype(dtype, copy=False) for name, value in params.items()}

    def _trained_params(self, params, model, dtype):
        """The solver's parameters as stored: the trained ones copied in the
        input's ``dtype``, the fixed ones (token statistics) at the full
        precision they were stored with."""
        fixed = self._fitted_params(dtype, model)
        trainable = model.trainable_names()
        return {
            name: value.astype(dtype) if name in trainable else fixed[name]
            for name, value in params.items()
        }

    def _store_params(self, params, model):
        """Store a parameter dict as fitted attributes (None for absent ones)."""
        attributes = params_to_attributes(
            params, model.param_specs(), self._fitted_structure["n_layers"]
        )
        for name, value in attributes.items():
            setattr(self, name, value)

    # The forward pass
    # ----------------

    def _check_sequences(self, X):
        """Validate X for a fitted estimator; return checked sequences."""
        check_is_fitted(self)
        sequences = check_input(
            self,
            X,
            reset=False,
            features_per_token=self._fitted_structure["features_per_token"],
            # absent from estimators fitted before data_format existed
            data_format=self._fitted_structure.get("data_format", CHANNELS_LAST),
        )
        self._check_lengths(sequence_lengths(sequences))
        return sequences

    def _forward_batches(
        self, sequences, *, layer=None, weights_out=None, pool_tokens=False
    ):
        """Run the model on batches within ``working_memory``, in order.

        Parameters
        ----------
        sequences : ndarray of shape (n_samples, n_tokens, n_features) or list
            Checked sequences.
        layer : int or None, default=None
            Encoder layer whose attention weights to write into ``weights_out``.
        weights_out : ndarray or list of ndarray, default=None
            With ``layer``, the attention weights of all the samples: an array
            of shape (n_samples, n_heads_, T', T'), or one array of shape
            (n_heads_, T'_i, T'_i) per sample. Each batch writes its rows.
        pool_tokens : bool, default=False
            Put the ``TOKEN_STATISTICS`` of the (standardised) tokens after
            the pooled outputs.

        Yields
        ------
        rows : ndarray of int
            Indices of the batch's samples.
        tokens : ndarray of shape (batch, T', d_model_)
            Per-token outputs, padded.
        pooled : ndarray of shape (batch, n_features_out)
            Pooled outputs (and the tokens' statistics with ``pool_tokens``).
        """
        model = self._model()
        params = self._fitted_params(sequences_dtype(sequences), model)
        lengths = sequence_lengths(sequences)
        scaler = model.units_of(TokenScaler)  # None without scale_tokens
        # the weights go straight to weights_out: a batch holds a block of them
        row_bytes = model_row_bytes(model, sequences, training=False)

        def run(rows, x):
            rows_out = None if layer is None else _rows_of(weights_out, rows)
            tokens, pooled, _ = model.forward(
                params, x, lengths[rows], layer=layer, weights_out=rows_out
            )
            if pool_tokens:
                if scaler is not None:  # the model's standardisation: a new array
                    x = scaler.forward(params, x, None)[0]
                statistics = pool_statistics(x, lengths[rows], TOKEN_STATISTICS)
                pooled = np.concatenate([pooled, statistics], axis=1)
            return rows, tokens, pooled

        rows = np.arange(len(lengths))
        yield from map_batches(run, sequences, lengths, rows, row_bytes, batch_budget())

    def _transform(self, X):
        """Pooled representations of X."""
        sequences = self._check_sequences(X)
        X_new = np.empty(
            (len(sequences), self._n_features_out), dtype=sequences_dtype(sequences)
        )
        with single_threaded_blas():  # once, not per batch: it costs ~20 us
            batches = self._forward_batches(sequences, pool_tokens=self._pools_tokens())
            for rows, _, pooled in batches:
                X_new[rows] = pooled
        check_finite_output(
            self, X_new, sequences, self._fitted_structure["scale_tokens"]
        )
        return X_new

    def _per_token(self, X, layer=None, max_bytes=None):
        """Per-token outputs, or the attention weights of ``layer``.

        The result is allocated once, each sequence's own tokens only, and the
        batches write into it: the weights of a long sequence are the largest
        array of the call, and copies of it (per row, then stacked) tripled
        its memory.

        Parameters
        ----------
        X : array-like
            Input, as for ``transform``.
        layer : int or None, default=None
            Encoder layer (checked) whose attention weights to return; None for
            the per-token outputs.
        max_bytes : float or None, default=None
            With ``layer``, the most the weights may take (see
            ``attention_weights``); None for no limit.
        """
        _check_max_bytes(max_bytes)
        sequences = self._check_sequences(X)
        dtype = sequences_dtype(sequences)
        # the tokens of each sequence in the model's output: patches, class token
        n_tokens = self._model().token_lengths(sequence_lengths(sequences))
        if layer is None:
            shapes = [(n, self.d_model_) for n in n_tokens]
        else:
            shapes = [(self.n_heads_, n, n) for n in n_tokens]
            self._check_weights_bytes(n_tokens, dtype, max_bytes)
        if isinstance(sequences, np.ndarray):  # one length
            out = np.empty((len(sequences), *shapes[0]), dtype=dtype)
        else:
            out = [np.empty(shape, dtype=dtype) for shape in shapes]
        with single_threaded_blas():  # see _transform
            for rows, tokens, _ in self._forward_batches(
                sequences, layer=layer, weights_out=out
            ):
                if layer is not None:  # the forward pass wrote the weights
                    continue
                if isinstance(out, np.ndarray):
                    out[rows] = tokens
                    continue
                for row, row_tokens in zip(rows, tokens, strict=True):
                    out[row][...] = row_tokens[: len(out[row])]
        scale_tokens = self._fitted_structure["scale_tokens"]
        check_finite_output(self, out, sequences, scale_tokens)
        return out

    def _check_weights_bytes(self, n_tokens, dtype, max_bytes):
        """Raise before computing attention weights larger than ``max_bytes``."""
        n_bytes = self.n_heads_ * int(np.sum(n_tokens.astype(np.int64) ** 2))
        n_bytes *= dtype.itemsize
        if max_bytes is None or n_bytes <= max_bytes:
            return
        raise ValueError(
            f"attention_weights would return {_format_bytes(n_bytes)} for "
            f"{len(n_tokens)} sequence(s) ({self.n_heads_} heads x n_tokens**2 "
            f"weights each, n_tokens up to {n_tokens.max()}, {dtype}), more than "
            f"max_bytes={max_bytes} ({_format_bytes(max_bytes)}). Pass a larger "
            "max_bytes, or max_bytes=None for no limit, if the memory is there; "
            "or pass fewer or shorter sequences."
        )

    def _check_layer(self, layer):
        """The index in ``range(n_layers)`` of ``layer`` (negative counts back)."""
        check_is_fitted(self)
        n_layers = len(self.layers_)
        if not isinstance(layer, Integral) or not -n_layers <= layer < n_layers:
            raise ValueError(
                f"layer must be an integer in [-{n_layers}, {n_layers}) for a model "
                f"of {n_layers} layer(s), got {layer!r}."
            )
        return int(layer) % n_layers

    @property
    def _n_features_out(self):
        """Number of output features, for ``get_feature_names_out``."""
        n_features = self.d_model_
        if self._fitted_structure["pooling"] == "flatten":
            n_features = self._n_model_tokens(self.max_tokens_) * self.d_model_
        if self._pools_tokens():
            n_features += len(TOKEN_STATISTICS) * self._token_width()
        return n_features

    def _token_width(self):
        """Features of a token of the fitted input (before patches)."""
        if self._input_kind == TABLE:
            return self._fitted_structure["features_per_token"] or 1
        return self.n_features_in_

    def _pools_tokens(self):
        """Whether transform puts the tokens' statistics after the model's
        outputs (AttentionTransformer's ``pool_tokens`` as fitted; "auto": for
        tokens of more than ``SERIES_MAX_FEATURES`` features)."""
        value = self._fitted_structure.get("pool_tokens", False)
        if isinstance(value, str):  # "auto"
            return self._token_width() > SERIES_MAX_FEATURES
        return bool(value)

    def _n_model_tokens(self, n_tokens):
        """Tokens the model sees for a sequence of ``n_tokens``: its patches."""
        size = self.patch_size_
        return patch_count(n_tokens, size) if size else n_tokens


def _rows_of(out, rows):
    """The part of ``out`` (an array or a list of per-sample arrays) of ``rows``.

    A view for consecutive rows of an array (batches of one length are), else
    a list of each row's array.
    """
    if isinstance(out, np.ndarray) and np.all(np.diff(rows) == 1):
        return out[rows[0] : rows[-1] + 1]
    return [out[row] for row in rows]


def _check_max_bytes(max_bytes):
    """``max_bytes`` of ``attention_weights``: a positive number, or None."""
    if max_bytes is None:
        return
    if isinstance(max_bytes, (bool, np.bool_)) or not isinstance(max_bytes, Real):
        raise TypeError(
            f"max_bytes must be a number of bytes or None, got {max_bytes!r}."
        )
    if not max_bytes > 0:  # NaN too
        raise ValueError(
            f"max_bytes must be a positive number of bytes or None, got {max_bytes!r}."
        )


def _format_bytes(n_bytes):
    """``n_bytes`` for a message: ``"11.9 GiB"``."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n_bytes < 1024:
            return f"{n_bytes:.1f} {unit}" if unit != "bytes" else f"{n_bytes} bytes"
        n_bytes /= 1024
    return f"{n_bytes:.1f} TiB"


def _init_key(name):
    """How a parameter is named in ``init``: ``init['layers'][0]['query']``."""
    if name.startswith("layers."):
        _, index, local = name.split(".", 2)
        return f"init['layers'][{index}]['{local}']"
    return f"init['{name}']"
