"""Every compiled kernel run once, so that numba compiles and caches it.

What the test suite compiles when it starts (``tests/conftest.py``: each
pytest-xdist worker one dtype, read by the others from numba's cache) and
what ``benchmarks/compile_time.py`` times, one list for both. It needs
numba (the ``[fast]`` extra).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from . import compiled, compiled_banded
from .band import band_offsets

# The names :func:`compile_kernels` gives ``timed``, in the order it runs them.
KERNELS = (
    "short forward",
    "short backward",
    "blocked forward",
    "blocked backward",
    "banded forward",
    "banded backward",
    "layer norm",
    "threshold statistics",
)


def _untimed(name, function, *arguments):
    return function(*arguments)


def compile_kernels(dtype, timed=_untimed):
    """Run each compiled kernel once on small arrays of ``dtype``.

    The short and the blocked attention passes (the blocked ones with their
    products by BLAS and by compiled loops, one function each), the banded
    passes without and with a global token, the layer norm and the threshold
    statistics (PPV and LSPV), on arrays of any layout as
    :mod:`skattn._kernels.compiled` passes them: numba compiles the
    signatures skattn runs, and caches them where it can.

    Parameters
    ----------
    dtype : type
        ``np.float32`` or ``np.float64``.
    timed : callable, default calls the function
        ``timed(name, function, *arguments)`` returns ``function(*arguments)``;
        ``name`` is one of ``KERNELS`` (a kernel of several calls is named at
        each). A benchmark's clock.
    """
    if not compiled.enabled():
        raise RuntimeError("the compiled kernels are off (no numba, or turned off)")
    rng = np.random.default_rng(0)
    q, k, v, d_out = (rng.standard_normal((2, 2, 40, 8)).astype(dtype) for _ in "qkvd")
    lengths = np.full((2, 2), 40, np.int64)
    saved = compiled._FORWARD_KERNEL, compiled._BACKWARD_KERNEL
    try:
        for kernel in ("short", "blocked"):
            compiled._FORWARD_KERNEL = compiled._BACKWARD_KERNEL = kernel
            out, lse = timed(
                f"{kernel} forward", compiled.forward, q, k, v, lengths, False, 0.3
            )
            delta = np.sum(d_out * out, axis=-1)
            timed(f"{kernel} backward", compiled.backward, d_out, q, k, v, lse,
                  delta, lengths, False, 0.3, 2.0**-10)  # fmt: skip
    finally:
        compiled._FORWARD_KERNEL, compiled._BACKWARD_KERNEL = saved
    q, k, v, d_out = (a[:, 0] for a in (q, k, v, d_out))  # (B, T, D)
    offsets = band_offsets(3, n_queries=40, n_keys=40)
    lengths = lengths[:, 0]
    for glob in (None, np.zeros(2, np.int64)):
        out, lse = timed("banded forward", compiled_banded.banded_forward, q, k, v,
                         lengths, glob, offsets, False, 0.3)  # fmt: skip
        timed("banded backward", compiled_banded.banded_backward, d_out, q, k, v,
              out, lse, lengths, glob, offsets, False, 0.3)  # fmt: skip
    weight, bias = np.ones(8, dtype), np.zeros(8, dtype)
    _, x_hat, inv_std = timed(
        "layer norm", compiled.layer_norm_forward, q, weight, bias, 1e-5
    )
    timed("layer norm", compiled.layer_norm_backward, d_out, weight, x_hat, inv_std)
    thresholds = np.zeros((3, 8), dtype)
    for longest_stretch in (False, True):
        timed("threshold statistics", compiled.threshold_statistics, q, lengths,
              thresholds, longest_stretch)  # fmt: skip
