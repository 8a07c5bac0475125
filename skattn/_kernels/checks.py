"""Checks of the arguments of the public kernels.

:func:`skattn.scaled_dot_product_attention` and
:func:`skattn.multi_head_attention` take arrays from users: each argument is
checked here once, with a message that names it. Pure numpy (and scipy's
sparse test): the estimators check their input in ``_input/validation.py``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import numbers
from numbers import Real

import numpy as np
from scipy import sparse


def as_mask(mask, n_queries, n_keys):
    """Check a user mask: boolean, broadcastable to (..., Tq, Tk); at least 2-D."""
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(
            f"mask must be a boolean array (True = may attend), got dtype {mask.dtype}."
        )
    try:
        np.broadcast_shapes(mask.shape, (n_queries, n_keys))
    except ValueError:
        raise ValueError(
            f"mask of shape {mask.shape} does not broadcast to (..., T_q, T_k) = "
            f"(..., {n_queries}, {n_keys})."
        ) from None
    return mask.reshape((1,) * (2 - mask.ndim) + mask.shape) if mask.ndim < 2 else mask


def check_kernel_array(array, name, min_ndim=2):
    """A kernel's array argument as a real ndarray of at least ``min_ndim`` axes.

    Raises
    ------
    TypeError
        For a sparse matrix, or a dtype that is not boolean, integer or real
        floating (complex numbers have no softmax order; objects and strings
        are not numbers).
    ValueError
        For fewer than ``min_ndim`` axes.
    """
    if sparse.issparse(array):
        raise TypeError(
            f"{name} is a sparse {type(array).__name__}; the attention kernels "
            f"take dense arrays: pass {name}.toarray()."
        )
    array = np.asarray(array)
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must be an array of real numbers, got dtype {array.dtype}"
            + (
                ": pass its real part (np.real) if the imaginary part is not needed."
                if array.dtype.kind == "c"
                else "."
            )
        )
    if array.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions, got shape {array.shape}."
        )
    return array


def check_batch_shapes(*named_shapes):
    """Raise a ValueError naming the arrays whose leading (batch) axes do not
    broadcast together (numpy's message names "arg 0" and "arg 1").

    Parameters
    ----------
    *named_shapes : (str, tuple or None)
        Each array's name and full shape (None: no such array); the last two
        axes are (tokens, width) and do not take part.
    """
    shapes = [(name, shape) for name, shape in named_shapes if shape is not None]
    try:
        np.broadcast_shapes(*(shape[:-2] for _, shape in shapes))
    except ValueError:
        described = ", ".join(f"{name} {shape}" for name, shape in shapes)
        raise ValueError(
            "The leading (batch) axes, all but the last two, must broadcast "
            f"together (numpy rules), but they do not: {described}. Give every "
            "array the same batch axes, or axes of size 1 to share one along them."
        ) from None


def check_scale(scale):
    """``scale`` as a finite float, or None."""
    if scale is None:
        return None
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, Real):
        raise TypeError(f"scale must be a real number or None, got {scale!r}.")
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale!r}.")
    return float(scale)


def check_bool(value, name):
    """A flag as a bool; a TypeError for anything else ("yes", 1, None)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def check_causal(causal):
    return check_bool(causal, "causal")


def check_int(value, name, minimum, *, or_none=False):
    """Raise unless ``value`` is an int (not a bool) of at least ``minimum``
    (``or_none``: the message says None is allowed too; the caller takes
    None apart)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        allowed = " or None" if or_none else ""
        raise TypeError(f"{name} must be an int >= {minimum}{allowed}, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
