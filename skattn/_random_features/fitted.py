"""What a fit of :class:`~skattn.RandomAttentionFeatures` keeps of its models.

:class:`FittedFeatures` holds the drawn models' configurations and seeded
weights (``models_`` and ``weights_``), how X is read, and the models built
from them, once per fit (at their first use: the thresholds in ``fit``, or
the first ``transform`` after unpickling). A pickle holds the plain
configurations and weights, never the built models.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import functools

from .models import build_models


class FittedFeatures:
    """The drawn models of a fit.

    Parameters
    ----------
    configs, params : list of dict
        ``models_`` and ``weights_``: each model's configuration and its
        seeded weights, nested.
    n_features : int
        Features of a token of X.
    n_tokens : int
        Tokens of a table (1 for sequences): a learned table's rows.
    input_format : dict
        How X is read (see :func:`~skattn._input.formats.input_format`).
    """

    def __init__(self, configs, params, n_features, n_tokens, input_format):
        self.configs, self.params = configs, params
        self.n_features, self.n_tokens = n_features, n_tokens
        self.input_format = input_format

    @functools.cached_property
    def built(self):
        """Each model, its flat weights and whether it reads the differences
        (see :func:`~.models.build_models`), built once."""
        return build_models(self.configs, self.params, self.n_features, self.n_tokens)

    def with_params(self, params):
        """A fitted object of other weights (its models built anew)."""
        return FittedFeatures(
            self.configs, params, self.n_features, self.n_tokens, self.input_format
        )

    def weights(self):
        """Every array of the models' weights."""
        arrays, stack = [], list(self.params)
        while stack:
            value = stack.pop()
            if isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, list):
                stack.extend(value)
            else:
                arrays.append(value)
        return arrays

    def to_state(self):
        """The fitted models as dicts, lists, numbers and arrays."""
        return {
            "configs": self.configs,
            "params": self.params,
            "n_features": self.n_features,
            "n_tokens": self.n_tokens,
            "input_format": dict(self.input_format),
        }

    @classmethod
    def from_state(cls, state):
        """The fitted object of :meth:`to_state`'s dict."""
        return cls(
            state["configs"],
            state["params"],
            state["n_features"],
            state["n_tokens"],
            dict(state["input_format"]),
        )
