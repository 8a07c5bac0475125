"""The numba functions of the compiled layer norm (imported only where numba
is installed; see :func:`skattn._kernels.compiled.layer_norm_forward`).

Arrays are 2-D, one row per token, C-contiguous. Each row is normalised in
one pass of its own, its sums taken in float64 whatever the dtype of the
tokens: a float32 row of 1e20 does not overflow them.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numba
import numpy as np

from ._numba_attention import JIT


@numba.njit(**JIT)
def forward(x, weight, bias, eps, out, x_hat, inv_std):
    """Normalise each row of ``x`` (R, E) into ``x_hat``, ``out = x_hat *
    weight + bias`` and ``inv_std`` (R, 1): one over the square root of its
    variance plus ``eps``. Returns False, at the first row whose variance or
    ``inv_std`` is not finite and positive (squares that overflow float64,
    NaN or infinite tokens, a constant row with ``eps = 0``), leaving the
    outputs incomplete."""
    n_rows, width = x.shape
    for i in range(n_rows):
        total = 0.0
        for e in range(width):
            total += x[i, e]
        mean = total / width
        squares = 0.0
        for e in range(width):
            centred = x[i, e] - mean
            squares += centred * centred
        variance = squares / width
        root = math.sqrt(variance + eps)
        if not (variance < np.inf and root > 0.0):  # NaN fails both
            return False
        scale = 1.0 / root
        if not scale < np.inf:
            return False
        inv_std[i, 0] = scale
        for e in range(width):
            value = x.dtype.type((x[i, e] - mean) * scale)
            x_hat[i, e] = value
            out[i, e] = value * weight[e] + bias[e]
    return True


@numba.njit(**JIT)
def backward(d_out, weight, x_hat, inv_std, d_x, d_weight, d_bias):
    """Gradients of :func:`forward` for ``d_out`` (R, E): ``d_x`` (R, E) and
    ``d_weight``, ``d_bias`` (E,), summed over the rows in float64."""
    n_rows, width = d_out.shape
    sum_weight = np.zeros(width)
    sum_bias = np.zeros(width)
    for i in range(n_rows):
        mean_g = 0.0  # of g = d_out * weight, the gradient of x_hat
        mean_g_x_hat = 0.0
        for e in range(width):
            g = d_out[i, e] * weight[e]
            mean_g += g
            mean_g_x_hat += g * x_hat[i, e]
            sum_weight[e] += d_out[i, e] * x_hat[i, e]
            sum_bias[e] += d_out[i, e]
        mean_g /= width
        mean_g_x_hat /= width
        for e in range(width):
            g = d_out[i, e] * weight[e]
            d_x[i, e] = (g - mean_g - x_hat[i, e] * mean_g_x_hat) * inv_std[i, 0]
    for e in range(width):
        d_weight[e] = sum_weight[e]
        d_bias[e] = sum_bias[e]
