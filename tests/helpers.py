"""What several test modules share: data makers, finite differences, a small task,
the scikit-learn checks that parametrize_with_checks does not run."""

import math

import numpy as np
from sklearn.utils.estimator_checks import (
    check_get_feature_names_out_error,
    check_global_output_transform_pandas,
    check_param_validation,
    check_set_output_transform,
    check_set_output_transform_pandas,
    check_transformer_get_feature_names_out,
    check_transformer_get_feature_names_out_pandas,
)

from skattn._model.sequences import pad_sequences
from skattn._model.units import Context

EPS = 1e-6
LENGTHS = (3, 7, 1, 5)

# Checks of scikit-learn that parametrize_with_checks does not run by itself.
EXTRA_CHECKS = [
    check_param_validation,
    check_set_output_transform,
    check_set_output_transform_pandas,
    check_global_output_transform_pandas,
    check_transformer_get_feature_names_out,
    check_transformer_get_feature_names_out_pandas,
    check_get_feature_names_out_error,
]


def make_3d(n=5, n_tokens=6, width=4, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n_tokens, width)).astype(dtype)


def make_ragged(lengths=LENGTHS, width=4, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, width)).astype(dtype) for n in lengths]


def make_table(n=5, n_features=6, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n_features)).astype(dtype)


def make_input(kind, dtype=np.float64):
    if kind == "table":
        return make_table(dtype=dtype)
    if kind == "3d":
        return make_3d(dtype=dtype)
    return make_ragged(dtype=dtype)


def object_array(sequences):
    """1-D object array of 2D arrays (np.array would stack equal shapes)."""
    out = np.empty(len(sequences), dtype=object)
    for i, seq in enumerate(sequences):
        out[i] = seq
    return out


def relative_error(analytic, numeric, noise=1e-8):
    """Largest difference relative to the largest gradient entry.

    Differences below the finite differences' own noise (rounding of the loss
    divided by 2 * EPS: up to about 1e-9 for the losses of these tests) count
    as none: a gradient that is exactly zero, such as a causal first token's
    query, has nothing to compare.
    """
    difference = np.abs(analytic - numeric).max()
    if difference < noise:
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


def directional_error(loss, array, grad, rng, n_directions=3, noise=1e-8):
    """Central differences of ``loss()`` along ``n_directions`` random unit
    directions ``u`` of ``array`` against ``grad . u``: the largest
    difference relative to ``|grad|`` (below ``noise``, as none; see
    :func:`relative_error`).

    Each gradient entry weighs in every direction, so a wrong entry shows
    at two finite differences a direction instead of two an entry: for the
    gradients of whole models, whose units are checked entry by entry."""
    scale = max(np.linalg.norm(grad), noise)
    worst = 0.0
    saved = array.copy()
    for _ in range(n_directions):
        u = rng.standard_normal(array.shape)
        u /= np.linalg.norm(u)
        array[...] = saved + EPS * u
        plus = loss()
        array[...] = saved - EPS * u
        minus = loss()
        array[...] = saved
        difference = abs((plus - minus) / (2 * EPS) - float(np.sum(grad * u)))
        if difference >= noise:
            worst = max(worst, difference / scale)
    return worst


def ragged_batch(rng, lengths, width):
    """A right-padded batch whose padding holds noise (it must not matter)."""
    x, lengths = pad_sequences(
        [rng.standard_normal((n, width)) for n in lengths], np.float64
    )
    x += 5.0 * rng.standard_normal(x.shape) * (x == 0)
    return x, lengths


def seeded_params(unit, rng):
    """The unit's parameters, moved off their initial values."""
    return {
        name: rng.standard_normal(spec.shape) * (0.5 if len(spec.shape) > 1 else 1.0)
        + (1.0 if spec.init == "ones" else 0.0)
        for name, spec in unit.param_specs().items()
    }


def check_unit(unit, params, x, lengths, rng, *, dropout=None, causal=False):
    """Gradients of a weighted sum of the unit's output: parameters and x."""

    def run():
        context = Context(lengths.copy(), causal=causal, dropout=dropout)
        return unit.forward(params, x, context)

    out, cache = run()
    weight = rng.standard_normal(out.shape)
    if out.ndim == 3:  # outputs at padded positions are never read
        valid = np.arange(out.shape[1]) < lengths[:, None] + (out.shape[1] - x.shape[1])
        weight *= valid[:, :, None]
    d_x, grads = unit.backward(params, weight.copy(), cache)

    def loss():
        return np.sum(run()[0] * weight)

    assert set(grads) == set(params)
    for name, array in params.items():
        assert grads[name].shape == array.shape
        assert relative_error(grads[name], numeric_gradient(loss, array)) < 1e-6, name
    if d_x is not None:
        assert relative_error(d_x, numeric_gradient(loss, x)) < 1e-6


