"""Inputs at the edges of the numbers: each test failed before its fix.

Huge finite scores or values in the kernels,
batch axes that do not broadcast, flags that are not bools, tokens of no
feature in multi_head_attention, token statistics and layer norms of tokens
beyond 1e154, float64 tokens beyond float32's range in RandomAttentionFeatures,
the L-BFGS verbose table, an Adam epsilon that underflows float32, and
unordered collections as lists of candidates.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import contextlib
import io
import re
import warnings

import numpy as np
import pytest

from skattn import (
    AttentionTransformer,
    RandomAttentionFeatures,
    multi_head_attention,
    scaled_dot_product_attention,
)


def _reference_attention(q, k, v, scale=None):
    """softmax(q k^T scale) v in long double, whose range holds 1e400 scores."""
    q, k, v = (np.asarray(a, dtype=np.longdouble) for a in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


@pytest.mark.parametrize(
    "dtype, magnitude", [(np.float64, 1e200), (np.float32, 1e20), (np.float16, 1e4)]
)
@pytest.mark.parametrize("scale", [None, -1.0])
def test_kernel_scores_beyond_the_dtype_range(dtype, magnitude, scale):
    """Finite queries and keys whose scores overflow (1e200 in float64, 1e20
    in float32) returned NaN: scores of inf minus a row maximum of inf. They
    are computed divided by a power of two per row, shifted, multiplied back."""
    rng = np.random.default_rng(0)
    q = (rng.standard_normal((2, 5, 4)) * magnitude).astype(dtype)
    k = (rng.standard_normal((2, 7, 4)) * magnitude / 1e3).astype(dtype)
    v = rng.standard_normal((2, 7, 3)).astype(dtype)
    expected, expected_weights = _reference_attention(q, k, v, scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, weights = scaled_dot_product_attention(
            q, k, v, scale=scale, return_weights=True
        )
        folded = scaled_dot_product_attention(q, k, v, scale=scale)
    atol = 10 * np.finfo(dtype).eps
    np.testing.assert_allclose(out, expected.astype(np.float64), atol=atol)
    np.testing.assert_allclose(folded, expected.astype(np.float64), atol=atol)
    np.testing.assert_allclose(weights, expected_weights.astype(np.float64), atol=atol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_values_near_the_largest_float(dtype):
    """Values near the dtype's largest number (1.7e308, 3e38) gave inf: the
    unnormalised sum over the keys overflowed before its division."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 4, 3)).astype(dtype)
    big = np.finfo(dtype).max * 0.9
    v = np.full((2, 4, 3), -big, dtype=dtype)
    v[..., 0] = big
    for return_weights in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = scaled_dot_product_attention(q, q, v, return_weights=return_weights)
        out = out[0] if return_weights else out
        np.testing.assert_allclose(out / big, v / big, rtol=4 * np.finfo(dtype).eps)


