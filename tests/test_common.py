"""scikit-learn's common estimator checks, on several configurations."""

import pytest
from helpers import EXTRA_CHECKS
from sklearn.utils.estimator_checks import (
    check_param_validation,
    parametrize_with_checks,
)

from skattn import AttentionClassifier, AttentionRegressor, AttentionTransformer
from skattn._model.options import REGISTRIES
from skattn._model.pooling import needs_fixed_length
from skattn.patterns import BigBirdAttention

CONFIGURATIONS = [
    AttentionTransformer(max_iter=5),
    AttentionTransformer(solver="lbfgs", max_iter=5),
    AttentionTransformer(objective=None),
    AttentionTransformer(objective="regression", max_iter=5),
    # each option below is in one configuration: the checks' data is the same
    # for all, and an option that breaks a check breaks it beside the others
    AttentionTransformer(
        n_heads=1, head_dim=3, positional_encoding="learned", causal=True, max_iter=3
    ),
    AttentionTransformer(
        positional_encoding=None, residual=False, layer_norm=None, max_iter=3
    ),
    AttentionTransformer(
        features_per_token=1, class_weight="balanced", early_stopping=True, max_iter=5
    ),
    AttentionTransformer(
        n_layers=2,
        ff_dim=8,
        dropout=0.1,
        layer_norm="pre",
        activation="gelu",
        pooling="attention",
        max_iter=5,
    ),
    AttentionTransformer(
        patch_size=3,
        scale_tokens=True,
        pooling="flatten",
        feed_forward="swiglu",
        max_iter=5,
    ),
    # the tokens' statistics after the model's outputs
    AttentionTransformer(
        n_heads=2,
        pooling="max",
        token_statistics=["mean", "max", "min", "first", "last"],
        max_iter=3,
    ),
    # banded attention, its class token global
    AttentionTransformer(
        attention_window=3, attention_dilation=2, pooling="cls", max_iter=3
    ),
    # BigBird's blocks, its random layout drawn in fit, its class token global
    AttentionTransformer(
        attention_pattern=BigBirdAttention(block_size=2, window_blocks=1),
        pooling="cls",
        patch_size=None,
        max_iter=3,
    ),
]
# every pooling in at least one configuration ("first", "last" and "min" go
# through every input format in test_transformer.py, POOLINGS: here they would
# repeat the checks of "max", shape for shape)
CONFIGURATIONS += [
    AttentionTransformer(n_heads=2, pooling=pooling, max_iter=3, random_state=0)
    for pooling in REGISTRIES["pooling"].names()
    if pooling not in {est.pooling for est in CONFIGURATIONS} | {"first", "last", "min"}
]

# The predictors pass check_classifiers_train / check_regressors_train (accuracy
# above 0.83, R^2 above 0.5): a small model, and enough iterations for it.
PREDICTORS = [
    AttentionClassifier(
        n_heads=2, head_dim=4, max_iter=30, learning_rate_init=0.01, random_state=0
    ),
    AttentionClassifier(
        n_heads=2, head_dim=4, solver="lbfgs", max_iter=20, random_state=0
    ),
    AttentionRegressor(
        n_heads=2, head_dim=4, solver="lbfgs", max_iter=20, random_state=0
    ),
]


def expected_failed_checks(estimator):
    expected = {}
    if getattr(estimator, "objective", None) is None:
        expected["check_transformer_n_iter"] = (
            "objective=None learns nothing: n_iter_ stays 0 although the "
            "estimator has a max_iter parameter."
        )
    learns = getattr(estimator, "objective", "predictor") is not None
    if learns and estimator.solver == "adam" and not estimator.dropout:
        # the equivalence itself is tested in test_training.py, to float32's
        # tolerance, and checked here exactly with solver="lbfgs"
        expected["check_sample_weight_equivalence_on_dense_data"] = (
            "Adam trains in float32: a repeated sample and a doubled weight "
            "round differently, far above the check's float64 tolerance."
        )
    if isinstance(estimator, AttentionRegressor):
        expected["check_sample_weight_equivalence_on_dense_data"] = (
            "the head's penalty is chosen by leave-one-out error: leaving out a "
            "sample of weight 2 leaves out both its counts, leaving out one of "
            "two repeated samples one (with one penalty the head is equivalent)."
        )
    if estimator.early_stopping is True:  # "auto" stays off on the checks' data
        expected["check_sample_weight_equivalence_on_dense_data"] = (
            "the validation split is drawn over samples: repeating a sample is "
            "not the same as doubling its weight."
        )
    if estimator.dropout:
        expected["check_sample_weight_equivalence_on_dense_data"] = (
            "dropout draws a mask per sample: a repeated sample gets two masks, "
            "a sample of weight 2 one."
        )
    return expected


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(
    CONFIGURATIONS + PREDICTORS, expected_failed_checks=expected_failed_checks
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("check", EXTRA_CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize(
    "estimator",
    [
        CONFIGURATIONS[0],
        next(
            est
            for est in CONFIGURATIONS
            if est.pooling != "auto" and needs_fixed_length(est.pooling)
        ),
    ],
    ids=["default", "fixed-length"],
)
def test_sklearn_extra_checks(estimator, check):
    check(type(estimator).__name__, estimator)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(
    "estimator", PREDICTORS[::2], ids=lambda est: type(est).__name__
)
def test_predictors_param_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)
