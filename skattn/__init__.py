"""skattn: multi-head self-attention as scikit-learn estimators, in plain numpy."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from ._estimators.predictors import AttentionClassifier, AttentionRegressor
from ._estimators.transformer import AttentionTransformer
from ._kernels.functional import scaled_dot_product_attention
from ._kernels.multi_head import multi_head_attention
from ._random_features import RandomAttentionFeatures
from ._version import __version__

__all__ = [
    "AttentionClassifier",
    "AttentionRegressor",
    "AttentionTransformer",
    "RandomAttentionFeatures",
    "__version__",
    "multi_head_attention",
    "scaled_dot_product_attention",
]