def test_kernel_batch_axes_that_do_not_broadcast_are_named():
    """numpy's "shape mismatch ... arg 0 with shape (2,) and arg 1 with shape
    (3,)" named neither the arrays nor the axes."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 5, 4))
    k = rng.standard_normal((3, 7, 4))
    with pytest.raises(ValueError, match=r"batch.*query \(2, 5, 4\), key \(3, 7, 4\)"):
        scaled_dot_product_attention(q, k, k)
    mask = np.ones((3, 5, 5), dtype=bool)
    with pytest.raises(ValueError, match=r"batch.*query.*mask \(3, 5, 5\)"):
        scaled_dot_product_attention(q, q, q, mask=mask)
    w = np.eye(4)
    with pytest.raises(ValueError, match=r"batch.*x \(2, 5, 4\), mask \(3, 5, 5\)"):
        multi_head_attention(q, w, w, w, n_heads=2, mask=mask)


def test_kernel_return_weights_must_be_a_bool():
    """return_weights="no" returned the weights (a truthy string)."""
    q = np.ones((3, 2))
    with pytest.raises(TypeError, match="return_weights must be True or False"):
        scaled_dot_product_attention(q, q, q, return_weights="no")
    with pytest.raises(TypeError, match="return_weights must be True or False"):
        multi_head_attention(
            q, np.eye(2), np.eye(2), np.eye(2), n_heads=1, return_weights="no"
        )


def test_multi_head_attention_tokens_of_no_feature():
    """D = 0 raised numpy's "cannot reshape array of size 0 into shape (0)":
    the projections of empty tokens are zeros, and so is the output."""
    empty = np.empty((0, 4))
    out, weights = multi_head_attention(
        np.empty((2, 3, 0)), empty, empty, empty, n_heads=2, return_weights=True
    )
    assert out.shape == (2, 3, 4) and not out.any()
    np.testing.assert_allclose(weights, 1 / 3)


def test_token_statistics_of_huge_tokens():
    """Tokens of 1e300 had an infinite token_scale_ (their squares overflow):
    every token standardised to 0 and the output was one constant vector."""
    X = np.random.default_rng(0).standard_normal((6, 4))
    model = AttentionTransformer(objective=None, random_state=0)
    expected = model.fit(X).transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        huge = model.fit(X * 1e300).transform(X * 1e300)
    np.testing.assert_allclose(huge, expected, atol=1e-12)
    np.testing.assert_allclose(
        model.token_scale_.ravel() / 1e300, X.std(axis=0), rtol=1e-12
    )


@pytest.mark.parametrize("power", [-700, -420, -200, 0, 200, 420, 800])
@pytest.mark.parametrize("differences", [False, True])
def test_token_moments_scale_exactly_with_a_power_of_two(power, differences):
    """The moments of tokens times 2**k are the moments times 2**k, bit for bit,
    from subnormal-squared to overflowing-squared magnitudes (the scaled and
    the plain paths of token_moments agree), over the valid tokens of ragged
    sequences (NumPy's mean and standard deviation of the stacked tokens),
    with one feature at another magnitude than the others. Tiny scales are
    kept: constancy is relative to the feature's mean, as in scikit-learn."""
    from skattn._model.sequences import token_moments

    rng = np.random.default_rng(0)
    X = [rng.standard_normal((n, 3)) + [0.0, 5.0, -2.0] for n in (4, 9, 1, 6)]
    for x in X:
        x[:, 2] *= 2.0**40  # another exponent than the other two
    mean, scale = token_moments(X, differences=differences, budget_bytes=2**30)
    factor = 2.0**power
    big_mean, big_scale = token_moments(
        [x * factor for x in X], differences=differences, budget_bytes=2**30
    )
    np.testing.assert_array_equal(big_mean, mean * factor)
    np.testing.assert_array_equal(big_scale, scale * factor)
    if not differences:
        tokens = np.vstack(X)
        np.testing.assert_allclose(mean, tokens.mean(axis=0), rtol=1e-14)
        np.testing.assert_allclose(scale, tokens.std(axis=0), rtol=1e-14)
    # a 3D array of one length: the same numbers as the list of its rows
    X3 = rng.standard_normal((5, 7, 3)) * factor
    np.testing.assert_array_equal(
        token_moments(X3, differences=differences, budget_bytes=2**30),
        token_moments(list(X3), differences=differences, budget_bytes=2**30),
    )


@pytest.mark.parametrize("factor", [1e-13, 1e-200])
def test_tiny_tokens_are_standardised_as_any_others(factor):
    """Features of standard deviation below 1e-12 counted as constant: scale
    1, and outputs that differed by 1e-14 between samples. Their scale is
    kept, as StandardScaler keeps it; a constant feature still gets 1."""
    X = np.random.default_rng(0).standard_normal((6, 4))
    X[:, 3] = 0.3  # constant
    model = AttentionTransformer(objective=None, random_state=0)
    expected = model.fit(X).transform(X)
    tiny = model.fit(X * factor).transform(X * factor)
    np.testing.assert_allclose(tiny, expected, rtol=1e-10, atol=1e-12)
    scale = model.token_scale_.ravel()
    np.testing.assert_allclose(scale[:3] / factor, X[:, :3].std(axis=0), rtol=1e-12)
    assert scale[3] == 1.0


def test_random_features_float64_tokens_beyond_float32():
    """Float64 tokens of 1e300 gave NaN features: cast to float32 (inf) before
    their standardisation. They are standardised in float64 first."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 4))
    features = RandomAttentionFeatures(n_models=2, random_state=0)
    expected = features.fit(X).transform(X)
    huge = features.fit(X * 1e300).transform(X * 1e300)
    np.testing.assert_allclose(huge, expected, atol=1e-5)


def test_unstandardised_huge_tokens_are_computed_or_refused():
    """scale_tokens=False with tokens of 1e300 returned NaN features without
    a word: the layer norm's squares overflowed. The layer norm now scales
    such rows by a power of two (AttentionTransformer computes them, as it
    does the same tokens divided by 1e290, up to the layer norm's epsilon);
    RandomAttentionFeatures, in float32, cannot hold them and says so, in fit
    when it runs its models for the PPV thresholds, else in transform."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 4))
    model = AttentionTransformer(objective=None, scale_tokens=False, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = model.fit(X * 1e300).transform(X * 1e300)
    np.testing.assert_allclose(out, model.fit(X * 1e10).transform(X * 1e10), atol=1e-6)
    features = RandomAttentionFeatures(n_models=1, scale_tokens=False, random_state=0)
    message = r"scale_tokens=False.*scale_tokens=True"
    with pytest.raises(ValueError, match=message), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        features.fit(X * 1e300)  # its PPV thresholds: the models run in fit
    features.set_params(statistics=["mean", "max"]).fit(X * 1e300)  # they do not
    with pytest.raises(ValueError, match=message), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        features.transform(X * 1e300)


def test_huge_init_weights_are_named_when_the_tokens_are_in_range():
    """Weights of 1e160 given in init overflow a transform of tokens of
    |x| <= 3.9: the error names the weights and init, not the tokens."""
    X = np.random.default_rng(0).uniform(-3.9, 3.9, (6, 5, 64))
    huge = {"value": np.eye(64) * 1e160, "output": np.eye(64) * 1e160}
    model = AttentionTransformer(
        objective=None, layer_norm=None, init=huge, random_state=0
    ).fit(X)
    with pytest.raises(ValueError) as error, np.errstate(all="ignore"):
        model.transform(X)
    message = str(error.value)
    assert re.search(r"its weights \(largest \|w\| = 1e\+160\)", message)
    assert "init" in message and "rescale X" not in message


def test_lbfgs_verbose_counts_its_iterations():
    """The L-BFGS table printed iteration 0 on every line (n_iter_ is set at
    the end of the fit)."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((10, 3)), np.arange(10) % 2
    model = AttentionTransformer(
        solver="lbfgs", max_iter=3, verbose=True, warm_start=True, random_state=0
    )
    for _ in range(2):
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            model.fit(X, y)
        printed = re.findall(r"\]\s+(\d+)\s+\S+e[+-]\d+", output.getvalue())
        n_before = model.n_iter_ - len(printed)
        assert [int(i) for i in printed] == list(range(n_before + 1, model.n_iter_ + 1))


def test_adam_epsilon_below_float32_is_named():
    """epsilon=1e-300 rounds to zero in float32 (Adam's dtype): the fit
    raised 'non-finite weights', blaming the tokens or the learning rate."""
    X, y = np.random.default_rng(0).standard_normal((10, 3)), np.arange(10) % 2
    with pytest.raises(ValueError, match=r"epsilon=1e-300 .*larger epsilon"):
        AttentionTransformer(epsilon=1e-300, max_iter=2).fit(X, y)


@pytest.mark.parametrize(
    "params",
    [{"n_heads": {1: 2}}, {"statistics": {"mean", "max"}}, {"head_dim": {8, 16}}],
)
def test_random_features_candidates_must_be_ordered(params):
    """A set of candidates was accepted (its order, and so the models and the
    columns, changes with the process's hash seed) and a dict's keys were read
    as the candidates."""
    features = RandomAttentionFeatures(n_models=1, **params)
    name = next(iter(params))
    with pytest.raises(TypeError, match=f"{name} must be a value or a list"):
        features.fit(np.ones((3, 2)))


@pytest.mark.parametrize("seed", range(5))
def test_weighted_median_length_is_the_median_of_the_repeated_lengths(seed):
    """Integer weights: np.median of each length repeated its weight times
    (zero: absent); weights divided by a power of two: the same median."""
    from skattn._model.sequences import series_median_length

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    lengths = rng.integers(1, 50, size=n)
    weights = rng.integers(0, 4, size=n).astype(float)
    weights[rng.integers(n)] += 1  # some positive
    sequences = np.zeros((n, 50, 1))
    expected = np.median(np.repeat(lengths, weights.astype(int)))
    assert series_median_length(sequences, lengths, weights) == expected
    assert series_median_length(sequences, lengths, weights / 4) == expected
    assert series_median_length(sequences, lengths, None) == np.median(lengths)
    assert series_median_length(np.zeros((n, 50, 9)), lengths, weights) is None
