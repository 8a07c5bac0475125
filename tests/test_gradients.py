"""Every backward pass against central finite differences in float64."""

import itertools

import numpy as np
import pytest

from skattn._attention import (
    attention_backward,
    attention_forward,
    multi_head_backward,
    multi_head_forward,
)
from skattn._model import backward, forward, init_params
from skattn._pooling import POOLINGS
from skattn._sequences import pad_sequences

EPS = 1e-6


def relative_error(analytic, numeric):
    """Largest difference relative to the largest gradient entry.

    Differences below the finite differences' own noise (rounding of the loss
    divided by 2 * EPS, about 2e-10 here) count as none: a gradient that is
    exactly zero, such as a causal first token's query, has nothing to compare.
    """
    difference = np.abs(analytic - numeric).max()
    if difference < 1e-9:
        return 0.0
    return difference / max(np.abs(analytic).max(), np.abs(numeric).max())


def numeric_gradient(loss, array):
    """Central differences of ``loss()`` with respect to every entry of array."""
    grad = np.zeros_like(array)
    for index in np.ndindex(*array.shape):
        saved = array[index]
        array[index] = saved + EPS
        plus = loss()
        array[index] = saved - EPS
        minus = loss()
        array[index] = saved
        grad[index] = (plus - minus) / (2 * EPS)
    return grad


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("tile_elements", [7, 10**6])
@pytest.mark.parametrize("n_keys", [6, 12])  # row shifts added, or folded
def test_attention_backward(rng, causal, use_mask, tile_elements, n_keys):
    from skattn._attention import backward_folds_rows

    assert backward_folds_rows(n_keys, 3) == (n_keys == 12)
    q = rng.standard_normal((2, 5, 3))
    k = rng.standard_normal((2, n_keys, 3))
    v = rng.standard_normal((2, n_keys, 4))
    mask = rng.random((2, 1, n_keys)) < 0.6 if use_mask else None
    if use_mask:
        mask[1] = False  # a sample whose queries have no key at all
    weight = rng.standard_normal((2, 5, 4))

    def loss():
        out, _, _ = attention_forward(q, k, v, mask=mask, causal=causal, scale=0.7)
        return np.sum(out * weight)

    out, lse, _ = attention_forward(q, k, v, mask=mask, causal=causal, scale=0.7)
    grads = attention_backward(
        weight, q, k, v, out, lse, mask=mask, causal=causal, scale=0.7,
        tile_elements=tile_elements,
    )  # fmt: skip
    for analytic, array in zip(grads, (q, k, v), strict=True):
        assert relative_error(analytic, numeric_gradient(loss, array)) < 1e-7


@pytest.mark.parametrize("n_keys", [5, 12])
def test_attention_backward_broadcast_query(rng, n_keys):
    """A query shared by all samples (attention pooling) sums its gradient."""
    q = rng.standard_normal((1, 1, 3))
    k = rng.standard_normal((4, n_keys, 3))
    weight = rng.standard_normal((4, 1, 3))

    def loss():
        return np.sum(attention_forward(q, k, k)[0] * weight)

    out, lse, _ = attention_forward(q, k, k)
    d_q, d_k, d_v = attention_backward(weight, q, k, k, out, lse)
    assert d_q.shape == q.shape
    assert relative_error(d_q, numeric_gradient(loss, q)) < 1e-7
    assert relative_error(d_k + d_v, numeric_gradient(loss, k)) < 1e-7


