"""Tests of the model pieces: positions, layer norm, class token, batching."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skattn._model.pooling import POOLINGS, pool_mean, token_mask, token_sums
from skattn._model.sequences import batch_indices, pad_sequences
from skattn._model.units import (
    append_class_token,
    layer_norm_forward,
    sinusoidal_positions,
)


def test_sinusoidal_positions_by_hand():
    """P[t, 2i] = sin(t / 10000^(2i/d)), P[t, 2i+1] = cos(...), odd width too."""
    table = sinusoidal_positions(3, 5)
    for t in range(3):
        for i, column in enumerate(range(0, 5, 2)):
            angle = t / 10000 ** (2 * i / 5)
            assert table[t, column] == pytest.approx(math.sin(angle), abs=1e-15)
            if column + 1 < 5:
                assert table[t, column + 1] == pytest.approx(math.cos(angle), abs=1e-15)
    assert_array_equal(table[0], [0, 1, 0, 1, 0])
    assert sinusoidal_positions(4, 6, np.float32).dtype == np.float32


def test_small_position_tables_are_shared_read_only_and_large_ones_new():
    """Every batch of a fit reads the same table of its shape and dtype; it
    cannot be written into, and a table above 2**20 values is not kept."""
    first, second = sinusoidal_positions(7, 4), sinusoidal_positions(7, 4)
    assert first is second and not first.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        first[0, 0] = 1.0
    assert sinusoidal_positions(7, 4, np.float32) is not first
    assert_array_equal(sinusoidal_positions(7, 4, np.float32), first.astype("f4"))
    large = sinusoidal_positions(2**14, 2**7)
    assert large.flags.writeable and large is not sinusoidal_positions(2**14, 2**7)
    assert_array_equal(large[:7, :4], sinusoidal_positions(7, 128)[:, :4])


def test_layer_norm_by_hand():
    x = np.array([[1.0, 2.0, 3.0, 6.0]])
    weight = np.array([1.0, 2.0, 1.0, 1.0])
    bias = np.array([0.0, 0.0, 1.0, 0.0])
    out, cache = layer_norm_forward(x, weight, bias, eps=0.0)
    # mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5
    x_hat = (x - 3.0) / math.sqrt(3.5)
    assert_allclose(out, x_hat * weight + bias, rtol=1e-15)
    assert_allclose(cache["x_hat"], x_hat, rtol=1e-15)
    out32, _ = layer_norm_forward(x.astype(np.float32), weight, bias)
    assert out32.dtype == np.float64  # float64 parameters promote: callers cast


def test_append_class_token_goes_after_each_sequence():
    h = np.arange(2 * 3 * 2, dtype=float).reshape(2, 3, 2) + 1
    lengths = np.array([3, 1])
    cls = np.array([-1.0, -2.0])
    extended = append_class_token(h, lengths, cls)
    assert_array_equal(extended[0], [[1, 2], [3, 4], [5, 6], [-1, -2]])
    assert_array_equal(extended[1, :2], [[7, 8], [-1, -2]])
    # the padding after the class token is never read (masked keys, pooling)
    assert extended.shape == (2, 4, 2)


def test_token_mask():
    assert_array_equal(token_mask(np.array([1, 3]), 3), [[1, 0, 0], [1, 1, 1]])


@pytest.mark.parametrize(
    "pooling",
    [name for name in POOLINGS.names() if not POOLINGS.get(name).needs_fixed_length],
)
def test_pooling_ignores_padding(pooling):
    rng = np.random.default_rng(0)
    tokens = rng.standard_normal((2, 4, 3))
    lengths = np.array([4, 2])
    padded = tokens.copy()
    padded[1, 2:] = 1e6  # anything in the padding
    unit = POOLINGS.get(pooling)(4, 3)
    params = {
        name: rng.standard_normal(spec.shape)
        for name, spec in unit.param_specs().items()
    }
    pooled, _ = unit.pool(padded, lengths, params)
    alone, _ = unit.pool(tokens[1:, :2], np.array([2]), params)
    assert_allclose(pooled[1], alone[0], rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_token_sums_add_each_features_tokens_in_order(dtype, layout):
    """The sum over the tokens adds them first to last, feature by feature:
    the same numbers as a loop over the tokens, whatever the memory layout."""
    rng = np.random.default_rng(0)
    scales = 10.0 ** rng.integers(-3, 4, 14)  # a scale per feature
    tokens = (rng.standard_normal((5, 37, 14)) * scales).astype(dtype)
    if layout == "F":
        tokens = np.asfortranarray(tokens)
    elif layout == "strided":
        tokens = tokens[:, :, ::2]
    by_hand = tokens[:, 0].copy()
    for t in range(1, tokens.shape[1]):
        by_hand += tokens[:, t]
    sums = token_sums(tokens)
    assert sums.dtype == dtype
    assert_array_equal(sums, by_hand)
    assert_array_equal(sums, tokens.sum(axis=1))


def test_token_sums_of_one_feature_are_numpys_pairwise_sums():
    """One feature of a long series: the sum numpy's contiguous reduction
    gives (pairwise), not one in order, which drifts further."""
    tokens = np.full((2, 100_000, 1), 0.1, dtype=np.float32)
    tokens[1] = np.random.default_rng(0).random((100_000, 1))
    sums = token_sums(tokens)
    assert_array_equal(sums, tokens.sum(axis=1))
    in_order = np.cumsum(tokens[:, :, 0], axis=1)[:, -1]  # first to last
    exact = tokens[:, :, 0].astype(np.float64).sum(axis=1)
    assert np.all(np.abs(sums[:, 0] - exact) < np.abs(in_order - exact))


def test_mean_pooling_divides_the_valid_tokens_sum_by_their_count():
    tokens = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    pooled, _ = pool_mean(tokens, np.array([3, 3]), {})
    assert pooled.dtype == np.float32
    assert_array_equal(pooled, [[2, 3], [8, 9]])
    pooled, _ = pool_mean(tokens, np.array([3, 1]), {})
    assert_array_equal(pooled, [[2, 3], [6, 7]])


def test_pad_sequences():
    batch, lengths = pad_sequences([np.ones((2, 3)), 2 * np.ones((4, 3))], np.float32)
    assert batch.shape == (2, 4, 3) and batch.dtype == np.float32
    assert_array_equal(lengths, [2, 4])
    assert_array_equal(batch[0, 2:], 0)
    assert_array_equal(batch[1], 2)


def test_batch_indices_respect_budget_and_cover_every_sample():
    lengths = np.array([5, 1, 9, 3, 3, 7, 2, 8])

    def row_bytes(n_tokens):
        return 10 * n_tokens

    batches = batch_indices(lengths, row_bytes, budget_bytes=200)
    assert_array_equal(np.sort(np.concatenate(batches)), np.arange(8))
    for batch in batches:
        assert len(batch) == 1 or len(batch) * row_bytes(lengths[batch].max()) <= 200
    # shortest first, so the padding per batch stays small
    assert_array_equal(np.concatenate(batches), np.argsort(lengths, kind="stable"))
    # a budget below one row still makes progress, one row at a time, and
    # says that it cannot keep to the budget
    message = r"one sequence of 9 tokens needs 8.58e-05 MiB, more than working_mem"
    with pytest.warns(UserWarning, match=message):
        assert len(batch_indices(lengths, row_bytes, budget_bytes=1)) == 8


def test_batches_hold_at_most_batch_bytes_whatever_the_budget():
    """A budget above BATCH_BYTES (twice CACHE_BYTES) still cuts batches of
    at most BATCH_BYTES, as even as their count allows."""
    from skattn._model.sequences import BATCH_BYTES
    from skattn._parallel import CACHE_BYTES

    assert BATCH_BYTES == 2 * CACHE_BYTES
    row = BATCH_BYTES // 8  # eight rows per batch
    batches = batch_indices(np.full(20, 3), lambda n_tokens: row, budget_bytes=2**40)
    assert [len(batch) for batch in batches] == [7, 7, 6]
    batches = batch_indices(np.full(20, 3), lambda n_tokens: row, budget_bytes=3 * row)
    assert [len(batch) for batch in batches] == [3] * 6 + [2]


def test_batch_indices_split_equal_lengths_evenly():
    """32 rows with room for 24 per batch: 16 + 16, not 24 + 8."""
    batches = batch_indices(np.full(32, 4), lambda n_tokens: 10, budget_bytes=240)
    assert [len(batch) for batch in batches] == [16, 16]
    assert_array_equal(np.concatenate(batches), np.arange(32))
    batches = batch_indices(np.full(7, 4), lambda n_tokens: 10, budget_bytes=30)
    assert [len(batch) for batch in batches] == [3, 3, 1]  # as few as the budget


def test_swiglu_by_hand():
    """linear2(silu(linear1(x)) * linear3(x)), written out with scalars."""
    from skattn._model.swiglu import SwiGLUFeedForward
    from skattn._model.units import Context

    unit = SwiGLUFeedForward(2, 1, None, layer=0)
    params = {
        "linear1": np.array([[1.0], [0.0]]),  # gate: the first feature
        "linear3": np.array([[0.0], [2.0]]),  # up: twice the second
        "linear2": np.array([[1.0, -1.0]]),
    }
    x = np.array([[[1.0, 3.0], [-2.0, 0.5]]])  # (1, 2 tokens, 2)
    out, _ = unit.forward(params, x, Context(np.array([2]), causal=False))

    def silu(a):
        return a / (1 + math.exp(-a))

    first = silu(1.0) * 6.0  # gate 1, up 2 * 3
    second = silu(-2.0) * 1.0  # gate -2, up 2 * 0.5
    expected = np.array([[[first, -first], [second, -second]]])
    assert_allclose(out, expected, rtol=1e-15)
