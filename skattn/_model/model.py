"""The model: one description (:class:`ModelConfig`) and the units it runs.

:func:`build_model` lays out what :class:`~skattn.AttentionTransformer`
computes, one unit per piece::

    tokens (N, T, D)
      -> [integer ids looked up in a learned table, for vocabulary_size]
      -> [standardised with statistics fixed in fit, for scale_tokens]
      -> [patches of P tokens as tokens (N, T / P, P * D), for patch_size]
      -> input projection (D -> E), when the model has one
      -> + positional encoding (of the positional_encoding registry, which
         may instead transform each attention's queries and keys)
      -> [class token appended, for a pooling that reads one (pooling="cls")]
      -> n_layers encoder layers, each: self-attention sublayer, then
         feed-forward sublayer (torch.nn.TransformerEncoderLayer semantics)
      -> [final layer norm, for layer_norm="pre"]
      -> pooling over the valid tokens -> (N, F)
      -> [training only] linear head -> (N, K)

:class:`Model` runs the units forward and backward and owns the parameter
names: a unit's local name (``"query"``) prefixed by its place (``"layers.0."``)
is the key of the flat parameter dict that the optimizers and the L-BFGS
packing see. The same parameters nest as the estimators' ``init`` dict reads
them (:meth:`Model.nest`): ``{"input": ..., "layers": [{"query": ...}, ...]}``.
A new unit is a class of ``units.py`` (or ``encoder.py``) and one line in
:func:`build_model`; a new value of an option (a positional encoding, a
pooling, an activation) is its unit and one line of its registry, in
``options.py`` (``pooling.py`` for the poolings).

Shape legend: N samples, T tokens (padded length), D token width, E model width
(``n_heads * head_dim``), F pooled width, K outputs.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import math
import numbers

import numpy as np

from .encoder import EncoderLayer
from .head import LinearHead
from .options import ATTENTION_PATTERNS, REGISTRIES, band_config
from .patterns import PatternUnit, pattern_from_config
from .pooling import pool_statistics, token_statistics_width
from .units import (
    ClassToken,
    Context,
    Embedding,
    InputProjection,
    LayerNorm,
    Patches,
    TokenScaler,
    glorot_uniform,
    sinusoidal_positions,
)

LAYER_PREFIX = "layers."


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Everything that fixes the model: its units, their shapes and options.

    Resolved once, when an estimator builds its model in ``fit``; the model,
    the names and shapes of its parameters (and so the keys of ``init`` and
    the fitted attributes that hold them) follow from it.

    Attributes
    ----------
    n_features : int
        Width D of an input token.
    d_model : int
        Model width E, ``n_heads * head_dim``.
    n_heads : int
        Attention heads.
    n_layers, ff_dim, activation, feed_forward, residual, causal
        As the estimators' parameters of these names.
    positional_encoding, pooling
        As the estimators' parameters of these names.
    layer_norm : {"post", "pre"} or None
        Where each sublayer normalises (see :class:`~skattn.AttentionTransformer`).
    n_positions : int
        Model tokens of the longest sequence seen in fit: rows of a learned
        positions table, and the one length of a pooling that needs one
        (``pooling="flatten"``).
    projects_input : bool
        Whether the tokens are projected (D -> E) before the first layer.
    token_scale_shape : tuple of int or None
        Shape of the token standardisation's statistics, ``(D,)`` or ``(T,
        D)``; None for no standardisation.
    patch_size, patch_stride : int or None
        Tokens per patch and from one patch to the next (None: no patches;
        a stride of None: side by side).
    n_outputs : int
        Outputs of the training head; 0 for no head.
    vocabulary_size : int or None
        Tokens are integer ids below it, looked up in a learned table (None:
        tokens are vectors, of ``n_features``).
    token_statistics : tuple of str
        Statistics (of ``TOKEN_STATISTICS``, or ``TABLE_STATISTIC`` for a
        table's ``n_positions`` tokens) of the standardised input tokens put
        after the pooled outputs, which the head reads with them.
    attention_pattern : dict
        The attention pattern of every layer, as plain values: the name of
        its class in ``ATTENTION_PATTERNS`` and its parameters
        (:func:`~skattn._model.patterns.pattern_config`), BigBird's seed
        drawn.
    """

    n_features: int
    d_model: int
    n_heads: int
    n_layers: int = 1
    ff_dim: int = 0
    activation: str = "relu"
    feed_forward: str = "mlp"
    layer_norm: str | None = "post"
    residual: bool = True
    causal: bool = False
    positional_encoding: str | None = "sinusoidal"
    pooling: str = "mean"
    n_positions: int = 1
    projects_input: bool = True
    token_scale_shape: tuple | None = None
    patch_size: int | None = None
    patch_stride: int | None = None
    n_outputs: int = 0
    vocabulary_size: int | None = None
    token_statistics: tuple = ()
    attention_pattern: dict = dataclasses.field(default_factory=band_config)

    def __post_init__(self):
        # Python ints: sizes given as numpy integers (n_heads=np.int32(4))
        # would overflow in the products of shapes and byte counts
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                object.__setattr__(self, field.name, int(value))
        if self.token_scale_shape is not None:
            shape = tuple(int(n) for n in self.token_scale_shape)
            object.__setattr__(self, "token_scale_shape", shape)
        object.__setattr__(self, "token_statistics", tuple(self.token_statistics))
        pattern = {
            key: int(value) if isinstance(value, int | np.integer) else value
            for key, value in self.attention_pattern.items()
        }
        object.__setattr__(self, "attention_pattern", pattern)

    def replace(self, **changes):
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def as_dict(self):
        """The configuration as plain Python values (what an estimator stores)."""
        return dataclasses.asdict(self)