@pytest.mark.parametrize("with_output", [False, True])
def test_multi_head_backward(rng, with_output):
    x = rng.standard_normal((2, 5, 4))
    w = {name: rng.standard_normal((4, 6)) for name in ("query", "key", "value")}
    w["output"] = rng.standard_normal((6, 3)) if with_output else None
    mask = rng.random((2, 1, 5)) < 0.7
    weight = rng.standard_normal((2, 5, 3 if with_output else 6))
    kwargs = dict(n_heads=2, mask=mask, causal=True)

    def loss():
        out, _ = multi_head_forward(x, *w.values(), **kwargs)
        return np.sum(out * weight)

    _, cache = multi_head_forward(x, *w.values(), **kwargs)
    d_x, grads = multi_head_backward(weight, x, *w.values(), cache, **kwargs)
    assert relative_error(d_x, numeric_gradient(loss, x)) < 1e-7
    for name, array in w.items():
        if array is not None:
            assert relative_error(grads[name], numeric_gradient(loss, array)) < 1e-7


COMBINATIONS = list(
    itertools.product(
        list(POOLINGS),
        ["sinusoidal", "learned", None],
        [(True, True), (False, False), (True, False)],
        [False, True],
    )
)


@pytest.mark.parametrize(
    "pooling, positional_encoding, residual_norm, causal", COMBINATIONS
)
@pytest.mark.parametrize("ragged", [False, True])
def test_block_backward(
    rng, pooling, positional_encoding, residual_norm, causal, ragged
):
    """Every parameter of the block, for every option of the forward pass."""
    residual, layer_norm = residual_norm
    if ragged and pooling == "flatten":
        pytest.skip("flatten needs one length")
    n_features, width, n_heads = 3, 4, 2
    lengths = [4, 2, 3] if ragged else [4, 4, 4]
    x, lengths = pad_sequences(
        [rng.standard_normal((n, n_features)) for n in lengths], np.float64
    )
    params = init_params(
        np.random.RandomState(0), n_features, width, pooling=pooling,
        positional_encoding=positional_encoding, n_positions=3,  # 4th is sinusoidal
        layer_norm=layer_norm, has_input=True,
    )  # fmt: skip
    for name in params:  # move layer norm and positions off their initial values
        params[name] = params[name] + 0.3 * rng.standard_normal(params[name].shape)
    options = dict(
        n_heads=n_heads, pooling=pooling, positional_encoding=positional_encoding,
        residual=residual, layer_norm=layer_norm, causal=causal,
    )  # fmt: skip
    _, pooled, cache = forward(params, x, lengths, **options)
    weight = rng.standard_normal(pooled.shape)

    def loss():
        return np.sum(forward(params, x, lengths, **options)[1] * weight)

    grads = backward(weight, params, x, cache, **options)
    assert set(grads) == set(params)
    for name, array in params.items():
        numeric = numeric_gradient(loss, array)
        assert grads[name].shape == array.shape
        assert relative_error(grads[name], numeric) < 1e-6, name


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("pooling", ["mean", "cls", "attention"])
def test_training_loss_gradient(rng, task, pooling):
    """Block + head + weighted loss + L2 penalty, through the estimator's routine,
    on ragged input."""
    from skattn import AttentionTransformer
    from skattn._sequences import sequence_lengths

    X = [rng.standard_normal((n, 3)) for n in (4, 2, 5, 3, 1)]
    if task == "classification":
        y = np.array(["a", "b", "c", "a", "b"])
    else:
        y = rng.standard_normal((5, 2))
    sample_weight = rng.uniform(0.5, 2.0, size=5)
    est = AttentionTransformer(
        n_heads=2, head_dim=2, pooling=pooling, positional_encoding="learned",
        alpha=0.3, max_iter=1, random_state=0,
    ).fit(X, y, sample_weight=sample_weight)  # fmt: skip
    params = est._params(np.float64)
    y_2d = y if task == "classification" else y.reshape(5, -1)
    y_encoded = est._encode_target(y_2d, task, False, None, sample_weight)
    data = (X, sequence_lengths(X), y_encoded, sample_weight)
    rows = np.arange(5)
    _, grads = est._loss_grad(params, data, rows)

    def loss():
        return est._loss_grad(params, data, rows)[0]

    assert set(grads) == set(params)
    for name, array in params.items():
        numeric = numeric_gradient(loss, array)
        assert relative_error(grads[name], numeric) < 1e-6, name
