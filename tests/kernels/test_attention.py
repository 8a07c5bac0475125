"""Tests of the attention kernels against hand-worked values and a loop reference."""

import itertools
import math
import tracemalloc

import numpy as np
import pytest
from helpers import reference_batched
from numpy.testing import assert_allclose, assert_array_equal

from skattn import multi_head_attention, scaled_dot_product_attention
from skattn._kernels.attention import attention_forward, causal_tile, score_exponents
from skattn._kernels.attention_backward import attention_backward
from skattn._kernels.multi_head import multi_head_backward, multi_head_forward

# The textbook example: three tokens, d = 2.
Q_TEXTBOOK = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
V_TEXTBOOK = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])


def test_textbook_example_by_hand():
    """softmax(Q K^T / sqrt(2)) V for the three-token example, worked by hand."""
    out, weights = scaled_dot_product_attention(
        Q_TEXTBOOK, Q_TEXTBOOK, V_TEXTBOOK, return_weights=True
    )
    # Q K^T = [[1, 0, 1], [0, 1, 1], [1, 1, 2]], each entry divided by sqrt(2)
    a = math.exp(1 / math.sqrt(2))
    b = math.exp(2 / math.sqrt(2))
    expected_weights = np.array(
        [
            [a / (2 * a + 1), 1 / (2 * a + 1), a / (2 * a + 1)],
            [1 / (2 * a + 1), a / (2 * a + 1), a / (2 * a + 1)],
            [a / (2 * a + b), a / (2 * a + b), b / (2 * a + b)],
        ]
    )
    assert_allclose(weights, expected_weights, rtol=1e-12, atol=0)
    assert_allclose(out, expected_weights @ V_TEXTBOOK, rtol=1e-12, atol=0)
    # the rounded numbers of the textbook
    assert_array_equal(
        np.round(weights, 3),
        [[0.401, 0.198, 0.401], [0.198, 0.401, 0.401], [0.248, 0.248, 0.503]],
    )
    assert_array_equal(np.round(out, 3), [[3.0, 4.0], [3.407, 4.407], [3.51, 4.51]])


def test_textbook_example_through_multi_head_attention():
    """One head with identity projections is the bare formula."""
    x = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    w_qk = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # one-hot x @ W = Q
    out, weights = multi_head_attention(
        x, w_qk, w_qk, V_TEXTBOOK, np.eye(2), n_heads=1, return_weights=True
    )
    expected_out, expected_weights = scaled_dot_product_attention(
        Q_TEXTBOOK, Q_TEXTBOOK, V_TEXTBOOK, return_weights=True
    )
    assert_allclose(out, expected_out, rtol=1e-12)
    assert_allclose(weights[0], expected_weights, rtol=1e-12)


@pytest.mark.parametrize(
    "batch, n_q, n_k, d_k, d_v",
    [((), 1, 1, 1, 1), ((), 4, 6, 3, 2), ((2,), 5, 5, 4, 3), ((2, 3), 3, 7, 2, 5)],
)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
def test_sdpa_matches_loop_reference(rng, batch, n_q, n_k, d_k, d_v, causal, use_mask):
    q = rng.standard_normal(batch + (n_q, d_k))
    k = rng.standard_normal(batch + (n_k, d_k))
    v = rng.standard_normal(batch + (n_k, d_v))
    mask = rng.random(batch + (n_q, n_k)) < 0.7 if use_mask else None
    out, weights = scaled_dot_product_attention(
        q, k, v, mask=mask, causal=causal, return_weights=True
    )
    expected_out, expected_weights = reference_batched(q, k, v, mask, causal)
    assert_allclose(out, expected_out, rtol=1e-12, atol=1e-14)
    assert_allclose(weights, expected_weights, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "mask_shape", [(6,), (1, 6), (4, 1), (3, 1, 6), (3, 4, 6), (2, 1, 1, 6)]
)
def test_sdpa_broadcasts_mask(rng, mask_shape):
    """Masks broadcast like numpy arrays against (..., Tq, Tk)."""
    q = rng.standard_normal((3, 4, 2))
    k = rng.standard_normal((3, 6, 2))
    v = rng.standard_normal((3, 6, 3))
    mask = rng.random(mask_shape) < 0.6
    out = scaled_dot_product_attention(q, k, v, mask=mask)
    expected, _ = reference_batched(q, k, v, mask)
    assert out.shape == expected.shape
    assert_allclose(out, expected, rtol=1e-12, atol=1e-14)


def test_sdpa_scale(rng):
    q, k, v = rng.standard_normal((3, 5, 4))
    out = scaled_dot_product_attention(q, k, v, scale=0.3)
    expected, _ = reference_batched(q, k, v, scale=0.3)
    assert_allclose(out, expected, rtol=1e-12)
    # scale=1/sqrt(d) is the default
    assert_allclose(
        scaled_dot_product_attention(q, k, v, scale=0.5),
        scaled_dot_product_attention(q, k, v),
        rtol=1e-15,
    )