def order_task(n=120, n_tokens=6, width=4, seed=0):
    """Label: does symbol 0 come before symbol 1? Same tokens in both classes."""
    vocabulary = np.random.RandomState(12345).standard_normal((5, width))
    rng = np.random.RandomState(seed)
    X = np.empty((n, n_tokens, width))
    y = np.empty(n, dtype=int)
    for i in range(n):
        symbols = rng.randint(2, 5, size=n_tokens)
        first, second = rng.choice(n_tokens, 2, replace=False)
        symbols[first], symbols[second] = 0, 1
        X[i] = vocabulary[symbols] + 0.05 * rng.standard_normal((n_tokens, width))
        y[i] = first < second
    return X, y


def reference_attention(q, k, v, allowed, scale, d_v=None):
    """Attention of one (Tq, d) query block with plain Python loops.

    ``allowed[i][j]`` says whether query i may attend to key j; ``d_v`` is the
    width of the values (needed only when there is no key).
    """
    n_queries, n_keys = len(q), len(k)
    d_v = len(v[0]) if d_v is None else d_v
    out = [[0.0] * d_v for _ in range(n_queries)]
    weights = [[0.0] * n_keys for _ in range(n_queries)]
    for i in range(n_queries):
        keys = [j for j in range(n_keys) if allowed[i][j]]
        if not keys:
            continue
        scores = {
            j: scale * sum(a * b for a, b in zip(q[i], k[j], strict=True)) for j in keys
        }
        top = max(scores.values())
        total = sum(math.exp(s - top) for s in scores.values())
        for j in keys:
            weights[i][j] = math.exp(scores[j] - top) / total
            for c in range(d_v):
                out[i][c] += weights[i][j] * v[j][c]
    return (
        np.array(out).reshape(n_queries, d_v),
        np.array(weights).reshape(n_queries, n_keys),
    )


def reference_batched(q, k, v, mask=None, causal=False, scale=None):
    """Loop reference over broadcast leading dimensions."""
    if scale is None:  # scores of empty queries and keys are 0 whatever the scale
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    n_q, n_k = q.shape[-2], k.shape[-2]
    batch = np.broadcast_shapes(
        q.shape[:-2],
        k.shape[:-2],
        v.shape[:-2],
        () if mask is None else mask.shape[:-2],
    )
    full_mask = np.ones((n_q, n_k), bool) if mask is None else mask
    full_mask = np.broadcast_to(full_mask, batch + (n_q, n_k))
    if causal:
        full_mask = full_mask & np.tril(np.ones((n_q, n_k), bool))
    q, k, v = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))
    out = np.zeros(batch + (n_q, v.shape[-1]))
    weights = np.zeros(batch + (n_q, n_k))
    for index in np.ndindex(*batch):
        out[index], weights[index] = reference_attention(
            q[index].tolist(),
            k[index].tolist(),
            v[index].tolist(),
            full_mask[index].tolist(),
            scale,
            v.shape[-1],
        )
    return out, weights


def assert_equals_the_dense_kernel(result, q, k, v, allowed, dropout):
    """A sparse kernel's ``(out, lse, weights)`` against the dense kernel
    given the pattern as its mask ``allowed``: outputs, weights (zero outside
    the pattern), log-sum-exp (inf for the same empty rows). Returns the dense
    kernel's output and log-sum-exp, for the gradients."""
    from numpy.testing import assert_allclose, assert_array_equal

    from skattn._kernels.attention import attention_forward

    out, lse, weights = result
    expected, expected_lse, expected_weights = attention_forward(
        q, k, v, mask=allowed, return_weights=True, dropout=dropout
    )
    assert_allclose(out, expected, rtol=0, atol=1e-14)
    assert_allclose(weights, expected_weights, rtol=0, atol=1e-14)
    assert_array_equal(np.isinf(lse), np.isinf(expected_lse))
    finite = np.isfinite(expected_lse)
    assert_allclose(lse[finite], expected_lse[finite], rtol=0, atol=1e-13)
    assert np.all(weights[~np.broadcast_to(allowed, weights.shape)] == 0)
    return expected, expected_lse


def shared_maps_on_two_cpus(monkeypatch):
    """The task counts of the maps skattn shares among threads from now on,
    as a list that grows with each, on a machine seen as having two CPUs
    (``_parallel._shared_map``: maps of at least two tasks on two workers)."""
    from skattn import _parallel

    monkeypatch.setattr(_parallel, "_available_cpus", lambda: 2)
    shared = []
    real_map = _parallel._shared_map

    def counted(function, tasks, n_workers):
        shared.append(len(tasks))
        return real_map(function, tasks, n_workers)

    monkeypatch.setattr(_parallel, "_shared_map", counted)
    return shared
