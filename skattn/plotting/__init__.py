"""Plots of attention, in the style of scikit-learn's ``*Display`` classes.

- :class:`AttentionDisplay`: the attention weights of one sequence as
  heatmaps, one head or a grid of every head, each token labelled.
- :class:`TokenAttributionDisplay`: one score per token of one sequence (a
  gradient x input attribution of the prediction, or the pooling's attention)
  drawn over its words, in matplotlib and as HTML in a notebook.

matplotlib is an optional dependency (the ``[plot]`` extra): it is imported
when a plot is drawn, never when skattn is imported.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from ._heatmap import AttentionDisplay
from ._text import TokenAttributionDisplay

__all__ = ["AttentionDisplay", "TokenAttributionDisplay"]