def test_weights_rows_sum_to_one(rng):
    q, k, v = rng.standard_normal((3, 2, 9, 4))
    mask = rng.random((2, 9, 9)) < 0.5
    mask[:, :, 0] = True  # every row has a key
    _, weights = scaled_dot_product_attention(
        q, k, v, mask=mask, causal=True, return_weights=True
    )
    assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-14)
    assert np.all(weights[~(mask & np.tril(np.ones((9, 9), bool)))] == 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fully_masked_rows_give_zeros(rng, dtype):
    """A query with no allowed key gets zero output and zero weights, never NaN."""
    q, k, v = rng.standard_normal((3, 4, 3)).astype(dtype)
    mask = np.ones((4, 4), bool)
    mask[1] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(weights))
    assert_array_equal(out[1], 0)
    assert_array_equal(weights[1], 0)
    # the other rows are untouched by the empty one
    expected, _ = reference_batched(q.astype(np.float64), k, v, mask)
    assert_allclose(out, expected, rtol=1e-5 if dtype == np.float32 else 1e-12)
    # causal + mask of the first key: row 0 has no key left
    mask = np.ones((4, 4), bool)
    mask[:, 0] = False
    out = scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    assert_array_equal(out[0], 0)
    assert np.all(np.isfinite(out))


def test_all_masked_lse_is_inf(rng):
    """The kept log-sum-exp makes exp(score - lse) vanish on empty rows."""
    q, k, v = rng.standard_normal((3, 1, 5, 2))
    mask = np.ones((5, 5), bool)
    mask[2] = False
    _, lse, _ = attention_forward(q, k, v, mask=mask, scale=0.5)
    scores = 0.5 * q @ np.swapaxes(k, -1, -2)
    scores[..., ~mask] = -np.inf
    with np.errstate(divide="ignore"):
        expected = np.log(np.exp(scores).sum(axis=-1))
    expected[..., 2] = np.inf
    assert_allclose(lse, expected, rtol=1e-13)


@pytest.mark.parametrize("tile_elements", [1, 5, 7 * 11, 13 * 31, 10**9])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("return_weights", [False, True])
def test_tile_size_invariance(rng, tile_elements, causal, return_weights):
    """Uneven query tiles give the same output, weights and lse as one tile,
    on the folded path (no weights) and on the exact path (weights)."""
    q = rng.standard_normal((2, 3, 29, 4))
    k = rng.standard_normal((2, 3, 31, 4))
    v = rng.standard_normal((2, 3, 31, 5))
    mask = rng.random((2, 1, 29, 31)) < 0.8
    expected = attention_forward(
        q, k, v, mask=mask, causal=causal, tile_elements=10**9, return_weights=True
    )
    result = attention_forward(
        q,
        k,
        v,
        mask=mask,
        causal=causal,
        tile_elements=tile_elements,
        return_weights=return_weights,
    )
    assert (result[2] is None) == (not return_weights)
    for got, want in zip(result[:2], expected[:2], strict=True):
        assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    if return_weights:
        assert_allclose(result[2], expected[2], rtol=1e-13, atol=1e-15)


def test_causal_tile():
    assert_array_equal(causal_tile(1, 3, 4), [[1, 1, 0, 0], [1, 1, 1, 0]])


@pytest.mark.parametrize("factor", [1e3, 1e6])
def test_large_inputs_stay_finite(rng, factor):
    """Max-shifted softmax: inputs times 1e6 still give finite, exact outputs."""
    q, k, v = rng.standard_normal((3, 2, 6, 4)).astype(np.float32)
    out, weights = scaled_dot_product_attention(
        q * factor, k * factor, v, return_weights=True
    )
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(weights))
    assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-6)
    if factor == 1e6:  # hard attention: each query picks its best key
        best = np.argmax(q @ np.swapaxes(k, -1, -2), axis=-1)
        assert_allclose(out, np.take_along_axis(v, best[..., None], axis=-2))


@pytest.mark.parametrize("function", ["sdpa", "mha"])
def test_float32_in_float32_out(rng, function):
    x = rng.standard_normal((2, 5, 4)).astype(np.float32)
    if function == "sdpa":
        out, weights = scaled_dot_product_attention(
            x, x, x, scale=np.float64(0.5), return_weights=True
        )
    else:
        w = rng.standard_normal((4, 4))  # float64 weights are cast to x's dtype
        out, weights = multi_head_attention(
            x, w, w, w, w, n_heads=2, return_weights=True
        )
    assert out.dtype == np.float32
    assert weights.dtype == np.float32


def test_integer_input_computes_in_float64():
    x = np.arange(12).reshape(3, 4) % 3
    out = scaled_dot_product_attention(x, x, x)
    assert out.dtype == np.float64
    assert_allclose(out, scaled_dot_product_attention(*(x.astype(float),) * 3))


@pytest.mark.parametrize("n_heads", [1, 2, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_output", [False, True])
def test_multi_head_matches_per_head_reference(rng, n_heads, causal, with_output):
    """Heads are consecutive column blocks, each an independent attention."""
    head_dim, d_model, n_tokens = 3, 5, 6
    x = rng.standard_normal((2, n_tokens, d_model))
    w_q, w_k, w_v = rng.standard_normal((3, d_model, n_heads * head_dim))
    w_o = rng.standard_normal((n_heads * head_dim, 7)) if with_output else None
    mask = rng.random((2, 1, n_tokens)) < 0.7
    mask[:, :, 0] = True
    out, weights = multi_head_attention(
        x, w_q, w_k, w_v, w_o, n_heads=n_heads, mask=mask, causal=causal,
        return_weights=True,
    )  # fmt: skip
    heads = []
    for h in range(n_heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)
        head_out, head_weights = reference_batched(
            x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols], mask, causal
        )
        heads.append(head_out)
        assert_allclose(weights[:, h], head_weights, rtol=1e-12, atol=1e-14)
    expected = np.concatenate(heads, axis=-1)
    if with_output:
        expected = expected @ w_o
    assert_allclose(out, expected, rtol=1e-11, atol=1e-13)


def test_kernels_do_not_modify_inputs(rng):
    x = rng.standard_normal((2, 5, 4)).astype(np.float32)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    mask = rng.random((2, 1, 5)) < 0.5
    copies = [a.copy() for a in (x, w, mask)]
    multi_head_attention(x, w, w, w, w, n_heads=2, mask=mask, causal=True)
    scaled_dot_product_attention(x, x, x, mask=mask)
    for array, copy in zip((x, w, mask), copies, strict=True):
        assert_array_equal(array, copy)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(mask=np.ones((3, 3), dtype=int)), TypeError, "mask must be a boolean"),
        (dict(mask=np.ones((2, 3), bool)), ValueError, r"mask of shape \(2, 3\)"),
    ],
)
def test_sdpa_rejects_bad_mask(kwargs, error, match):
    x = np.ones((3, 2))
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(x, x, x, **kwargs)


