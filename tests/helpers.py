"""What several test modules share: data makers, finite differences, a small task,
the scikit-learn checks that parametrize_with_checks does not run."""

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
