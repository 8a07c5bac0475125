"""Every unit's backward pass, and whole stacks, against central finite differences.

The attention kernels' own gradients are tested in test_attention_gradients.py.
"""

import itertools

import numpy as np
import pytest
from helpers import (
    check_unit,
    directional_error,
    numeric_gradient,
    ragged_batch,
    relative_error,
    seeded_params,
)

from skattn._kernels import compiled, multi_head
from skattn._model.encoder import DropoutStreams, FeedForward, SelfAttention, Sublayer
from skattn._model.model import ModelConfig, build_model
from skattn._model.options import ACTIVATIONS, FEED_FORWARDS, POSITIONAL_ENCODINGS
from skattn._model.patterns import PatternUnit
from skattn._model.pooling import POOLINGS
from skattn._model.units import (
    ClassToken,
    Context,
    Embedding,
    InputProjection,
    LayerNorm,
)
from skattn.patterns import BandedAttention, BigBirdAttention


@pytest.fixture
def batch(rng):
    x, lengths = ragged_batch(rng, [4, 2, 3], 4)
    return x, lengths


def test_input_projection_backward(rng, batch):
    x, lengths = batch
    unit = InputProjection(4, 6)
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng)


def test_embedding_backward_holds_the_rows_of_the_valid_tokens(rng):
    # ids repeat within and across sequences; the padding holds ids too, and
    # an id beyond the table reads as 0
    ids = np.array([[1, 3, 1, 2], [4, 9, 0, 3]])[:, :, None]  # (N, T, 1)
    lengths = np.array([4, 2])
    unit = Embedding(5, 3)
    params = seeded_params(unit, rng)
    context = Context(lengths, causal=False)
    out, cache = unit.forward(params, ids, context)
    assert out.shape == (2, 4, 3)
    np.testing.assert_array_equal(out[1, 1], params["embeddings"][0])
    weight = (
        rng.standard_normal(out.shape) * (np.arange(4) < lengths[:, None])[..., None]
    )
    d_x, grads = unit.backward(params, weight, cache)
    assert d_x is None
    sparse = grads["embeddings"]
    assert sorted(sparse.rows.tolist()) == [0, 1, 1, 2, 3, 4]  # the valid tokens'

    def loss():
        return np.sum(unit.forward(params, ids, context)[0] * weight)

    numeric = numeric_gradient(loss, params["embeddings"])
    assert relative_error(sparse.toarray(), numeric) < 1e-6
    rows, values = sparse.coalesced()
    assert rows.tolist() == [0, 1, 2, 3, 4]
    assert relative_error(values, numeric[rows]) < 1e-6


@pytest.mark.parametrize("kind", POSITIONAL_ENCODINGS.names())
@pytest.mark.parametrize("n_positions", [2, 6])  # beyond the table: sinusoidal
def test_positions_backward(rng, batch, kind, n_positions):
    x, lengths = batch
    unit = POSITIONAL_ENCODINGS.get(kind)(n_positions, 4, 2)
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng)


def test_class_token_backward(rng, batch):
    x, lengths = batch
    unit = ClassToken(4)
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng)


@pytest.mark.parametrize("path", ["numpy", "compiled"])
def test_layer_norm_backward(rng, batch, monkeypatch, path):
    """Against finite differences on both paths of the layer norm."""
    if path == "compiled" and compiled.kernels() is None:
        pytest.skip("numba is not installed (the [fast] extra)")
    monkeypatch.setattr(compiled, "_DISABLED", path == "numpy")
    x, lengths = batch
    unit = LayerNorm(4, "norm1")
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng)


@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_backward(rng, batch, causal):
    x, lengths = batch
    unit = SelfAttention(4, 2, layer=0)
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng, causal=causal)


