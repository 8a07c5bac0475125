"""Tests of RandomAttentionFeatures: the estimator checks, what fit learns, the
statistics against AttentionTransformer's models, invariances, formats, errors."""

import re
import tracemalloc

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from helpers import (
    EXTRA_CHECKS,
    LENGTHS,
    make_3d,
    make_input,
    make_ragged,
    make_table,
    object_array,
)
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import RidgeClassifierCV
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import (
    parametrize_with_checks,
)
from threadpoolctl import threadpool_limits

from skattn import AttentionTransformer, RandomAttentionFeatures
from skattn._model.units import patch_count
from skattn._random_features.configs import RANDOM_POSITIONAL_ENCODINGS

# the models compute in float32 whatever the input's dtype
FLOAT32 = dict(rtol=2e-5, atol=2e-5)
# small and quick, and every kind of draw: lists of heads, widths, positions
SMALL = dict(n_models=3, n_heads=2, head_dim=4)
SMALL_MODEL = dict(n_heads=1, head_dim=2)
MIXED = dict(
    n_models=6,
    n_heads=[1, 2],
    head_dim=[3, 4],
    positional_encoding=["sinusoidal", None],
    causal=[False, True],
    statistics=["mean", "max", "ppv", "lspv", "first", "last", "min"],
    patch_size=None,  # "auto" reads short univariate series in windows
)


# Data
# ----


# 1. scikit-learn's estimator checks
# ----------------------------------

CONFIGURATIONS = [
    RandomAttentionFeatures(n_models=2),
    RandomAttentionFeatures(**MIXED),
    RandomAttentionFeatures(n_models=2, scale_tokens=False, statistics="ppv"),
    RandomAttentionFeatures(
        n_models=2, n_heads=1, head_dim=3, features_per_token=1, causal=True
    ),
]


def expected_failed_checks(estimator):
    failed = {}
    statistics = estimator.statistics
    thresholded = {"ppv", "lspv"} & set(
        [statistics] if isinstance(statistics, str) else statistics
    )
    if statistics == "auto" or thresholded:  # the checks' tables are narrow
        failed["check_sample_weight_equivalence_on_dense_data"] = (
            "the thresholds are quantiles of the models' outputs on at most "
            "16 training sequences of positive weight, each counted once: "
            "repeating a row does not weigh it (test_zero_weight_sequences_are_"
            "never_sampled checks what the weights do)"
        )
    return failed


# scikit-learn's checks that a row's output does not depend on the rows
# transformed with it compare at 1e-7, a float64 tolerance. The random
# features compute in float32, and BLAS sums a row's products in an order that
# depends on the rows multiplied with it (OpenBLAS 0.3.31's Haswell kernels:
# 4.8e-7 apart on the checks' data), so these checks run at float32's
# rounding: 64 units in the last place, relative and absolute.
FLOAT32_CHECKS = {
    "check_methods_subset_invariance": "assert_allclose",
    "check_methods_sample_order_invariance": "assert_allclose_dense_sparse",
}
FLOAT32_TOLERANCE = 64 * np.finfo(np.float32).eps


@parametrize_with_checks(CONFIGURATIONS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check, monkeypatch):
    import sklearn.utils.estimator_checks as checks

    name = check.func.__name__ if hasattr(check, "func") else check.__name__
    if name in FLOAT32_CHECKS:
        assert_close = getattr(checks, FLOAT32_CHECKS[name])

        def at_float32_rounding(actual, desired, **kwargs):
            kwargs.update(rtol=FLOAT32_TOLERANCE, atol=FLOAT32_TOLERANCE)
            return assert_close(actual, desired, **kwargs)

        monkeypatch.setattr(checks, FLOAT32_CHECKS[name], at_float32_rounding)
    check(estimator)


