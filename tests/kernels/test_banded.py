"""Banded attention: the dense kernel given the band as its mask, torch's
``scaled_dot_product_attention`` with that boolean mask, finite differences,
and memory that grows with ``T * window``, not ``T**2``.

The band (Longformer's sliding window, dilated): query ``i`` attends key ``j``
when ``i - j`` is a multiple of ``dilation`` and ``|i - j| <= (window // 2) *
dilation``; with ``causal``, when ``0 <= i - j <= (window - 1) * dilation``.
"""

import tracemalloc

import numpy as np
import pytest
from helpers import (
    assert_equals_the_dense_kernel,
    numeric_gradient,
    relative_error,
    shared_maps_on_two_cpus,
)
from numpy.testing import assert_allclose, assert_array_equal
from threadpoolctl import threadpool_limits

from skattn import multi_head_attention, scaled_dot_product_attention
from skattn._kernels import compiled, compiled_banded
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward
from skattn._kernels.band import band_mask, band_offsets
from skattn._kernels.banded import banded_backward, banded_forward

BANDS = [(1, 1), (3, 1), (4, 2), (5, 3), (40, 1)]  # (window, dilation)


def stream_keys(rng, shape):
    return rng.integers(0, 2**63, size=shape, dtype=np.uint64)


def dense_band(n_tokens, window, dilation, causal, glob=None):
    """The band (and the global token's row and column) as a dense mask."""
    allowed = band_mask(n_tokens, n_tokens, window, dilation, causal)
    if glob is None:
        return allowed
    rows = np.arange(n_tokens)
    g = np.asarray(glob)[:, None, None, None]  # (N, 1, 1, 1): every head
    allowed = allowed | (rows[:, None] == g) | (rows[None, :] == g)
    if causal:
        allowed = allowed & (rows[None, :] <= rows[:, None])
    return allowed


def test_band_offsets_by_hand():
    lengths = dict(n_queries=9, n_keys=9)
    assert_array_equal(band_offsets(3, **lengths), [-1, 0, 1])
    assert_array_equal(band_offsets(4, 2, **lengths), [-4, -2, 0, 2, 4])
    assert_array_equal(band_offsets(3, 2, causal=True, **lengths), [-4, -2, 0])
    # 4 queries and 6 keys span the 9 offsets -(4 - 1) to 6 - 1: a band of at
    # most 9 offsets is computed as it is, a longer one only on those 9
    lengths = dict(n_queries=4, n_keys=6)
    assert_array_equal(band_offsets(9, **lengths), np.arange(-4, 5))
    assert_array_equal(band_offsets(9, 2, **lengths), np.arange(-8, 9, 2))
    assert_array_equal(band_offsets(9, 3, causal=True, **lengths), np.arange(-24, 1, 3))
    assert_array_equal(band_offsets(11, **lengths), np.arange(-3, 6))
    assert_array_equal(band_offsets(11, 2, **lengths), [-2, 0, 2, 4])
    assert_array_equal(band_offsets(10, 3, causal=True, **lengths), [-3, 0])
    assert_array_equal(band_offsets(3, 2**62, **lengths), [-(2**62), 0, 2**62])
    assert_array_equal(band_offsets(3, 2**62 + 1, **lengths), [0])
    # query 3 of 7, window 3, dilation 2: keys 1, 3, 5
    assert_array_equal(np.flatnonzero(band_mask(7, 7, 3, 2)[3]), [1, 3, 5])


