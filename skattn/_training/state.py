"""What a fit keeps: the fitted model (:class:`FittedModel`) and its record
(:class:`History`).

An attention estimator holds one :class:`FittedModel` (as
``HistGradientBoostingClassifier`` holds its predictors): the model's
description, its parameters, what training has done, Adam's state, the
target's encoding and how X is read: everything ``predict`` and
``transform`` need. It is
built once per fit; the solvers receive its parameters and history and return
them; the estimator's public fitted attributes (``layers_``, ``head_coef_``,
``n_iter_``, ...) read it.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import functools
import math

import numpy as np

from .._input.targets import TargetEncoding
from .._model.model import LAYER_PREFIX, ModelConfig, build_model


@dataclasses.dataclass
class History:
    """What training has done so far: the estimator's training attributes.

    The solvers update it, epoch by epoch; the estimator's attributes
    (``n_iter_``, ``loss_curve_``, ...) read it, and a warm start, a
    ``partial_fit`` and the blocked fit of a dask array go on from it.
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


@dataclasses.dataclass
class FittedModel:
    """A fitted model: its description, its parameters and its training record.

    Attributes
    ----------
    config : ModelConfig
        The model's description.
    params : dict of str to ndarray
        Every parameter by global name (see :class:`~skattn._model.model.Model`):
        the learned ones in the dtype of the data fit saw, the token statistics
        in float64.
    history : History
        What training has done so far.
    optimizer_state : dict or None
        Adam's state that ``partial_fit`` continues from (None: none kept).
    target : TargetEncoding or None
        How the outputs read as the target: the classes, or the target's
        standardisation (None: nothing learned).
    input_format : dict
        How X is read: ``"kind"`` (table, sequences or ids),
        ``"features_per_token"`` and ``"data_format"`` (see
        :func:`~skattn._input.formats.input_format`).
    """

    config: ModelConfig
    params: dict
    history: History = dataclasses.field(default_factory=History)
    optimizer_state: dict | None = None
    target: TargetEncoding | None = None
    input_format: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, model, params, history, *, target, input_format):
        """The fitted model of a built ``model`` (kept, not built again)."""
        fitted = cls(
            model.config, params, history, target=target, input_format=input_format
        )
        vars(fitted)["model"] = model
        return fitted

    @functools.cached_property
    def model(self):
        """The model of ``config``, built once."""
        return build_model(self.config)

    def replace(self, **changes):
        """A copy with ``changes``; the built model goes along unless the
        configuration changes. The parameter arrays are shared, not copied."""
        new = dataclasses.replace(self, **changes)
        if "config" not in changes and "model" in vars(self):
            vars(new)["model"] = self.model
        return new

    def cast(self, dtype, names=None, *, copy=False):
        """The parameters (those of ``names``, or all) cast to ``dtype``."""
        names = self.params if names is None else names
        return {name: self.params[name].astype(dtype, copy=copy) for name in names}

    # The estimator's fitted attributes
    # ---------------------------------

    def attribute(self, attribute):
        """The value of a fitted attribute of the parameters: ``layers_`` (one
        dict per encoder layer, by local name), or the parameter of the
        attribute (None where the model has none). The arrays are the
        parameters themselves, not copies."""
        if attribute == "layers_":
            return self.model.nest(self.params)["layers"]
        name = self._names().get(attribute)
        return None if name is None else self.params[name]

    def with_attribute(self, attribute, value):
        """A copy whose parameters of ``attribute`` are ``value``."""
        if attribute == "layers_":
            changes = {
                f"{LAYER_PREFIX}{index}.{local}": array
                for index, layer in enumerate(value)
                for local, array in layer.items()
            }
        elif attribute in self._names():
            changes = {self._names()[attribute]: value}
        else:
            raise AttributeError(
                f"{attribute} cannot be set: the fitted model has no such "
                "parameter (see the estimator's model options)."
            )
        unknown = set(changes) - set(self.params)
        if unknown:
            raise AttributeError(f"layers_ has no parameters {sorted(unknown)}.")
        params = dict(self.params)
        params.update({name: np.asarray(array) for name, array in changes.items()})
        return self.replace(params=params)

    def _names(self):
        """Parameter name by fitted attribute (outside ``layers_``)."""
        return {
            spec.attribute: name
            for name, spec in self.model.param_specs().items()
            if spec.attribute is not None
        }

    def weights(self):
        """The learned parameters (not the token statistics)."""
        specs = self.model.param_specs()
        return [self.params[name] for name, spec in specs.items() if spec.trainable]

    # Persistence: plain types only
    # -----------------------------

    def to_state(self):
        """The fitted model as dicts, lists, numbers and arrays (what a pickle
        or a skops file holds, so that loading trusts no private type)."""
        target = None if self.target is None else dataclasses.asdict(self.target)
        return {
            "config": self.config.as_dict(),
            "params": dict(self.params),
            "history": dataclasses.asdict(self.history),
            "optimizer_state": self.optimizer_state,
            "target": target,
            "input_format": dict(self.input_format),
        }

    @classmethod
    def from_state(cls, state):
        """The fitted model of :meth:`to_state`'s dict."""
        target = state["target"]
        return cls(
            config=ModelConfig(**state["config"]),
            params=dict(state["params"]),
            history=History(**state["history"]),
            optimizer_state=state["optimizer_state"],
            target=None if target is None else TargetEncoding(**target),
            input_format=dict(state["input_format"]),
        )
