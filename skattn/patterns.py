"""Attention patterns: which tokens each token attends to.

Pass one to the attention estimators as ``attention_pattern`` or to the
kernels as ``pattern``, as scikit-learn's Gaussian processes take a kernel
object::

    AttentionClassifier(attention_pattern=BigBirdAttention(block_size=32))

A pattern is its parameters (``get_params``, ``set_params``, ``repr`` and
equality), so :func:`sklearn.base.clone` and grid searches treat it as a
value. ``mask(n_tokens)`` shows the pairs it allows.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from ._kernels.block_sparse import BigBirdAttention
from ._kernels.patterns import BandedAttention, FullAttention

__all__ = [
    "BandedAttention",
    "BigBirdAttention",
    "FullAttention",
]