@pytest.mark.parametrize("window, dilation", BANDS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("global_token", [False, True])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_banded_equals_the_dense_kernel_with_the_band_as_mask(
    rng, window, dilation, causal, global_token, p
):
    n, h, t, d = 3, 2, 13, 4
    q, k, v = (rng.standard_normal((n, h, t, d)) for _ in range(3))
    lengths = np.array([13, 9, 5])
    key_mask = (np.arange(t) < lengths[:, None])[:, None, None, :]
    glob = lengths - 1 if global_token else None
    dropout = (p, stream_keys(rng, (n, h)))
    allowed = dense_band(t, window, dilation, causal, glob) & key_mask
    band = dict(window=window, dilation=dilation, causal=causal, dropout=dropout)
    result = banded_forward(
        q, k, v, mask=key_mask, return_weights=True, global_index=glob, **band
    )
    assert_equals_the_dense_kernel(result, q, k, v, allowed, dropout)
    out, lse, _ = result

    d_out = rng.standard_normal(out.shape)
    grads = banded_backward(
        d_out, q, k, v, out, lse, mask=key_mask, global_index=glob, **band
    )
    context, dense_lse, _ = attention_forward(q, k, v, mask=allowed, dropout=dropout)
    expected_grads = attention_backward(
        d_out, q, k, v, context, dense_lse, mask=allowed, dropout=dropout
    )
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        assert_allclose(grad, expected_grad, rtol=0, atol=1e-13)


@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-14), (np.float32, 2e-6)])
def test_scaled_dot_product_attention_window_rows_sum_to_one(rng, dtype, atol):
    q, k, v = (rng.standard_normal((2, 17, 5)).astype(dtype) for _ in range(3))
    out, weights = scaled_dot_product_attention(
        q, k, v, window=5, dilation=2, return_weights=True
    )
    assert out.dtype == weights.dtype == dtype
    assert_allclose(weights.sum(axis=-1), 1, atol=atol)
    assert np.all(weights[..., ~band_mask(17, 17, 5, 2)] == 0)
    dense = scaled_dot_product_attention(q, k, v, mask=band_mask(17, 17, 5, 2))
    assert_allclose(out, dense, rtol=0, atol=10 * atol)


def test_window_one_reads_only_itself(rng):
    q, k, v = (rng.standard_normal((6, 3)) for _ in range(3))
    assert_array_equal(scaled_dot_product_attention(q, k, v, window=1), v)


def test_multi_head_attention_window_equals_the_band_as_mask(rng):
    x = rng.standard_normal((3, 11, 8))
    w = rng.standard_normal((4, 8, 8)) / np.sqrt(8)
    out, weights = multi_head_attention(
        x, *w, n_heads=2, window=3, dilation=2, return_weights=True, causal=True
    )
    mask = band_mask(11, 11, 3, 2, causal=True)
    expected, expected_weights = multi_head_attention(
        x, *w, n_heads=2, mask=mask, return_weights=True
    )
    assert_allclose(out, expected, rtol=0, atol=1e-14)
    assert_allclose(weights, expected_weights, rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    "window, dilation, error, match",
    [
        (0, 1, ValueError, "window must be >= 1"),
        (3, 0, ValueError, "dilation must be >= 1"),
        (2.5, 1, TypeError, "window must be an int >= 1 or None"),
        (True, 1, TypeError, "window must be an int"),
        (3, None, TypeError, "dilation must be an int >= 1, got None"),
    ],
)
def test_bad_band_names_the_argument(rng, window, dilation, error, match):
    q = rng.standard_normal((4, 2))
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(q, q, q, window=window, dilation=dilation)


@pytest.mark.parametrize("global_token", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_banded_backward_matches_finite_differences(rng, causal, global_token):
    q = rng.standard_normal((2, 9, 3))
    k = rng.standard_normal((2, 9, 3))
    v = rng.standard_normal((2, 9, 2))
    mask = (np.arange(9) < np.array([9, 6])[:, None])[:, None, :]
    weight = rng.standard_normal((2, 9, 2))
    kwargs = dict(
        window=3,
        dilation=2,
        mask=mask,
        causal=causal,
        scale=0.8,
        dropout=(0.2, stream_keys(rng, (2,))),
        global_index=np.array([8, 5]) if global_token else None,
    )

    def loss():
        return np.sum(banded_forward(q, k, v, **kwargs)[0] * weight)

    out, lse, _ = banded_forward(q, k, v, **kwargs)
    grads = banded_backward(weight, q, k, v, out, lse, **kwargs)
    for grad, array in zip(grads, (q, k, v), strict=True):
        assert relative_error(grad, numeric_gradient(loss, array)) < 1e-6


def test_banded_matches_torch_with_the_band_as_boolean_mask(rng):
    torch = pytest.importorskip("torch")
    q, k, v = (rng.standard_normal((2, 3, 20, 8)) for _ in range(3))
    mask = band_mask(20, 20, 5, 3)
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(mask)
    ).numpy()
    out = scaled_dot_product_attention(q, k, v, window=5, dilation=3)
    assert_allclose(out, expected, rtol=0, atol=1e-14)


