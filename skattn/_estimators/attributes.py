"""The attention estimators' fitted attributes, read from their fitted model.

A fitted attention estimator holds one
:class:`~skattn._training.state.FittedModel` in ``_fitted``. The public
fitted attributes are properties that read it: the parameters (``layers_``,
``head_coef_``, ...; assigning one gives the estimator a fitted model with
that parameter replaced, so a shallow copy's assignment leaves the original
alone), the training record (``n_iter_``, ``loss_curve_``, ...) and the
model's sizes (``n_heads_``, ``d_model_``, ...). Pickles and skops files hold
the fitted model as plain dicts and arrays.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

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


def _fitted(estimator, attribute):
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
        return _fitted(self, attribute).attribute(attribute)

    def write(self, value):
        self._fitted = _fitted(self, attribute).with_attribute(attribute, value)

    return property(read, write)


def _history(attribute):
    field = HISTORY_ATTRIBUTES[attribute]

    def read(self):
        return getattr(_fitted(self, attribute).history, field)

    return property(read)


def _size(attribute, read_config):
    def read(self):
        return read_config(_fitted(self, attribute).config)

    return property(read)


class FittedAttributes:
    """Mixin of the attention estimators: their fitted attributes as
    properties of ``_fitted``, and its plain-typed pickled state."""

    n_heads_ = _size("n_heads_", lambda config: config.n_heads)
    head_dim_ = _size("head_dim_", lambda config: config.d_model // config.n_heads)
    d_model_ = _size("d_model_", lambda config: config.d_model)
    patch_size_ = _size("patch_size_", lambda config: config.patch_size)
    pooling_ = _size("pooling_", lambda config: config.pooling)
    token_statistics_ = _size(
        "token_statistics_", lambda config: config.token_statistics
    )

    def __getstate__(self):
        state = dict(super().__getstate__())
        if "_fitted" in state:
            state["_fitted"] = state["_fitted"].to_state()
        return state

    def __setstate__(self, state):
        if "_fitted" in state:
            state = {**state, "_fitted": FittedModel.from_state(state["_fitted"])}
        super().__setstate__(state)


for _name in PARAMETER_ATTRIBUTES:
    setattr(FittedAttributes, _name, _parameter(_name))
for _name in HISTORY_ATTRIBUTES:
    setattr(FittedAttributes, _name, _history(_name))
del _name
