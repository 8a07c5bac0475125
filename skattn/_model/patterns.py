"""The attention pattern of a model's self-attention: which keys each query
reads.

A pattern is an object of :mod:`skattn.patterns` (its classes are listed in
the registry ``ATTENTION_PATTERNS`` of ``options.py``), described in
:class:`~skattn._model.model.ModelConfig` by a plain dict of its class's
registered name and its parameters (:func:`pattern_config`).
:class:`PatternUnit` is the attention step of
:class:`~skattn._model.encoder.SelfAttention` for it, between the projections
(and a positional encoding's query/key transform) and the output projection:
``at(context)`` gives the pattern's kernels of one batch, with its sequences'
lengths and, when the model appends a class token, that token as global.

Shape legend: N samples, H heads, T tokens, Dh head width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np


def pattern_config(registry, pattern):
    """The plain description of ``pattern`` in a model's configuration:
    ``{"name": <its registered name>, **its parameters}``."""
    return {"name": registry.name_of(type(pattern)), **pattern.get_params()}


def pattern_from_config(registry, config):
    """The pattern object a configuration's description holds."""
    params = {key: value for key, value in config.items() if key != "name"}
    return registry.get(config["name"])(**params)


class PatternUnit:
    """A pattern as the attention step of a layer.

    Parameters
    ----------
    pattern : AttentionPattern
        Which keys each query reads.
    global_token : bool, default=False
        Whether the last valid token of each sequence (the class token) is
        global: it reads every token, and every token reads it.
    """

    def __init__(self, pattern, global_token=False):
        self.pattern = pattern
        self.global_token = global_token

    def at(self, context):
        """The pattern's kernels of one batch: its sequences' lengths (N, 1)
        and, with ``global_token``, their class tokens' positions."""
        lengths = np.asarray(context.lengths)[:, None]  # (N, 1): every head
        glob = lengths - 1 if self.global_token else None
        return self.pattern._kernels_of(lengths=lengths, global_index=glob)

    def score_floats(self, n_heads, causal, n_tokens):
        """Numbers per token of the scores while a layer runs on sequences of
        ``n_tokens``, and the extra copies of the queries, keys and values
        (in units of the model width)."""
        return self.pattern._score_floats(n_heads, causal, n_tokens, self.global_token)