def test_banded_memory_grows_with_the_band_not_the_square(rng):
    """A long sequence: the peak is a few times the inputs, far below one
    (T, T) array of scores (the 0.5 GiB a dense kernel would hold whole)."""
    n_tokens = 8192
    q, k, v = (rng.standard_normal((n_tokens, 8)) for _ in range(3))
    scaled_dot_product_attention(q[:50], k[:50], v[:50], window=9, dilation=4)
    tracemalloc.start()  # after a first call compiled the kernels (or not)
    scaled_dot_product_attention(q, k, v, window=9, dilation=4)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    inputs = 3 * q.nbytes
    assert peak < 4 * inputs + 30 * n_tokens * 8  # 9 + 1 columns of scores, x3
    assert peak < n_tokens**2 * 8 / 50


needs_numba = pytest.mark.skipif(
    compiled.kernels() is None, reason="numba is not installed (the [fast] extra)"
)


def ragged_band_inputs(rng, dtype, n_queries=29, n_keys=29, d=5):
    """Four sequences of two heads: ragged lengths (one empty), the last valid
    token global (none in the empty sequence: an index past the keys)."""
    lengths = np.array([n_keys, 17, 1, 0])
    q = rng.standard_normal((4, 2, n_queries, d)).astype(dtype)
    k, v = (rng.standard_normal((4, 2, n_keys, d)).astype(dtype) for _ in "kv")
    d_out = rng.standard_normal(q.shape).astype(dtype)
    mask = (np.arange(n_keys) < lengths[:, None])[:, None, None, :]
    glob = np.where(lengths > 0, lengths - 1, n_keys)[:, None]  # (4, 1): each head
    return q, k, v, d_out, mask, glob


def forward_and_gradients(q, k, v, d_out, **band):
    """The banded forward pass's output and log-sum-exp, then the gradients
    of q, k and v."""
    out, lse, _ = banded_forward(q, k, v, **band)
    return (out, lse, *banded_backward(d_out, q, k, v, out, lse, **band))


def both_paths(monkeypatch, q, k, v, d_out, **band):
    """Forward results and gradients on the numpy path, then compiled."""
    results = []
    for disabled in (True, False):
        monkeypatch.setattr(compiled, "_DISABLED", disabled)
        results.append(forward_and_gradients(q, k, v, d_out, **band))
    return results


