"""Property-based tests: the kernels against a loop reference, and ``transform``
on random ragged input, over shapes, masks, scales and dtypes drawn by
hypothesis (T = 1, d = 1, empty dimensions, rows with no allowed key, causal
masks, any sign and size of scale, float16/32/64).

The examples are derandomized (the same ones on every run, see the profiles in
``conftest.py``); to search further, run
``pytest tests/test_properties.py --hypothesis-profile=long``.

Tolerances follow the conditioning of the softmax: a score ``s = scale * q.k``
computed in floating point is off by up to about ``(d + 2) * eps * |scale|
|q| max|k|``, and a probability by that much relatively. Where that bound is
large (huge scores in float32), the comparison is loose and only finiteness,
the range of the weights and their row sums are exact properties."""

import numpy as np
import pytest
from helpers import reference_batched
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from skattn import (
    AttentionTransformer,
    multi_head_attention,
    scaled_dot_product_attention,
)
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward
from skattn._model.options import REGISTRIES
from skattn._model.pooling import needs_fixed_length

# The values of the options a ragged input takes.
RAGGED_POOLINGS = [
    name for name in REGISTRIES["pooling"].names() if not needs_fixed_length(name)
]
POSITIONAL_ENCODINGS = [*REGISTRIES["positional_encoding"].names(), None]
LAYER_NORMS = [*REGISTRIES["layer_norm"].names(), None]

DTYPES = [np.float16, np.float32, np.float64]
SCALES = st.one_of(
    st.none(),
    st.sampled_from([-1e3, -2.0, -0.1, 0.0, 1e-3, 0.3, 1.0, 50.0]),
    st.floats(-10, 10, allow_nan=False),
)


