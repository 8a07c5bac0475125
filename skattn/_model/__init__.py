"""The model: units with their forward and backward passes, and what runs them.

- ``units``: the unit protocol (parameters, forward, backward, and what a unit
  does to the lengths, width and memory of the tokens) and the units around
  the encoder: token standardisation, patches, input projection, positions,
  class token, layer norm.
- ``encoder``: the encoder layer, ``torch.nn.TransformerEncoderLayer``'s
  self-attention and feed-forward sublayers, and their dropout; ``swiglu``:
  the gated feed-forward sublayer.
- ``patterns``: the attention pattern of a layer's self-attention (an
  object of :mod:`skattn.patterns`, described in the configuration by its
  name and parameters) as the unit that gives each batch its kernels.
- ``rotary``: rotary positions, which rotate each attention's queries and
  keys.
- ``pooling``: poolings of the per-token outputs, the units of the model's
  poolings and their registry, and the statistics of random attention
  features.
- ``registry`` and ``options``: the values of each architectural option
  (positional encoding, pooling, activation, feed-forward, layer norm) with
  what the model builds for them and their documentation.
- ``head``: the linear training head and the losses.
- ``model``: :class:`~skattn._model.model.ModelConfig`, the one description
  of a model, :func:`~skattn._model.model.build_model` and
  :class:`~skattn._model.model.Model`, which runs the units and names their
  parameters.
- ``sequences``: checked sequences as padded batches: lengths, padding,
  batches within a memory budget, token statistics.
- ``evaluate``: the model run over many sequences, a batch at a time within a
  memory budget; ``attribution``: the gradients of its outputs with respect
  to the tokens, and the pooling's attention.

Pure numpy on arrays: nothing here imports scikit-learn or an estimator; the
kernels of ``skattn._kernels`` do the attention.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause
