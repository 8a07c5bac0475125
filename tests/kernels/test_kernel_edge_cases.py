"""Regression tests of the attention kernels on inputs that once gave NaN, inf,
a wrong number or an internal error: huge scores in the backward pass, float16,
a negative scale, empty dimensions, and arguments that are not real arrays.

Each test failed before its fix; the property tests of ``test_properties.py``
cover the same ground on random shapes."""

import warnings

import numpy as np
import pytest
from helpers import reference_batched
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse

from skattn import (
    AttentionTransformer,
    multi_head_attention,
    scaled_dot_product_attention,
)
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward


def reference_gradients(q, k, v, d_out, scale):
    """Gradients of softmax(scale Q K^T) V, in float64, without tiles."""
    q, k, v, d_out = (a.astype(np.float64) for a in (q, k, v, d_out))
    scores = scale * q @ np.swapaxes(k, -1, -2)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    d_probs = d_out @ np.swapaxes(v, -1, -2)
    d_scores = probs * (d_probs - (d_probs * probs).sum(axis=-1, keepdims=True))
    return (
        scale * d_scores @ k,
        scale * np.swapaxes(d_scores, -1, -2) @ q,
        np.swapaxes(probs, -1, -2) @ d_out,
    )


@pytest.mark.parametrize("n_keys", [16, 64])  # the plain and the folded backward
def test_backward_of_huge_scores_is_finite_and_exact(n_keys):
    """Scores of about 1e10 in float32: the recomputed scores are off by
    hundreds, so exp(scores - lse) overflowed to inf and every gradient to NaN.
    The tiles at risk are normalised from their own scores instead."""
    rng = np.random.default_rng(0)
    q, k = (rng.standard_normal((2, n_keys, 8)) * 1e5 for _ in range(2))
    v, d_out = (rng.standard_normal((2, n_keys, 8)) for _ in range(2))
    q, k, v, d_out = (a.astype(np.float32) for a in (q, k, v, d_out))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow, no invalid value
        out, lse, _ = attention_forward(q, k, v)
        grads = attention_backward(d_out, q, k, v, out, lse)
    scale = 1 / np.sqrt(8)
    # the softmax is one-hot: exact gradients of the values, and gradients of
    # the queries and keys of the order of the scores' rounding
    atol = 64 * np.finfo(np.float32).eps * scale * 1e5 * 5 * np.abs(d_out).max() * 3
    for grad, expected in zip(
        grads, reference_gradients(q, k, v, d_out, scale), strict=True
    ):
        assert np.isfinite(grad).all()
        assert_allclose(grad, expected, rtol=1e-5, atol=atol)
    assert_allclose(grads[2], reference_gradients(q, k, v, d_out, scale)[2], atol=1e-5)


def test_backward_of_ordinary_scores_keeps_the_saved_lse():
    """Ordinary scores stay on the fast path: exp(scale q.k - lse), exactly as
    before (the renormalised path would round differently)."""
    rng = np.random.default_rng(1)
    q, k, v, d_out = (rng.standard_normal((3, 40, 8)) for _ in range(4))
    out, lse, _ = attention_forward(q, k, v)
    grads = attention_backward(d_out, q, k, v, out, lse)
    for grad, expected in zip(
        grads, reference_gradients(q, k, v, d_out, 8**-0.5), strict=True
    ):
        assert_allclose(grad, expected, rtol=1e-10, atol=1e-12)