@pytest.mark.parametrize("check", EXTRA_CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize(
    "estimator", [CONFIGURATIONS[0], CONFIGURATIONS[1]], ids=["default", "mixed"]
)
def test_sklearn_extra_checks(estimator, check):
    check(type(estimator).__name__, estimator)


# 2. The models and their statistics
# ----------------------------------


def _with_differences(X):
    """Each token beside half its difference from the token before (0 for the
    first)."""

    def one(x):
        return np.concatenate([x, np.diff(x, axis=0, prepend=x[:1]) / 2], axis=1)

    if isinstance(X, list):
        return [one(x) for x in X]
    return np.stack([one(x) for x in X])


def _standardised_tokens(features, X):
    """The sequences of X as the models read them, standardised."""
    if isinstance(X, np.ndarray) and X.ndim == 2:  # a table of scalar tokens
        X = X[:, :, None]  # statistics per column: (n_tokens, 1)
    mean, scale = features.token_mean_, features.token_scale_
    if mean is None:
        return [np.asarray(x, dtype=np.float64) for x in X]
    return [(x - mean) / scale for x in X]


def _model_input(features, index, X):
    """The tokens model ``index`` reads (before their standardisation)."""
    return _with_differences(X) if features.models_[index]["difference"] else X


def _attention_transformer(features, index, pooling):
    """AttentionTransformer with the configuration and weights of one model."""
    config = features.models_[index]
    return AttentionTransformer(
        n_heads=config["n_heads"],
        head_dim=config["head_dim"],
        positional_encoding=config["positional_encoding"],
        causal=config["causal"],
        scale_tokens=features.scale_tokens,
        features_per_token=features.features_per_token,
        patch_size=config["patch_size"],
        attention_window=config.get("attention_window"),
        attention_dilation=config.get("attention_dilation", 1),
        ff_dim=0,  # a model of random features is one attention sublayer
        objective=None,
        pooling=pooling,
        token_statistics=None,  # the model's outputs alone
        init=features.weights_[index],  # the same schema
    )


@pytest.mark.parametrize("scale_tokens", [True, False])
@pytest.mark.parametrize("kind", ["table", "3d", "ragged"])
def test_statistics_are_those_of_attention_transformer_models(kind, scale_tokens):
    """Each model's block: the mean and max pooling of the AttentionTransformer
    with the same weights, then the share of its per-token outputs above each
    of the model's thresholds (K = 3 per feature by default), threshold by
    threshold, the longest stretch of consecutive outputs above them, and the
    first and last pooling of that AttentionTransformer (the last valid
    token of a ragged sequence, not padding)."""
    X = make_input(kind, np.float32)
    features = RandomAttentionFeatures(
        **{**MIXED, "n_models": 8}, scale_tokens=scale_tokens, random_state=0
    ).fit(X)
    K = features.n_thresholds
    X_new = features.transform(X)
    # narrow tokens: models with and without the differences; a table: without
    drawn = {config["difference"] for config in features.models_}
    assert drawn == ({False} if kind == "table" else {False, True})
    start = 0
    for index, config in enumerate(features.models_):
        width = config["n_heads"] * config["head_dim"]
        blocks = X_new[:, start : start + (5 + 2 * K) * width]
        blocks = blocks.reshape(len(X), -1, width)
        start += (5 + 2 * K) * width
        X_model = _model_input(features, index, X)
        for position, pooling in enumerate(["mean", "max"]):
            reference = _attention_transformer(features, index, pooling).fit(X_model)
            assert_allclose(
                blocks[:, position], reference.transform(X_model), **FLOAT32
            )
        tokens = _attention_transformer(features, index, "mean").fit(X_model)
        per_token = tokens.transform_sequences(X_model)
        thresholds = features.thresholds_[index]
        assert thresholds.shape == (K, width) and thresholds.dtype == np.float32
        for k, threshold in enumerate(thresholds):
            ppv = [np.mean(seq > threshold, axis=0) for seq in per_token]
            assert_allclose(blocks[:, 2 + k], ppv, **FLOAT32)
            lspv = [_longest_stretch(seq > threshold) / len(seq) for seq in per_token]
            assert_allclose(blocks[:, 2 + K + k], lspv, **FLOAT32)
        for position, pooling in enumerate(["first", "last"], start=2 + 2 * K):
            reference = _attention_transformer(features, index, pooling).fit(X_model)
            assert_allclose(
                blocks[:, position], reference.transform(X_model), **FLOAT32
            )
        minimum = [seq.min(axis=0) for seq in per_token]  # of the valid tokens
        assert_allclose(blocks[:, 4 + 2 * K], minimum, **FLOAT32)
    # token_statistics="auto": then the same statistics of the standardised tokens
    tokens = _standardised_tokens(features, X)
    expected = [
        [seq.mean(axis=0) for seq in tokens],
        [seq.max(axis=0) for seq in tokens],
        [np.mean(seq > 0, axis=0) for seq in tokens],
        [_longest_stretch(seq > 0) / len(seq) for seq in tokens],
        [seq[0] for seq in tokens],
        [seq[-1] for seq in tokens],
        [seq.min(axis=0) for seq in tokens],
    ]
    width = tokens[0].shape[1]
    assert_allclose(X_new[:, start:], np.hstack(expected), **FLOAT32)
    assert start + 7 * width == X_new.shape[1] == features.n_features_out_


def _longest_stretch(positive):
    """Longest run of True down each column of a (T, E) array, by a loop."""
    longest = np.zeros(positive.shape[1])
    for column in range(positive.shape[1]):
        run = 0
        for value in positive[:, column]:
            run = run + 1 if value else 0
            longest[column] = max(longest[column], run)
    return longest


def _float32_patch_input(kind):
    """Sequences of 9 tokens, or ragged ones of 2 to 13 tokens, in float32."""
    if kind == "3d":
        return make_3d(n_tokens=9).astype(np.float32)
    return [x.astype(np.float32) for x in make_ragged(lengths=(9, 2, 5, 13, 4))]


@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_patched_models_are_those_of_attention_transformer(kind):
    """A model drawing patches of P tokens is AttentionTransformer's model with
    patch_size=P and the same weights."""
    X = _float32_patch_input(kind)
    features = RandomAttentionFeatures(
        n_models=12,
        n_heads=2,
        head_dim=4,
        patch_size=[1, 2, 3],
        patch_stride=None,  # side by side, as AttentionTransformer's patches
        statistics=["mean", "max"],
        random_state=0,
    ).fit(X)
    assert {config["patch_size"] for config in features.models_} == {None, 2, 3}
    strides = {config["patch_stride"] for config in features.models_}
    assert strides == {None, 2, 3}  # None without patches, else the size
    X_new = features.transform(X)
    start = 0
    for index in range(12):
        X_model = _model_input(features, index, X)
        for pooling in ["mean", "max"]:
            reference = _attention_transformer(features, index, pooling).fit(X_model)
            assert_allclose(
                X_new[:, start : start + 8], reference.transform(X_model), **FLOAT32
            )
            start += 8
    # padding does not matter to patched models either
    if kind == "ragged":
        alone = np.vstack([features.transform([x]) for x in X])
        assert_allclose(X_new, alone, **FLOAT32)


@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_models_of_every_positional_encoding_are_those_of_attention_transformer(
    kind,
):
    """Each positional encoding a model draws is AttentionTransformer's."""
    X = _float32_patch_input(kind)
    positions = [*RANDOM_POSITIONAL_ENCODINGS, None]
    features = RandomAttentionFeatures(
        n_models=4 * len(positions),
        n_heads=2,
        head_dim=4,
        positional_encoding=positions,
        patch_size=None,
        statistics=["mean"],
        random_state=0,
    ).fit(X)
    drawn = {config["positional_encoding"] for config in features.models_}
    assert drawn == set(positions)
    X_new = features.transform(X)
    for index in range(len(features.models_)):
        X_model = _model_input(features, index, X)
        reference = _attention_transformer(features, index, "mean").fit(X_model)
        assert_allclose(
            X_new[:, 8 * index : 8 * (index + 1)],
            reference.transform(X_model),
            **FLOAT32,
        )


def test_positional_encodings_are_the_untrained_ones_of_the_registry():
    # a learned table would keep its initial values: the sinusoidal table
    assert "sinusoidal" in RANDOM_POSITIONAL_ENCODINGS
    assert "learned" not in RANDOM_POSITIONAL_ENCODINGS
    constraint = RandomAttentionFeatures._parameter_constraints["positional_encoding"]
    assert constraint[0].options == {*RANDOM_POSITIONAL_ENCODINGS, "auto"}
    choices = ", ".join(f'"{name}"' for name in RANDOM_POSITIONAL_ENCODINGS)
    doc = " ".join(RandomAttentionFeatures.__doc__.split())
    assert f"positional_encoding : {{{choices}, None}}, list of them" in doc


def test_positions_that_refuse_a_head_width_a_model_may_draw_are_refused():
    # whichever configurations the models draw
    features = RandomAttentionFeatures(
        n_models=1, head_dim=[3, 4], positional_encoding=["rotary", None]
    )
    with pytest.raises(ValueError, match="head_dim must be even, got head_dim=3"):
        features.fit(make_3d())


def _windows(x, size, stride):
    """Patch j of a sequence by hand: tokens j * stride to j * stride + size - 1
    side by side, the last ones completed with zeros."""
    n_patches = 1 + max(0, -(-(len(x) - size) // stride))
    padded = np.zeros(((n_patches - 1) * stride + size, x.shape[1]), x.dtype)
    padded[: len(x)] = x
    return np.stack(
        [padded[j * stride : j * stride + size].ravel() for j in range(n_patches)]
    )


@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_strided_patches_are_windows_read_as_tokens(kind):
    """A model with patches of P tokens every S is AttentionTransformer's
    model, with the same weights, on the windows of the standardised tokens
    built by hand; padding does not change them."""
    X = _float32_patch_input(kind)
    features = RandomAttentionFeatures(
        n_models=10,
        n_heads=2,
        head_dim=4,
        patch_size=3,
        patch_stride=[1, 2, 3],
        difference=False,
        statistics=["mean", "max"],
        token_statistics=None,
        random_state=0,
    ).fit(X)
    assert {config["patch_stride"] for config in features.models_} == {1, 2, 3}
    X_new = features.transform(X)
    tokens = _standardised_tokens(features, X)
    for index, config in enumerate(features.models_):
        size, stride = config["patch_size"], config["patch_stride"]
        windows = [_windows(x, size, stride) for x in tokens]
        for position, pooling in enumerate(["mean", "max"]):
            reference = _attention_transformer(features, index, pooling)
            reference.set_params(patch_size=None, scale_tokens=False).fit(windows)
            block = X_new[:, (2 * index + position) * 8 :][:, :8]
            assert_allclose(block, reference.transform(windows), **FLOAT32)
    if kind == "ragged":  # each sequence alone: no padding
        alone = np.vstack([features.transform([x]) for x in X])
        assert_allclose(X_new, alone, **FLOAT32)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("stride", [None, 1, 2, 3, 5])
def test_patch_count_counts_the_windows(size, stride):
    from skattn._model.units import patch_count

    lengths = np.arange(1, 30)
    expected = [len(_windows(np.zeros((n, 1)), size, stride or size)) for n in lengths]
    assert_array_equal(patch_count(lengths, size, stride), expected)
    assert [patch_count(int(n), size, stride) for n in lengths] == expected


@pytest.mark.parametrize(
    "shape, strides",
    [
        # an eighth of each patch size (2, 4, 8), at least 1
        ((3, 150, 1), {(2, 1), (4, 1), (8, 1)}),
        # an eighth of 16, 32, 64, but at most 256 patches of 1460 points:
        # patches of 16 and 32 every 6 points (242 and 239 of them)
        ((3, 1460, 1), {(16, 6), (32, 6), (64, 8)}),
        ((3, 3000, 1), {(32, 12), (64, 12), (128, 16)}),
        ((3, 32, 1), {(None, None), (2, 1), (3, 1), (4, 1)}),  # short: windows
    ],
)
def test_auto_patch_strides_are_an_eighth_of_the_patch_up_to_256(shape, strides):
    X = np.random.default_rng(0).standard_normal(shape)
    features = RandomAttentionFeatures(
        n_models=40, n_heads=1, head_dim=2, random_state=0
    ).fit(X)
    drawn = {(c["patch_size"], c["patch_stride"]) for c in features.models_}
    assert drawn == strides
    # what the transform pools: as many patches as the rule says
    for config in features.models_:
        if config["patch_size"] is not None:
            n_patches = patch_count(
                shape[1], config["patch_size"], config["patch_stride"]
            )
            assert n_patches <= 256


def test_patch_stride_larger_than_the_patch_is_refused():
    X = make_3d(n_tokens=9)
    with pytest.raises(ValueError, match="patch_stride=4 is larger than the patch"):
        RandomAttentionFeatures(patch_size=[2, 3], patch_stride=4).fit(X)
    # a stride equal to the patch size is side by side
    features = RandomAttentionFeatures(patch_size=3, patch_stride=3).fit(X)
    assert {config["patch_stride"] for config in features.models_} == {3}


@pytest.mark.parametrize(
    "shape, sizes",
    [
        ((3, 150, 1), {2, 4, 8}),  # 150 / 128 -> 2 up to 150 / 16 -> 8
        ((3, 100, 2), {None, 2, 4}),
        ((3, 1460, 1), {16, 32, 64}),
        ((3, 32, 1), {None, 2, 3, 4}),  # short, univariate: windows of 1 to 4
        ((3, 32, 2), {None}),
        ((3, 8, 8), {None}),  # short, of 8 features (the rows of an image)
        ((3, 5, 1), {None, 2}),  # at most half the length
        ((3, 3, 1), {None}),
        ((3, 150, 9), {None}),  # wide tokens (word vectors): no patches
    ],
)
def test_auto_patch_sizes(shape, sizes):
    """Series read in 16 to 128 patches, of powers of two; short univariate
    ones in windows of 1 to 4 points; other short ones and wide tokens not at
    all."""
    X = np.random.default_rng(0).standard_normal(shape)
    features = RandomAttentionFeatures(
        n_models=40, n_heads=1, head_dim=2, random_state=0
    ).fit(X)
    assert {config["patch_size"] for config in features.models_} == sizes


@pytest.mark.parametrize(
    "shape, positions",
    [
        ((3, 150, 1), {"sinusoidal", None}),  # read in patches: half without
        ((3, 32, 1), {"sinusoidal"}),  # short: windows, with positions
        ((3, 150, 9), {"sinusoidal"}),  # wide tokens
    ],
)
def test_auto_positional_encoding(shape, positions):
    X = np.random.default_rng(0).standard_normal(shape)
    features = RandomAttentionFeatures(n_models=20, **SMALL_MODEL, random_state=0)
    features.fit(X)
    assert {config["positional_encoding"] for config in features.models_} == positions
    with pytest.raises(ValueError, match="positional_encoding must be"):
        RandomAttentionFeatures(positional_encoding=["auto", None]).fit(X)


def test_auto_configurations_weigh_the_median_length():
    """sample_weight counts as repetition in the median length that picks the
    patches and positions; a sequence of weight zero counts as absent."""
    rng = np.random.default_rng(0)
    X = [rng.standard_normal((n, 1)) for n in (20, 20, 40, 40, 40)]
    weights = np.array([3.0, 3.0, 1.0, 1.0, 0.0])  # median 20: short windows
    kwargs = dict(n_models=30, **SMALL_MODEL, random_state=0)
    weighted = RandomAttentionFeatures(**kwargs).fit(X, sample_weight=weights)
    repeated = RandomAttentionFeatures(**kwargs).fit([X[0]] * 3 + [X[1]] * 3 + X[2:4])
    assert weighted.models_ == repeated.models_
    assert {config["patch_size"] for config in weighted.models_} == {None, 2, 3, 4}
    unweighted = RandomAttentionFeatures(**kwargs).fit(X)  # median 40: patches
    assert {config["patch_size"] for config in unweighted.models_} == {None, 2}
    assert {c["positional_encoding"] for c in unweighted.models_} == {
        "sinusoidal",
        None,
    }


def test_auto_patch_sizes_read_the_median_length_and_not_tables():
    rng = np.random.default_rng(0)
    X = [rng.standard_normal((n, 1)) for n in (10, 140, 150, 160, 3000)]
    features = RandomAttentionFeatures(
        n_models=30, n_heads=1, head_dim=2, random_state=0
    ).fit(X)
    assert {config["patch_size"] for config in features.models_} == {2, 4, 8}
    table = rng.standard_normal((5, 300))
    features.fit(table)
    assert {config["patch_size"] for config in features.models_} == {None}


def test_models_draw_from_every_candidate():
    features = RandomAttentionFeatures(**{**MIXED, "n_models": 40}, random_state=0)
    features.fit(make_3d())
    for name in ["n_heads", "head_dim", "positional_encoding", "causal"]:
        drawn = {config[name] for config in features.models_}
        assert drawn == set(MIXED[name]), name
    # difference="auto" on tokens of 4 features: with and without
    assert {config["difference"] for config in features.models_} == {False, True}


def test_default_models_have_one_head_of_width_64():
    features = RandomAttentionFeatures(n_models=3, random_state=0).fit(make_3d())
    assert [(m["n_heads"], m["head_dim"]) for m in features.models_] == [(1, 64)] * 3
    for weights in features.weights_:
        assert weights["layers"][0]["query"].shape == (64, 64)
    # the max and 3 PPVs of 64 features per model, the tokens' max and PPV
    assert features.transform(make_3d()).shape == (5, 3 * 4 * 64 + 2 * 4)


def test_scalar_parameters_give_one_configuration():
    features = RandomAttentionFeatures(
        n_models=3,
        n_heads=2,
        head_dim=5,
        positional_encoding=None,
        causal=True,
        difference=True,
        patch_size=None,
    ).fit(make_3d())
    expected = dict(
        n_heads=2,
        head_dim=5,
        positional_encoding=None,
        causal=True,
        patch_size=None,
        difference=True,
        patch_stride=None,
    )
    assert features.models_ == [expected] * 3
    # the max and 3 PPVs of 10 features per model, the tokens' max and PPV
    assert features.transform(make_3d()).shape == (5, 3 * 4 * 10 + 2 * 4)


def test_weights_of_each_model_are_in_the_layout_of_init():
    features = RandomAttentionFeatures(**SMALL, random_state=0).fit(make_3d(width=4))
    layer = {
        "query": (8, 8),
        "key": (8, 8),
        "value": (8, 8),
        "output": (8, 8),
        "norm1_weight": (8,),
        "norm1_bias": (8,),
    }
    for config, weights in zip(features.models_, features.weights_, strict=True):
        width = 8 if config["difference"] else 4  # the tokens and differences
        width *= config["patch_size"] or 1  # side by side in a patch
        assert set(weights) == {"input", "layers"}
        assert weights["input"].shape == (width, 8)
        assert len(weights["layers"]) == 1
        assert {name: v.shape for name, v in weights["layers"][0].items()} == layer
    # independent models: different weights
    query = [weights["layers"][0]["query"] for weights in features.weights_]
    assert not np.allclose(query[0], query[1])


def test_ppv_counts_valid_tokens_only():
    X = make_ragged()
    X_new = RandomAttentionFeatures(  # one token per time point: no patches
        **SMALL, statistics="ppv", patch_size=None, random_state=0
    ).fit_transform(X)
    assert X_new.min() >= 0 and X_new.max() <= 1
    lengths = np.array(LENGTHS)[:, None]
    assert_allclose(X_new * lengths, np.round(X_new * lengths), atol=1e-5)
    assert np.any((X_new > 0) & (X_new < 1))


# 3. What fit learns, and what it costs
# -------------------------------------


def _fitted_state(features):
    return (
        features.models_,
        features.weights_,
        features.token_mean_,
        features.token_scale_,
        features.difference_mean_,
        features.difference_scale_,
    )


def _assert_same_state(a, b):
    models_a, weights_a, *stats_a = _fitted_state(a)
    models_b, weights_b, *stats_b = _fitted_state(b)
    assert models_a == models_b
    for wa, wb in zip(weights_a, weights_b, strict=True):
        assert wa.keys() == wb.keys() == {"input", "layers"}
        assert_array_equal(wa["input"], wb["input"])
        for la, lb in zip(wa["layers"], wb["layers"], strict=True):
            assert la.keys() == lb.keys()
            for name in la:
                assert_array_equal(la[name], lb[name])
    for sa, sb in zip(stats_a, stats_b, strict=True):
        assert (sa is None) == (sb is None)
        if sa is not None:
            assert_allclose(sa, sb, rtol=1e-12)


def test_fit_learns_only_the_token_statistics():
    """Two inputs with the same tokens in other sequences and places: the same
    fitted transformer, although the sequences differ."""
    X = make_3d(n=6, n_tokens=5)
    rng = np.random.default_rng(1)
    tokens = X.reshape(-1, X.shape[2])[rng.permutation(30)]
    shuffled = tokens.reshape(X.shape)
    # without the differences, whose statistics depend on the order
    a = RandomAttentionFeatures(**SMALL, difference=False, random_state=0).fit(X)
    b = RandomAttentionFeatures(**SMALL, difference=False, random_state=0)
    b.fit(shuffled)
    _assert_same_state(a, b)
    assert not np.allclose(a.transform(X), a.transform(shuffled))


def test_fit_without_scaling_does_not_depend_on_the_values():
    a = RandomAttentionFeatures(**SMALL, scale_tokens=False, random_state=0)
    b = RandomAttentionFeatures(**SMALL, scale_tokens=False, random_state=0)
    _assert_same_state(a.fit(make_3d(seed=0)), b.fit(make_3d(seed=1) * 100))
    assert a.token_mean_ is None and a.token_scale_ is None
    assert a.difference_mean_ is None and a.difference_scale_ is None


def test_difference_statistics_are_those_of_the_first_differences():
    """Of every valid token's difference from the one before, the first
    token's (0) included; None when no model reads the differences."""
    X = make_ragged(width=3)
    features = RandomAttentionFeatures(**SMALL, difference=True).fit(X)
    differences = np.vstack([np.diff(x, axis=0, prepend=x[:1]) / 2 for x in X])
    assert_allclose(features.difference_mean_, differences.mean(axis=0), rtol=1e-12)
    assert_allclose(features.difference_scale_, differences.std(axis=0), rtol=1e-12)
    assert not np.allclose(features.difference_scale_, features.token_scale_)
    without = RandomAttentionFeatures(**SMALL, difference=False).fit(X)
    assert without.difference_mean_ is None and without.difference_scale_ is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_differences_of_the_largest_tokens_do_not_overflow(dtype):
    """Tokens of alternating sign near the dtype's largest number: their
    differences exceed it, their halves do not; the features are those of the
    same tokens divided by 2**100 (the standardisation removes the scale)."""
    big = np.finfo(dtype).max * dtype(0.75)
    X = np.array([[[big], [-big], [big / 4], [-big / 2]]], dtype=dtype)
    X = np.concatenate([X, X[:, ::-1] * dtype(0.5), X * dtype(0.25)])
    features = RandomAttentionFeatures(
        n_models=4, n_heads=1, head_dim=4, difference=True, random_state=0
    )
    X_new = features.fit_transform(X)
    assert np.all(np.isfinite(features.difference_mean_))
    assert np.all(np.isfinite(features.difference_scale_))
    small = np.ldexp(X.astype(np.float64), -100).astype(dtype)
    assert_allclose(X_new, features.fit_transform(small), **FLOAT32)


@pytest.mark.parametrize(
    "X, drawn",
    [
        (make_3d(width=8), {False, True}),  # short series, rows of an image
        (make_ragged(width=1), {False, True}),
        # series of a median length above 32 (read in patches): every model
        (make_3d(n_tokens=33, width=2), {True}),
        (make_ragged(lengths=(10, 33, 40), width=1), {True}),
        (make_3d(n_tokens=32, width=2), {False, True}),
        (make_3d(width=9), {False}),  # word vectors
        (make_3d(n_tokens=40, width=9), {False}),
        (make_table(n_features=8), {False}),  # columns of a table
    ],
    ids=[
        "8-features",
        "ragged-series",
        "median-33",
        "ragged-median-33",
        "median-32",
        "9-features",
        "9-features-40-tokens",
        "table",
    ],
)
def test_auto_difference_half_the_models_all_for_long_series(X, drawn):
    features = RandomAttentionFeatures(n_models=20, **SMALL_MODEL, random_state=0)
    features.fit(X)
    assert {config["difference"] for config in features.models_} == drawn


@pytest.mark.parametrize(
    "X, statistics",
    [
        (make_3d(width=8), ["max", "ppv"]),  # short series, rows of an image
        (make_ragged(width=1), ["max", "ppv"]),
        (make_table(n_features=8), ["max", "ppv"]),  # scalar columns
        (make_table(n_features=40), ["max", "ppv"]),  # even many of them
        (make_3d(width=9), ["mean", "max", "min", "first", "last"]),  # word vectors
        # series of a median length above 32 (read in patches): and the LSPV
        (make_3d(n_tokens=33, width=2), ["max", "ppv", "lspv"]),
        (make_ragged(lengths=(10, 33, 40), width=1), ["max", "ppv", "lspv"]),
        (make_3d(n_tokens=32, width=2), ["max", "ppv"]),
        (make_3d(n_tokens=40, width=9), ["mean", "max", "min", "first", "last"]),
    ],
    ids=[
        "8-features",
        "ragged-series",
        "table",
        "wide-table",
        "9-features",
        "long-series",
        "long-ragged",
        "32-tokens",
        "long-9-features",
    ],
)
def test_auto_pooling_by_token_width_and_length(X, statistics):
    """statistics="auto" computes exactly the statistics it names in
    statistics_: ROCKET's max and PPV up to 8 features, with MultiRocket's
    LSPV on series of a median length above 32; mean, max, min, first and
    last above 8."""
    auto = RandomAttentionFeatures(**SMALL, random_state=0).fit(X)
    assert auto.statistics_ == statistics
    explicit = RandomAttentionFeatures(**SMALL, statistics=statistics, random_state=0)
    assert_array_equal(auto.transform(X), explicit.fit(X).transform(X))
    names = auto.get_feature_names_out()
    assert_array_equal(names, explicit.get_feature_names_out())
    assert names[0] == f"randomattentionfeatures_m0_{statistics[0]}_0"
    assert names[-1].startswith(f"randomattentionfeatures_tokens_{statistics[-1]}_")


def test_differences_change_the_features_of_reordered_tokens():
    """Without positions, a model is blind to the order of the tokens; with
    the differences it is not."""
    X = make_3d()
    reversed_ = X[:, ::-1].copy()
    kwargs = dict(n_models=2, n_heads=1, head_dim=4, positional_encoding=None)
    kwargs["patch_size"] = None  # a patch reads its tokens in order
    blind = RandomAttentionFeatures(**kwargs, difference=False, random_state=0)
    assert_allclose(blind.fit_transform(X), blind.transform(reversed_), **FLOAT32)
    seeing = RandomAttentionFeatures(**kwargs, difference=True, random_state=0)
    assert not np.allclose(seeing.fit(X).transform(X), seeing.transform(reversed_))


def test_token_statistics_are_those_of_the_valid_tokens():
    X = make_ragged(width=3)
    features = RandomAttentionFeatures(**SMALL, random_state=0).fit(X)
    tokens = np.vstack(X)
    assert_allclose(features.token_mean_, tokens.mean(axis=0), rtol=1e-12)
    assert_allclose(features.token_scale_, tokens.std(axis=0), rtol=1e-12)
    table = make_table(n=8, n_features=6)
    per_column = RandomAttentionFeatures(**SMALL, features_per_token=2).fit(table)
    assert per_column.token_mean_.shape == (3, 2)
    assert_allclose(per_column.token_mean_.ravel(), table.mean(axis=0), rtol=1e-12)


def test_sample_weight_weighs_the_token_statistics():
    X = make_3d()
    weights = np.array([2.0, 1.0, 1.0, 1.0, 1.0])
    weighted = RandomAttentionFeatures(**SMALL, random_state=0)
    repeated = RandomAttentionFeatures(**SMALL, random_state=0)
    weighted.fit(X, sample_weight=weights)
    repeated.fit(np.concatenate([X[:1], X]))
    _assert_same_state(weighted, repeated)


def _peak_bytes(function):
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_fit_runs_no_model_without_ppv():
    """A model on one sequence of 4096 tokens holds tens of MB of activations;
    fit holds about the sequence (32 KB) and the weights, unless it needs the
    PPV thresholds: then it runs the models as transform does, in as much
    memory, and keeps a sample of their outputs."""
    X = make_3d(n=1, n_tokens=4096, width=1)
    # patch_size=None: models that read the 4096 tokens, not patches of them
    kwargs = dict(n_models=4, patch_size=None, random_state=0)
    features = RandomAttentionFeatures(**kwargs, statistics=["mean", "max"])
    fit_peak = _peak_bytes(lambda: features.fit(X))
    transform_peak = _peak_bytes(lambda: features.transform(X))
    assert transform_peak > 10 * 2**20
    assert fit_peak < 2**20
    with_ppv = RandomAttentionFeatures(**kwargs)  # "auto": max and PPV
    assert 10 * 2**20 < _peak_bytes(lambda: with_ppv.fit(X)) < 1.5 * transform_peak


def test_thresholds_are_quantiles_of_the_models_outputs(monkeypatch):
    """Each feature's threshold is the quantile, at its level, of the model's
    valid per-token outputs on the training sequences (all of them up to 16):
    the median at level 0.5; between the quartiles at the default levels."""
    import skattn._random_features.models as random_features

    X = [x.astype(np.float32) for x in make_ragged(lengths=(9, 2, 5, 13, 4, 7))]
    kwargs = dict(n_models=3, n_heads=2, head_dim=4, statistics="ppv", random_state=0)
    kwargs["patch_size"] = None  # the reference reads one token per time point
    default = RandomAttentionFeatures(**kwargs).fit(X)
    assert default.thresholds_[0].shape == (3, 8)  # n_thresholds=3
    monkeypatch.setattr(random_features, "THRESHOLD_LEVELS", (0.5, 0.5))
    median = RandomAttentionFeatures(**kwargs).fit(X)
    for index in range(3):
        X_model = _model_input(median, index, X)
        reference = _attention_transformer(median, index, "mean").fit(X_model)
        outputs = np.vstack(reference.transform_sequences(X_model))  # valid only
        expected = np.median(outputs, axis=0)
        for threshold in median.thresholds_[index]:
            assert_allclose(threshold, expected, **FLOAT32)
        low, high = np.quantile(outputs, [0.25, 0.75], axis=0)
        thresholds = default.thresholds_[index]
        assert np.all((low - 1e-6 <= thresholds) & (thresholds <= high + 1e-6))
        assert not np.allclose(thresholds, median.thresholds_[index])
        # each feature's thresholds are at levels of their own
        assert not np.allclose(thresholds[0], thresholds[1])


def test_zero_weight_sequences_are_never_sampled():
    """The PPV thresholds of a fit with zero weights are those of a fit
    without those sequences (and with the others' weights, which weigh the
    median length of the patches), however far out they are (unstandardised
    tokens: the weights change nothing else)."""
    X = [x.astype(np.float32) for x in make_ragged(lengths=(9, 2, 5, 13, 4, 7))]
    X[1] = X[1] * 1e3
    weights = np.array([1.0, 0.0, 2.0, 1.0, 0.0, 3.0])
    kept = [x for x, w in zip(X, weights, strict=True) if w > 0]
    kwargs = dict(**SMALL, statistics="ppv", scale_tokens=False, random_state=0)
    weighted = RandomAttentionFeatures(**kwargs).fit(X, sample_weight=weights)
    without = RandomAttentionFeatures(**kwargs).fit(kept, sample_weight=[1, 2, 1, 3])
    every = RandomAttentionFeatures(**kwargs).fit(X)
    for index in range(SMALL["n_models"]):
        assert_allclose(
            weighted.thresholds_[index], without.thresholds_[index], **FLOAT32
        )
    assert not np.allclose(every.thresholds_[0], weighted.thresholds_[0])


@pytest.mark.parametrize("thresholds", [None, 0.3, "per-feature", "per-row"])
def test_pool_lspv_is_the_longest_stretch_above_the_thresholds(rng, thresholds):
    """The longest run of valid tokens above each threshold, over the valid
    length; padding never counts, whatever its values."""
    from skattn._model.pooling import pool_lspv, pool_ppv

    tokens = rng.standard_normal((4, 9, 3)).astype(np.float32)
    lengths = np.array([9, 5, 1, 7])
    params = {
        None: None,
        0.3: 0.3,
        "per-feature": rng.standard_normal(3).astype(np.float32),
        "per-row": rng.standard_normal((2, 3)).astype(np.float32),
    }[thresholds]
    if params is None or np.ndim(params) == 0:  # one threshold for all
        rows = [np.full(3, 0 if params is None else params)]
    else:  # one per feature, or rows of them
        rows = list(np.atleast_2d(params))
    expected = [
        np.concatenate([_longest_stretch(x[:n] > row) / n for row in rows])
        for x, n in zip(tokens, lengths, strict=True)
    ]
    lspv = pool_lspv(tokens, lengths, params)[0]
    assert lspv.dtype == np.float32
    assert_allclose(lspv, expected, rtol=1e-6)
    padded = tokens.copy()
    padded[np.arange(9)[None, :] >= lengths[:, None]] = 1e6  # all above
    assert_array_equal(pool_lspv(padded, lengths, params)[0], lspv)
    # never more than the PPV: a stretch is some of the tokens above
    assert np.all(lspv <= pool_ppv(tokens, lengths, params)[0] + 1e-7)


def test_every_statistic_the_parameters_accept_has_a_pooling():
    from skattn._model.pooling import STATISTICS
    from skattn._random_features.configs import STATISTIC_NAMES, THRESHOLDED

    assert tuple(STATISTICS) == STATISTIC_NAMES
    assert THRESHOLDED <= set(STATISTIC_NAMES)


def test_column_quantiles_are_numpys_quantiles(rng):
    from skattn._model.pooling import column_quantiles

    values = rng.standard_normal((37, 5))
    levels = np.array([0.0, 0.25, 0.5, 0.9, 1.0])
    expected = [np.quantile(values[:, j], q) for j, q in enumerate(levels)]
    assert_allclose(column_quantiles(values, levels), expected, rtol=1e-14)
    assert_array_equal(column_quantiles(values[:1], levels), values[0])
    # several levels per column: a row of quantiles per row of levels
    several = np.array([levels, levels[::-1]])
    reversed_ = [np.quantile(values[:, j], q) for j, q in enumerate(levels[::-1])]
    assert_allclose(column_quantiles(values, several), [expected, reversed_])


def test_first_models_do_not_depend_on_n_models():
    X = make_ragged()
    few = RandomAttentionFeatures(**{**MIXED, "n_models": 3}, random_state=0).fit(X)
    many = RandomAttentionFeatures(**{**MIXED, "n_models": 7}, random_state=0).fit(X)
    assert many.models_[:3] == few.models_
    X_few, X_many = few.transform(X), many.transform(X)
    tokens = (
        7 * 4
    )  # token_statistics="auto": 7 statistics of the 4 token features, last
    models = X_few.shape[1] - tokens
    assert_array_equal(X_many[:, :models], X_few[:, :models])
    assert_array_equal(X_many[:, -tokens:], X_few[:, -tokens:])


# 4. Determinism and invariances
# ------------------------------


@pytest.mark.parametrize("kind", ["table", "3d", "ragged"])
def test_same_seed_gives_identical_features(kind):
    X = make_input(kind)
    a = RandomAttentionFeatures(**MIXED, random_state=0).fit_transform(X)
    b = RandomAttentionFeatures(**MIXED, random_state=0).fit(X).transform(X)
    assert_array_equal(a, b)


def test_different_seeds_give_different_features():
    X = make_3d()
    a = RandomAttentionFeatures(**SMALL, random_state=0).fit_transform(X)
    b = RandomAttentionFeatures(**SMALL, random_state=1).fit_transform(X)
    assert a.shape == b.shape
    assert not np.allclose(a, b)


def test_random_state_instance_draws_new_models_on_refit():
    X = make_3d()
    features = RandomAttentionFeatures(**SMALL, random_state=np.random.RandomState(0))
    first = features.fit_transform(X)
    assert not np.allclose(features.fit_transform(X), first)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("positional_encoding", [*RANDOM_POSITIONAL_ENCODINGS, None])
def test_padding_invariance(positional_encoding, causal, dtype):
    X = make_ragged(dtype=dtype)
    features = RandomAttentionFeatures(
        **SMALL,
        positional_encoding=positional_encoding,
        causal=causal,
        statistics=["mean", "max", "ppv"],
        random_state=0,
    ).fit(X)
    together = features.transform(X)
    alone = np.vstack([features.transform([seq]) for seq in X])
    assert_allclose(together, alone, **FLOAT32)


@pytest.mark.filterwarnings("ignore:Could not adhere to working_memory")
@pytest.mark.parametrize("kind", ["table", "3d", "ragged"])
def test_small_working_memory_gives_same_result_in_several_batches(kind):
    X = make_input(kind)
    features = RandomAttentionFeatures(**MIXED, random_state=0).fit(X)
    expected = features.transform(X)
    with config_context(working_memory=0.001):  # one row per batch
        batched = features.transform(X)
    assert_allclose(batched, expected, **FLOAT32)


def test_thread_count_does_not_change_results():
    """Several batches, computed one by one on one thread and side by side on
    two: identical features."""
    rng = np.random.default_rng(0)
    X = [rng.standard_normal((n, 3)) for n in rng.integers(5, 40, size=30)]
    features = RandomAttentionFeatures(**MIXED, random_state=0).fit(X)
    with config_context(working_memory=0.05), threadpool_limits(limits=1):
        one = features.transform(X)
    with config_context(working_memory=0.05), threadpool_limits(limits=2):
        two = features.transform(X)
    assert_array_equal(one, two)


# 5. dtypes and formats
# ---------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["table", "3d", "ragged"])
def test_float_dtype_is_preserved(kind, dtype):
    X = make_input(kind, dtype)
    features = RandomAttentionFeatures(**MIXED, random_state=0)
    assert features.fit_transform(X).dtype == dtype
    assert features.transform(X).dtype == dtype


@pytest.mark.parametrize("kind", ["table", "3d", "ragged"])
def test_float32_close_to_float64(kind):
    X = make_input(kind)
    X32 = [x.astype(np.float32) for x in X] if kind == "ragged" else X.astype("f4")
    features = RandomAttentionFeatures(
        **SMALL, statistics=["mean", "max"], random_state=0
    )
    assert_allclose(
        features.fit_transform(X32), features.fit_transform(X), rtol=1e-4, atol=1e-4
    )


def test_integer_input_becomes_float64():
    X = (make_3d() * 10).astype(np.int64)
    assert RandomAttentionFeatures(**SMALL).fit_transform(X).dtype == np.float64


@pytest.mark.parametrize("container", [list, tuple, object_array])
def test_ragged_containers_give_same_results(container):
    X = make_ragged()
    features = RandomAttentionFeatures(**MIXED, random_state=0)
    expected = features.fit_transform(X)
    assert_allclose(features.fit_transform(container(X)), expected, rtol=1e-14)


def test_3d_batch_equals_list_of_its_rows():
    X = make_3d()
    features = RandomAttentionFeatures(**MIXED, random_state=0)
    assert_allclose(
        features.fit_transform(X), features.fit_transform(list(X)), **FLOAT32
    )


def test_table_reads_features_per_token_columns_as_one_token():
    table = make_table(n_features=8)
    features = RandomAttentionFeatures(**SMALL, features_per_token=2, random_state=0)
    features.fit(table)
    assert features.n_features_in_ == 8
    assert features.weights_[0]["input"].shape == (2, 8)
    # the same tokens as a 3D array, with statistics per column in both (and
    # no differences, which difference="auto" draws for sequences only)
    sequences = RandomAttentionFeatures(  # nor patches, never read in a table
        **SMALL, scale_tokens=False, difference=False, patch_size=None, random_state=0
    )
    columns = RandomAttentionFeatures(
        **SMALL, scale_tokens=False, features_per_token=2, random_state=0
    )
    assert_allclose(
        columns.fit_transform(table),
        sequences.fit_transform(table.reshape(5, 4, 2)),
        **FLOAT32,
    )


def test_dataframe_sets_feature_names_and_matches_array():
    table = make_table(n_features=6)
    frame = pd.DataFrame(table, columns=[f"c{i}" for i in range(6)])
    features = RandomAttentionFeatures(**SMALL, random_state=0).fit(frame)
    assert_array_equal(features.feature_names_in_, frame.columns)
    expected = RandomAttentionFeatures(**SMALL, random_state=0).fit_transform(table)
    assert_allclose(features.transform(frame), expected, rtol=1e-14)


# 6. Feature names and shapes
# ---------------------------


def test_feature_names_name_model_statistic_and_feature():
    features = RandomAttentionFeatures(
        n_models=2,
        n_heads=[1, 2],
        head_dim=2,
        statistics=["max", "ppv"],
        random_state=3,
    ).fit(make_3d())
    names = features.get_feature_names_out()
    assert names.dtype == object
    # a model's PPV at each of its 3 thresholds; the tokens' PPV at zero
    expected = [
        f"randomattentionfeatures_m{m}_{statistic}_{i}"
        for m, config in enumerate(features.models_)
        for statistic in ["max", "ppv0", "ppv1", "ppv2"]
        for i in range(config["n_heads"] * config["head_dim"])
    ]
    tokens = [
        f"randomattentionfeatures_tokens_{statistic}_{i}"
        for statistic in ["max", "ppv"]
        for i in range(4)  # the token width
    ]
    assert_array_equal(names, expected + tokens)
    n_out = features.transform(make_3d()).shape[1]
    assert len(names) == features.n_features_out_ == n_out
    features.set_params(token_statistics=None).fit(make_3d())
    assert_array_equal(features.get_feature_names_out(), expected)
    assert features.transform(make_3d()).shape[1] == len(expected)
    # one threshold: the PPV is named as the other statistics
    features.set_params(n_thresholds=1).fit(make_3d())
    one = [
        name.replace("_ppv0_", "_ppv_")
        for name in expected
        if "_ppv1_" not in name and "_ppv2_" not in name
    ]
    assert_array_equal(features.get_feature_names_out(), one)
    assert features.transform(make_3d()).shape[1] == len(one)


def test_banded_models_are_banded_attention_transformers():
    """Each model draws its window and its dilation ("auto": ROCKET's
    exponential scale, up to a reach of half the series); its mean pooling is
    the banded AttentionTransformer's with the same weights."""
    X = make_3d(n=6, n_tokens=40, width=1)
    features = RandomAttentionFeatures(
        n_models=6,
        attention_window=[3, 5],
        patch_size=None,
        difference=False,
        statistics=["mean"],
        token_statistics=None,
        random_state=0,
    ).fit(X)
    bands = [(m["attention_window"], m["attention_dilation"]) for m in features.models_]
    assert {window for window, _ in bands} <= {3, 5}
    for window, dilation in bands:  # reach at most half the 40 points
        assert 1 <= dilation and (window // 2) * dilation <= 19.5
    assert len(set(bands)) > 1
    X_new = features.transform(X)
    for index, config in enumerate(features.models_):
        width = config["n_heads"] * config["head_dim"]
        reference = _attention_transformer(features, index, "mean").fit(X)
        block = X_new[:, index * width : (index + 1) * width]
        assert_allclose(block, reference.transform(X), **FLOAT32)


def test_full_models_draw_as_without_a_band():
    """attention_window=None draws no band: the models, and so the features,
    are those of the default's full attention on short sequences."""
    X = make_ragged()
    default = RandomAttentionFeatures(**SMALL, random_state=0).fit(X)
    explicit = RandomAttentionFeatures(
        **SMALL, attention_window=None, attention_dilation=2, random_state=0
    ).fit(X)
    assert default.models_ == explicit.models_
    assert "attention_window" not in default.models_[0]
    assert_array_equal(default.transform(X), explicit.transform(X))


def test_auto_window_bands_the_models_of_series_read_in_patches():
    """attention_window="auto" on series read in patches (a median length
    above 32): every model attends in a band of 17 patches at its own dilation
    (its reach at most half its patches), the models otherwise those of full
    attention; the features are those of attention_window=17."""
    X = make_3d(n=6, n_tokens=250, width=1)
    auto = RandomAttentionFeatures(n_models=8, random_state=0).fit(X)
    full = clone(auto).set_params(attention_window=None).fit(X)
    seventeen = clone(auto).set_params(attention_window=17).fit(X)
    assert auto.models_ == seventeen.models_
    assert_array_equal(auto.transform(X), seventeen.transform(X))
    for config, unbanded in zip(auto.models_, full.models_, strict=True):
        drawn = dict(config)
        window = drawn.pop("attention_window")
        dilation = drawn.pop("attention_dilation")
        assert drawn == unbanded
        size, stride = config["patch_size"] or 1, config["patch_stride"] or 1
        n_patches = 1 + (250 - size) // stride
        assert window == 17 and 8 * dilation <= (n_patches - 1) / 2
    assert len({m["attention_dilation"] for m in auto.models_}) > 1


@pytest.mark.parametrize(
    "X",
    [make_3d(n=6, n_tokens=32, width=1), make_3d(n=6, n_tokens=250, width=9)],
    ids=["too-short-for-patches", "wide-tokens"],
)
def test_auto_window_attends_over_every_token_of_other_input(X):
    """attention_window="auto" keeps full attention for series too short to be
    read in patches and for tokens too wide for them."""
    auto = RandomAttentionFeatures(**SMALL, random_state=0).fit(X)
    full = clone(auto).set_params(attention_window=None).fit(X)
    assert auto.models_ == full.models_
    assert all("attention_window" not in model for model in auto.models_)
    assert_array_equal(auto.transform(X), full.transform(X))


def test_token_statistics_chooses_the_tokens_own_columns():
    """A list pools the tokens with its statistics, whatever the models'."""
    X = make_3d()
    auto = RandomAttentionFeatures(**SMALL, statistics=["max", "ppv"])
    auto.set_params(random_state=0).fit(X)
    chosen = clone(auto).set_params(token_statistics=["ppv", "mean"]).fit(X)
    assert auto.token_statistics_ == ("max", "ppv")
    assert chosen.token_statistics_ == ("ppv", "mean")
    names = chosen.get_feature_names_out()
    width = 4  # the token width of make_3d
    assert [n.split("_")[-2] for n in names[-2 * width :]] == ["ppv"] * 4 + ["mean"] * 4
    n_models = auto.n_features_out_ - 2 * width
    out_auto, out_chosen = auto.transform(X), chosen.transform(X)
    assert_array_equal(out_chosen[:, :n_models], out_auto[:, :n_models])
    # the tokens' PPV is the same column in both
    assert_array_equal(out_chosen[:, n_models : n_models + width], out_auto[:, -width:])
    with pytest.raises(ValueError, match="unknown \\['median'\\]"):
        clone(auto).set_params(token_statistics=["median"]).fit(X)


def test_transform_keeps_the_fitted_structure_after_set_params():
    X = make_ragged()
    features = RandomAttentionFeatures(**SMALL, difference=True, random_state=0)
    expected = features.fit_transform(X)
    names = features.get_feature_names_out()
    features.set_params(
        difference=False, token_statistics=None, scale_tokens=False, statistics="ppv"
    )
    assert_array_equal(features.transform(X), expected)
    assert_array_equal(features.get_feature_names_out(), names)


def test_set_output_pandas_for_sequences():
    X = make_ragged()
    features = RandomAttentionFeatures(**SMALL, random_state=0)
    X_new = features.set_output(transform="pandas").fit_transform(X)
    assert isinstance(X_new, pd.DataFrame)
    assert list(X_new.columns) == list(features.get_feature_names_out())
    assert X_new.shape == (4, 3 * 4 * 8 + 2 * 4)  # max and 3 PPVs per model


def test_default_shape():
    features = RandomAttentionFeatures(random_state=0).fit(make_3d())
    # models x (max, 3 PPVs) x width, then the max and PPV of the 4 token features
    expected = features.n_models * 4 * 4 * 16 + 2 * 4
    assert features.transform(make_3d()).shape == (5, expected)


# 7. Errors and the caller's input
# --------------------------------


def _with(X, index, value):
    X = X.copy()
    X[index] = value
    return X


BAD_INPUTS = {
    "nan-table": (_with(make_table(), (1, 2), np.nan), r"Input X contains NaN"),
    "inf-3d": (_with(make_3d(), (1, 2, 0), -np.inf), r"Input X contains infinity"),
    "nan-ragged": (
        [make_ragged()[0], _with(make_ragged()[1], (2, 1), np.nan)],
        r"Input X\[1\] contains NaN",
    ),
    "empty-list": ([], "X is empty"),
    "empty-3d": (np.empty((0, 4, 3)), r"0 sample\(s\)"),
    "zero-length-sequence": (
        [np.ones((2, 3)), np.empty((0, 3))],
        r"X\[1\] is a zero-length sequence",
    ),
    "no-tokens": (np.empty((3, 0, 2)), r"shape \(3, 0, 2\) has no tokens"),
    "4d": (np.zeros((2, 3, 4, 5)), r"X has 4 dimensions \(shape \(2, 3, 4, 5\)\)"),
    "1d": (np.zeros(5), "Expected 2D array, got 1D array"),
    "mixed-widths": (
        [np.ones((2, 4)), np.ones((2, 5))],
        r"X\[1\] has 5 features per token, but X\[0\] has 4",
    ),
}


@pytest.mark.parametrize(
    "X, match", list(BAD_INPUTS.values()), ids=list(BAD_INPUTS.keys())
)
def test_bad_input_raises_the_errors_of_attention_transformer(X, match):
    with pytest.raises(ValueError, match=match):
        RandomAttentionFeatures(**SMALL).fit(X)
    with pytest.raises(ValueError, match=match):
        AttentionTransformer().fit(X)


def test_sparse_input_raises_type_error():
    with pytest.raises(TypeError, match="Sparse data was passed"):
        RandomAttentionFeatures(**SMALL).fit(sp.csr_matrix(make_table()))


@pytest.mark.parametrize(
    "fit_kind, transform_kind, match",
    [
        ("3d", "table", "was fitted on sequences and cannot transform a table"),
        ("table", "ragged", "was fitted on a table and cannot transform sequences"),
    ],
)
def test_other_kind_of_input_is_rejected(fit_kind, transform_kind, match):
    features = RandomAttentionFeatures(**SMALL).fit(make_input(fit_kind))
    X = make_table(n_features=4) if transform_kind == "table" else make_ragged()
    with pytest.raises(ValueError, match=match):
        features.transform(X)


def test_other_token_width_is_rejected():
    features = RandomAttentionFeatures(**SMALL).fit(make_ragged(width=4))
    msg = "X has 5 features per token, but RandomAttentionFeatures is expecting 4"
    with pytest.raises(ValueError, match=msg):
        features.transform(make_ragged(width=5))


@pytest.mark.parametrize("method", ["transform", "get_feature_names_out"])
def test_not_fitted(method):
    args = [make_3d()] if method == "transform" else []
    with pytest.raises(NotFittedError):
        getattr(RandomAttentionFeatures(), method)(*args)


@pytest.mark.parametrize(
    "params, name",
    [
        ({"n_models": 0}, "n_models"),
        ({"n_heads": 0}, "n_heads"),
        ({"head_dim": 1.5}, "head_dim"),
        ({"positional_encoding": "learned"}, "positional_encoding"),
        ({"causal": "yes"}, "causal"),
        ({"statistics": "cls"}, "statistics"),
        ({"scale_tokens": 1.0}, "scale_tokens"),
        ({"features_per_token": 0}, "features_per_token"),
        ({"patch_size": 0}, "patch_size"),
        ({"patch_size": "big"}, "patch_size"),
        ({"patch_stride": 0}, "patch_stride"),
        ({"patch_stride": "half"}, "patch_stride"),
        ({"n_thresholds": 0}, "n_thresholds"),
        ({"difference": "yes"}, "difference"),
    ],
)
def test_invalid_parameters(params, name):
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter"):
        RandomAttentionFeatures(**params).fit(make_3d())


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_heads": []}, "n_heads must be a positive int or a non-empty list"),
        ({"n_heads": [2, 0]}, "n_heads must be a positive int or a non-empty list"),
        ({"head_dim": [4, 2.5]}, "head_dim must be a positive int or a non-empty"),
        (
            {"positional_encoding": ["sinusoidal", "learned"]},
            "positional_encoding must be "
            + ", ".join(map(repr, RANDOM_POSITIONAL_ENCODINGS))
            + " or None (or 'auto', alone)",
        ),
        ({"causal": [True, 1]}, "causal must be a bool or a non-empty list"),
        ({"statistics": ["mean", "cls"]}, "statistics must be one of"),
        ({"statistics": ["max", "max"]}, "without repeats"),
        ({"statistics": []}, "statistics must be one of"),
        ({"patch_size": [2, 0]}, "patch_size must be a positive int, 'auto', None"),
        ({"patch_size": [2.5]}, "patch_size must be a positive int, 'auto', None"),
        ({"patch_size": []}, "patch_size must be a positive int, 'auto', None"),
        ({"patch_stride": [2, 0]}, "patch_stride must be a positive int, 'auto'"),
        ({"patch_stride": []}, "patch_stride must be a positive int, 'auto'"),
        ({"difference": [True, 1]}, "difference must be a bool, 'auto' or a non-empty"),
        ({"difference": []}, "difference must be a bool, 'auto' or a non-empty"),
    ],
)
def test_invalid_candidate_lists(params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        RandomAttentionFeatures(**params).fit(make_3d())


CALLER_INPUTS = {
    "table": lambda: make_table(n_features=8),
    "3d": lambda: make_3d(),
    "list": lambda: make_ragged(),
    "tuple": lambda: tuple(make_ragged()),
    "object-array": lambda: object_array(make_ragged()),
    "dataframe": lambda: pd.DataFrame(make_table(n_features=8)),
}


@pytest.mark.parametrize("scale_tokens", [True, False])
@pytest.mark.parametrize("kind", list(CALLER_INPUTS))
def test_caller_input_is_never_modified(kind, scale_tokens):
    X = CALLER_INPUTS[kind]()
    original = CALLER_INPUTS[kind]()
    features = RandomAttentionFeatures(
        **MIXED,
        scale_tokens=scale_tokens,
        features_per_token=2 if kind in ("table", "dataframe") else None,
        random_state=0,
    )
    features.fit(X)
    features.transform(X)
    if isinstance(X, pd.DataFrame):
        pd.testing.assert_frame_equal(X, original)
    elif isinstance(X, np.ndarray) and X.dtype != object:
        assert_array_equal(X, original)
    else:
        for x, o in zip(X, original, strict=True):
            assert_array_equal(x, o)


# 8. In a pipeline
# ----------------


def test_documented_pipeline_learns_an_order_task():
    """The label is whether the first half of a sequence has a larger mean than
    the second: the positions matter, the mean of all tokens says nothing."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 16, 2))
    y = (X[:, :8, 0].mean(axis=1) > X[:, 8:, 0].mean(axis=1)).astype(int)
    ridge = RidgeClassifierCV(alphas=np.logspace(-3, 3, 10))
    model = make_pipeline(
        RandomAttentionFeatures(n_models=8, random_state=0), StandardScaler(), ridge
    )
    assert cross_val_score(model, X, y, cv=3).mean() > 0.7
    assert cross_val_score(ridge, X.mean(axis=1), y, cv=3).mean() < 0.6


@pytest.mark.parametrize("window", [10**5, 10**400], ids=["1e5", "1e400"])
def test_a_window_beyond_the_series_draws_and_costs_a_covering_band(window):
    """A window far longer than the series: a dilation of 1 drawn (its reach
    counted within the series), and the features, and the memory, of a band
    that just covers the series, which is full attention."""
    X = make_3d(n=6, n_tokens=40, width=1)
    params = dict(
        n_models=3,
        patch_size=None,
        difference=False,
        statistics=["mean"],
        token_statistics=None,
        random_state=0,
    )
    results, peaks = [], []
    for band in (81, window):
        features = RandomAttentionFeatures(attention_window=band, **params).fit(X)
        assert [m["attention_dilation"] for m in features.models_] == [1, 1, 1]
        features.transform(X)  # the kernels compiled, if so
        tracemalloc.start()
        results.append(features.transform(X))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert_array_equal(results[1], results[0])
    assert peaks[1] <= 1.5 * peaks[0]
