"""The public :func:`~skattn.scaled_dot_product_attention`: full attention
(``attention.py``) or the kernels of an attention pattern (``patterns.py``:
banded, BigBird's blocks), on arrays of any leading dimensions, with the
checks of its arguments.

Like ``torch.nn.functional.scaled_dot_product_attention``: pure functions on
arrays, nothing here imports scikit-learn or knows about an estimator.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from .attention import attention_forward, compute_dtype, output_dtype
from .checks import (
    as_mask,
    check_batch_shapes,
    check_bool,
    check_causal,
    check_kernel_array,
    check_scale,
)
from .patterns import resolve_pattern


def scaled_dot_product_attention(
    query,
    key,
    value,
    *,
    mask=None,
    causal=False,
    scale=None,
    return_weights=False,
    window=None,
    dilation=1,
    pattern=None,
):
    """Scaled dot-product attention, ``softmax(Q K^T * scale) V``.

    Works like ``torch.nn.functional.scaled_dot_product_attention`` on numpy
    arrays. Scores are computed in query tiles of about a million scores, so
    memory is linear in the sequence length unless ``return_weights=True``;
    with a sparse ``pattern`` (or ``window``), time is linear too.

    Parameters
    ----------
    query : array-like of shape (..., T_q, d_k)
        Queries.
    key : array-like of shape (..., T_k, d_k)
        Keys.
    value : array-like of shape (..., T_k, d_v)
        Values.
    mask : array-like of bool, broadcastable to (..., T_q, T_k), default=None
        True where a query may attend to a key. A key-padding mask of shape
        ``(n, 1, T_k)`` or ``(n, T_k)``-like broadcasts over the queries.
    causal : bool, default=False
        Query ``i`` attends only to keys ``j <= i`` (combined with ``mask``).
    scale : float, default=None
        Multiplier of the scores, finite, of either sign; None means
        ``1 / sqrt(d_k)`` (1 when ``d_k = 0``: the scores are then all 0).
    return_weights : bool, default=False
        Also return the attention weights.
    window : int or None, default=None
        Banded attention (Longformer's sliding window): query ``i`` attends
        key ``j`` only when ``i - j`` is a multiple of ``dilation`` and
        ``|i - j| <= (window // 2) * dilation`` (with ``causal``: ``0 <= i - j
        <= (window - 1) * dilation``), combined with ``mask``; time and memory
        ``O(T_q * window)``. None: every key.
    dilation : int, default=1
        Gap between the keys of the band.
    pattern : attention pattern or None, default=None
        Which keys each query reads, an object of :mod:`skattn.patterns`
        (:class:`~skattn.patterns.BandedAttention`,
        :class:`~skattn.patterns.BigBirdAttention`: self-attention only, as
        many queries as keys), combined with ``mask``. ``window`` and
        ``dilation`` are the shorthand of ``BandedAttention(window,
        dilation)``: give one or the other. None: every key.

    Returns
    -------
    output : ndarray of shape (..., T_q, d_v)
        The attention output, in the common floating dtype of the inputs
        (float32 stays float32; integers become float64; float16 is computed
        in float32 and returned in float16). A query row with no allowed key
        gives zeros, and so does every row when ``T_k = 0``.
    weights : ndarray of shape (..., T_q, T_k)
        Only when ``return_weights=True``. Each row sums to 1 over the allowed
        keys (0 for a row with no allowed key), zero outside the pattern.

    Examples
    --------
    >>> import numpy as np
    >>> from skattn import scaled_dot_product_attention
    >>> q = k = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> v = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> out, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    >>> print(np.round(w, 3))
    [[0.401 0.198 0.401]
     [0.198 0.401 0.401]
     [0.248 0.248 0.503]]
    >>> print(np.round(out, 3))
    [[3.    4.   ]
     [3.407 4.407]
     [3.51  4.51 ]]

    A band of one token each side: the first query reads the first two keys.

    >>> out, w = scaled_dot_product_attention(q, k, v, window=3, return_weights=True)
    >>> print(np.round(w, 3))
    [[0.67  0.33  0.   ]
     [0.198 0.401 0.401]
     [0.    0.33  0.67 ]]
    """
    query, key, value = (
        check_kernel_array(array, name)
        for array, name in ((query, "query"), (key, "key"), (value, "value"))
    )
    scale, causal = check_scale(scale), check_causal(causal)
    pattern = resolve_pattern(pattern, window, dilation)
    return_weights = check_bool(return_weights, "return_weights")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same last dimension d_k, got "
            f"{query.shape[-1]} and {key.shape[-1]}."
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same number of tokens T_k, got "
            f"{key.shape[-2]} and {value.shape[-2]}."
        )
    mask = as_mask(mask, query.shape[-2], key.shape[-2])
    check_batch_shapes(
        ("query", query.shape),
        ("key", key.shape),
        ("value", value.shape),
        ("mask", None if mask is None else mask.shape),
    )
    dtype = compute_dtype(query, key, value)
    result_dtype = output_dtype(query, key, value)
    query, key, value = (a.astype(dtype, copy=False) for a in (query, key, value))
    kernel = attention_forward if pattern is None else pattern._kernels_of().forward
    out, _, weights = kernel(
        query,
        key,
        value,
        mask=mask,
        causal=causal,
        scale=scale,
        return_weights=return_weights,
        dropout=None,
    )
    out = out.astype(result_dtype, copy=False)
    if return_weights:
        return out, weights.astype(result_dtype, copy=False)
    return out