@needs_numba
@pytest.mark.compiled_path
@pytest.mark.parametrize("window, dilation", BANDS + [(65, 4)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("global_token", [False, True])
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("n_keys", [29, 300])
def test_compiled_banded_kernels_equal_the_numpy_path(
    monkeypatch, rng, window, dilation, causal, global_token, dtype, tol, n_keys
):
    """Random inputs, ragged lengths, global tokens, causal or not, queries as
    many as the keys or fewer: the same results to float rounding."""
    q, k, v, d_out, mask, glob = ragged_band_inputs(rng, dtype, 23, n_keys)
    band = dict(window=window, dilation=dilation, causal=causal, mask=mask)
    band["global_index"] = glob if global_token else None
    expected, result = both_paths(monkeypatch, q, k, v, d_out, **band)
    for got, want in zip(result, expected, strict=True):
        assert got.dtype == want.dtype == dtype and got.shape == want.shape
        assert_array_equal(np.isfinite(got), np.isfinite(want))
        finite = np.isfinite(want)
        assert_allclose(got[finite], want[finite], rtol=tol, atol=tol)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("global_token", [False, True])
def test_numpy_path_in_blocks_of_rows_computes_what_it_computes_whole(
    monkeypatch, rng, causal, global_token
):
    """The numpy path walks the band a block of rows at a time (BLOCK_BYTES
    of each operand): blocks of a few rows, crossing every column's edges,
    give the results of one block, to the bit."""
    from skattn._kernels import sparse as band_module

    q, k, v, d_out, mask, glob = ragged_band_inputs(rng, np.float64, 29, 29)
    band = dict(window=5, dilation=3, causal=causal, mask=mask)
    band["global_index"] = glob if global_token else None
    monkeypatch.setattr(compiled, "_DISABLED", True)
    results = []
    for block_bytes in (2**40, 3 * 4 * 2 * 5 * 8):  # whole; 3 rows a block
        monkeypatch.setattr(band_module, "BLOCK_BYTES", block_bytes)
        results.append(forward_and_gradients(q, k, v, d_out, **band))
    for whole, blocked in zip(*results, strict=True):
        assert_array_equal(blocked, whole)


@needs_numba
@pytest.mark.compiled_path
@pytest.mark.parametrize("causal", [False, True])
def test_compiled_banded_kernels_across_chunks_equal_the_numpy_path(
    monkeypatch, rng, causal
):
    """The compiled kernels copy a chunk of CHUNK queries (and the keys they
    read) at a time: a sequence of two chunks and more, a dilated band that
    reaches across their edges, padding and a global token."""
    from skattn._kernels._numba_banded import CHUNK

    n_tokens = 2 * CHUNK + 37
    q, k, v, d_out, mask, glob = ragged_band_inputs(
        rng, np.float32, n_tokens, n_tokens, d=2
    )
    lengths = np.array([n_tokens, CHUNK + 5, 1, 0])
    mask = (np.arange(n_tokens) < lengths[:, None])[:, None, None, :]
    glob = np.where(lengths > 0, lengths // 2, n_tokens)[:, None]
    band = dict(window=5, dilation=9, causal=causal, mask=mask, global_index=glob)
    expected, result = both_paths(monkeypatch, q, k, v, d_out, **band)
    for got, want in zip(result, expected, strict=True):
        assert_array_equal(np.isfinite(got), np.isfinite(want))
        finite = np.isfinite(want)
        assert_allclose(got[finite], want[finite], rtol=2e-5, atol=2e-5)


def spy(monkeypatch, name, calls):
    function = getattr(compiled_banded, name)

    def counted(*args):
        calls.append(name)
        return function(*args)

    monkeypatch.setattr(compiled_banded, name, counted)


@needs_numba
@pytest.mark.compiled_path
def test_compiled_banded_kernels_run_where_they_apply(monkeypatch, rng):
    """Key padding (or no mask), with or without global tokens, float32 or
    float64: compiled; weights, dropout, a mask per query, a negative global
    index or float16: the numpy path."""
    monkeypatch.setattr(compiled, "_DISABLED", False)
    calls = []
    for name in ("banded_forward", "banded_backward"):
        spy(monkeypatch, name, calls)
    q, k, v, d_out, mask, glob = ragged_band_inputs(rng, np.float32)
    band = dict(window=5, dilation=2)
    for kwargs in (dict(mask=mask, global_index=glob), dict(causal=True)):
        out, lse, _ = banded_forward(q, k, v, **band, **kwargs)
        banded_backward(d_out, q, k, v, out, lse, **band, **kwargs)
    assert calls == ["banded_forward", "banded_backward"] * 2
    calls.clear()
    banded_forward(q, k, v, **band, return_weights=True)
    banded_forward(q, k, v, **band, dropout=(0.5, stream_keys(rng, (4, 2))))
    banded_forward(q, k, v, **band, mask=rng.random((4, 2, 29, 29)) < 0.5)
    banded_forward(q, k, v, **band, global_index=-1)
    banded_forward(*(a.astype(np.float16) for a in (q, k, v)), **band)
    assert calls == []
    monkeypatch.setattr(compiled, "_DISABLED", True)
    banded_forward(q, k, v, **band)
    assert calls == []


@needs_numba
@pytest.mark.compiled_path
@pytest.mark.parametrize("n_tokens, split", [(64, False), (4096, True)])
def test_small_banded_attentions_run_in_the_calling_thread(
    monkeypatch, n_tokens, split
):
    """On two threads, the banded passes of two sequences of 64 tokens (a
    band of 66 columns, heads of 16) run in the calling thread; of 4,096
    tokens (35 to 52 million operations a pass) they are split into tasks
    for both threads: the forward pass, the queries' and the keys' passes."""
    monkeypatch.setattr(compiled, "_DISABLED", False)
    shared = shared_maps_on_two_cpus(monkeypatch)
    rng = np.random.default_rng(0)
    q, k, v, d_out = (
        rng.standard_normal((2, n_tokens, 16)).astype(np.float32) for _ in "qkvd"
    )
    lengths = np.full(2, n_tokens, np.int64)
    offsets = band_offsets(65, n_queries=n_tokens, n_keys=n_tokens)
    band = (lengths, None, offsets, False, 0.25)
    with threadpool_limits(2):
        out, lse = compiled_banded.banded_forward(q, k, v, *band)
        compiled_banded.banded_backward(d_out, q, k, v, out, lse, *band)
    assert len(shared) == (3 if split else 0) and all(n > 1 for n in shared)


@needs_numba
@pytest.mark.compiled_path
@pytest.mark.parametrize("causal", [False, True])
def test_compiled_banded_results_do_not_depend_on_the_threads(monkeypatch, causal):
    """Bit for bit on one and two threads, one attention split into rows."""
    monkeypatch.setattr(compiled, "_DISABLED", False)
    monkeypatch.setattr(compiled, "MIN_TASK_FLOPS", 0)  # split however small
    rng = np.random.default_rng(0)
    q, k, v, d_out = (
        rng.standard_normal((1, 700, 8)).astype(np.float32) for _ in "qkvd"
    )
    band = dict(window=9, dilation=3, causal=causal, global_index=[350])
    results = []
    for n_threads in (1, 2):
        with threadpool_limits(n_threads):
            results.append(forward_and_gradients(q, k, v, d_out, **band))
    for one, two in zip(*results, strict=True):
        assert_array_equal(one, two)


@needs_numba
@pytest.mark.compiled_path
def test_a_banded_kernel_numba_cannot_compile_leaves_the_numpy_path(monkeypatch, rng):
    """A compiled banded function that fails to compile (a typing error): the
    numpy path computes, with one warning, and the compiled kernels stay off."""
    import numba

    from skattn._kernels import _numba_banded

    @numba.njit
    def fails_to_compile(*args):
        return undefined_name  # noqa: F821 (numba's typing fails)

    q, k, v, _, mask, glob = ragged_band_inputs(rng, np.float32)
    band = dict(window=5, dilation=2, mask=mask, global_index=glob)
    monkeypatch.setattr(compiled, "_DISABLED", True)
    expected = banded_forward(q, k, v, **band)
    monkeypatch.setattr(_numba_banded, "forward", fails_to_compile)
    monkeypatch.setattr(compiled, "_DISABLED", False)
    monkeypatch.setattr(compiled, "_FAILED", False)
    with pytest.warns(RuntimeWarning, match="SKATTN_COMPILED=0"):
        out, lse, _ = banded_forward(q, k, v, **band)
    assert not compiled.enabled()
    assert_array_equal(out, expected[0])
    assert_array_equal(lse, expected[1])


@pytest.mark.parametrize("causal", [False, True])
def test_banded_scores_that_would_overflow_equal_the_dense_kernel_by_hand(causal):
    """Equal queries and keys of 3e19: every score of a row is the same (about
    1.3e39, beyond float32), so each row is the mean of its band's values."""
    q = np.full((3, 2), 3e19, np.float32)
    v = np.array([[1, 2], [2, 3], [3, 4]], np.float32)
    out = scaled_dot_product_attention(q, q, v, window=3, causal=causal)
    dense = scaled_dot_product_attention(q, q, v, mask=band_mask(3, 3, 3, 1, causal))
    expected = (
        [[1, 2], [1.5, 2.5], [2, 3]] if causal else [[1.5, 2.5], [2, 3], [2.5, 3.5]]
    )
    assert_allclose(dense, expected, rtol=1e-6)
    assert_allclose(out, dense, rtol=1e-6)


@pytest.mark.parametrize("dtype, size", [(np.float32, 1e20), (np.float64, 1e155)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("global_token", [False, True])
def test_banded_scores_that_would_overflow_equal_the_dense_kernel(
    rng, dtype, size, causal, global_token
):
    """Queries and keys whose scores exceed the dtype's range: the scores
    divided by a power of two, as the dense kernel divides them."""
    q, k, v, d_out, mask, glob = ragged_band_inputs(rng, dtype)
    q, k = q * dtype(size), k * dtype(size)
    glob = glob if global_token else None
    band = dict(window=5, dilation=2, causal=causal, mask=mask, global_index=glob)
    out, lse, _ = banded_forward(q, k, v, **band)
    allowed = dense_band(29, 5, 2, causal, None if glob is None else glob[:, 0])
    expected, expected_lse, _ = attention_forward(q, k, v, mask=allowed & mask)
    assert np.all(np.isfinite(out))
    assert_allclose(out, expected, rtol=1e-5, atol=0)
    assert_array_equal(np.isposinf(lse), np.isposinf(expected_lse))
    finite = np.isfinite(expected_lse)
    # within the scores' rounding (Higham's bound of a dot product of 5 terms)
    q_norm, k_norm = (np.linalg.norm(a / size, axis=-1).max() for a in (q, k))
    error = np.abs(lse[finite] - expected_lse[finite]) / size / size
    assert np.all(error <= 7 * np.finfo(dtype).eps * q_norm * k_norm / np.sqrt(5))
    grads = banded_backward(d_out, q, k, v, out, lse, **band)
    for grad in grads:
        assert np.all(np.isfinite(grad))


@pytest.mark.parametrize("dtype, size", [(np.float32, 1e5), (np.float64, 1e75)])
@pytest.mark.parametrize("global_token", [False, True])
def test_banded_gradients_of_large_scores_equal_the_dense_kernel(
    rng, dtype, size, global_token
):
    """Scores of 1e10 in float32 (1e150 in float64): exp(scores - lse)
    recomputed from the log-sum-exp is off by far more than a probability,
    so the probabilities are normalised from their own scores, as the dense
    kernel's backward pass does. The values' gradient sums the probabilities
    (each 0 or 1 at such scores); those of the queries and keys are rounding
    errors times the scores, finite."""
    q, k, v, d_out, mask, glob = ragged_band_inputs(rng, dtype)
    q, k = q * dtype(size), k * dtype(size)
    glob = glob if global_token else None
    band = dict(window=5, dilation=2, mask=mask, global_index=glob)
    out, lse, _ = banded_forward(q, k, v, **band)
    d_q, d_k, d_v = banded_backward(d_out, q, k, v, out, lse, **band)
    allowed = dense_band(29, 5, 2, False, None if glob is None else glob[:, 0])
    allowed = allowed & mask
    context, dense_lse, _ = attention_forward(q, k, v, mask=allowed)
    expected = attention_backward(d_out, q, k, v, context, dense_lse, mask=allowed)
    assert_allclose(d_v, expected[2], rtol=1e-5, atol=1e-5)
    assert np.all(np.isfinite(d_q)) and np.all(np.isfinite(d_k))


@pytest.mark.parametrize("causal", [False, True])
def test_banded_values_that_would_overflow_equal_the_dense_kernel(rng, causal):
    """Values of 3e38 in float32: a sum of several overflows, their weighted
    mean does not (divided by a power of two, as the dense kernel does)."""
    q = rng.standard_normal((7, 2)).astype(np.float32)
    v = np.full((7, 2), 3e38, np.float32)
    out = scaled_dot_product_attention(q, q, v, window=5, causal=causal)
    dense = scaled_dot_product_attention(q, q, v, mask=band_mask(7, 7, 5, 1, causal))
    assert np.all(np.isfinite(dense))
    assert_allclose(out, dense, rtol=1e-6)


HUGE = [2**62, 2**63 - 1, 2**63, 10**30]


@pytest.mark.parametrize("dilation", [6, *HUGE])
@pytest.mark.parametrize("causal", [False, True])
def test_dilation_beyond_the_sequence_reads_the_query_alone(rng, dilation, causal):
    """On 6 tokens, a dilation of 6 or more leaves the query alone in its
    band, whatever its size (none wraps around int64): a band within the
    sequence's span of offsets is computed with its empty columns, one
    reaching beyond int64 on the query alone."""
    q, k, v, d_out = (rng.standard_normal((2, 6, 3)) for _ in range(4))
    lengths = dict(n_queries=6, n_keys=6)
    offsets = band_offsets(5, dilation, causal, **lengths)
    if dilation == 6:
        expected = [-24, -18, -12, -6, 0] if causal else [-12, -6, 0, 6, 12]
        assert_array_equal(offsets, expected)
    else:
        assert_array_equal(offsets, [0])
    assert_array_equal(band_mask(6, 6, 5, dilation, causal), np.eye(6, dtype=bool))
    band = dict(window=5, dilation=dilation, causal=causal)
    out, weights = scaled_dot_product_attention(q, k, v, return_weights=True, **band)
    assert_array_equal(out, v)
    assert_array_equal(weights, np.broadcast_to(np.eye(6), weights.shape))
    x = rng.standard_normal((2, 6, 4))
    w = rng.standard_normal((4, 4, 4))
    assert_array_equal(
        multi_head_attention(x, *w, n_heads=2, **band),
        multi_head_attention(x, *w, n_heads=2, window=1),
    )
    got = forward_and_gradients(q, k, v, d_out, **band)
    expected = forward_and_gradients(q, k, v, d_out, window=1)
    for result, want in zip(got, expected, strict=True):
        assert_array_equal(result, want)


@pytest.mark.parametrize("window", [11, 10**6, 10**12, 2**63, 10**30])
@pytest.mark.parametrize("causal", [False, True])
def test_window_beyond_the_sequence_is_full_attention(rng, window, causal):
    """A band that covers the 6 tokens is full attention, computed as full
    attention (of every kernel and gradient), whatever the window's size."""
    q, k, v, d_out = (rng.standard_normal((2, 6, 3)) for _ in range(4))
    mask = rng.random((2, 1, 6)) < 0.7
    out, weights = scaled_dot_product_attention(
        q, k, v, mask=mask, causal=causal, window=window, return_weights=True
    )
    expected = scaled_dot_product_attention(
        q, k, v, mask=mask, causal=causal, return_weights=True
    )
    assert_array_equal(out, expected[0])
    assert_array_equal(weights, expected[1])
    x = rng.standard_normal((2, 6, 4))
    w = rng.standard_normal((4, 4, 4))
    assert_array_equal(
        multi_head_attention(x, *w, n_heads=2, causal=causal, window=window),
        multi_head_attention(x, *w, n_heads=2, causal=causal),
    )
    band = dict(mask=mask, causal=causal)
    out, lse, _ = banded_forward(q, k, v, window=window, **band)
    dense_out, dense_lse, _ = attention_forward(q, k, v, **band)
    assert_array_equal(out, dense_out)
    assert_array_equal(lse, dense_lse)
    grads = banded_backward(d_out, q, k, v, out, lse, window=window, **band)
    expected = attention_backward(d_out, q, k, v, dense_out, dense_lse, **band)
    for got, want in zip(grads, expected, strict=True):
        assert_array_equal(got, want)


def test_window_beyond_the_sequence_costs_no_more_than_full_attention(rng):
    """The memory of a window of a million or more on 6 tokens is that of
    full attention (and of a window of 7), not that of the window."""
    q, k, v = (rng.standard_normal((2, 4, 6, 8)) for _ in range(3))
    peaks = {}
    for window in (None, 7, 10**6, 10**12):
        scaled_dot_product_attention(q, k, v, window=window)  # compiled, if so
        tracemalloc.start()
        scaled_dot_product_attention(q, k, v, window=window)
        peaks[window] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[10**6] <= 2 * max(peaks[None], peaks[7])
    assert peaks[10**12] <= 2 * max(peaks[None], peaks[7])
