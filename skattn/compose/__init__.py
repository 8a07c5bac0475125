"""Composite estimators: features of several transformers, weighed for the
estimator that reads them.

- :class:`WeightedUnionCV`: blocks of features side by side (TF-IDF beside
  the random attention features of token states, say), each block's weight
  chosen by cross-validation of the estimator that reads them.

Read more in the :ref:`User Guide <text-start>`.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from ._union import WeightedUnionCV

__all__ = ["WeightedUnionCV"]
