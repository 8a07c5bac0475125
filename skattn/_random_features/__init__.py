"""Random attention features: many seeded attention models, nothing trained.

- ``estimator``: :class:`~skattn.RandomAttentionFeatures`.
- ``configs``: the candidates each model draws its configuration from, their
  ``"auto"`` values resolved from the data.
- ``models``: each model's configuration, weights and threshold levels drawn
  from its seed, the models built from ``models_`` and ``weights_``, and
  their thresholds (quantiles of their outputs on a sample).
- ``fitted``: the fitted object (``_fitted``) that holds the drawn models,
  how X is read and the models built from them, once per fit.
- ``runner``: the fitted models run over padded batches, and the quantiles of
  their outputs (the thresholds of the PPV and LSPV).
- ``columns``: the output columns, their blocks (and names) and their values
  a padded batch at a time.

The models are those of ``skattn._model``, one ``ModelConfig`` each.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from .estimator import RandomAttentionFeatures

__all__ = ["RandomAttentionFeatures"]