@st.composite
def attention_problems(draw, dtypes=DTYPES, max_magnitude=30.0):
    """Queries, keys, values, a mask or None, causal, scale, of random shapes."""
    dtype = draw(st.sampled_from(dtypes))
    batch = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    n_queries, n_keys = draw(st.integers(0, 6)), draw(st.integers(0, 6))
    d_k, d_v = draw(st.integers(0, 5)), draw(st.integers(0, 3))
    magnitude = draw(st.sampled_from([1e-3, 1.0, max_magnitude]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.standard_normal(batch + (n_queries, d_k)) * magnitude
    k = rng.standard_normal(batch + (n_keys, d_k)) * magnitude
    v = rng.standard_normal(batch + (n_keys, d_v))
    mask = None
    if draw(st.booleans()):
        # a mask for all batch elements or one each; False rows are common
        mask_shape = draw(st.sampled_from([(), batch])) + (n_queries, n_keys)
        mask = rng.random(mask_shape) < draw(st.sampled_from([0.2, 0.7]))
    q, k, v = (a.astype(dtype) for a in (q, k, v))
    return q, k, v, mask, draw(st.booleans()), draw(SCALES)


def score_error_bound(q, k, scale, compute_eps):
    """Per query row, the bound of the rounding of its scores (in exponent units)."""
    q, k = q.astype(np.float64), k.astype(np.float64)
    if scale is None:
        scale = 1 / np.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    q_norm = np.linalg.norm(q, axis=-1)  # (..., Tq)
    k_max = np.linalg.norm(k, axis=-1).max(axis=-1, initial=0)[..., None]  # (..., 1)
    return (q.shape[-1] + 2) * compute_eps * abs(scale) * q_norm * k_max


@given(attention_problems())
def test_scaled_dot_product_attention_matches_the_loop_reference(problem):
    q, k, v, mask, causal, scale = problem
    out, weights = scaled_dot_product_attention(
        q, k, v, mask=mask, causal=causal, scale=scale, return_weights=True
    )
    expected_out, expected_weights = reference_batched(
        *(a.astype(np.float64) for a in (q, k, v)), mask, causal, scale
    )
    assert out.dtype == weights.dtype == q.dtype
    assert out.shape == expected_out.shape
    assert weights.shape == expected_weights.shape
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    assert ((weights >= 0) & (weights <= 1)).all()

    compute_eps = np.finfo(np.promote_types(q.dtype, np.float32)).eps
    output_eps = np.finfo(q.dtype).eps
    n_terms = q.shape[-1] + k.shape[-2] + 2
    # each row's probabilities, relatively: its scores' rounding, then sums
    error = 4 * score_error_bound(q, k, scale, compute_eps) + 8 * n_terms * compute_eps
    error = np.broadcast_to(error, expected_out.shape[:-1])[..., None]
    v_max = np.abs(v.astype(np.float64)).max(initial=0)
    assert (np.abs(out - expected_out) <= (error + 2 * output_eps) * v_max).all()
    assert (np.abs(weights - expected_weights) <= error + 2 * output_eps).all()
    # rows sum to 1, or to 0 where no key is allowed
    row_sums = weights.astype(np.float64).sum(axis=-1)
    assert_allclose(row_sums, expected_weights.sum(axis=-1), atol=n_terms * output_eps)


@given(attention_problems(dtypes=[np.float32, np.float64], max_magnitude=3.0))
def test_backward_matches_the_reference_gradients(problem):
    """The tiled backward pass against the gradients of the loop reference's
    softmax, to a bound made of the absolute values of the same products."""
    q, k, v, mask, causal, scale = problem
    rng = np.random.default_rng(0)
    full_mask = (
        None if mask is None else np.broadcast_to(mask, q.shape[:-2] + mask.shape[-2:])
    )
    out, lse, _ = attention_forward(q, k, v, mask=full_mask, causal=causal, scale=scale)
    d_out = rng.standard_normal(out.shape).astype(q.dtype)
    grads = attention_backward(
        d_out, q, k, v, out, lse, mask=full_mask, causal=causal, scale=scale
    )

    q64, k64, v64, d64 = (a.astype(np.float64) for a in (q, k, v, d_out))
    s = (1 / np.sqrt(q.shape[-1]) if q.shape[-1] else 1.0) if scale is None else scale
    _, probs = reference_batched(q64, k64, v64, mask, causal, scale)
    v_t = np.swapaxes(v64, -1, -2)
    d_probs = d64 @ v_t
    delta = (d_probs * probs).sum(axis=-1, keepdims=True)
    d_scores = probs * (d_probs - delta)
    expected = (
        s * d_scores @ k64,
        s * np.swapaxes(d_scores, -1, -2) @ q64,
        np.swapaxes(probs, -1, -2) @ d64,
    )
    # the same products on absolute values bound the rounding of each term
    abs_d_scores = probs * (np.abs(d64) @ np.abs(v_t) + np.abs(delta))
    scale_ = abs(s)
    magnitudes = (
        scale_ * abs_d_scores @ np.abs(k64),
        scale_ * np.swapaxes(abs_d_scores, -1, -2) @ np.abs(q64),
        np.swapaxes(probs, -1, -2) @ np.abs(d64),
    )
    eps = np.finfo(q.dtype).eps
    n_terms = q.shape[-1] + k.shape[-2] + v.shape[-1] + 4
    bound = score_error_bound(q, k, scale, eps)  # relative error of probabilities
    relative = 8 * n_terms * eps + 4 * bound.max(initial=0)
    underflow = 1e6 * np.finfo(q.dtype).tiny
    for grad, value, magnitude in zip(grads, expected, magnitudes, strict=True):
        assert grad.shape == value.shape and np.isfinite(grad).all()
        # probabilities below the smallest normal number flush to 0
        assert (np.abs(grad - value) <= relative * magnitude + underflow).all()


@given(attention_problems(dtypes=DTYPES), st.integers(1, 3))
def test_multi_head_attention_is_attention_per_head(problem, n_heads):
    """Each head is scaled_dot_product_attention of its block of columns."""
    x, _, _, mask, causal, _ = problem
    if x.ndim < 2 or x.shape[-1] == 0:
        return
    rng = np.random.default_rng(1)
    width = n_heads * 2
    w_q, w_k, w_v = (
        rng.standard_normal((x.shape[-1], width)).astype(x.dtype) for _ in range(3)
    )
    if mask is not None:
        mask = mask[..., : x.shape[-2], :][..., :, : x.shape[-2]]
        if mask.shape[-1] != x.shape[-2] or mask.shape[-2] != x.shape[-2]:
            mask = None
    out, weights = multi_head_attention(
        x, w_q, w_k, w_v, n_heads=n_heads, mask=mask, causal=causal, return_weights=True
    )
    assert out.dtype == weights.dtype == x.dtype
    compute = np.promote_types(x.dtype, np.float32)
    q, k, v = (x.astype(compute) @ w.astype(compute) for w in (w_q, w_k, w_v))
    for head in range(n_heads):
        columns = slice(2 * head, 2 * head + 2)
        head_mask = None if mask is None else mask
        head_out, head_weights = scaled_dot_product_attention(
            q[..., columns],
            k[..., columns],
            v[..., columns],
            mask=head_mask,
            causal=causal,
            return_weights=True,
        )
        assert_allclose(
            out[..., columns].astype(np.float64),
            head_out.astype(x.dtype),
            rtol=1e-3 if x.dtype == np.float16 else 1e-4,
            atol=1e-3
            if x.dtype == np.float16
            else 1e-5 * (1 + np.abs(v).max(initial=0)),
        )
        assert_allclose(
            weights[..., head, :, :].astype(np.float64),
            head_weights.astype(x.dtype),
            atol=1e-3 if x.dtype == np.float16 else 1e-5,
        )


def _reads_heads(positional_encoding, n_heads, head_dim):
    """Whether a positional encoding takes heads of ``head_dim`` features
    (rotary positions pair them); None, the default width, is even."""
    if positional_encoding is None or head_dim is None:
        return True
    unit = REGISTRIES["positional_encoding"].get(positional_encoding)
    try:
        unit(1, n_heads * head_dim, n_heads)
    except ValueError:
        return False
    return True


@st.composite
def ragged_inputs(draw):
    """A ragged list of (T_i, D) float sequences and an estimator configuration."""
    n_features = draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(1, 9), min_size=2, max_size=6))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    magnitude = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = [
        (rng.standard_normal((n, n_features)) * magnitude).astype(dtype)
        for n in lengths
    ]
    n_heads = draw(st.integers(1, 3))
    positional_encoding = draw(st.sampled_from(POSITIONAL_ENCODINGS))
    head_dims = [
        head_dim
        for head_dim in (None, 1, 2, 3)
        if _reads_heads(positional_encoding, n_heads, head_dim)
    ]
    params = {
        "n_heads": n_heads,
        "head_dim": draw(st.sampled_from(head_dims)),
        "pooling": draw(st.sampled_from(RAGGED_POOLINGS)),
        "positional_encoding": positional_encoding,
        "causal": draw(st.booleans()),
        "layer_norm": draw(st.sampled_from(LAYER_NORMS)),
        "n_layers": draw(st.integers(1, 2)),
    }
    return X, params


@pytest.mark.filterwarnings("ignore:X \\(a list of:UserWarning")  # one token each
@given(ragged_inputs())
def test_transform_of_ragged_input_is_finite_and_padding_invariant(case):
    """transform of seeded models on random ragged lists: finite, of the
    announced width, in the input dtype, and each sequence's features the same
    whether it is transformed alone or padded in a batch with the others."""
    X, params = case
    est = AttentionTransformer(objective=None, random_state=0, **params).fit(X)
    Z = est.transform(X)
    assert Z.dtype == X[0].dtype
    assert Z.shape == (len(X), len(est.get_feature_names_out()))
    assert np.isfinite(Z).all()
    rtol = 1e-4 if Z.dtype == np.float32 else 1e-10
    for i, sequence in enumerate(X):
        alone = est.transform([sequence])[0]
        assert_allclose(Z[i], alone, rtol=rtol, atol=rtol * np.abs(Z).max())
    # and the input is left as it was
    assert_array_equal(est.transform(X), Z)
