"""The encoder stack: depth, feed-forward sublayers, norms, dropout, init, layers."""

import math
import re

import numpy as np
import pytest
from helpers import order_task
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.base import clone
from threadpoolctl import threadpool_limits

from skattn import AttentionTransformer
from skattn._model.options import REGISTRIES
from skattn._model.units import LAYER_NORM_EPS

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

ATTENTION_KEYS = {"query", "key", "value", "output"}
NORM1_KEYS = {"norm1_weight", "norm1_bias"}
FEED_FORWARD_KEYS = {"linear1", "linear1_bias", "linear2", "linear2_bias"}
NORM2_KEYS = {"norm2_weight", "norm2_bias"}
ALL_KEYS = ATTENTION_KEYS | NORM1_KEYS | FEED_FORWARD_KEYS | NORM2_KEYS


def make_ragged(lengths=(3, 7, 1, 5), width=4, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, width)) for n in lengths]


# Fitted weights
# --------------


@pytest.mark.parametrize(
    "ff_dim, layer_norm, keys, final_norm",
    [
        (0, "post", ATTENTION_KEYS | NORM1_KEYS, False),
        (6, "post", ALL_KEYS, False),
        (6, "pre", ALL_KEYS, True),
        (6, None, ATTENTION_KEYS | FEED_FORWARD_KEYS, False),
        (0, None, ATTENTION_KEYS, False),
    ],
)  # fmt: skip
def test_layers_hold_torch_names_and_shapes(ff_dim, layer_norm, keys, final_norm):
    est = AttentionTransformer(
        n_heads=2, head_dim=8, n_layers=3, ff_dim=ff_dim, layer_norm=layer_norm,
        objective=None, random_state=0,
    ).fit(make_ragged())  # fmt: skip
    assert len(est.layers_) == 3
    shapes = {
        **dict.fromkeys(ATTENTION_KEYS, (16, 16)),
        **dict.fromkeys(NORM1_KEYS | NORM2_KEYS, (16,)),
        "linear1": (16, ff_dim), "linear1_bias": (ff_dim,),
        "linear2": (ff_dim, 16), "linear2_bias": (16,),
    }  # fmt: skip
    for layer in est.layers_:
        assert set(layer) == keys
        for name, value in layer.items():
            assert value.shape == shapes[name], name
    # each layer is seeded on its own
    assert not np.allclose(est.layers_[0]["query"], est.layers_[1]["query"])
    if final_norm:
        assert_array_equal(est.final_norm_weight_, np.ones(16))
        assert_array_equal(est.final_norm_bias_, np.zeros(16))
    else:
        assert est.final_norm_weight_ is None and est.final_norm_bias_ is None


def test_default_model_is_one_layer_with_feed_forward():
    """One post-norm layer of width 64 (4 heads of 16) with a feed-forward
    sublayer of 128, on standardised tokens projected to the model width."""
    est = AttentionTransformer(random_state=0).fit(make_ragged())
    assert len(est.layers_) == 1
    assert set(est.layers_[0]) == ALL_KEYS
    assert (est.n_heads, est.head_dim_, est.d_model_) == (4, 16, 64)
    assert est.layers_[0]["query"].shape == (64, 64)
    assert est.layers_[0]["linear1"].shape == (64, 128)
    assert est.layers_[0]["linear2"].shape == (128, 64)
    assert est.input_weights_.shape == (4, 64)  # tokens of width 4
    assert est.final_norm_weight_ is None
    assert est.token_mean_.shape == est.token_scale_.shape == (4,)
    assert est.patch_size_ is None  # short sequences are not patched


# init
# ----


def random_layer(rng, keys, d_model=8, ff_dim=5):
    shapes = {
        **dict.fromkeys(ATTENTION_KEYS, (d_model, d_model)),
        **dict.fromkeys(NORM1_KEYS | NORM2_KEYS, (d_model,)),
        "linear1": (d_model, ff_dim), "linear1_bias": (ff_dim,),
        "linear2": (ff_dim, d_model), "linear2_bias": (d_model,),
    }  # fmt: skip
    return {name: rng.standard_normal(shapes[name]) for name in keys}


