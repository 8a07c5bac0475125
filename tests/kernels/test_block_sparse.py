"""BigBird's block-sparse attention: the layout of its blocks, the dense
kernel given the layout as its mask (forward, weights, gradients, dropout,
padding, the global token), the public kernels and the pattern objects.

The layout: tokens in blocks of ``b``; the queries of block ``n`` read the
keys of the blocks ``n - w // 2`` to ``n + w // 2`` (with ``causal``, ``n - w
+ 1`` to ``n``) and of ``r`` distinct blocks drawn from the rest of the
sequence (with ``causal``, from the blocks before the window).
"""

import pickle

import numpy as np
import pytest
from helpers import assert_equals_the_dense_kernel
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

from skattn import multi_head_attention, scaled_dot_product_attention
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward
from skattn._kernels.block_sparse import (
    block_sparse_backward,
    block_sparse_forward,
    key_blocks,
)
from skattn.patterns import BandedAttention, BigBirdAttention, FullAttention

pytestmark = pytest.mark.numpy_path(
    reason="block-sparse attention has the numpy path only"
)

LAYOUTS = [(2, 1, 1), (3, 3, 2), (4, 2, 1), (2, 3, 0)]  # (b, window, random)


def reference_mask(n_tokens, layout, lengths, causal, glob=None):
    """The layout as a dense (B, T, T) mask, block by block, with the keys
    before each length, ``causal`` and the global token's row and column."""
    block_size = layout[0]
    n_blocks = -(-n_tokens // block_size)
    blocks = key_blocks(n_blocks, np.asarray(lengths), layout, causal)
    rows = np.arange(n_tokens)
    allowed = np.zeros((len(lengths), n_tokens, n_tokens), dtype=bool)
    for seq, length in enumerate(lengths):
        for query in range(n_tokens):
            for block in blocks[seq, query // block_size]:
                if block >= 0:
                    start = block * block_size
                    allowed[seq, query, start : start + block_size] = True
        if glob is not None and glob[seq] < n_tokens:
            allowed[seq, glob[seq], :] = True
            allowed[seq, :, glob[seq]] = True
        allowed[seq, :, length:] = False
    if causal:
        allowed &= rows[None, :] <= rows[:, None]
    return allowed


def test_key_blocks_by_hand():
    # 6 blocks, a window of 3 blocks and 2 random ones: block 0 reads blocks
    # 0 and 1 (none before it), block 5 reads 4 and 5 (none after it)
    blocks = key_blocks(6, np.array([12]), (2, 3, 2, 7), False)[0]
    assert_array_equal(blocks[:, :3], [[-1, 0, 1], [0, 1, 2], [1, 2, 3],
                                       [2, 3, 4], [3, 4, 5], [4, 5, -1]])  # fmt: skip
    # causal: the block and the two before it; random blocks before those
    causal = key_blocks(6, np.array([12]), (2, 3, 2, 7), True)[0]
    assert_array_equal(causal[:, :3], [[-1, -1, 0], [-1, 0, 1], [0, 1, 2],
                                       [1, 2, 3], [2, 3, 4], [3, 4, 5]])  # fmt: skip
    assert_array_equal(causal[:3, 3:], -1)  # nothing before the window
    assert_array_equal(causal[3, 3:][causal[3, 3:] >= 0], [0])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_valid", [1, 2, 5, 9, 40])
def test_random_blocks_are_distinct_and_outside_the_window(causal, n_valid):
    n_blocks, window, n_random = 40, 3, 3
    blocks = key_blocks(
        n_blocks, np.array([n_valid * 4]), (4, window, n_random, 3), causal
    )
    for query, row in enumerate(blocks[0]):
        read = row[row >= 0]
        assert len(set(read)) == len(read)
        assert np.all(read < n_valid)
        before = window - 1 if causal else window // 2
        after = 0 if causal else window // 2
        in_window = set(
            range(max(query - before, 0), min(query + after, n_valid - 1) + 1)
        )
        assert set(row[:-n_random][row[:-n_random] >= 0]) == in_window
        random = row[-n_random:]
        random = random[random >= 0]
        assert not set(random) & in_window
        if causal:
            assert np.all(random < query - before)
        candidates = (
            min(max(query - before, 0), n_valid) if causal else n_valid - len(in_window)
        )
        assert len(random) == min(n_random, max(candidates, 0))


def test_random_blocks_are_drawn_uniformly():
    # each of the 27 candidates of a query block is drawn with probability
    # 3/27 over seeds: 2,000 seeds, 222 draws expected per block
    counts = np.zeros(30, dtype=int)
    for seed in range(2000):
        row = key_blocks(30, np.array([30 * 2]), (2, 3, 3, seed), False)[0, 15]
        counts[row[3:]] += 1
    assert_array_equal(counts[14:17], 0)
    candidates = np.delete(counts, [14, 15, 16])
    expected = 2000 * 3 / 27
    assert np.all(np.abs(candidates - expected) < 5 * np.sqrt(expected))


def test_layout_depends_on_a_sequence_own_length_only():
    lengths = np.array([20, 7, 20, 13, 7])
    blocks = key_blocks(10, lengths, (2, 3, 2, 11), False)
    assert_array_equal(blocks[0], blocks[2])
    assert_array_equal(blocks[1], blocks[4])
    alone = key_blocks(4, np.array([7]), (2, 3, 2, 11), False)[0]
    assert_array_equal(blocks[1, :4], alone)  # padded to 10 blocks or to 4
    other_seed = key_blocks(10, lengths, (2, 3, 2, 12), False)
    assert not np.array_equal(blocks, other_seed)


def ragged_inputs(rng, dtype, n_tokens=23, d=4):
    """Four sequences of two heads: ragged lengths (one empty), the key
    padding mask and the last valid token as global."""
    lengths = np.array([n_tokens, 14, 1, 0])
    q, k, v, d_out = (
        rng.standard_normal((4, 2, n_tokens, d)).astype(dtype) for _ in range(4)
    )
    mask = (np.arange(n_tokens) < lengths[:, None])[:, None, None, :]
    glob = np.where(lengths > 0, lengths - 1, n_tokens)
    return q, k, v, d_out, mask, lengths, glob


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("global_token", [False, True])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_block_sparse_equals_the_dense_kernel_with_the_layout_as_mask(
    rng, layout, causal, global_token, p
):
    layout = (*layout, 1234)
    q, k, v, d_out, mask, lengths, glob = ragged_inputs(rng, np.float64)
    glob = glob if global_token else None
    dropout = (p, rng.integers(0, 2**63, size=(4, 2), dtype=np.uint64))
    allowed = reference_mask(q.shape[2], layout, lengths, causal, glob)[:, None]
    call = dict(layout=layout, causal=causal, dropout=dropout, mask=mask)
    call.update(lengths=lengths[:, None])
    call.update(global_index=None if glob is None else glob[:, None])
    result = block_sparse_forward(q, k, v, return_weights=True, **call)
    expected, expected_lse = assert_equals_the_dense_kernel(
        result, q, k, v, allowed, dropout
    )
    out, lse, weights = result
    if p == 0:  # rows sum to 1 (dropped weights are rescaled, not renormalised)
        sums = weights.sum(axis=-1)[allowed.any(axis=-1).repeat(2, axis=1)]
        assert_allclose(sums, 1.0, atol=1e-14)

    grads = block_sparse_backward(d_out, q, k, v, out, lse, **call)
    expected_grads = attention_backward(
        d_out, q, k, v, expected, expected_lse, mask=allowed, dropout=dropout
    )
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        assert_allclose(grad, expected_grad, rtol=0, atol=1e-13)


def test_block_sparse_in_float32_is_float32_and_close_to_float64(rng):
    q, k, v, d_out, mask, lengths, glob = ragged_inputs(rng, np.float32, 41)
    call = dict(layout=(4, 3, 2, 0), mask=mask, lengths=lengths[:, None])
    out, lse, _ = block_sparse_forward(q, k, v, **call)
    grads = block_sparse_backward(d_out, q, k, v, out, lse, **call)
    wide = [a.astype(np.float64) for a in (q, k, v, d_out)]
    out64, lse64, _ = block_sparse_forward(*wide[:3], **call)
    grads64 = block_sparse_backward(wide[3], *wide[:3], out64, lse64, **call)
    assert out.dtype == lse.dtype == np.float32
    assert_allclose(out, out64, atol=2e-6)
    for grad, grad64 in zip(grads, grads64, strict=True):
        assert grad.dtype == np.float32
        assert_allclose(grad, grad64, atol=2e-5)


def test_padding_and_batch_do_not_change_a_sequence(rng):
    """A sequence alone, and padded among others, reads the same layout."""
    n_tokens, length = 40, 27
    q, k, v = (rng.standard_normal((3, 2, n_tokens, 4)) for _ in range(3))
    lengths = np.array([40, length, 9])
    mask = (np.arange(n_tokens) < lengths[:, None])[:, None, None, :]
    layout = (4, 3, 2, 99)
    out, _, _ = block_sparse_forward(
        q, k, v, layout=layout, mask=mask, lengths=lengths[:, None]
    )
    row = slice(1, 2)
    alone, _, _ = block_sparse_forward(
        q[row, :, :length], k[row, :, :length], v[row, :, :length], layout=layout
    )
    assert_allclose(out[row, :, :length], alone, rtol=0, atol=1e-14)


def test_a_sequence_of_few_blocks_is_read_whole(rng):
    # 3 blocks of 4, a window of 3: every query reads every key
    q, k, v = (rng.standard_normal((2, 12, 4)) for _ in range(3))
    out, _, weights = block_sparse_forward(
        q, k, v, layout=(4, 3, 0, 0), return_weights=True
    )
    expected, _, expected_weights = attention_forward(q, k, v, return_weights=True)
    assert_allclose(out, expected, rtol=0, atol=1e-15)
    assert np.all(weights > 0)


def test_block_sparse_refuses_cross_attention(rng):
    q = rng.standard_normal((5, 4))
    k = rng.standard_normal((9, 4))
    with pytest.raises(ValueError, match="as many queries as keys, got 5 and 9"):
        block_sparse_forward(q, k, k, layout=(2, 1, 1, 0))


# The public kernels and the pattern objects
# ------------------------------------------


def test_scaled_dot_product_attention_with_a_pattern_equals_its_mask(rng):
    q, k, v = (rng.standard_normal((2, 50, 4)) for _ in range(3))
    for pattern in (
        FullAttention(),
        BandedAttention(5, dilation=2),
        BigBirdAttention(block_size=4, window_blocks=1, n_random_blocks=2, seed=3),
    ):
        for causal in (False, True):
            out, weights = scaled_dot_product_attention(
                q, k, v, pattern=pattern, causal=causal, return_weights=True
            )
            allowed = pattern.mask(50, causal=causal)
            expected, expected_weights = scaled_dot_product_attention(
                q, k, v, mask=allowed, return_weights=True
            )
            assert_allclose(out, expected, rtol=0, atol=1e-14)
            assert_allclose(weights, expected_weights, rtol=0, atol=1e-15)


def test_window_is_the_shorthand_of_a_banded_pattern(rng):
    x = rng.standard_normal((2, 30, 8))
    w = rng.standard_normal((3, 8, 8))
    shorthand = multi_head_attention(x, *w, n_heads=2, window=5, dilation=3)
    pattern = multi_head_attention(
        x, *w, n_heads=2, pattern=BandedAttention(window=5, dilation=3)
    )
    assert_array_equal(pattern, shorthand)


def test_a_pattern_with_its_shorthand_or_not_a_pattern_is_refused(rng):
    q = rng.standard_normal((6, 4))
    with pytest.raises(ValueError, match="shorthand of pattern=BandedAttention"):
        scaled_dot_product_attention(q, q, q, pattern=FullAttention(), window=3)
    with pytest.raises(TypeError, match="pattern must be an attention pattern"):
        scaled_dot_product_attention(q, q, q, pattern="bigbird")
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"):
        scaled_dot_product_attention(q, q, q, pattern=BigBirdAttention(0))
    with pytest.raises(TypeError, match="n_random_blocks must be an int >= 0"):
        scaled_dot_product_attention(
            q, q, q, pattern=BigBirdAttention(n_random_blocks=1.5)
        )
    for seed, error in ((-1, ValueError), (2**63, ValueError), (True, TypeError)):
        with pytest.raises(error, match="seed must be"):
            scaled_dot_product_attention(q, q, q, pattern=BigBirdAttention(seed=seed))
    with pytest.raises(ValueError, match="dilation must be >= 1, got 0"):
        scaled_dot_product_attention(q, q, q, dilation=0)  # without a window too


def test_patterns_are_values_for_clone_repr_equality_and_pickle():
    pattern = BigBirdAttention(block_size=32, n_random_blocks=2)
    assert repr(pattern) == (
        "BigBirdAttention(block_size=32, window_blocks=3, n_random_blocks=2, seed=None)"
    )
    copy = clone(pattern, safe=False)
    assert copy == pattern and copy is not pattern
    assert pickle.loads(pickle.dumps(pattern)) == pattern
    assert hash(copy) == hash(pattern)
    assert pattern != BigBirdAttention(block_size=32, n_random_blocks=3)
    assert BandedAttention(3) != FullAttention()
    assert pattern.set_params(seed=4).seed == 4
    with pytest.raises(ValueError, match="'window' is not a parameter of Big"):
        pattern.set_params(window=3)


def test_bigbird_mask_by_hand():
    # blocks of 2, a window of one block and one random block of seed 0
    allowed = BigBirdAttention(2, window_blocks=1, n_random_blocks=1, seed=0).mask(8)
    blocks = key_blocks(4, np.array([8]), (2, 1, 1, 0), False)[0]
    for block, (own, random) in enumerate(blocks):
        assert own == block and random != block
        expected = np.zeros(8, dtype=bool)
        expected[2 * own : 2 * own + 2] = expected[2 * random : 2 * random + 2] = True
        assert_array_equal(allowed[2 * block], expected)
        assert_array_equal(allowed[2 * block + 1], expected)


def test_bigbird_matches_torch_with_its_layout_as_boolean_mask(rng):
    """The output and the gradients by torch's autograd of its
    ``scaled_dot_product_attention`` given the layout's mask (torch has no
    BigBird kernel)."""
    torch = pytest.importorskip("torch")
    q, k, v, d_out = (rng.standard_normal((2, 3, 30, 8)) for _ in range(4))
    pattern = BigBirdAttention(block_size=3, window_blocks=3, n_random_blocks=2, seed=8)
    layout = pattern._layout()
    out, lse, _ = block_sparse_forward(q, k, v, layout=layout)
    grads = block_sparse_backward(d_out, q, k, v, out, lse, layout=layout)
    tensors = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    expected = torch.nn.functional.scaled_dot_product_attention(
        *tensors, attn_mask=torch.from_numpy(pattern.mask(30))
    )
    expected.backward(torch.from_numpy(d_out))
    assert_allclose(out, expected.detach().numpy(), rtol=0, atol=1e-14)
    for grad, tensor in zip(grads, tensors, strict=True):
        assert_allclose(grad, tensor.grad.numpy(), rtol=0, atol=1e-13)


def test_bigbird_memory_grows_with_the_blocks_read_not_the_square(rng):
    """A long sequence: the peak is a few arrays of ``T * K`` numbers (K = 4
    blocks of 8 keys a query), far below one (T, T) array of scores."""
    import tracemalloc

    n_tokens = 8192
    q, k, v = (rng.standard_normal((n_tokens, 8)) for _ in range(3))
    pattern = BigBirdAttention(block_size=8, window_blocks=3, n_random_blocks=1)
    tracemalloc.start()
    scaled_dot_product_attention(q, k, v, pattern=pattern)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    per_score = n_tokens * 4 * 8  # scores a layout holds
    assert peak < 3 * q.nbytes + 30 * per_score  # scores, keys' indices, masks
    assert peak < n_tokens**2 * 8 / 20
