"""The model: a list of units, their parameters collected in one place.

:func:`build_model` lays out what :class:`~skattn.AttentionTransformer`
computes, one unit per piece::

    tokens (N, T, D)
      -> [standardised with statistics fixed in fit, for scale_tokens]
      -> [patches of P tokens as tokens (N, T / P, P * D), for patch_size]
      -> input projection (D -> E), when the model has one
      -> + positional encoding
      -> [class token appended, for pooling="cls"]
      -> n_layers encoder layers, each: self-attention sublayer, then
         feed-forward sublayer (torch.nn.TransformerEncoderLayer semantics)
      -> [final layer norm, for norm_first]
      -> pooling over the valid tokens -> (N, F)
      -> [training only] linear head -> (N, K)

:class:`Model` runs the units forward and backward and owns the parameter
names: a unit's local name (``"query"``) prefixed by its place (``"layers.0."``)
is the key of the flat parameter dict that the optimizers and the L-BFGS
packing see; the specs say how each is seeded, whether it is penalised and
which fitted attribute holds it. A new unit kind is a class in ``_layers.py``
and one line in :func:`build_model`.

Shape legend: N samples, T tokens (padded length), D token width, E model width
(``n_heads * head_dim``), F pooled width, K outputs.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from ._head import LinearHead
from ._layers import (
    ClassToken,
    Context,
    InputProjection,
    LayerNorm,
    Patches,
    Positions,
    TokenScaler,
    encoder_layer,
    glorot_uniform,
    patch_count,
    sinusoidal_positions,
)
from ._pooling import Pooling
from ._sequences import activation_bytes

LAYER_PREFIX = "layers."

# Fitted attributes of the parameters outside the encoder layers (those live in
# ``layers_``); None when the model has no such parameter.
OPTIONAL_ATTRIBUTES = (
    "token_mean_",
    "token_scale_",
    "input_weights_",
    "position_embeddings_",
    "cls_token_",
    "final_norm_weight_",
    "final_norm_bias_",
    "pooling_query_",
    "head_coef_",
    "head_intercept_",
)


class Model:
    """Units run in order, then a pooling unit and, for training, a head.

    Parameters
    ----------
    units : list of (str, Unit)
        Each unit with the prefix of its parameter names (``""`` or
        ``"layers.{i}."``), in the order of the forward pass.
    pooling : Pooling
        Pools the tokens into one vector per sample.
    head : LinearHead or None
        The training head.
    n_heads, n_layers, ff_dim, causal
        The shape of the encoder, for memory estimates and the context.
    """

    def __init__(self, units, pooling, head, *, n_heads, n_layers, ff_dim, causal):
        self.units = units
        self.pooling = pooling
        self.head = head
        self.n_heads, self.n_layers, self.ff_dim = n_heads, n_layers, ff_dim
        self.causal = causal
        self._steps = [
            (prefix, unit, list(unit.param_specs()))
            for prefix, unit in [*units, ("", pooling), ("", head)]
            if unit is not None
        ]

    def param_specs(self):
        """Every parameter by its global name, in the order they are seeded.

        Returns
        -------
        specs : dict of str to ParamSpec
        """
        return {
            prefix + name: spec
            for prefix, unit, _ in self._steps
            for name, spec in unit.param_specs().items()
        }

    def trainable_names(self):
        """Names of the parameters that training changes, in seeding order."""
        return [name for name, spec in self.param_specs().items() if spec.trainable]

    def init_params(self, rng, dtype, init=None):
        """Seed the parameters.

        Weight matrices are Glorot-uniform from ``rng`` and vectors (class
        token, pooling query) N(0, 1/E), drawn in the order of
        :meth:`param_specs` whether ``init`` gives them or not (so each
        depends only on its own shape, its place and ``rng``). Learned positions
        start from the sinusoidal table, layer norms from the identity, biases
        from zero.

        Parameters
        ----------
        rng : numpy.random.RandomState
            Source of the seeded weights.
        dtype : dtype
            dtype of the parameters.
        init : dict of str to ndarray, default=None
            User-given weights by global name (checked), copied.

        Returns
        -------
        params : dict of str to ndarray
        """
        init = {} if init is None else init
        params = {}
        for name, spec in self.param_specs().items():
            if spec.init == "glorot":
                value = glorot_uniform(rng, *spec.shape, dtype)
            elif spec.init == "normal":
                value = rng.standard_normal(spec.shape) / math.sqrt(spec.shape[0])
            elif spec.init == "sinusoidal":
                value = sinusoidal_positions(*spec.shape)
            else:
                value = (np.ones if spec.init == "ones" else np.zeros)(spec.shape)
            params[name] = np.array(init.get(name, value), dtype=dtype)
        return params

    def row_bytes(self, n_tokens, *, n_features, itemsize, training):
        """Memory of one sequence padded to ``n_tokens`` (see ``activation_bytes``)."""
        patches = self.units_of(Patches)
        if patches is not None:  # the model sees fewer, wider tokens
            n_features *= patches.size
        return activation_bytes(
            self.token_lengths(n_tokens),
            n_features=n_features,
            d_model=self.pooling.d_model,
            n_heads=self.n_heads,
            itemsize=itemsize,
            n_layers=self.n_layers,
            ff_dim=self.ff_dim,
            training=training,
        )

    def token_lengths(self, lengths):
        """Tokens of each sequence in the encoder's output.

        A patch counts once, and the class token adds one.

        Parameters
        ----------
        lengths : int or ndarray of int
            Tokens of each input sequence.

        Returns
        -------
        int or ndarray of int, as ``lengths``.
        """
        patches = self.units_of(Patches)
        if patches is not None:
            lengths = patch_count(lengths, patches.size, patches.stride)
        if self.units_of(ClassToken) is not None:
            lengths = lengths + 1
        return lengths

    def units_of(self, kind):
        """The first unit of class ``kind``, or None."""
        return next((unit for _, unit in self.units if isinstance(unit, kind)), None)

    def forward(
        self,
        params,
        x,
        lengths,
        *,
        dropout=None,
        training=False,
        layer=None,
        weights_out=None,
    ):
        """Forward pass on a right-padded batch.

        Parameters
        ----------
        params : dict of str to ndarray
            Parameters by global name, in the dtype of ``x``.
        x : ndarray of shape (N, T, D)
            Right-padded token batch; padded positions may hold anything finite.
        lengths : ndarray of shape (N,), dtype int
            Number of valid tokens of each row.
        dropout : DropoutStreams or None, default=None
            Training-time dropout.
        training : bool, default=False
            Keep what the backward pass needs; otherwise each unit's cache is
            dropped as soon as the next unit has run.
        layer : int or None, default=None
            Encoder layer whose attention weights to write into ``weights_out``.
        weights_out : ndarray or list of ndarray, default=None
            With ``layer``, where its attention weights go: an array of shape
            (N, H, T', T'), or a list of one array of shape (H, T'_i, T'_i) per
            row for the row's own tokens (``T'_i`` from :meth:`token_lengths`).
            Written a block of rows at a time, never whole elsewhere (T'^2
            numbers per sequence and head).

        Returns
        -------
        tokens : ndarray of shape (N, T', E)
            Per-token outputs of the last layer; ``T' = T + 1`` with a class
            token, which follows each sequence's last token.
        pooled : ndarray of shape (N, F)
            Pooled representation.
        trace : dict
            ``"caches"``: one per unit and the pooling, when ``training``.
        """
        context = Context(
            lengths,
            causal=self.causal,
            dropout=dropout,
            weights_layer=layer,
            weights_out=weights_out,
        )
        caches = []
        h = x
        for prefix, unit, names in self._steps[: len(self.units)]:
            h, cache = unit.forward(_local(params, prefix, names), h, context)
            if training:
                caches.append(cache)
        _, pooling, names = self._steps[len(self.units)]
        pooled, cache = pooling.forward(_local(params, "", names), h, context)
        caches.append(cache)
        return h, pooled, {"caches": caches}

    def head_forward(self, params, pooled):
        """Outputs of the training head: ``(N, F) -> (N, K)``."""
        return self.head.forward(params, pooled)[0]

    def backward(self, params, d_pooled, trace):
        """Gradients of every parameter of the units and the pooling.

        Parameters
        ----------
        params : dict of str to ndarray
            As given to :meth:`forward`.
        d_pooled : ndarray of shape (N, F)
            Gradient of the loss with respect to the pooled output.
        trace : dict
            What :meth:`forward` returned with ``training=True``.

        Returns
        -------
        grads : dict of str to ndarray
            One gradient per trainable parameter of the units and the pooling,
            by global name.
        """
        grads = {}
        d = d_pooled
        steps = self._steps[: len(self.units) + 1]
        for (prefix, unit, names), cache in zip(
            reversed(steps), reversed(trace["caches"]), strict=True
        ):
            d, unit_grads = unit.backward(_local(params, prefix, names), d, cache)
            grads.update((prefix + name, grad) for name, grad in unit_grads.items())
            if d is None:  # the tokens are data from here: nothing before learns
                break
        return grads


def _local(params, prefix, names):
    """A unit's parameters by local name."""
    return {name: params[prefix + name] for name in names}


def build_model(
    *,
    n_features,
    d_model,
    n_heads,
    n_layers,
    ff_dim,
    activation,
    norm_first,
    residual,
    layer_norm,
    causal,
    pooling,
    positional_encoding,
    n_positions,
    projects_input,
    token_shape=None,
    patch_size=None,
    patch_stride=None,
    n_outputs=0,
):
    """The units of the model, in the order of the forward pass.

    Parameters
    ----------
    n_features : int
        Token width D.
    d_model : int
        Model width E.
    n_heads, n_layers, ff_dim, activation, norm_first, residual, layer_norm, \
            causal, pooling, positional_encoding
        As the estimator's parameters of these names.
    n_positions : int
        Longest sequence seen in fit: rows of a learned positions table, and the
        length ``pooling="flatten"`` needs.
    projects_input : bool
        Whether the tokens are projected (D -> E) before the first layer.
    token_shape : tuple or None, default=None
        Shape of the token standardisation's statistics, ``(D,)`` or ``(T, D)``;
        None for no standardisation.
    patch_size : int or None, default=None
        Patches of this many consecutive tokens become the model's tokens (of
        width ``patch_size * D``); ``n_positions`` then counts patches.
    patch_stride : int or None, default=None
        Tokens from the start of a patch to the start of the next (smaller than
        ``patch_size``: overlapping patches); None: ``patch_size``.
    n_outputs : int, default=0
        Outputs of the training head; 0 for no head.

    Returns
    -------
    model : Model
    """
    units = []
    if token_shape is not None:
        units.append(("", TokenScaler(token_shape)))
    if patch_size is not None:
        units.append(("", Patches(patch_size, patch_stride)))
        n_features *= patch_size
    if projects_input:
        units.append(("", InputProjection(n_features, d_model)))
    if positional_encoding is not None:
        units.append(("", Positions(positional_encoding, n_positions, d_model)))
    if pooling == "cls":
        units.append(("", ClassToken(d_model)))
    for index in range(n_layers):
        prefix = f"{LAYER_PREFIX}{index}."
        for sublayer in encoder_layer(
            index,
            d_model,
            n_heads=n_heads,
            ff_dim=ff_dim,
            activation=activation,
            residual=residual,
            layer_norm=layer_norm,
            norm_first=norm_first,
        ):
            units.append((prefix, sublayer))
    if norm_first and layer_norm:
        units.append(("", LayerNorm(d_model, "final_norm", attributes=True)))
    pooling_unit = Pooling(pooling, d_model, n_positions)
    head = LinearHead(pooling_unit.n_features_out, n_outputs) if n_outputs else None
    return Model(
        units,
        pooling_unit,
        head,
        n_heads=n_heads,
        n_layers=n_layers,
        ff_dim=ff_dim,
        causal=causal,
    )


def params_to_attributes(params, specs, n_layers):
    """Fitted attributes of a parameter dict.

    Returns
    -------
    attributes : dict of str to object
        ``"layers_"`` (a list of ``n_layers`` dicts by local name) and every
        name of :data:`OPTIONAL_ATTRIBUTES` (None where the model has no such
        parameter).
    """
    attributes = dict.fromkeys(OPTIONAL_ATTRIBUTES)
    layers = [{} for _ in range(n_layers)]
    for name, value in params.items():
        if name.startswith(LAYER_PREFIX):
            index, local = name[len(LAYER_PREFIX) :].split(".", 1)
            layers[int(index)][local] = value
        else:
            attributes[specs[name].attribute] = value
    attributes["layers_"] = layers
    return attributes


def attributes_to_params(estimator, specs):
    """The parameter dict of an estimator's fitted attributes (not copied)."""
    params = {}
    for name, spec in specs.items():
        if name.startswith(LAYER_PREFIX):
            index, local = name[len(LAYER_PREFIX) :].split(".", 1)
            params[name] = estimator.layers_[int(index)][local]
        else:
            params[name] = getattr(estimator, spec.attribute)
    return params


def flat_init(init):
    """A user ``init`` dict (already checked) keyed by global parameter name.

    ``"layers"`` (a list of per-layer dicts) becomes ``"layers.{i}.{key}"``;
    the flat keys of a one-layer model (``"query"``, ...) become
    ``"layers.0.{key}"``.

    Returns
    -------
    flat : dict of str to ndarray
        The arrays by global name.
    labels : dict of str to str
        How the user named each one (``"init['layers'][1]['query']"``), for
        error messages.
    """
    flat, labels = {}, {}
    for key, value in init.items():
        if key == "layers":
            for index, layer in enumerate(value):
                for local, array in layer.items():
                    name = f"{LAYER_PREFIX}{index}.{local}"
                    flat[name] = array
                    labels[name] = f"init['layers'][{index}]['{local}']"
        else:
            name = key if key == "input" else f"{LAYER_PREFIX}0.{key}"
            flat[name] = value
            labels[name] = f"init['{key}']"
    return flat, labels