def build_model(config):
    """The units of the model of ``config``, in the order of the forward pass.

    Parameters
    ----------
    config : ModelConfig

    Returns
    -------
    model : Model
    """
    width = config.n_features
    units = []

    def add(unit, prefix=""):
        nonlocal width
        units.append((prefix, unit))
        width = unit.width(width)

    scaler = None
    if config.vocabulary_size is not None:
        add(Embedding(config.vocabulary_size, config.d_model))
    if config.token_scale_shape is not None:
        scaler = TokenScaler(config.token_scale_shape)
        add(scaler)
    if config.patch_size is not None:
        add(Patches(config.patch_size, config.patch_stride))
    read_units = [unit for _, unit in units]  # before the projection
    if config.projects_input:
        add(InputProjection(width, config.d_model))
    # each option's unit, placement or function, from its registry
    option = {
        name: registry.get(getattr(config, name))
        for name, registry in REGISTRIES.items()
    }
    query_key = None
    if option["positional_encoding"] is not None:
        positions = option["positional_encoding"](
            config.n_positions, config.d_model, config.n_heads
        )
        add(positions)
        query_key = positions.query_key_transform()
    pooling = option["pooling"](config.n_positions, config.d_model)
    if pooling.appends_class_token:
        add(ClassToken(config.d_model))
    pattern = PatternUnit(  # the class token, if any, is global
        pattern_from_config(ATTENTION_PATTERNS, config.attention_pattern),
        global_token=pooling.appends_class_token,
    )
    for index in range(config.n_layers):
        layer = EncoderLayer(
            index,
            config.d_model,
            n_heads=config.n_heads,
            ff_dim=config.ff_dim,
            activation=option["activation"],
            feed_forward=option["feed_forward"],
            residual=config.residual,
            layer_norm=option["layer_norm"],
            query_key=query_key,
            pattern=pattern,
        )
        add(layer, prefix=f"{LAYER_PREFIX}{index}.")
    if option["layer_norm"] is not None and option["layer_norm"].final:
        add(LayerNorm(config.d_model, "final_norm", attributes=True))
    head = None
    if config.n_outputs:
        width = pooling.n_features_out + token_statistics_width(
            config.token_statistics, config.n_positions, config.n_features
        )
        head = LinearHead(width, config.n_outputs)
    return Model(config, units, pooling, head, scaler=scaler, read_units=read_units)