def test_init_layers_are_used_copied_and_missing_keys_seeded():
    rng = np.random.default_rng(0)
    layers = [
        random_layer(rng, ATTENTION_KEYS | FEED_FORWARD_KEYS),
        random_layer(rng, {"query", "norm2_weight"}),
    ]
    originals = [{k: v.copy() for k, v in layer.items()} for layer in layers]
    est = AttentionTransformer(
        n_heads=2, head_dim=4, n_layers=2, ff_dim=5, init={"layers": layers},
        objective=None, random_state=0,
    ).fit(make_ragged(width=8))  # fmt: skip
    for fitted, given in zip(est.layers_, originals, strict=True):
        for name, value in given.items():
            assert_array_equal(fitted[name], value)
    for layer, original in zip(layers, originals, strict=True):
        for name in layer:
            assert_array_equal(layer[name], original[name])  # not modified
            layer[name] += 1.0  # the caller's arrays are not the fitted ones
    assert_array_equal(est.layers_[1]["query"], originals[1]["query"])
    seeded = AttentionTransformer(
        n_heads=2, head_dim=4, n_layers=2, ff_dim=5, objective=None, random_state=0
    ).fit(make_ragged(width=8))
    # what init does not give is seeded as without init
    assert_array_equal(est.layers_[1]["key"], seeded.layers_[1]["key"])
    assert_array_equal(est.layers_[1]["norm1_weight"], np.ones(8))


def test_flat_init_keys_equal_one_layer_list():
    rng = np.random.default_rng(1)
    layer = random_layer(rng, ATTENTION_KEYS | NORM1_KEYS)
    X = make_ragged(width=8)
    flat = AttentionTransformer(n_heads=2, init=layer, random_state=0).fit(X)
    nested = AttentionTransformer(n_heads=2, init={"layers": [layer]}, random_state=0)
    assert_array_equal(nested.fit(X).transform(X), flat.transform(X))