@pytest.mark.parametrize("global_token", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_banded_self_attention_backward(rng, batch, causal, global_token):
    """A band of 3 keys, every second token; the last valid token global."""
    x, lengths = batch
    pattern = PatternUnit(BandedAttention(3, dilation=2), global_token=global_token)
    unit = SelfAttention(4, 2, layer=0, pattern=pattern)
    dropout = DropoutStreams(0.2, 3, np.arange(len(x)))
    params = seeded_params(unit, rng)
    check_unit(unit, params, x, lengths, rng, causal=causal, dropout=dropout)


@pytest.mark.parametrize("global_token", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_bigbird_self_attention_backward(rng, causal, global_token):
    """Blocks of 2 tokens, a window of one block and one random block: each
    query reads 4 of up to 13 keys; padded sequences of several lengths, the
    last valid token global, dropout."""
    lengths = np.array([13, 9, 4])
    x = rng.standard_normal((3, 13, 4))
    x[np.arange(13) >= lengths[:, None]] = 0.0
    pattern = BigBirdAttention(2, window_blocks=1, n_random_blocks=1, seed=5)
    unit = SelfAttention(4, 2, layer=0, pattern=PatternUnit(pattern, global_token))
    dropout = DropoutStreams(0.2, 3, np.arange(len(x)))
    params = seeded_params(unit, rng)
    check_unit(unit, params, x, lengths, rng, causal=causal, dropout=dropout)


class MixedQueries:
    """A query/key transform for the tests: each query plus its token's key,
    each key times a per-feature factor (linear, and mixing q and k)."""

    def __init__(self, factors):
        self.factors = factors  # (Dh,)

    def forward(self, q, k):
        return q + k, k * self.factors, None

    def backward(self, d_q, d_k, cache):
        return d_q, d_q + d_k * self.factors


@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_with_a_query_key_transform_backward(rng, batch, causal):
    x, lengths = batch
    unit = SelfAttention(4, 2, layer=0, query_key=MixedQueries(np.array([2.0, -1])))
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng, causal=causal)


def test_the_query_key_transform_acts_between_projections_and_scores(rng, batch):
    # q + k, k * factors: the attention of weights w_q + w_k and w_k * factors
    # (per head, the factors of its two features)
    x, lengths = batch
    factors = np.array([0.5, 3.0])
    plain = SelfAttention(4, 2, layer=0)
    params = seeded_params(plain, rng)
    moved = dict(
        params,
        query=params["query"] + params["key"],
        key=params["key"] * np.tile(factors, 2),
    )
    context = Context(lengths, causal=False)
    transformed = SelfAttention(4, 2, layer=0, query_key=MixedQueries(factors))
    np.testing.assert_allclose(
        transformed.forward(params, x, context)[0],
        plain.forward(moved, x, context)[0],
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize("kind", FEED_FORWARDS.names())
@pytest.mark.parametrize("activation", ACTIVATIONS.names())
@pytest.mark.parametrize("dropout", [None, 0.3])
def test_feed_forward_backward(rng, batch, kind, activation, dropout):
    x, lengths = batch
    unit = FEED_FORWARDS.get(kind)(4, 5, ACTIVATIONS.get(activation), layer=1)
    streams = None if dropout is None else DropoutStreams(dropout, 7, np.arange(3))
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng, dropout=streams)


@pytest.mark.parametrize(
    "inner, residual, layer_norm, norm_first, dropout",
    [
        (inner, *options)
        for inner in ("attention", "feed_forward")
        for options in itertools.product([True, False], [True, False], [False, True])
        for options in [(*options, None)]
    ]
    + [("attention", True, True, False, 0.4), ("feed_forward", True, True, True, 0.4)],
)
def test_sublayer_backward(
    rng, batch, inner, residual, layer_norm, norm_first, dropout
):
    x, lengths = batch
    if inner == "attention":
        inner_unit = SelfAttention(4, 2, layer=0)
    else:
        inner_unit = FeedForward(4, 3, ACTIVATIONS.get("gelu"), layer=0)
    unit = Sublayer(
        inner_unit,
        LayerNorm(4, "norm1") if layer_norm else None,
        residual=residual,
        norm_first=norm_first,
        dropout_site=1,
    )
    streams = None if dropout is None else DropoutStreams(dropout, 3, np.arange(3))
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng, dropout=streams)


@pytest.mark.parametrize("kind", POOLINGS.names())
@pytest.mark.parametrize("ragged", [False, True])
def test_pooling_backward(rng, kind, ragged):
    unit = POOLINGS.get(kind)(3, 4)
    if ragged and unit.needs_fixed_length:
        pytest.skip(f"{kind} needs one length")
    x, lengths = ragged_batch(rng, [3, 1, 2] if ragged else [3, 3, 3], 4)
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng)