class Model:
    """Units run in order, then a pooling unit and, for training, a head.

    Built by :func:`build_model`.

    Parameters
    ----------
    config : ModelConfig
        The model's description.
    units : list of (str, Unit)
        Each unit with the prefix of its parameter names (``""`` or
        ``"layers.{i}."``), in the order of the forward pass.
    pooling : Pooling
        Pools the tokens into one vector per sample.
    head : LinearHead or None
        The training head.
    scaler : TokenScaler or None
        The token standardisation (the first unit), if any.
    read_units : list of Unit
        The units before the input projection, which shape the tokens it reads
        (for the memory of a row).
    """

    def __init__(self, config, units, pooling, head, *, scaler, read_units):
        self.config = config
        self.units = units
        self.pooling = pooling
        self.head = head
        self.scaler = scaler
        self._read_units = read_units
        self._steps = [
            (prefix, unit, list(unit.param_specs()))
            for prefix, unit in [*units, ("", pooling), ("", head)]
            if unit is not None
        ]
        # the first unit that learns: its input is data in training
        self._first_learner = next(
            (
                index
                for index, (_, unit) in enumerate(units)
                if any(spec.trainable for spec in unit.param_specs().values())
            ),
            None,
        )

    def pooled_head_only(self):
        """This model with its head on the pooled vector alone, without the
        tokens' statistics: the model as it trains (its units shared)."""
        if not self.config.token_statistics:
            return self
        config = self.config.replace(token_statistics=())
        head = self.head
        if head is not None:
            head = LinearHead(self.pooling.n_features_out, config.n_outputs)
        return Model(
            config,
            self.units,
            self.pooling,
            head,
            scaler=self.scaler,
            read_units=self._read_units,
        )

    # Parameters
    # ----------

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

        Weight matrices are Glorot-uniform from ``rng``, vectors (class
        token, pooling query) N(0, 1/E) and token embeddings N(0, 1), drawn
        in the order of :meth:`param_specs` whether ``init`` gives them or not
        (so each depends only on its own shape, its place and ``rng``). Learned
        positions start from the sinusoidal table, layer norms from the
        identity, biases from zero. The head's rows of the tokens' statistics
        (``config.token_statistics``) start from zero, and the rest is drawn
        as :meth:`pooled_head_only` draws it, so that the model trains from the
        weights of the model without statistics.

        Parameters
        ----------
        rng : numpy.random.RandomState
            Source of the seeded weights.
        dtype : dtype
            dtype of the parameters.
        init : dict of str to ndarray, default=None
            Given weights by global name (checked with :meth:`check_init`),
            copied.

        Returns
        -------
        params : dict of str to ndarray
        """
        init = {} if init is None else init
        if self.config.token_statistics and self.head is not None:
            if "head_coef" not in init:
                return self._init_params_statistics_at_zero(rng, dtype, init)
        params = {}
        for name, spec in self.param_specs().items():
            if spec.init == "glorot":
                value = glorot_uniform(rng, *spec.shape, dtype)
            elif spec.init == "normal":
                value = rng.standard_normal(spec.shape) / math.sqrt(spec.shape[0])
            elif spec.init == "embedding":
                value = rng.standard_normal(spec.shape)
            elif spec.init == "sinusoidal":
                value = sinusoidal_positions(*spec.shape)
            else:
                value = (np.ones if spec.init == "ones" else np.zeros)(spec.shape)
            params[name] = np.array(init.get(name, value), dtype=dtype)
        return params

    def _init_params_statistics_at_zero(self, rng, dtype, init):
        """:meth:`init_params` of :meth:`pooled_head_only`, the head's rows of
        the tokens' statistics appended at zero: the same draws as the model
        without statistics, so that it trains as that model does."""
        params = self.pooled_head_only().init_params(rng, dtype, init)
        trained = params["head_coef"]
        params["head_coef"] = np.zeros(
            (self.head.n_features, self.head.n_outputs), dtype
        )
        params["head_coef"][: len(trained)] = trained
        return params

    def flat_init(self, init):
        """Given weights in the ``init`` layout (checked arrays), by global name.

        ``init["layers"][i][key]`` is ``"layers.{i}.{key}"``; a one-layer
        model also takes its layer's keys at the top level (``init["query"]``);
        every other key is a parameter's name.

        Returns
        -------
        flat : dict of str to ndarray
        labels : dict of str to str
            How ``init`` named each one (``"init['query']"``), for messages.

        Raises
        ------
        ValueError
            For a key that is no parameter of the model or one that is not
            learned (the token statistics come from the data), or an array of
            another shape.
        """
        specs = self.param_specs()
        layer_keys = {
            name.split(".", 2)[2] for name in specs if name.startswith(LAYER_PREFIX)
        }
        flat, labels = {}, {}
        for key, value in init.items():
            if key == "layers":
                for index, layer in enumerate(value):
                    for local, array in layer.items():
                        name = f"{LAYER_PREFIX}{index}.{local}"
                        flat[name], labels[name] = array, init_key(name)
            elif key in layer_keys:
                if self.config.n_layers > 1 or "layers" in init:
                    raise ValueError(
                        f"init has the key {key!r}: with n_layers="
                        f"{self.config.n_layers} or with init['layers'], give each "
                        "layer's weights in init['layers'] (a list of one dict "
                        "per layer)."
                    )
                name = f"{LAYER_PREFIX}0.{key}"
                flat[name], labels[name] = value, f"init[{key!r}]"
            else:
                flat[key], labels[key] = value, f"init[{key!r}]"
        known = [init_key(name) for name, spec in specs.items() if spec.trainable]
        for name, value in flat.items():
            if name not in specs or not specs[name].trainable:
                raise ValueError(
                    f"{labels[name]} is not a parameter of this model; its "
                    f"parameters are {known}."
                )
            if value.shape != specs[name].shape:
                raise ValueError(
                    f"{labels[name]} has shape {value.shape}, expected "
                    f"{specs[name].shape} (n_features={self.config.n_features}, "
                    f"d_model={self.config.d_model})."
                )
        return flat, labels

    def nest(self, params):
        """Parameters by global name as the ``init`` dict holds them.

        Returns
        -------
        nested : dict
            ``"layers"``: a list of one dict per encoder layer, by local name;
            every other parameter by its name.
        """
        nested = {"layers": [{} for _ in range(self.config.n_layers)]}
        for name, value in params.items():
            if name.startswith(LAYER_PREFIX):
                index, local = name[len(LAYER_PREFIX) :].split(".", 1)
                nested["layers"][int(index)][local] = value
            else:
                nested[name] = value
        return nested

    # What the units do to the tokens
    # -------------------------------

    def token_lengths(self, lengths):
        """Tokens of each sequence in the encoder's output (a patch counts
        once, the class token adds one).

        Parameters
        ----------
        lengths : int or ndarray of int
            Tokens of each input sequence.

        Returns
        -------
        int or ndarray of int, as ``lengths``.
        """
        for _, unit in self.units:
            lengths = unit.lengths(lengths)
        return lengths

    def row_bytes(self, n_tokens, *, n_features, itemsize, training):
        """Memory of one sequence padded to ``n_tokens`` while its batch runs.

        Per token of the encoder: the input tokens as the projection reads
        them (of ``n_features`` each, patches side by side), plus the units'
        activations (:meth:`Unit.activation_floats`). Evaluating, the units
        run one at a time: the largest unit's. Training, every unit keeps its
        activations for the backward pass, which holds about as much again
        for the largest unit's gradients, with the largest transient.

        Parameters
        ----------
        n_tokens : int
            Padded length of the sequence.
        n_features : int
            Width of the tokens the caller feeds the model.
        itemsize : int
            Bytes per number.
        training : bool
            Whether the activations are kept for a backward pass.

        Returns
        -------
        n_bytes : int
        """
        read_width = n_features
        for unit in self._read_units:
            read_width = unit.width(read_width)
        n_encoded = int(self.token_lengths(n_tokens))
        kept, transient = zip(
            *(unit.activation_floats(n_encoded) for _, unit in self.units),
            strict=True,
        )
        if training:
            floats = sum(kept) + max(kept) + max(transient)
        else:
            floats = max(k + t for k, t in zip(kept, transient, strict=True))
        return n_encoded * (read_width + floats) * itemsize

    # Passes
    # ------

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
        input_gradient=True,
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
        input_gradient : bool, default=True
            Whether :meth:`backward`'s units compute the gradient with respect
            to ``x`` (attributions need it). False in training, where ``x`` is
            data: the first unit that learns skips the products of its input's
            gradient.

        Returns
        -------
        tokens : ndarray of shape (N, T', E)
            Per-token outputs of the last layer; ``T' = T + 1`` with a class
            token, which follows each sequence's last token.
        pooled : ndarray of shape (N, F)
            Pooled representation (then the statistics of the standardised
            input tokens, with ``config.token_statistics``).
        trace : dict
            ``"caches"``: one per unit and the pooling, when ``training``.
        """
        context = Context(
            lengths,
            causal=self.config.causal,
            dropout=dropout,
            weights_layer=layer,
            weights_out=weights_out,
        )
        caches = []
        h = tokens = x
        data_input = None if input_gradient else self._first_learner
        for index, (prefix, unit, names) in enumerate(self._steps[: len(self.units)]):
            unit_context = context.with_input_gradient(index != data_input)
            h, cache = unit.forward(_local(params, prefix, names), h, unit_context)
            context = context.with_lengths(unit.lengths(context.lengths))
            if unit is self.scaler:
                tokens = h  # the standardised tokens, for their statistics
            if training:
                caches.append(cache)
        _, pooling, names = self._steps[len(self.units)]
        pooled, cache = pooling.forward(_local(params, "", names), h, context)
        caches.append(cache)
        if self.config.token_statistics:  # data: their gradient stops here
            statistics = pool_statistics(tokens, lengths, self.config.token_statistics)
            pooled = np.concatenate([pooled, statistics], axis=1)
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
        d = d_pooled[:, : self.pooling.n_features_out]  # not the tokens' statistics
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


def init_key(name):
    """How a parameter is named in ``init``: ``init['layers'][0]['query']``."""
    if name.startswith(LAYER_PREFIX):
        index, local = name[len(LAYER_PREFIX) :].split(".", 1)
        return f"init['layers'][{index}]['{local}']"
    return f"init['{name}']"