def test_training_on_huge_float32_inputs_is_finite():
    """Unscaled float32 tokens of 1e5 with post-norm layers: the first Adam
    steps' backward pass overflowed and fit raised 'non-finite parameter
    weights' (before that error existed, it returned NaN weights)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 40, 4))
    y = (X[:, :, 0].mean(axis=1) > 0).astype(int)
    X = (X * 1e5).astype(np.float32)
    est = AttentionTransformer(
        head_dim=2, scale_tokens=False, patch_size=None, max_iter=5, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # not converged
        est.fit(X, y)
    assert np.isfinite(est.loss_curve_).all()
    weights = [est.input_weights_, est.head_coef_] + [
        value for layer in est.layers_ for value in layer.values()
    ]
    assert all(np.isfinite(w).all() for w in weights)
    assert np.isfinite(est.transform(X)).all()


def test_float16_is_computed_in_float32_and_returned_in_float16():
    """The folded shift's underflow guard (exp(-60)) is 0 in float16: a row
    whose sum underflowed was divided by 0 and returned NaN."""
    k = np.array([[10.0, 0.0], [0.0, 1.0]], dtype=np.float16)
    q = np.array([[0.0, 3.0]], dtype=np.float16)
    v = np.array([[1.0], [2.0]], dtype=np.float16)
    out, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    assert out.dtype == weights.dtype == np.float16
    expected, expected_weights = scaled_dot_product_attention(
        *(a.astype(np.float32) for a in (q, k, v)), return_weights=True
    )
    assert_array_equal(out, expected.astype(np.float16))
    assert_array_equal(weights, expected_weights.astype(np.float16))
    reference, _ = reference_batched(*(a.astype(np.float64) for a in (q, k, v)))
    assert_allclose(out, reference, rtol=1e-3)

    x = np.array([[[0.0, 3.0], [1.0, 0.5], [2.0, -1.0]]], dtype=np.float16)
    w = np.array([[10.0, 0.0], [0.0, 1.0]], dtype=np.float16)
    out = multi_head_attention(x, w, w, w, n_heads=1)
    assert out.dtype == np.float16
    expected = multi_head_attention(x.astype(np.float32), w, w, w, n_heads=1)
    assert_array_equal(out, expected.astype(np.float16))


def test_negative_scale_bounds_the_shift():
    """The folded shift was scale * |q| * max|k|, below the scores for a
    negative scale: exp overflowed and the output was inf."""
    q = np.array([[20.0, 0.0]])
    k = np.array([[-20.0, 0.0], [1.0, 0.0]])
    v = np.array([[1e20], [1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = scaled_dot_product_attention(q, k, v, scale=-0.85)
    expected, _ = reference_batched(q, k, v, scale=-0.85)
    assert_allclose(out, expected, rtol=1e-12)


# values far below 1 in float32: two orders of magnitude, and the smallest
# normal number (1.18e-38) up to rounding
SMALL_VALUES = [1e-25, 1e-30, 1.5e-38]


@pytest.mark.parametrize("magnitude", SMALL_VALUES)
def test_values_of_equal_scores_are_averaged_whatever_their_magnitude(magnitude):
    """Equal scores, each far below its upper bound (queries orthogonal to
    the keys): the output is the mean of the values, in float32 as in
    float64, for a column of small values beside a column of ones."""
    q = np.array([[8.8, 0.0]], dtype=np.float32)
    k = np.tile(np.array([[0.0, 8.8]], dtype=np.float32), (64, 1))
    v = np.tile(np.array([[magnitude, 1.0]], dtype=np.float32), (64, 1))
    # the mean of 64 float32 values: up to 64 roundings of half an ulp
    # (3.8e-6), in an order that depends on the BLAS kernel
    assert_allclose(scaled_dot_product_attention(q, k, v), v[:1], rtol=4e-6)


def small_values_attention(magnitude, dtype):
    """Queries along two axes, keys (mostly) along the two others: the
    largest score of each row 14 to 42 below its Cauchy-Schwarz bound (the
    folded shift, 50). Values of ``magnitude``; in float32, the float64
    inputs rounded; key padding."""
    rng = np.random.default_rng(0)
    q = np.zeros((2, 3, 64, 4))
    q[..., :2] = rng.standard_normal((2, 3, 64, 2))
    q *= 10 / np.linalg.norm(q, axis=-1, keepdims=True)
    k = rng.standard_normal((2, 3, 64, 4)) * [0.1, 0.1, 1, 1]
    k *= 10 / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((2, 3, 64, 2)) * magnitude
    d_out = rng.standard_normal((2, 3, 64, 2))
    mask = (np.arange(64) < np.array([64, 40])[:, None])[:, None, None, :]
    arrays = (a.astype(np.float32).astype(dtype) for a in (q, k, v, d_out))
    return *arrays, mask


@pytest.mark.parametrize("magnitude", SMALL_VALUES)
def test_float32_attention_of_small_values_equals_float64(magnitude):
    """The output and the gradients of values of 1e-25 to 1e-38 in float32
    agree with float64 (where nothing underflows) to float32 rounding, relative
    to their largest magnitude."""
    results = {}
    for dtype in (np.float32, np.float64):
        q, k, v, d_out, mask = small_values_attention(magnitude, dtype)
        out, lse, _ = attention_forward(q, k, v, mask=mask)
        grads = attention_backward(d_out, q, k, v, out, lse, mask=mask)
        results[dtype] = (out, *grads)
    for got, expected in zip(results[np.float32], results[np.float64], strict=True):
        size = np.abs(expected).max()
        assert size > 0
        assert_allclose(got / size, expected / size, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "shapes",
    [
        ((0, 4), (5, 4), (5, 2)),  # T_q = 0
        ((3, 4), (0, 4), (0, 2)),  # T_k = 0
        ((3, 0), (5, 0), (5, 2)),  # d_k = 0
        ((2, 0, 3, 4), (2, 0, 5, 4), (2, 0, 5, 2)),  # an empty batch axis
    ],
    ids=["T_q=0", "T_k=0", "d_k=0", "batch=0"],
)
def test_empty_dimensions(shapes):
    """Empty queries, keys or key width gave internal errors ('range() arg 3
    must not be zero', a reduction without identity, ZeroDivisionError)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape) for shape in shapes)
    out, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    expected_out, expected_weights = reference_batched(q, k, v)
    assert out.shape == expected_out.shape and weights.shape == expected_weights.shape
    assert_allclose(out, expected_out, atol=1e-15)
    assert_allclose(weights, expected_weights, atol=1e-15)
    if shapes[0][-1] == 0:  # no key width: every score is 0, uniform weights
        assert_allclose(out, np.broadcast_to(v.mean(axis=-2, keepdims=True), out.shape))
    if shapes[1][-2] == 0:  # no key: the output is 0, as for a fully masked row
        assert_array_equal(out, 0)
    d_out = rng.standard_normal(out.shape)
    out, lse, _ = attention_forward(q, k, v)
    grads = attention_backward(d_out, q, k, v, out, lse)
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape]
    assert all(np.isfinite(g).all() for g in grads)


