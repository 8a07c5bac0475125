"""scikit-learn's common estimator checks, on several configurations."""

import pytest
from sklearn.utils.estimator_checks import (
    check_get_feature_names_out_error,
    check_global_output_transform_pandas,
    check_param_validation,
    check_set_output_transform,
    check_set_output_transform_pandas,
    check_transformer_get_feature_names_out,
    check_transformer_get_feature_names_out_pandas,
    parametrize_with_checks,
)

from skattn import AttentionTransformer

CONFIGURATIONS = [
    AttentionTransformer(),
    *(
        AttentionTransformer(n_heads=2, pooling=pooling, random_state=0)
        for pooling in ["max", "first", "last", "cls", "attention", "flatten"]
    ),
    AttentionTransformer(
        n_heads=1, head_dim=3, positional_encoding="learned", causal=True
    ),
    AttentionTransformer(positional_encoding=None, residual=False, layer_norm=False),
    AttentionTransformer(embed_dim=1),
]


@parametrize_with_checks(CONFIGURATIONS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


# Checks that parametrize_with_checks does not run (SKLEARN_NOTES.md).
EXTRA_CHECKS = [
    check_param_validation,
    check_set_output_transform,
    check_set_output_transform_pandas,
    check_global_output_transform_pandas,
    check_transformer_get_feature_names_out,
    check_transformer_get_feature_names_out_pandas,
    check_get_feature_names_out_error,
]


@pytest.mark.parametrize("check", EXTRA_CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize(
    "estimator", [CONFIGURATIONS[0], CONFIGURATIONS[6]], ids=["mean", "flatten"]
)
def test_sklearn_extra_checks(estimator, check):
    check(type(estimator).__name__, estimator)