STACKS = [
    # (n_layers, ff_dim, activation, layer_norm, residual, causal, pooling,
    #  positional_encoding, dropout)
    (2, 5, "relu", "post", True, False, "mean", "sinusoidal", None),
    (2, 5, "gelu", "pre", True, True, "cls", "learned", None),
    (2, 0, "relu", "pre", True, False, "attention", None, None),
    (3, 3, "gelu", "post", True, True, "max", "learned", None),
    (2, 4, "gelu", "pre", False, False, "last", "sinusoidal", None),
    (2, 4, "relu", None, True, True, "first", None, None),
    (3, 4, "gelu", None, False, False, "mean", "sinusoidal", None),
    (2, 5, "gelu", "post", True, False, "mean", "learned", 0.3),
    (2, 5, "gelu", "pre", True, True, "cls", "sinusoidal", 0.3),
    (3, 3, "relu", "pre", True, False, "attention", "learned", 0.2),
    (2, 5, "gelu", "pre", True, True, "cls", "rotary", None),
    (2, 4, "relu", "post", True, False, "attention", "rotary", 0.3),
]


@pytest.mark.parametrize(
    "n_layers, ff_dim, activation, layer_norm, residual, causal, pooling, "
    "positional_encoding, dropout",
    STACKS,
)
@pytest.mark.parametrize("ragged", [False, True])
def test_stack_backward(
    rng,
    n_layers,
    ff_dim,
    activation,
    layer_norm,
    residual,
    causal,
    pooling,
    positional_encoding,
    dropout,
    ragged,
):
    """Every parameter of a whole encoder stack, pooling included, along
    random directions (its units are checked entry by entry above)."""
    x, lengths = ragged_batch(rng, [3, 1, 2] if ragged else [3, 3, 3], 3)
    config = ModelConfig(
        n_features=3, d_model=4, n_heads=2, n_layers=n_layers, ff_dim=ff_dim,
        activation=activation, layer_norm=layer_norm, residual=residual,
        causal=causal, pooling=pooling, positional_encoding=positional_encoding,
        n_positions=2,
    )  # fmt: skip
    check_stack(rng, config, x, lengths, dropout)


@pytest.mark.parametrize("kind", FEED_FORWARDS.names())
@pytest.mark.parametrize("layer_norm, dropout", [("post", None), ("pre", 0.3)])
def test_stack_backward_of_every_feed_forward(rng, kind, layer_norm, dropout):
    x, lengths = ragged_batch(rng, [3, 1, 2], 3)
    config = ModelConfig(
        n_features=3, d_model=4, n_heads=2, n_layers=2, ff_dim=5,
        feed_forward=kind, layer_norm=layer_norm, n_positions=2,
    )  # fmt: skip
    check_stack(rng, config, x, lengths, dropout)


def check_stack(rng, config, x, lengths, dropout):
    """The stack of ``config``'s gradients, with its norms, biases and
    positions moved off their start, along random directions."""
    model = build_model(config)
    params = model.init_params(np.random.RandomState(0), np.float64)
    for name in params:  # move norms, biases and positions off their start
        params[name] = params[name] + 0.3 * rng.standard_normal(params[name].shape)
    streams = None if dropout is None else DropoutStreams(dropout, 11, np.arange(3))
    _, pooled, trace = model.forward(params, x, lengths, dropout=streams, training=True)
    weight = rng.standard_normal(pooled.shape)

    def loss():
        return np.sum(model.forward(params, x, lengths, dropout=streams)[1] * weight)

    grads = model.backward(params, weight, trace)
    assert set(grads) == set(params)
    for name, array in params.items():
        assert grads[name].shape == array.shape
        assert directional_error(loss, array, grads[name], rng) < 1e-6, name


def spy_on_input_gradients(monkeypatch):
    """The ``input_gradient`` of every projections' backward pass, in order."""
    calls = []
    original = multi_head.project_qkv_backward

    def spy(*args, input_gradient=True):
        calls.append(input_gradient)
        return original(*args, input_gradient=input_gradient)

    monkeypatch.setattr(multi_head, "project_qkv_backward", spy)
    return calls


