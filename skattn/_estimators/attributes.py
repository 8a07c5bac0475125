"""The attention estimators' fitted attributes, read from their fitted model.

A fitted attention estimator holds one
:class:`~skattn._training.state.FittedModel` in ``_fitted``. The public
fitted attributes are properties that read it: the parameters (``layers_``,
``head_coef_``, ...; assigning one gives the estimator a fitted model with
that parameter replaced, so a shallow copy's assignment leaves the original
alone), the training record (``n_iter_``, ``loss_curve_``, ...) and the
model's sizes (``n_heads_``, ``d_model_``, ...) and the target
(``objective_``, ``classes_``). Pickles and skops files hold the fitted model
as plain dicts and arrays.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from .._persistence import PlainFittedState
from .._training.state import FittedModel

# The fitted attributes of the parameters: layers_ for the encoder layers,
# and one for each parameter outside them (None where the model has none).
PARAMETER_ATTRIBUTES = (
    "layers_",
    "token_mean_",
    "token_scale_",
    "input_weights_",
    "token_embeddings_",
    "position_embeddings_",
    "cls_token_",
    "final_norm_weight_",
    "final_norm_bias_",
    "pooling_query_",
    "head_coef_",
    "head_intercept_",
)

# Fitted attribute -> field of the History
HISTORY_ATTRIBUTES = {
    "n_iter_": "n_iter",
    "t_": "t",
    "loss_": "loss",
    "loss_curve_": "loss_curve",
    "best_loss_": "best_loss",
    "validation_scores_": "validation_scores",
    "validation_loss_curve_": "validation_loss_curve",
    "best_validation_score_": "best_validation_score",
}


def fitted_object(estimator, attribute):
    """The fitted model; an AttributeError naming ``attribute`` before fit."""
    try:
        return vars(estimator)["_fitted"]
    except KeyError:
        raise AttributeError(
            f"{type(estimator).__name__!r} object has no attribute {attribute!r} "
            "(it is set by fit)."
        ) from None


def _parameter(attribute):
    def read(self):
        return fitted_object(self, attribute).attribute(attribute)

    def write(self, value):
        self._fitted = fitted_object(self, attribute).with_attribute(attribute, value)

    return property(read, write)


def _history(attribute):
    field = HISTORY_ATTRIBUTES[attribute]

    def read(self):
        return getattr(fitted_object(self, attribute).history, field)

    return property(read)


def _size(attribute, read_config):
    def read(self):
        return read_config(fitted_object(self, attribute).config)

    return property(read)


class FittedAttributes(PlainFittedState):
    """Mixin of the attention estimators: their fitted attributes as
    properties of ``_fitted``, and its plain-typed pickled state."""

    _fitted_type = FittedModel

    n_heads_ = _size("n_heads_", lambda config: config.n_heads)
    head_dim_ = _size("head_dim_", lambda config: config.d_model // config.n_heads)
    d_model_ = _size("d_model_", lambda config: config.d_model)
    patch_size_ = _size("patch_size_", lambda config: config.patch_size)
    pooling_ = _size("pooling_", lambda config: config.pooling)
    token_statistics_ = _size(
        "token_statistics_", lambda config: config.token_statistics
    )

    @property
    def objective_(self):
        target = fitted_object(self, "objective_").target
        return None if target is None else target.objective

    @property
    def classes_(self):
        target = fitted_object(self, "classes_").target
        if target is None:  # nothing learned: no classes
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute 'classes_' "
                "(it is set by a fit that learns classes)."
            )
        return target.classes

    def _target_scaling(self):
        """The regression target's mean and scale: predictions are the
        head's outputs times the scale plus the mean."""
        target = fitted_object(self, "predict").target
        return target.mean, target.scale


for _name in PARAMETER_ATTRIBUTES:
    setattr(FittedAttributes, _name, _parameter(_name))
for _name in HISTORY_ATTRIBUTES:
    setattr(FittedAttributes, _name, _history(_name))
del _name
