"""Issue 9, adversarial pass: inputs beyond the seven fault classes of the issue.

Each test failed before its fix: huge finite scores or values in the kernels,
batch axes that do not broadcast, flags that are not bools, tokens of no
feature in multi_head_attention, float64 tokens beyond float32's range in
RandomAttentionFeatures, the L-BFGS verbose table, an Adam epsilon that
underflows float32, and unordered collections as lists of candidates.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
import pytest

from skattn import (
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
