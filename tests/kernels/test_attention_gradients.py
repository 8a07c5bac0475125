"""The attention kernels' backward passes against central finite differences.

In float64. With dropout, the stream keys are fixed, hence the mask: the loss
is then a deterministic, smooth function of the inputs.
"""

import numpy as np
import pytest
from helpers import numeric_gradient, relative_error

from skattn._kernels.attention import attention_forward, folds_rows
from skattn._kernels.attention_backward import attention_backward
from skattn._kernels.multi_head import multi_head_backward, multi_head_forward


def stream_keys(rng, shape):
    """Fixed dropout stream keys (uint64)."""
    return rng.integers(0, 2**63, size=shape, dtype=np.uint64)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("tile_elements", [1, 50, 10**6])  # 1, 2 or 5 query rows
@pytest.mark.parametrize("n_keys", [6, 12])  # row shifts added, or folded
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_attention_backward(
    rng, kernel_path, causal, use_mask, tile_elements, n_keys, p
):
    if kernel_path != "numpy" and (p or use_mask or tile_elements != 10**6):
        # dropout and a random mask (not key padding) take the numpy path on
        # both; the compiled kernels compute in blocks of their own, whatever
        # tile_elements: the same numbers as the runs of the numpy path, or
        # of tile_elements=10**6
        pytest.skip("the same computation as another case of this test")
    assert folds_rows(n_keys, 3) == (n_keys == 12)
    q = rng.standard_normal((2, 5, 3))
    k = rng.standard_normal((2, n_keys, 3))
    v = rng.standard_normal((2, n_keys, 4))
    mask = rng.random((2, 1, n_keys)) < 0.6 if use_mask else None
    if use_mask:
        mask[1] = False  # a sample whose queries have no key at all
    weight = rng.standard_normal((2, 5, 4))
    kwargs = dict(mask=mask, causal=causal, scale=0.7, tile_elements=tile_elements)
    kwargs["dropout"] = (p, stream_keys(rng, (2,)))

    def loss():
        out, _, _ = attention_forward(q, k, v, **kwargs)
        return np.sum(out * weight)

    out, lse, _ = attention_forward(q, k, v, **kwargs)
    grads = attention_backward(weight, q, k, v, out, lse, **kwargs)
    for analytic, array in zip(grads, (q, k, v), strict=True):
        assert relative_error(analytic, numeric_gradient(loss, array)) < 1e-7


@pytest.mark.numpy_path(reason="dropout: the numpy path's, on both paths")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tile_elements", [1, 10**6])
def test_attention_backward_key_padding(rng, causal, tile_elements):
    """Right-padded sequences of 4, 2 and 7 of 7 tokens with dropout; the
    padded keys and values get no gradient."""
    lengths = np.array([4, 2, 7])
    n_tokens = 7
    q, k, v = rng.standard_normal((3, 3, n_tokens, 3))
    mask = (np.arange(n_tokens) < lengths[:, None])[:, None, :]  # (N, 1, T)
    weight = rng.standard_normal((3, n_tokens, 3))
    kwargs = dict(mask=mask, causal=causal, tile_elements=tile_elements)
    kwargs["dropout"] = (0.4, stream_keys(rng, (3,)))

    def loss():
        return np.sum(attention_forward(q, k, v, **kwargs)[0] * weight)

    out, lse, _ = attention_forward(q, k, v, **kwargs)
    grads = attention_backward(weight, q, k, v, out, lse, **kwargs)
    for analytic, array in zip(grads, (q, k, v), strict=True):
        assert relative_error(analytic, numeric_gradient(loss, array)) < 1e-7
    _, d_k, d_v = grads
    padding = ~mask[:, 0, :]
    assert np.all(d_k[padding] == 0) and np.all(d_v[padding] == 0)


@pytest.mark.parametrize("n_keys", [5, 12])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_attention_backward_broadcast_query(rng, n_keys, p):
    """A query shared by all samples (attention pooling) sums its gradient."""
    q = rng.standard_normal((1, 1, 3))
    k = rng.standard_normal((4, n_keys, 3))
    weight = rng.standard_normal((4, 1, 3))
    dropout = (p, stream_keys(rng, (4,)))

    def loss():
        return np.sum(attention_forward(q, k, k, dropout=dropout)[0] * weight)

    out, lse, _ = attention_forward(q, k, k, dropout=dropout)
    d_q, d_k, d_v = attention_backward(weight, q, k, k, out, lse, dropout=dropout)
    assert d_q.shape == q.shape
    assert relative_error(d_q, numeric_gradient(loss, q)) < 1e-7
    assert relative_error(d_k + d_v, numeric_gradient(loss, k)) < 1e-7


@pytest.mark.parametrize("with_output", [False, True])
@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("keys_shape", [(2, 2), (2, 1)])  # per head, or shared
def test_multi_head_backward(rng, with_output, p, keys_shape):
    x = rng.standard_normal((2, 5, 4))
    w = {name: rng.standard_normal((4, 6)) for name in ("query", "key", "value")}
    w["output"] = rng.standard_normal((6, 3)) if with_output else None
    mask = rng.random((2, 1, 5)) < 0.7
    weight = rng.standard_normal((2, 5, 3 if with_output else 6))
    kwargs = dict(n_heads=2, mask=mask, causal=True)
    kwargs["dropout"] = (p, stream_keys(rng, keys_shape))

    def loss():
        out, _ = multi_head_forward(x, *w.values(), **kwargs)
        return np.sum(out * weight)

    _, cache = multi_head_forward(x, *w.values(), **kwargs)
    d_x, grads = multi_head_backward(weight, x, *w.values(), cache, **kwargs)
    assert relative_error(d_x, numeric_gradient(loss, x)) < 1e-7
    for name, array in w.items():
        if array is not None:
            assert relative_error(grads[name], numeric_gradient(loss, array)) < 1e-7