@pytest.mark.parametrize(
    "init, n_layers, message",
    [
        ({"layers": [{}]}, 2, "init['layers'] must be a list of n_layers=2 dicts"),
        ({"layers": {"query": 1}}, 1, "init['layers'] must be a list of n_layers=1"),
        ({"layers": [np.eye(8)]}, 1, "init['layers'][0] must be a dict of arrays"),
        ({"query": np.eye(8)}, 2, "init has the key 'query': with n_layers=2"),
        (
            {"layers": [{}], "query": np.eye(8)},
            1,
            "init has the key 'query': with n_layers=1 or with init['layers']",
        ),
        (
            {"layers": [{}, {"linear1": np.eye(8)}]},
            2,
            "init['layers'][1]['linear1'] is not a parameter of this model",
        ),
        (
            {"layers": [{}, {"output": np.eye(6)}]},
            2,
            "init['layers'][1]['output'] has shape (6, 6), expected (8, 8)",
        ),
        (
            {"layers": [{"norm1_bias": np.ones((1, 8))}]},
            1,
            "init['layers'][0]['norm1_bias'] has shape (1, 8), expected (8,)",
        ),
        (
            {"layers": [{"key": np.full((8, 8), np.nan)}]},
            1,
            "Input init['layers'][0]['key'] contains NaN",
        ),
    ],
)
def test_init_errors_name_the_key(init, n_layers, message):
    # ff_dim=0: no feed-forward sublayer, so that "linear1" is unknown
    est = AttentionTransformer(
        n_heads=2, head_dim=4, n_layers=n_layers, ff_dim=0, init=init
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        est.fit(make_ragged(width=8))


def test_init_of_the_first_layer_sets_the_width():
    init = {"layers": [{}, {"value": np.eye(6)}]}
    est = AttentionTransformer(n_heads=2, n_layers=2, init=init, random_state=0)
    msg = "init['layers'][1]['value'] has shape (6, 6), expected (64, 64)"
    with pytest.raises(ValueError, match=re.escape(msg)):
        est.fit(make_ragged(width=8))  # the width rule gives 64, layer 1 must follow
    init = {"layers": [{"value": np.eye(6)}, {}]}
    est = AttentionTransformer(n_heads=2, n_layers=2, init=init, random_state=0)
    assert est.fit(make_ragged(width=8)).d_model_ == 6


# A numpy reference of the stack
# ------------------------------


# Each activation by its formula; the exact GELU by the math module.
REFERENCE_ACTIVATIONS = {
    "relu": lambda a: np.maximum(a, 0),
    "gelu": lambda a: 0.5 * a * (1 + np.vectorize(math.erf)(a / math.sqrt(2))),
}


def reference_layer(h, layer, n_heads, *, norm_first, activation):
    """One TransformerEncoderLayer on a sequence h (T, E), with full softmaxes."""

    def norm(z, name):
        z = (z - z.mean(axis=1, keepdims=True)) / np.sqrt(
            z.var(axis=1, keepdims=True) + LAYER_NORM_EPS
        )
        return z * layer[f"{name}_weight"] + layer[f"{name}_bias"]

    def attention(z):
        q, k, v = (z @ layer[name] for name in ("query", "key", "value"))
        width = q.shape[1] // n_heads
        heads = []
        for head in range(n_heads):
            cols = slice(head * width, (head + 1) * width)
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(width)
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            weights /= weights.sum(axis=1, keepdims=True)
            heads.append(weights @ v[:, cols])
        return np.hstack(heads) @ layer["output"]

    def feed_forward(z):
        pre = z @ layer["linear1"] + layer["linear1_bias"]
        hidden = REFERENCE_ACTIVATIONS[activation](pre)
        return hidden @ layer["linear2"] + layer["linear2_bias"]

    if norm_first:
        h = h + attention(norm(h, "norm1"))
        return h + feed_forward(norm(h, "norm2"))
    h = norm(h + attention(h), "norm1")
    return norm(h + feed_forward(h), "norm2")


@pytest.mark.parametrize("layer_norm", REGISTRIES["layer_norm"].names())
@pytest.mark.parametrize("activation", REGISTRIES["activation"].names())
def test_stack_matches_numpy_reference(layer_norm, activation):
    """Input projection, positions, two layers with feed-forward sublayers, final
    norm, mean pooling: against the formulas, one sequence at a time."""
    X = make_ragged(width=5)
    est = AttentionTransformer(
        n_heads=2, head_dim=4, n_layers=2, ff_dim=6, activation=activation,
        layer_norm=layer_norm, scale_tokens=False, patch_size=None, max_iter=2,
        random_state=0,
    ).fit(X, [0, 1, 1, 0])  # fmt: skip
    placement = REGISTRIES["layer_norm"].get(layer_norm)
    norm_first = placement.first
    tokens = est.transform_sequences(X)
    for x, out in zip(X, tokens, strict=True):
        table = np.array(
            [[math.sin(t / 10000 ** (2 * (j // 2) / 8)) if j % 2 == 0
              else math.cos(t / 10000 ** (2 * (j // 2) / 8)) for j in range(8)]
             for t in range(len(x))]
        )  # fmt: skip
        h = x @ est.input_weights_ + table
        for layer in est.layers_:
            h = reference_layer(
                h, layer, 2, norm_first=norm_first, activation=activation
            )
        if placement.final:
            h = (h - h.mean(axis=1, keepdims=True)) / np.sqrt(
                h.var(axis=1, keepdims=True) + LAYER_NORM_EPS
            ) * est.final_norm_weight_ + est.final_norm_bias_  # fmt: skip
        assert_allclose(out, h, rtol=1e-10, atol=1e-12)
    pooled = est.transform(X)
    assert_allclose(pooled, [t.mean(axis=0) for t in tokens], rtol=1e-12)


# attention_weights of a layer
# ----------------------------


def test_attention_weights_of_each_layer():
    """Layer 0's weights are those of a one-layer model with the same layer 0;
    every layer's rows sum to 1; negative indices count from the last."""
    X = make_ragged(width=8)
    deep = AttentionTransformer(
        n_heads=2, n_layers=3, ff_dim=4, objective=None, random_state=0
    ).fit(X)
    shallow = AttentionTransformer(
        n_heads=2, init={"layers": [deep.layers_[0]]}, ff_dim=4, objective=None,
        random_state=0,
    ).fit(X)  # fmt: skip
    first = deep.attention_weights(X, layer=0)
    for a, b in zip(first, shallow.attention_weights(X), strict=True):
        assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    last = deep.attention_weights(X)
    for a, b in zip(last, deep.attention_weights(X, layer=2), strict=True):
        assert_array_equal(a, b)
    for a, b in zip(first, deep.attention_weights(X, layer=-3), strict=True):
        assert_array_equal(a, b)
    for layer in range(3):
        for weights, x in zip(deep.attention_weights(X, layer=layer), X, strict=True):
            assert weights.shape == (2, len(x), len(x))
            assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    assert not np.allclose(last[1], first[1])


@pytest.mark.parametrize("layer", [3, -4, 1.0, "0", None])
def test_attention_weights_layer_out_of_range(layer):
    X = make_ragged()
    est = AttentionTransformer(n_layers=3, objective=None, random_state=0).fit(X)
    with pytest.raises(
        ValueError, match=re.escape("layer must be an integer in [-3, 3)")
    ):
        est.attention_weights(X, layer=layer)


# Dropout
# -------


def test_dropout_fits_are_reproducible_and_change_training():
    X, y = order_task(n=60)
    kwargs = dict(n_heads=2, n_layers=2, ff_dim=8, max_iter=3, random_state=0)
    first = AttentionTransformer(dropout=0.3, **kwargs).fit(X, y)
    second = AttentionTransformer(dropout=0.3, **kwargs).fit(X, y)
    assert first.loss_curve_ == second.loss_curve_
    for a, b in zip(first.layers_, second.layers_, strict=True):
        for name in a:
            assert_array_equal(a[name], b[name])
    plain = AttentionTransformer(dropout=0.0, **kwargs).fit(X, y)
    assert not np.allclose(plain.layers_[1]["linear1"], first.layers_[1]["linear1"])


@pytest.mark.filterwarnings("ignore:Could not adhere to working_memory")
@pytest.mark.parametrize("ragged", [False, True])
def test_dropout_does_not_depend_on_threads_or_batches(ragged):
    """The masks depend on the seed, the sample and the site only: fits on one
    or two threads, in one batch or one sequence per batch, agree to the
    rounding of float32, in which Adam trains."""
    X, y = order_task(n=40, n_tokens=8)
    if ragged:
        X = [x[: 3 + i % 6] for i, x in enumerate(X)]
    est = AttentionTransformer(
        n_heads=2, n_layers=2, ff_dim=8, dropout=0.4, max_iter=2, random_state=0
    )
    results = []
    for n_threads, working_memory in [(1, 1024), (2, 1024), (1, 1e-5)]:
        with (
            threadpool_limits(n_threads),
            config_context(working_memory=working_memory),
        ):
            fitted = clone(est).fit(X, y)
        results.append((fitted.loss_curve_, fitted.layers_[0]["query"]))
    # Adam steps in float32 (dropout needs Adam): sums over other batches round
    # differently at float32's precision, 1e-7 of the loss, which Adam's
    # normalised steps amplify in the weights of the smallest gradients (up to
    # 7e-7 in this test). A mask that followed the threads or batches would
    # move the loss by about 1e-2 and these weights by about 4e-3 (as
    # dropout=0.41 does).
    for loss_curve, query in results[1:]:
        assert_allclose(loss_curve, results[0][0], rtol=1e-6)
        assert_allclose(query, results[0][1], rtol=1e-6, atol=1e-5)


def test_transform_never_drops():
    X, y = order_task(n=40)
    est = AttentionTransformer(
        n_heads=2, n_layers=2, ff_dim=8, dropout=0.5, max_iter=2, random_state=0
    ).fit(X, y)
    first = est.transform_sequences(X)
    assert_array_equal(est.transform_sequences(X), first)
    # the same weights without dropout give the same outputs
    est.set_params(dropout=0.0)
    assert_array_equal(est.transform_sequences(X), first)


def test_dropout_needs_adam():
    X, y = order_task(n=20)
    est = AttentionTransformer(solver="lbfgs", dropout=0.1)
    with pytest.raises(ValueError, match="dropout=0.1 needs solver='adam'"):
        est.fit(X, y)
    est.set_params(objective=None).fit(X, y)  # nothing trained: nothing dropped


# Learning
# --------


def test_two_layers_with_feed_forward_learn_the_order_task():
    """The acceptance test of the encoder: a 2-layer stack with feed-forward
    sublayers learns make_sequence_classification's order task."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline

    from skattn.datasets import make_sequence_classification

    X, y = make_sequence_classification(
        n_samples=600, n_tokens=8, n_features=8, task="order", random_state=0
    )
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    model = make_pipeline(
        AttentionTransformer(
            n_layers=2, ff_dim=32, dropout=0.1, learning_rate_init=0.003,
            max_iter=60, random_state=0,
        ),
        LogisticRegression(max_iter=1000),
    ).fit(X_train, y_train)  # fmt: skip
    assert model.score(X_test, y_test) >= 0.9


# Token standardisation
# ---------------------


@pytest.mark.parametrize("kind", ["3d", "ragged", "table"])
def test_scale_tokens_equals_standardised_input(kind):
    """scale_tokens=True is the same model as standardising the tokens by hand
    (per feature of sequences, padding excluded; per column of a table)."""
    rng = np.random.default_rng(0)
    scale = np.array([1.0, 10.0, 100.0, 0.1])
    if kind == "table":
        X = rng.standard_normal((30, 4)) * scale + [5, -3, 0, 1]
        mean, std = X.mean(axis=0), X.std(axis=0)
        standardised = (X - mean) / std
    else:
        lengths = [6] * 30 if kind == "3d" else rng.integers(1, 9, size=30)
        X = [rng.standard_normal((n, 4)) * scale + [5, -3, 0, 1] for n in lengths]
        tokens = np.vstack(X)
        mean, std = tokens.mean(axis=0), tokens.std(axis=0)
        standardised = [(x - mean) / std for x in X]
        if kind == "3d":
            X, standardised = np.stack(X), np.stack(standardised)
    y = np.arange(30) % 2
    # L-BFGS trains in the input's float64, so that the two fits agree to
    # float64's rounding (Adam steps in float32, whose rounding training amplifies)
    kwargs = dict(n_heads=2, solver="lbfgs", max_iter=3, random_state=0)
    scaled = AttentionTransformer(scale_tokens=True, **kwargs).fit(X, y)
    by_hand = AttentionTransformer(scale_tokens=False, **kwargs).fit(standardised, y)
    assert_allclose(scaled.token_mean_.ravel(), mean, rtol=1e-12)
    assert_allclose(scaled.token_scale_.ravel(), std, rtol=1e-12)
    assert_allclose(scaled.transform(X), by_hand.transform(standardised), rtol=1e-9)
    plain = AttentionTransformer(scale_tokens=False, **kwargs).fit(X, y)
    assert plain.token_mean_ is None and plain.token_scale_ is None


def test_scale_tokens_weighs_samples_and_keeps_constant_features():
    X = [np.array([[1.0, 2.0], [3.0, 2.0]]), np.array([[5.0, 2.0]])]
    est = AttentionTransformer(scale_tokens=True, objective=None).fit(
        X, sample_weight=[1.0, 2.0]
    )
    # tokens 1 and 3 weigh 1, token 5 weighs 2: mean 3.5, variance 2.75
    assert_allclose(est.token_mean_, [3.5, 2.0])
    assert_allclose(est.token_scale_, [math.sqrt(2.75), 1.0])  # constant: 1
    X32 = [x.astype(np.float32) for x in X]
    est32 = clone(est).fit(X32)
    assert est32.token_mean_.dtype == np.float32
    assert est32.transform(X32).dtype == np.float32


# Patches
# -------


def test_patches_equal_reshaped_tokens():
    """patch_size=P reads (n, T, D) as (n, T / P, P * D): the same model as the
    reshaped array, seeded alike; a length that P does not divide is completed
    with zeros."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 10, 2))
    y = np.arange(12) % 2
    # scale_tokens=False: statistics per feature of the tokens would differ from
    # those per feature of the patches
    # token_statistics=None: the patches' statistics are not the tokens'
    # early_stopping=False: "auto" holds out a split for the wide reshaped tokens
    # pooling="mean": "auto" takes the maximum of patches only
    kwargs = dict(
        pooling="mean",
        n_heads=2,
        head_dim=4,
        scale_tokens=False,
        token_statistics=None,
        early_stopping=False,
        max_iter=2,
        random_state=0,
    )
    patched = AttentionTransformer(patch_size=5, **kwargs).fit(X, y)
    by_hand = AttentionTransformer(patch_size=None, **kwargs).fit(
        X.reshape(12, 2, 10), y
    )
    assert_allclose(patched.transform(X), by_hand.transform(X.reshape(12, 2, 10)))
    assert patched.transform_sequences(X).shape == (12, 2, 8)
    assert patched.attention_weights(X).shape == (12, 2, 2, 2)
    uneven = AttentionTransformer(patch_size=4, **kwargs).fit(X, y)
    completed = np.concatenate([X, np.zeros((12, 2, 2))], axis=1).reshape(12, 3, 8)
    by_hand = AttentionTransformer(patch_size=None, **kwargs).fit(completed, y)
    assert_allclose(uneven.transform(X), by_hand.transform(completed))


@pytest.mark.parametrize(
    "shape, patch_size",
    [
        ((4, 200, 1), 7),  # ceil(200 / 32): about 32 patches
        ((4, 65, 3), 3),
        ((4, 1460, 1), 46),
        ((4, 64, 1), None),  # short enough as it is
        ((4, 200, 9), None),  # wide tokens (word vectors) are not patched
    ],
)
def test_auto_patch_size_rule(shape, patch_size):
    X = np.random.default_rng(0).standard_normal(shape)
    est = AttentionTransformer(patch_size="auto", n_heads=2, random_state=0).fit(X)
    assert est.patch_size_ == patch_size
    n_patches = shape[1] if patch_size is None else -(-shape[1] // patch_size)
    assert est.transform_sequences(X[:1]).shape[1] == n_patches
    fixed = AttentionTransformer(patch_size=patch_size, n_heads=2, random_state=0)
    assert_array_equal(est.transform(X), fixed.fit(X).transform(X))


def test_auto_patch_size_reads_the_median_length_and_not_tables():
    rng = np.random.default_rng(0)
    X = [rng.standard_normal((n, 1)) for n in (10, 130, 140, 150, 2000)]
    est = AttentionTransformer(patch_size="auto", random_state=0).fit(X)
    assert est.patch_size_ == math.ceil(140 / 32)
    table = rng.standard_normal((5, 300))  # columns are tokens, not a time axis
    est = AttentionTransformer(patch_size="auto", random_state=0).fit(table)
    assert est.patch_size_ is None
    assert est.transform_sequences(table).shape == (5, 300, est.d_model_)


def test_auto_patch_size_weighs_the_median_length():
    """sample_weight counts as repetition in the median length; a sequence of
    weight zero counts as absent (the class weights do not count)."""
    rng = np.random.default_rng(0)
    lengths = (70, 100, 130, 400, 2000)
    X = [rng.standard_normal((n, 1)) for n in lengths]
    y = [0, 1, 0, 1, 1]
    weights = np.array([0.0, 3.0, 1.0, 1.0, 0.0])  # 100, 100, 100, 130, 400
    kwargs = dict(patch_size="auto", max_iter=1, random_state=0)
    est = AttentionTransformer(**kwargs).fit(X, y, sample_weight=weights)
    assert est.patch_size_ == math.ceil(100 / 32)  # unweighted: ceil(130 / 32)
    assert AttentionTransformer(**kwargs).fit(X, y).patch_size_ == math.ceil(130 / 32)
    repeated = [X[1]] * 3 + [X[2], X[3]]
    assert (
        AttentionTransformer(**kwargs).fit(repeated, [1] * 3 + [0, 1]).patch_size_ == 4
    )
    balanced = AttentionTransformer(**kwargs, class_weight="balanced")
    assert balanced.fit(X, y).patch_size_ == math.ceil(130 / 32)


@pytest.mark.parametrize("scale_tokens", [False, True])
def test_patches_of_ragged_sequences_ignore_padding(scale_tokens):
    X = make_ragged(lengths=(9, 2, 5, 13, 4), width=2)
    est = AttentionTransformer(
        patch_size=4, scale_tokens=scale_tokens, n_layers=2, ff_dim=8, max_iter=2,
        random_state=0,
    ).fit(X, [0, 1, 0, 1, 1])  # fmt: skip
    together = est.transform(X)
    alone = np.vstack([est.transform([x]) for x in X])
    assert_allclose(together, alone, rtol=1e-12, atol=1e-12)
    assert [len(t) for t in est.transform_sequences(X)] == [3, 1, 2, 4, 1]
    if scale_tokens:  # the completed patch holds the mean: zeros once scaled
        x = X[1]
        by_hand = np.concatenate([x, np.repeat(est.token_mean_[None], 2, 0)])
        assert_allclose(est.transform([x]), est.transform([by_hand]), rtol=1e-12)