def test_empty_sequences_in_multi_head_attention():
    """T = 0 tokens: empty outputs, no division by zero while batching."""
    w = np.eye(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, weights = multi_head_attention(
            np.zeros((3, 0, 4)), w, w, w, n_heads=2, return_weights=True
        )
    assert out.shape == (3, 0, 4) and weights.shape == (3, 2, 0, 0)


@pytest.mark.parametrize(
    "scale, error, match",
    [
        ("0.5", TypeError, "scale must be a real number or None, got '0.5'"),
        (np.ones(3), TypeError, r"scale must be a real number or None, got array"),
        (True, TypeError, "scale must be a real number or None, got True"),
        (np.nan, ValueError, "scale must be finite, got nan"),
        (-np.inf, ValueError, "scale must be finite, got -inf"),
    ],
)
def test_bad_scale_is_named(scale, error, match):
    q = np.ones((2, 3))
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(q, q, q, scale=scale)


def test_numpy_scalar_scale_is_accepted():
    q = np.random.default_rng(0).standard_normal((3, 4))
    assert_array_equal(
        scaled_dot_product_attention(q, q, q, scale=np.float32(0.5)),
        scaled_dot_product_attention(q, q, q, scale=0.5),
    )


@pytest.mark.parametrize("argument", ["query", "key", "value"])
def test_complex_input_is_rejected_by_name(argument):
    """Complex input lost its imaginary part with only numpy's warning."""
    arrays = {name: np.ones((2, 3)) for name in ("query", "key", "value")}
    arrays[argument] = arrays[argument] + 1j
    with pytest.raises(TypeError, match=f"{argument} must be an array of real"):
        scaled_dot_product_attention(**arrays)


@pytest.mark.parametrize("argument", ["x", "w_query", "w_key", "w_value", "w_output"])
def test_complex_input_is_rejected_by_multi_head_attention(argument):
    arrays = {name: np.eye(2) for name in ("w_query", "w_key", "w_value", "w_output")}
    arrays["x"] = np.ones((3, 2))
    arrays[argument] = arrays[argument] * (1 + 1j)
    with pytest.raises(TypeError, match=f"{argument} must be an array of real"):
        multi_head_attention(**arrays, n_heads=1)


def test_sparse_and_non_numeric_input_is_named():
    """A sparse matrix gave 'must have at least 2 dimensions, got shape ()'."""
    q = np.ones((2, 3))
    with pytest.raises(TypeError, match=r"key is a sparse csr_matrix.*key.toarray\(\)"):
        scaled_dot_product_attention(q, sparse.csr_matrix(q), q)
    with pytest.raises(TypeError, match=r"x is a sparse csr_array"):
        multi_head_attention(
            sparse.csr_array(q), np.eye(3), np.eye(3), np.eye(3), n_heads=1
        )
    with pytest.raises(TypeError, match="value must be an array of real numbers, got"):
        scaled_dot_product_attention(q, q, [["a", "b", "c"], ["d", "e", "f"]])
    with pytest.raises(TypeError, match="x must be an array of real numbers, got"):
        multi_head_attention(
            (row for row in q), np.eye(3), np.eye(3), np.eye(3), n_heads=1
        )


def test_causal_and_n_heads_must_be_what_they_say():
    """causal='yes' was read as True; n_heads=True as one head."""
    q = np.ones((2, 3))
    with pytest.raises(TypeError, match="causal must be True or False, got 'yes'"):
        scaled_dot_product_attention(q, q, q, causal="yes")
    with pytest.raises(TypeError, match="causal must be True or False, got 1"):
        multi_head_attention(q, np.eye(3), np.eye(3), np.eye(3), n_heads=1, causal=1)
    with pytest.raises(
        ValueError, match="n_heads must be a positive integer, got True"
    ):
        multi_head_attention(q, np.eye(3), np.eye(3), np.eye(3), n_heads=True)
    # numpy booleans are booleans
    assert_array_equal(
        scaled_dot_product_attention(q, q, q, causal=np.bool_(True)),
        scaled_dot_product_attention(q, q, q, causal=True),
    )
