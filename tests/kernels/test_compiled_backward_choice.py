"""The compiled backward kernels: the short one against the numpy path, and
which kernel the backward pass runs at each size."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skattn._kernels import compiled
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward

needs_numba = pytest.mark.skipif(
    compiled.kernels() is None, reason="numba is not installed (the [fast] extra)"
)
pytestmark = [needs_numba, pytest.mark.compiled_path]

# the rule's constant, before the kernel tests set it to 0 (conftest.py)
MIN_KEYS_PER_SQUARED_DIM = compiled.MIN_KEYS_PER_SQUARED_DIM


def gradients(monkeypatch, arrays, mask, causal, kernel):
    """Gradients of the attention of ``arrays`` (q, k, v, d_out) on
    ``kernel`` (None: the numpy path), from the numpy path's forward pass."""
    q, k, v, d_out = arrays
    monkeypatch.setattr(compiled, "_DISABLED", True)
    out, lse, _ = attention_forward(q, k, v, mask=mask, causal=causal)
    monkeypatch.setattr(compiled, "_DISABLED", kernel is None)
    monkeypatch.setattr(compiled, "_BACKWARD_KERNEL", kernel)
    return attention_backward(d_out, q, k, v, out, lse, mask=mask, causal=causal)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [3, 16, 33])
def test_short_backward_equals_the_numpy_path(monkeypatch, dtype, causal, head_dim):
    """The short kernel: 301 queries (a block of 256 and a last one of 45),
    301, 150, 37 and 0 valid keys (widths of a register tile, of vectors and
    of single columns), two heads, give the numpy path's gradients to float
    rounding; the keys and values past a sequence's length get 0, and an
    attention with no key gets 0 everywhere."""
    rng = np.random.default_rng(0)
    shape = (4, 2, 301, head_dim)
    arrays = [rng.standard_normal(shape).astype(dtype) for _ in range(4)]
    lengths = np.array([301, 150, 37, 0])
    padding = (np.arange(301) < lengths[:, None])[:, None, None, :]
    grads = gradients(monkeypatch, arrays, padding, causal, "short")
    expected = gradients(monkeypatch, arrays, padding, causal, None)
    rtol = 1e-4 if dtype == np.float32 else 1e-11
    for grad, want in zip(grads, expected, strict=True):
        assert grad.dtype == dtype
        assert_allclose(grad, want, rtol=rtol, atol=rtol * np.abs(want).max())
    d_q, d_k, d_v = grads
    for n, length in enumerate(lengths):
        assert_array_equal(d_k[n, :, length:], 0.0)
        assert_array_equal(d_v[n, :, length:], 0.0)
    assert_array_equal(d_q[3], 0.0)
    assert np.abs(d_q[:3]).min(axis=-1).max() > 0


def test_short_backward_of_a_batch_is_each_attention_alone(monkeypatch):
    """Each attention's gradients are the same, to the bit, computed in a
    batch of five (split over the threads) or alone."""
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((5, 2, 40, 16)).astype(np.float32) for _ in "qkvd"]
    padding = (np.arange(40) < np.array([40, 33, 17, 8, 1])[:, None])[:, None, None]
    batch = gradients(monkeypatch, arrays, padding, True, "short")
    for n in range(5):
        alone = gradients(
            monkeypatch,
            [a[n : n + 1] for a in arrays],
            padding[n : n + 1],
            True,
            "short",
        )
        for grad, single in zip(batch, alone, strict=True):
            assert_array_equal(grad[n : n + 1], single)


@pytest.mark.parametrize(
    "n_keys, head_dim, kernel",
    [(7, 16, None), (8, 16, "short"), (127, 16, "short"), (128, 16, "blocked")]
    + [(4, 4, "blocked"), (8, 64, "short"), (127, 128, "short")]
    + [(255, 32, None), (256, 32, "blocked"), (1024, 64, None), (8192, 64, None)],
)
def test_compiled_backward_kernel_runs_where_it_is_faster(
    monkeypatch, n_keys, head_dim, kernel
):
    """The short kernel from 8 to 127 keys at any head width; else the
    blocked kernel from ``head_dim**2 / 4`` keys on for heads of at most 32
    features; the numpy path elsewhere (numpy's products are faster at heads
    of 64). The kernel chosen is the kernel that runs, with the numpy path's
    gradients."""
    from skattn._kernels import _numba_short

    monkeypatch.setattr(compiled, "_DISABLED", False)
    monkeypatch.setattr(compiled, "MIN_KEYS_PER_SQUARED_DIM", MIN_KEYS_PER_SQUARED_DIM)
    monkeypatch.setattr(compiled, "_BACKWARD_KERNEL", None)
    assert compiled.backward_kernel(n_keys, head_dim) == kernel
    if n_keys > 256:
        return  # the choice only: the larger arrays add nothing to the run
    ran = []
    names = {_numba_short.backward: "short", compiled.kernels().backward: "blocked"}
    run = compiled._run

    def recording_run(function, calls, **kwargs):
        ran.append(names.get(function))
        return run(function, calls, **kwargs)

    monkeypatch.setattr(compiled, "_run", recording_run)
    rng = np.random.default_rng(0)
    q, d_out = (rng.standard_normal((2, 8, head_dim)) for _ in "qd")
    k, v = (rng.standard_normal((2, n_keys, head_dim)) for _ in "kv")
    monkeypatch.setattr(compiled, "_DISABLED", True)
    out, lse, _ = attention_forward(q, k, v)
    expected = attention_backward(d_out, q, k, v, out, lse)
    monkeypatch.setattr(compiled, "_DISABLED", False)
    grads = attention_backward(d_out, q, k, v, out, lse)
    assert ran == ([] if kernel is None else [kernel])
    for grad, want in zip(grads, expected, strict=True):
        assert_allclose(grad, want, rtol=1e-10, atol=1e-12)