def test_sdpa_rejects_bad_shapes():
    with pytest.raises(ValueError, match="same last dimension d_k, got 2 and 3"):
        scaled_dot_product_attention(np.ones((3, 2)), np.ones((3, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="same number of tokens T_k, got 3 and 4"):
        scaled_dot_product_attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="query must have at least 2 dimensions"):
        scaled_dot_product_attention(np.ones(3), np.ones((3, 3)), np.ones((3, 3)))


def test_mha_rejects_bad_weights():
    x = np.ones((5, 4))
    w = np.ones((4, 6))
    with pytest.raises(ValueError, match=r"w_key must have shape \(D, n_heads"):
        multi_head_attention(x, w, np.ones((3, 6)), w, n_heads=2)
    with pytest.raises(ValueError, match="n_heads=4 must divide the width of w_query"):
        multi_head_attention(x, w, w, w, n_heads=4)
    with pytest.raises(ValueError, match=r"w_output must have shape \(6, d_out\)"):
        multi_head_attention(x, w, w, w, np.ones((4, 4)), n_heads=2)
    with pytest.raises(ValueError, match="n_heads must be a positive integer"):
        multi_head_attention(x, w, w, w, n_heads=0)


def reference_rows(q, k, v, rows, scale):
    """Exact float64 full-softmax attention of some query rows of one head."""
    scores = scale * (q[rows].astype(np.float64) @ k.astype(np.float64).T)
    scores -= scores.max(axis=1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=1, keepdims=True)
    return weights @ v.astype(np.float64)


def test_long_sequence_against_reference(rng):
    """T = 8192 (many tiles, strided head views) against a plain reference."""
    n_tokens, d_model, n_heads = 8192, 16, 2
    head_dim = d_model // n_heads
    x = rng.standard_normal((n_tokens, d_model)).astype(np.float32)
    w_q, w_k, w_v = rng.standard_normal((3, d_model, d_model)).astype(np.float32)
    out = multi_head_attention(x, w_q, w_k, w_v, n_heads=n_heads, causal=True)
    assert out.dtype == np.float32
    rows = np.concatenate([np.arange(8), rng.choice(n_tokens, 56, replace=False)])
    for h in range(n_heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        for row in rows:  # causal: row t sees keys 0..t
            expected = reference_rows(
                q, k[: row + 1], v[: row + 1], [row], 1 / math.sqrt(head_dim)
            )
            assert_allclose(out[row, cols], expected[0], rtol=2e-4, atol=2e-5)


def traced_peak(function):
    """``function()`` and the peak of the memory traced while it ran."""
    tracemalloc.start()
    try:
        result = function()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def test_memory_is_linear_in_sequence_length(kernel_path):
    """One sequence of T and of 2T tokens (T = 4096), width 64, 4 heads: no
    T x T array, and memory growing linearly from T to 2T.

    The 4 heads' float32 scores at 2T would be 1 GiB. The query tiles keep the
    traced peak to a few (T, 64) activations plus a few tiles (4 MiB each) per
    thread: two threads here, whatever the machine. Doubling T adds about 8
    activations of T tokens (tiles do not grow: they get fewer rows); a T x T
    array would add 12 T^2 bytes per head.
    """
    if kernel_path == "short":
        # its scores are 256 rows by all the keys: it runs below 128 keys
        pytest.skip("the short kernel runs only on short sequences")
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    n_tokens, d_model, n_heads, head_dim = 4096, 64, 4, 16
    x = rng.standard_normal((2 * n_tokens, d_model), dtype=np.float32)
    w_q, w_k, w_v, w_o = rng.standard_normal((4, d_model, d_model), dtype=np.float32)
    w_q /= 8
    w_k /= 8
    peaks = []
    for length in (n_tokens, 2 * n_tokens):
        with threadpool_limits(2, user_api="blas"):
            out, peak = traced_peak(
                lambda length=length: multi_head_attention(
                    x[:length], w_q, w_k, w_v, w_o, n_heads=n_heads
                )
            )
        peaks.append(peak)
    activation = n_tokens * d_model * 4  # 1 MiB: (T, 64) float32
    growth = peaks[1] - peaks[0]
    assert growth < 12 * activation, f"T to 2T: +{growth / 2**20:.1f} MiB"
    assert peaks[1] < (2 * n_tokens) ** 2, f"peak {peaks[1] / 2**20:.0f} MiB"
    assert out.shape == (2 * n_tokens, d_model) and out.dtype == np.float32

    rows = [0, 1, 2345, 2 * n_tokens - 1]
    heads = []
    for h in range(n_heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        heads.append(reference_rows(q, k, v, rows, 1 / math.sqrt(head_dim)))
    expected = np.concatenate(heads, axis=1) @ w_o.astype(np.float64)
    assert_allclose(out[rows], expected, rtol=1e-3, atol=1e-4)


def test_folded_tile_matches_exact_tile(rng):
    """The fast path (shift and row sums folded into the products) equals the
    exact max-shifted softmax."""
    from skattn._kernels.attention import (
        attention_tile,
        attention_tile_shift_folded,
        fold_keys_values,
    )

    q = rng.standard_normal((2, 3, 7, 4))
    k = rng.standard_normal((2, 3, 9, 4))
    v = rng.standard_normal((2, 3, 9, 5))
    allowed = rng.random((2, 1, 7, 9)) < 0.8
    allowed[..., 0] = True
    folded = attention_tile_shift_folded(
        q, *fold_keys_values(k, v, 0.5), allowed, (2, 3)
    )
    exact = attention_tile(
        q, np.swapaxes(k, -1, -2), v, allowed, 0.5, (2, 3), return_weights=False
    )
    assert folded[2].all()  # every row folded
    assert_allclose(folded[0], exact[0], rtol=1e-12, atol=1e-15)
    assert_allclose(folded[1], exact[1], rtol=1e-12)


def test_folded_tile_gives_the_same_bits_at_every_call(rng):
    """Twelve calls on the same inputs give identical results, whatever
    memory numpy's temporaries land in. (numpy 1.26's log takes its scalar
    loop, which rounds otherwise, when its output is allocated just past a
    strided input: the row sums, a column of the folded product, are read
    contiguous.)"""
    from skattn._kernels.attention import attention_tile_shift_folded, fold_keys_values

    q, k, v = (rng.standard_normal((40, 2, 25, 4)) for _ in range(3))
    folded_keys = fold_keys_values(k, v, 0.5)
    results = [
        attention_tile_shift_folded(q, *folded_keys, None, (40, 2)) for _ in range(12)
    ]
    for context, lse, folded in results[1:]:
        assert_array_equal(context, results[0][0])
        assert_array_equal(lse, results[0][1])
        assert_array_equal(folded, results[0][2])


def test_underflowing_row_sums_take_the_exact_path(rng):
    """A loose Cauchy-Schwarz shift (one long key orthogonal to the queries)
    makes every exponential underflow: the folded tile refuses its rows, and
    the attention is still exact (the rows are redone by attention_tile)."""
    from skattn._kernels.attention import attention_tile_shift_folded, fold_keys_values

    q = np.zeros((5, 3), dtype=np.float32)
    q[:, 0] = 30.0  # queries along the first axis
    k = rng.standard_normal((12, 3)).astype(np.float32)  # enough keys to fold
    k[0] = [0.0, 0.0, 1e3]  # a long key orthogonal to every query
    v = rng.standard_normal((12, 2)).astype(np.float32)
    scale = np.float32(1 / math.sqrt(3))
    folded = attention_tile_shift_folded(q, *fold_keys_values(k, v, scale), None, ())
    assert not folded[2].any()  # the folded shift underflowed: refused
    out = scaled_dot_product_attention(q, k, v)
    expected, _ = reference_batched(q.astype(np.float64), k, v)
    assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert np.all(np.isfinite(out))


def test_a_sequence_is_computed_as_if_alone_whatever_its_batch_and_tiles(rng):
    """A sequence's attention equals, to the bit, its attention alone (the
    query rows of a tile depend on one sequence's size, never on the batch's),
    beside a sequence whose folded shift underflows (its rows alone take the
    exact path); padded among longer sequences, to float rounding (the
    padding's keys do not change its shift)."""
    from skattn._kernels.attention import attention_forward

    d = 4
    q = rng.standard_normal((3, 2, 40, d)).astype(np.float32)
    k = rng.standard_normal((3, 2, 40, d)).astype(np.float32)
    v = rng.standard_normal((3, 2, 40, 2)).astype(np.float32)
    q[1, ..., 0] = 30.0  # queries along the first axis ...
    q[1, ..., 1:] = 0.0
    k[1, :, 0] = [0.0, 0.0, 0.0, 1e3]  # ... and an orthogonal long key: underflow
    for tile_elements in (2**20, 200, 1000):  # whole sequences, or row tiles
        out, lse, _ = attention_forward(q, k, v, tile_elements=tile_elements)
        for i in range(3):
            one = slice(i, i + 1)  # the batch of one sequence (of 2 heads)
            alone, alone_lse, _ = attention_forward(
                q[one], k[one], v[one], tile_elements=tile_elements
            )
            np.testing.assert_array_equal(out[one], alone)
            np.testing.assert_array_equal(lse[one], alone_lse)
    lengths = np.array([40, 40, 25])
    mask = (np.arange(40) < lengths[:, None])[:, None, None, :]
    k[2, :, 25:] *= 1e3  # long padded keys
    out, _, _ = attention_forward(q, k, v, mask=mask)
    alone, _, _ = attention_forward(q[2, :, :25], k[2, :, :25], v[2, :, :25])
    np.testing.assert_allclose(out[2, :, :25], alone, rtol=1e-5, atol=1e-6)


@pytest.mark.numpy_path
@pytest.mark.parametrize("n_keys", [7, 8])
def test_forward_folds_only_rows_of_enough_keys(rng, monkeypatch, n_keys):
    """Rows of fewer than 2 (d + 1) keys take the exact tile (folding would
    cost more than it saves, as in the backward pass), longer rows the folded
    one; both equal the reference."""
    import skattn._kernels.attention as attention

    calls = []
    folded_tile = attention.attention_tile_shift_folded

    def spy(*args):
        calls.append(args[0].shape)
        return folded_tile(*args)

    monkeypatch.setattr(attention, "attention_tile_shift_folded", spy)
    q = rng.standard_normal((2, 5, 3))
    k = rng.standard_normal((2, n_keys, 3))
    v = rng.standard_normal((2, n_keys, 4))
    out, _, _ = attention_forward(q, k, v)
    assert bool(calls) == (n_keys >= 8) == attention.folds_rows(n_keys, 3)
    expected, _ = reference_batched(q, k, v)
    assert_allclose(out, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("return_weights", [False, True])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_tiles_on_two_threads_give_identical_results(rng, return_weights, p):
    """Tiles computed side by side (BLAS limit 2) equal tiles one by one, and
    so do their dropout masks."""
    from threadpoolctl import threadpool_limits

    q, k, v = rng.standard_normal((3, 2, 300, 8)).astype(np.float32)
    mask = rng.random((2, 1, 300)) < 0.9
    dropout = (p, rng.integers(0, 2**63, size=2, dtype=np.uint64))
    results = []
    for n_threads in (1, 2):
        with threadpool_limits(n_threads, user_api="blas"):
            results.append(
                attention_forward(
                    q,
                    k,
                    v,
                    mask=mask,
                    causal=True,
                    tile_elements=1000,
                    return_weights=return_weights,
                    dropout=dropout,
                )  # fmt: skip
            )
    for one, two in zip(*results, strict=True):
        if one is not None:
            assert_array_equal(one, two)


# Sequences of 6 tokens of width 64: 6000 of them (9 MiB of float32 input
# alone) are more than twice the memory multi_head_attention computes at once
# (CACHE_BYTES), whatever its estimate of the intermediate arrays.
N_CHUNKED = 6000


@pytest.mark.parametrize(
    "x_shape, mask_shape",
    [
        ((N_CHUNKED, 6, 64), None),
        ((N_CHUNKED, 6, 64), (N_CHUNKED, 1, 6)),  # one mask per sequence: sliced
        ((N_CHUNKED, 6, 64), (6, 6)),  # one mask for all
        ((N_CHUNKED // 2, 2, 6, 64), (2, 1, 6)),  # mask over a second batch axis
        ((1, 6, 64), (3, 6, 6)),  # the mask adds batch rows: computed at once
        ((6, 64), (6, 6)),  # one sequence
    ],
)
@pytest.mark.parametrize("return_weights", [False, True])
def test_mha_batch_chunks_do_not_change_results(
    rng, kernel_path, x_shape, mask_shape, return_weights
):
    """multi_head_attention computes cache-sized chunks of the first axis (on
    inputs this large): the same numbers as all sequences at once through the
    kernel (to float32 rounding: BLAS may round products of other shapes
    differently), and bit for bit the same on one thread and on two (chunks
    side by side)."""
    if kernel_path != "numpy" and (return_weights or mask_shape is not None):
        # returned weights, and random masks (not key padding), take the
        # numpy path on both: the same computation as the numpy case
        pytest.skip("the same computation as another case of this test")
    from threadpoolctl import threadpool_limits

    from skattn._kernels.multi_head import multi_head_forward
    from skattn._parallel import CACHE_BYTES

    x = rng.standard_normal(x_shape).astype(np.float32)
    if x.ndim == 3 and x.shape[0] == N_CHUNKED:
        assert x.nbytes > 2 * CACHE_BYTES
    w_q, w_k, w_v = rng.standard_normal((3, 64, 4)).astype(np.float32) / 8
    w_o = rng.standard_normal((4, 3)).astype(np.float32)
    mask = None if mask_shape is None else rng.random(mask_shape) < 0.7
    kwargs = dict(n_heads=2, mask=mask, causal=True, return_weights=return_weights)
    whole_out, cache = multi_head_forward(x, w_q, w_k, w_v, w_o, **kwargs)
    whole = (whole_out, cache["weights"]) if return_weights else (whole_out,)
    chunked = []
    for n_threads in (1, 2):
        with threadpool_limits(n_threads, user_api="blas"):
            result = multi_head_attention(x, w_q, w_k, w_v, w_o, **kwargs)
        chunked.append(result if return_weights else (result,))
    for one, two, want in zip(*chunked, whole, strict=True):
        assert one.dtype == np.float32
        assert one.shape == want.shape
        # float32 rounding of sums of 64 products, relative to the outputs'
        # size: an output near zero after cancellation differs by as much as
        # a large one (3.8e-6 of outputs up to about 5, with OpenBLAS's
        # generic kernels)
        assert_allclose(one, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        assert_array_equal(one, two)
    batch = np.broadcast_shapes(x_shape[:-2], () if mask is None else mask_shape[:-2])
    assert whole[0].shape == batch + (x_shape[-2], 3)


@pytest.mark.parametrize("with_output", [False, True])
@pytest.mark.parametrize("mask_shape", [None, (7, 1, 5), (1, 5, 5)])
def test_mha_chunks_write_their_rows_of_the_output(
    rng, monkeypatch, with_output, mask_shape
):
    """Each chunk of sequences writes its output (the output projection's, or
    the merged heads without one) into its own rows of the result: with one
    sequence a chunk, the same numbers as all of them at once."""
    from skattn._kernels import multi_head

    x = rng.standard_normal((7, 5, 8))
    w_q, w_k, w_v = rng.standard_normal((3, 8, 6))
    w_o = rng.standard_normal((6, 3)) if with_output else None
    mask = None if mask_shape is None else rng.random(mask_shape) < 0.7
    kwargs = dict(n_heads=2, mask=mask)
    whole, _ = multi_head_forward(x, w_q, w_k, w_v, w_o, **kwargs)
    monkeypatch.setattr(multi_head, "CACHE_BYTES", 1)  # one sequence a chunk
    chunked = multi_head_attention(x, w_q, w_k, w_v, w_o, **kwargs)
    assert chunked.shape == (7, 5, 3 if with_output else 6)
    assert_allclose(chunked, whole, rtol=1e-12, atol=1e-13)


def test_projection_and_merged_heads_write_into_the_array_given(rng):
    """project and merge_heads write into ``out`` the numbers they would
    return in a new array, and refuse an ``out`` that is not C-contiguous (its
    reshape would be a copy, and the result lost)."""
    from skattn._kernels.multi_head import merge_heads, project

    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((5, 6)).astype(np.float32)
    heads = rng.standard_normal((3, 2, 4, 3))
    for function, args, shape, dtype in (
        (project, (x, w), (3, 4, 6), np.float32),
        (merge_heads, (heads,), (3, 4, 6), np.float64),
    ):
        out = np.full(shape, np.nan, dtype=dtype)
        assert function(*args, out=out) is out
        assert_array_equal(out, function(*args))
        strided = np.zeros(shape[:-1] + (12,), dtype=dtype)[..., ::2]
        with pytest.raises(ValueError, match="C-contiguous"):
            function(*args, out=strided)


@pytest.mark.parametrize("limit", [1, 2])
def test_tiles_respect_the_blas_thread_limit(rng, limit):
    """With a BLAS limit of 1 every tile runs in the calling thread; with 2, at
    most two threads compute tiles, and BLAS itself runs on one thread."""
    import threading

    from threadpoolctl import threadpool_info, threadpool_limits

    from skattn._parallel import _available_cpus, map_parallel

    seen = []

    def tile(index):
        blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        seen.append((threading.get_ident(), max(blas)))
        return index * 2

    with threadpool_limits(limit, user_api="blas"):
        assert map_parallel(tile, range(20)) == list(range(0, 40, 2))
    threads = {ident for ident, _ in seen}
    assert all(n_threads == 1 for _, n_threads in seen)
    if limit == 1 or _available_cpus() == 1:
        assert threads == {threading.get_ident()}
    else:
        assert 1 <= len(threads) <= 2


@pytest.mark.numpy_path(reason="the tiles' threads, in a subprocess: run once")
def test_omp_num_threads_caps_the_tile_threads():
    """OMP_NUM_THREADS=1 (read by OpenBLAS when it loads) means one thread."""
    import os
    import subprocess
    import sys

    code = "from skattn._parallel import parallel_workers; print(parallel_workers())"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("OPENBLAS_NUM_THREADS", None)
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


# Attention dropout: a multiplier per (query, key), a pure function of the
# stream key of the attention and of the indices (see skattn._kernels.dropout).


def random_keys(rng, shape):
    """Stream keys: uint64, like skattn._kernels.dropout.stream_keys gives."""
    return rng.integers(0, 2**63, size=shape, dtype=np.uint64)


def dropout_reference(q, k, v, mask, causal, p, keys):
    """(P * M) V with the full (Tq, Tk) multipliers M of skattn._kernels.dropout."""
    from skattn._kernels.dropout import grid_index, keep_scale

    _, weights = reference_batched(q, k, v, mask, causal)
    index = grid_index(q.shape[-2], k.shape[-2])
    multipliers = keep_scale(keys[..., None, None], index, p, np.dtype(np.float64))
    dropped = weights * multipliers
    return dropped @ v, dropped


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
def test_dropout_matches_reference(rng, causal, use_mask):
    """Weights dropped after the softmax (their row sums are those of the
    undropped weights), the kept ones times 1 / (1 - p), then times V."""
    q = rng.standard_normal((2, 3, 7, 4))
    k = rng.standard_normal((2, 3, 9, 4))
    v = rng.standard_normal((2, 3, 9, 5))
    mask = rng.random((2, 1, 7, 9)) < 0.8 if use_mask else None
    keys = random_keys(rng, (2, 3))
    out, lse, weights = attention_forward(
        q, k, v, mask=mask, causal=causal, return_weights=True, dropout=(0.4, keys)
    )
    expected_out, expected_weights = dropout_reference(q, k, v, mask, causal, 0.4, keys)
    assert_allclose(out, expected_out, rtol=1e-12, atol=1e-14)
    assert_allclose(weights, expected_weights, rtol=1e-12, atol=1e-15)
    # lse is that of the scores, dropout or not
    _, lse_undropped, _ = attention_forward(q, k, v, mask=mask, causal=causal)
    assert_allclose(lse, lse_undropped, rtol=1e-13)
    # the weights returned are those that multiplied the values
    assert_allclose(out, weights @ v, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("tile_elements", [1, 5, 7 * 11, 13 * 31, 10**9])
def test_dropout_mask_does_not_depend_on_tiles(rng, tile_elements):
    """The same weights are dropped whatever the query tiles, and the results
    agree with one tile."""
    q = rng.standard_normal((2, 3, 29, 4))
    k = rng.standard_normal((2, 3, 31, 4))
    v = rng.standard_normal((2, 3, 31, 5))
    mask = rng.random((2, 1, 29, 31)) < 0.8
    dropout = (0.3, random_keys(rng, (2, 3)))
    kwargs = dict(mask=mask, causal=True, return_weights=True, dropout=dropout)
    expected = attention_forward(q, k, v, tile_elements=10**9, **kwargs)
    result = attention_forward(q, k, v, tile_elements=tile_elements, **kwargs)
    assert_array_equal(result[2] == 0, expected[2] == 0)
    for got, want in zip(result, expected, strict=True):
        assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    d_out = rng.standard_normal(expected[0].shape)
    grads = [
        attention_backward(
            d_out,
            q,
            k,
            v,
            *expected[:2],
            mask=mask,
            causal=True,
            tile_elements=elements,
            dropout=dropout,
        )  # fmt: skip
        for elements in (tile_elements, 10**9)
    ]
    for got, want in zip(*grads, strict=True):
        assert_allclose(got, want, rtol=1e-11, atol=1e-13)


def test_dropout_rate_is_close_to_p(rng):
    """On 512 x 512 weights, the share dropped is p to within 5 standard
    deviations, and the kept weights are scaled by exactly 1 / (1 - p)."""
    q, k, v = rng.standard_normal((3, 512, 4)).astype(np.float32)
    p = 0.2
    _, _, weights = attention_forward(
        q, k, v, return_weights=True, dropout=(p, random_keys(rng, ()))
    )
    _, _, undropped = attention_forward(q, k, v, return_weights=True)
    assert np.all(undropped > 0)  # so that 0 means dropped
    dropped = weights == 0
    n = dropped.size
    assert abs(dropped.mean() - p) < 5 * math.sqrt(p * (1 - p) / n)
    assert_allclose(weights[~dropped], undropped[~dropped] / (1 - p), rtol=1e-6)


def test_dropout_zero_is_no_dropout_bit_for_bit(rng):
    """p = 0 computes exactly what no dropout computes (folded tiles included),
    forward and backward, for one attention and for multi-head attention."""
    q, k, v, d_out = rng.standard_normal((4, 2, 3, 40, 8)).astype(np.float32)
    mask = rng.random((2, 1, 1, 40)) < 0.8
    zero = (0.0, random_keys(rng, (2, 3)))
    for return_weights in (False, True):
        kwargs = dict(mask=mask, causal=True, return_weights=return_weights)
        plain = attention_forward(q, k, v, **kwargs)
        with_zero = attention_forward(q, k, v, dropout=zero, **kwargs)
        for a, b in zip(plain, with_zero, strict=True):
            assert (a is None and b is None) or np.array_equal(a, b)
    out, lse, _ = plain
    kwargs = dict(mask=mask, causal=True)
    grads = attention_backward(d_out, q, k, v, out, lse, **kwargs)
    grads_zero = attention_backward(d_out, q, k, v, out, lse, dropout=zero, **kwargs)
    for a, b in zip(grads, grads_zero, strict=True):
        assert_array_equal(a, b)

    x = rng.standard_normal((2, 20, 8)).astype(np.float32)
    arrays = (x, *(rng.standard_normal((4, 8, 8)).astype(np.float32) / 3))
    zero = (0.0, random_keys(rng, (2, 2)))  # per sample and head
    kwargs = dict(n_heads=2, mask=rng.random((2, 1, 20)) < 0.8, causal=True)
    out, cache = multi_head_forward(*arrays, **kwargs)
    out_zero, cache_zero = multi_head_forward(*arrays, dropout=zero, **kwargs)
    assert_array_equal(out, out_zero)
    d_out = rng.standard_normal(out.shape).astype(np.float32)
    d_x, grads = multi_head_backward(d_out, *arrays, cache, **kwargs)
    d_x_zero, grads_zero = multi_head_backward(
        d_out, *arrays, cache_zero, dropout=zero, **kwargs
    )
    assert_array_equal(d_x, d_x_zero)
    for name in grads:
        assert_array_equal(grads[name], grads_zero[name])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dropout_keeps_empty_rows_zero(rng, dtype):
    """A query with no allowed key still gets zeros (and zero gradients)."""
    q, k, v = rng.standard_normal((3, 2, 6, 3)).astype(dtype)
    mask = np.ones((2, 6, 6), bool)
    mask[0, 2] = False
    mask[1, :, 0] = False  # causal: query 0 of sample 1 has no key left
    dropout = (0.5, random_keys(rng, (2,)))
    out, lse, weights = attention_forward(
        q, k, v, mask=mask, causal=True, return_weights=True, dropout=dropout
    )
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(weights))
    for sample, row in ((0, 2), (1, 0)):
        assert_array_equal(out[sample, row], 0)
        assert_array_equal(weights[sample, row], 0)
        assert lse[sample, row] == np.inf
    d_q, d_k, d_v = attention_backward(
        np.ones_like(out), q, k, v, out, lse, mask=mask, causal=True, dropout=dropout
    )
    assert all(np.all(np.isfinite(grad)) for grad in (d_q, d_k, d_v))
    assert_array_equal(d_q[0, 2], 0)
    assert_array_equal(d_q[1, 0], 0)


def test_dropout_keys_give_each_sample_and_head_its_mask(rng):
    """multi_head_forward takes one key per (sample, head): different keys drop
    different weights of the same scores, equal keys the same weights."""
    x = np.broadcast_to(rng.standard_normal((1, 16, 4)), (3, 16, 4))  # 3 copies
    w_q, w_k, w_v = rng.standard_normal((3, 4, 4))
    kwargs = dict(n_heads=2, return_weights=True)

    def dropped(keys):
        _, cache = multi_head_forward(
            x, w_q, w_k, w_v, None, dropout=(0.5, keys), **kwargs
        )
        return cache["weights"] == 0  # (3, 2, 16, 16)

    keys = random_keys(rng, (3, 2))
    masks = dropped(keys)
    pairs = [(n, h) for n in range(3) for h in range(2)]
    for a, b in itertools.combinations(pairs, 2):
        assert not np.array_equal(masks[a], masks[b]), (a, b)
    # one key per sample, the same for both heads; one per head for all samples
    same_heads = dropped(keys[:, :1])
    assert_array_equal(same_heads[:, 0], same_heads[:, 1])
    assert_array_equal(same_heads[:, 0], masks[:, 0])
    same_samples = dropped(keys[0])
    assert_array_equal(same_samples[0], same_samples[2])
    assert_array_equal(same_samples, np.broadcast_to(masks[0], (3, 2, 16, 16)))


def test_dropout_does_not_depend_on_padding(rng):
    """A sequence padded with masked keys and extra queries gets the same
    outputs and the same dropped weights on its own tokens."""
    n_tokens, n_padded = 5, 9
    x = rng.standard_normal((1, n_padded, 4))
    w_q, w_k, w_v, w_o = rng.standard_normal((4, 4, 4))
    keys = random_keys(rng, (1, 2))
    mask = (np.arange(n_padded) < n_tokens)[None, None, :]  # (1, 1, T): key padding
    kwargs = dict(n_heads=2, causal=True, return_weights=True, dropout=(0.3, keys))
    alone, cache_alone = multi_head_forward(
        x[:, :n_tokens], w_q, w_k, w_v, w_o, **kwargs
    )
    padded, cache_padded = multi_head_forward(
        x, w_q, w_k, w_v, w_o, mask=mask, **kwargs
    )
    assert_allclose(padded[:, :n_tokens], alone, rtol=1e-12, atol=1e-14)
    weights = cache_padded["weights"][..., :n_tokens, :]
    assert_array_equal(weights[..., n_tokens:], 0)
    assert_allclose(weights[..., :n_tokens], cache_alone["weights"], rtol=1e-12)


@pytest.mark.parametrize(
    "dropout, error, match",
    [
        ((1.0, np.zeros(2, np.uint64)), ValueError, r"must be in \[0, 1\), got 1.0"),
        ((-0.1, np.zeros(2, np.uint64)), ValueError, r"must be in \[0, 1\)"),
        ((0.1, np.zeros(2, np.int64)), TypeError, "must be of dtype uint64"),
    ],
)
def test_dropout_rejects_bad_arguments(dropout, error, match):
    q = np.ones((2, 3, 2))
    with pytest.raises(error, match=match):
        attention_forward(q, q, q, dropout=dropout)


def _row_exponents(q, k, scale):
    """score_exponents' definition, row by row: None when no row needs one."""
    limit = np.finfo(q.dtype).maxexp - 2
    q_max = np.max(np.abs(q), axis=-1, keepdims=True, initial=0)
    k_max = np.max(np.abs(k), axis=(-2, -1), keepdims=True, initial=0)
    bound = (
        np.frexp(q_max)[1]
        + np.frexp(k_max)[1]
        + math.frexp(abs(scale))[1]
        + math.frexp(q.shape[-1])[1]
    )
    return None if not np.any(bound > limit) else np.maximum(bound - limit, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "case", ["small", "one-huge-row", "apart", "huge-keys", "nan", "empty"]
)
def test_score_exponents_are_those_of_each_row(case, dtype):
    """The shortcut through one bound for all rows gives the row by row result:
    None in the usual case, exponents for the rows that need them, and None
    when the largest query and the largest key are in different attentions."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 2, 5, 4)).astype(dtype)
    k = rng.standard_normal((3, 2, 6, 4)).astype(dtype)
    big = np.finfo(dtype).max ** 0.5 * 4
    if case == "one-huge-row":
        q[1, 0, 2] *= big
        k[1, 0] *= big
    elif case == "apart":  # each large, but their product in no attention
        q[0, 0, 1] *= big
        k[2, 1] *= big
    elif case == "huge-keys":  # large queries against keys near the largest
        q[0, 1] *= 1e3
        k[0, 1] *= np.finfo(dtype).max / 4e3
    elif case == "nan":
        q[0, 0, 0, 0] = np.nan
        q[1, 0, 2] *= big
        k[1, 0] *= big
    elif case == "empty":
        q, k = q[..., :0, :], k[..., :0, :]
    expected = _row_exponents(q, k, 0.5)
    exponent = score_exponents(q, k, dtype(0.5))
    if case in ("small", "apart", "empty"):
        assert expected is None
    else:
        assert expected is not None
    if expected is None:
        assert exponent is None
    else:
        assert_array_equal(exponent, expected)
