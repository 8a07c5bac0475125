"""What several test modules share: finite differences and a small task."""

import numpy as np

EPS = 1e-6


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