@pytest.mark.parametrize("layer_norm", [None, "post", "pre"])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("projects_input", [False, True])
def test_the_first_unit_that_learns_skips_the_gradient_of_its_data_input(
    rng, monkeypatch, layer_norm, residual, projects_input
):
    """Without ``input_gradient``, the first layer computes no gradient of
    its tokens when they are data (no input projection before it) and returns
    None for them (its attention computes none unless a pre-norm learns
    before it); every parameter's gradient is the same to the bit."""
    calls = spy_on_input_gradients(monkeypatch)
    x, lengths = ragged_batch(rng, [3, 1, 2], 4)
    config = ModelConfig(
        n_features=4, d_model=4, n_heads=2, n_layers=2, ff_dim=3,
        layer_norm=layer_norm, residual=residual, projects_input=projects_input,
        positional_encoding="rotary", n_positions=3,
    )  # fmt: skip
    model = build_model(config)
    params = model.init_params(np.random.RandomState(0), np.float64)
    weight = rng.standard_normal((3, 4))
    grads = {}
    for input_gradient in (True, False):
        _, _, trace = model.forward(
            params, x, lengths, training=True, input_gradient=input_gradient
        )
        grads[input_gradient] = model.backward(params, weight, trace)
    # layer 1 then layer 0, with and without; before the pre-norm's attention,
    # the norm learns
    assert calls == [True, True, True, projects_input or layer_norm == "pre"]
    assert set(grads[False]) == set(params)
    for name in params:
        np.testing.assert_array_equal(grads[False][name], grads[True][name], name)
    index = [prefix for prefix, _ in model.units].index("layers.0.")
    prefix, layer = model.units[index]
    local = {name[len(prefix) :]: params[name] for name in params if prefix in name}
    d_x, _ = layer.backward(local, rng.standard_normal(x.shape), trace["caches"][index])
    assert (d_x is None) == (not projects_input)  # None: its input is data


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_training_computes_no_gradient_of_the_tokens(rng, monkeypatch):
    """Adam's steps skip the product of the tokens' gradient when the first
    layer reads the tokens as they are (as wide as the model)."""
    from skattn import AttentionTransformer

    calls = spy_on_input_gradients(monkeypatch)
    X = rng.standard_normal((6, 5, 4))
    AttentionTransformer(
        n_heads=2, head_dim=2, positional_encoding=None, scale_tokens=False,
        token_statistics=None, ff_dim=0, max_iter=2, batch_size=3, random_state=0,
    ).fit(X, [0, 1, 0, 1, 1, 0])  # fmt: skip
    assert calls == [False] * 4  # two steps in each of two epochs


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize(
    "options",
    [
        dict(pooling="mean", scale_tokens=False, ff_dim=0),
        dict(pooling="cls", scale_tokens=False, ff_dim=0),
        dict(
            pooling="attention",
            n_layers=2,
            ff_dim=3,
            layer_norm="pre",
            scale_tokens=True,
        ),
    ],
    ids=["mean", "cls", "deep"],
)
def test_training_loss_gradient(rng, task, options):
    """Model + head + weighted loss + L2 penalty, as the solvers compute it,
    on ragged input, along random directions of each parameter."""
    from skattn import AttentionTransformer
    from skattn._input.targets import TrainingSet
    from skattn._model.sequences import sequence_lengths
    from skattn._training.loss import loss_gradients

    X = [rng.standard_normal((n, 3)) for n in (4, 2, 5, 3, 1)]
    if task == "classification":
        y = np.array(["a", "b", "c", "a", "b"])
        y_encoded = np.array([0, 1, 2, 0, 1])
    else:
        y = rng.standard_normal((5, 2))
        y_encoded = y
    sample_weight = rng.uniform(0.5, 2.0, size=5)
    est = AttentionTransformer(
        n_heads=2, head_dim=2, positional_encoding="learned", alpha=0.3,
        max_iter=1, random_state=0, **options,
    ).fit(X, y, sample_weight=sample_weight)  # fmt: skip
    model = est._fitted.model
    params = est._fitted.cast(np.float64)
    data = TrainingSet(X, sequence_lengths(X), y_encoded, sample_weight, 0.3, task)
    rows = np.arange(5)
    _, grads = loss_gradients(model, params, data, rows)

    def loss():
        return loss_gradients(model, params, data, rows)[0]

    assert set(grads) == set(model.trainable_names())
    assert ("token_mean" in params) == bool(options.get("scale_tokens"))
    for name in grads:
        assert directional_error(loss, params[name], grads[name], rng) < 1e-6, name
