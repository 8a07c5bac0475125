"""Multi-head self-attention: projections, heads, forward and backward.

Pure functions on arrays: the queries, keys and values are projections of the
tokens (``x @ W``), split into heads as consecutive column blocks; each head is
the scaled dot-product attention of :mod:`skattn._kernels.attention`. Nothing here
imports scikit-learn or knows about an estimator.

Shape legend used in the comments: N samples (or any leading batch dimensions),
T tokens, D token width, H heads, Dh head width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from .._parallel import CACHE_BYTES, even_chunks, map_parallel
from .attention import (
    attention_forward,
    compute_dtype,
    mask_with_head_axis,
    output_dtype,
)
from .attention_backward import attention_backward
from .checks import (
    as_mask,
    check_batch_shapes,
    check_bool,
    check_causal,
    check_kernel_array,
)
from .patterns import resolve_pattern


def project(x, w, out=None):
    """``x @ w`` over the last axis of ``x``, as one 2-D matrix product.

    A stacked product of a 3-D ``x`` with a transposed ``w`` runs one small
    GEMM per sample; flattening the leading axes makes it one GEMM, several
    times faster. ``out``: a C-contiguous array of the result's shape and
    dtype to write it into (returned), or None for a new one.
    """
    # the row count spelled out: -1 is ambiguous for tokens of no feature
    flat_x = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
    if out is None:
        return (flat_x @ w).reshape(x.shape[:-1] + (w.shape[1],))  # (..., d_out)
    np.matmul(flat_x, w, out=_view_of(out, (flat_x.shape[0], w.shape[1])))
    return out


def _view_of(out, shape):
    """``out`` reshaped to ``shape`` as a view, to write a result into: a
    ValueError for an ``out`` that is not C-contiguous (its reshape would be
    a copy, and what is written into it lost)."""
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous.")
    return out.reshape(shape)


def split_heads(x, n_heads):
    """View ``(..., T, H * Dh)`` as ``(..., H, T, Dh)`` without copying."""
    *batch, n_tokens, width = x.shape
    x = x.reshape(*batch, n_tokens, n_heads, width // n_heads)  # (..., T, H, Dh)
    return np.swapaxes(x, -2, -3)  # (..., H, T, Dh)


def merge_heads(x, out=None):
    """Inverse of :func:`split_heads`: ``(..., H, T, Dh)`` to ``(..., T, H * Dh)``,
    into ``out`` (C-contiguous, returned) where given."""
    *batch, n_heads, n_tokens, head_dim = x.shape
    x = np.swapaxes(x, -2, -3)  # (..., T, H, Dh)
    if out is None:
        return x.reshape(*batch, n_tokens, n_heads * head_dim)  # (..., T, H*Dh)
    _view_of(out, (*out.shape[:-1], n_heads, head_dim))[...] = x
    return out


def concat_qkv(query, key, value):
    """Query, key and value blocks side by side along the last axis.

    The one layout of the three projections in this module: their weights
    ``(D, Wq + Wk + Wv)`` and the gradients of the projected tokens ``(...,
    T, Wq + Wk + Wv)``; :func:`split_qkv` takes them apart.

    Returns
    -------
    ndarray of shape (..., Wq + Wk + Wv), a new array.
    """
    return np.concatenate([query, key, value], axis=-1)


def split_qkv(qkv, width_query, width_key):
    """Views of the query, key and value blocks of :func:`concat_qkv`'s layout.

    Parameters
    ----------
    qkv : ndarray of shape (..., Wq + Wk + Wv)
    width_query, width_key : int
        ``Wq`` and ``Wk``; the value block is the rest.

    Returns
    -------
    query, key, value : ndarray of shape (..., Wq), (..., Wk), (..., Wv)
    """
    return np.split(qkv, [width_query, width_query + width_key], axis=-1)


def project_qkv(x, w_query, w_key, w_value, n_heads):
    """Queries, keys and values of the tokens ``x``, split into heads.

    Three matrix products, not one with ``concat_qkv(w_query, w_key,
    w_value)``: with OpenBLAS, the fused float32 product rounds most entries
    differently from separate products (shapes (6400, 32) @ (32, 96) and
    (16384, 128) @ (128, 384); float64 agrees on those shapes), and separate
    products round as each projection alone does.
    :func:`project_qkv_backward` does use the fused layout.

    Returns
    -------
    q, k : ndarray of shape (..., H, T, Dh)
    v : ndarray of shape (..., H, T, Dv)
    """
    return tuple(split_heads(project(x, w), n_heads) for w in (w_query, w_key, w_value))


def project_qkv_backward(
    d_q, d_k, d_v, x, w_query, w_key, w_value, *, input_gradient=True
):
    """Gradients of :func:`project_qkv` with respect to ``x`` and the weights.

    The three projections' gradients side by side (:func:`concat_qkv`), so
    that the weight gradients and ``d_x`` are one matrix product each.

    Parameters
    ----------
    d_q, d_k, d_v : ndarray of shape (..., H, T, Dh) (Dv for ``d_v``)
        Gradients of the loss with respect to the projected heads.
    x, w_query, w_key, w_value
        As given to :func:`project_qkv`.
    input_gradient : bool, default=True
        Compute ``d_x``; False: None, without its product.

    Returns
    -------
    d_x : ndarray of shape (..., T, D) or None
    d_w_query, d_w_key, d_w_value : ndarray, shapes of the weights
    """
    d_qkv = concat_qkv(*(merge_heads(d) for d in (d_q, d_k, d_v)))  # (..., T, W)
    d_qkv = d_qkv.reshape(-1, d_qkv.shape[-1])  # (N*T, Wq + Wk + Wv)
    d_w_qkv = x.reshape(-1, x.shape[-1]).T @ d_qkv  # (D, Wq + Wk + Wv)
    d_x = None
    if input_gradient:
        w_qkv = concat_qkv(w_query, w_key, w_value)  # (D, Wq + Wk + Wv)
        d_x = (d_qkv @ w_qkv.T).reshape(x.shape)  # (..., T, D)
    return d_x, *split_qkv(d_w_qkv, w_query.shape[1], w_key.shape[1])


# Arrays of (T, width) one layer holds at once per sequence: queries, keys and
# values with their folded copies, context, merged heads, output (and, in the
# model, the residual and the norm): the memory model of multi_head_forward
# and of the model's encoder layer.
LAYER_ARRAYS = 10


def layer_bytes(n_tokens, *, n_features, width, n_heads, itemsize, return_weights):
    """Memory one sequence of ``n_tokens`` needs in :func:`multi_head_forward`.

    About ten ``(T, width)`` arrays (queries, keys and values with their
    folded copies, context, merged heads, output), the tokens, and one row of
    scores per token and head (all ``T`` of them with the weights).
    """
    scores = n_heads * (n_tokens if return_weights else 1)
    return n_tokens * (n_features + LAYER_ARRAYS * width + scores) * itemsize


def multi_head_forward(
    x,
    w_query,
    w_key,
    w_value,
    w_output,
    *,
    n_heads,
    mask=None,
    causal=False,
    return_weights=False,
    dropout=None,
    query_key=None,
    pattern=None,
    out=None,
):
    """Multi-head self-attention forward pass, keeping what backward needs.

    The projections, then ``query_key`` on the queries and keys, the
    attention of each head and the output projection. All arrays must already
    be in one floating dtype. See :func:`multi_head_attention` for the meaning
    of the arguments but ``dropout`` and ``query_key``.

    Parameters
    ----------
    dropout : None or (float, ndarray of uint64), default=None
        ``(p, keys)``: attention dropout (see :func:`attention_forward`), with
        one stream key per sequence and head: ``keys`` broadcastable to
        ``x.shape[:-2] + (n_heads,)``.
    query_key : object or None, default=None
        A transform of the projected queries and keys before the scores (the
        rotation of rotary positions), with ``forward(q, k)`` returning ``(q,
        k, cache)`` for ``q, k`` of shape (..., H, T, Dh), and ``backward(d_q,
        d_k, cache)`` returning the gradients with respect to its inputs.
        None: the projections as they are.
    pattern : object or None, default=None
        Which keys each query attends to, and the kernels that compute it:
        ``forward(q, k, v, *, mask, causal, return_weights, dropout)`` as
        :func:`attention_forward`, ``backward(d_context, q, k, v, context, lse,
        *, mask, causal, dropout)`` as :func:`attention_backward`. None: every
        key (those two kernels).
    out : ndarray of shape (..., T, d_out) or None, default=None
        A C-contiguous array to write the output into; None: a new array.

    Returns
    -------
    out : ndarray of shape (..., T, d_out)
        Output (the merged context when ``w_output`` is None).
    cache : dict
        ``q``, ``k`` (after ``query_key``), ``v`` of shape (..., H, T, Dh),
        ``context`` of shape (..., H, T, Dh), ``merged`` of shape (..., T,
        H*Dh), ``lse`` of shape (..., H, T), ``weights`` of shape (..., H, T,
        T) or None and ``query_key``, the transform's cache.
    """
    q, k, v = project_qkv(x, w_query, w_key, w_value, n_heads)  # (..., H, T, Dh)
    query_key_cache = None
    if query_key is not None:
        q, k, query_key_cache = query_key.forward(q, k)  # (..., H, T, Dh)
    forward = attention_forward if pattern is None else pattern.forward
    context, lse, weights = forward(
        q,
        k,
        v,
        mask=mask_with_head_axis(mask),
        causal=causal,
        return_weights=return_weights,
        dropout=dropout,
    )  # (..., H, T, Dv)
    if w_output is None:
        out = merged = merge_heads(context, out)  # (..., T, H*Dv)
    else:
        merged = merge_heads(context)  # (..., T, H*Dv)
        out = project(merged, w_output, out)  # (..., T, d_out)
    cache = dict(
        q=q,
        k=k,
        v=v,
        context=context,
        merged=merged,
        lse=lse,
        weights=weights,
        query_key=query_key_cache,
    )
    return out, cache


def multi_head_attention(
    x,
    w_query,
    w_key,
    w_value,
    w_output=None,
    *,
    n_heads,
    mask=None,
    causal=False,
    return_weights=False,
    window=None,
    dilation=1,
    pattern=None,
):
    """Multi-head self-attention: the bare layer, without biases or residual.

    Computes ``Q = x W_q``, ``K = x W_k``, ``V = x W_v``, splits each into
    ``n_heads`` consecutive column blocks, applies
    :func:`scaled_dot_product_attention` to each head, concatenates the heads
    and multiplies by ``W_o``.

    Parameters
    ----------
    x : array-like of shape (..., T, D)
        Token sequences.
    w_query, w_key : array-like of shape (D, n_heads * head_dim)
        Query and key projections (``x @ W`` convention).
    w_value : array-like of shape (D, n_heads * head_dim_v)
        Value projection; usually ``head_dim_v == head_dim``.
    w_output : array-like of shape (n_heads * head_dim_v, d_out), default=None
        Output projection; None returns the concatenated heads.
    n_heads : int
        Number of heads; must divide the projection widths.
    mask : array-like of bool, broadcastable to (..., T, T), default=None
        True where a query token may attend to a key token; the same mask is
        used by every head.
    causal : bool, default=False
        Token ``i`` attends only to tokens ``j <= i``.
    return_weights : bool, default=False
        Also return the attention weights of every head.
    window : int or None, default=None
        Banded attention: each token attends to itself and to the
        ``window // 2`` tokens on each side of it, every ``dilation``-th one
        (with ``causal``: itself and the ``window - 1`` before it; see
        :func:`scaled_dot_product_attention`), in time and memory linear in
        ``T``. None: every token.
    dilation : int, default=1
        Gap between the tokens of the band.
    pattern : attention pattern or None, default=None
        Which tokens each token attends to, an object of
        :mod:`skattn.patterns` (see :func:`scaled_dot_product_attention`);
        ``window`` and ``dilation`` are the shorthand of
        ``BandedAttention(window, dilation)``: give one or the other. None:
        every token.

    Returns
    -------
    output : ndarray of shape (..., T, d_out)
        In the dtype of ``x`` (float64 for integer ``x``; float16 ``x`` is
        computed in float32 and returned in float16); the weight matrices are
        cast to the compute dtype.
    weights : ndarray of shape (..., n_heads, T, T)
        Only when ``return_weights=True``.

    Notes
    -----
    The sequences of the first axis are computed in chunks of about 4 MiB of
    intermediate arrays, which stay in the CPU's caches,
    side by side on as many threads as the BLAS thread limit allows; each
    sequence's attention runs in query tiles, so memory stays linear in ``T``
    unless ``return_weights`` is set.

    Examples
    --------
    >>> import numpy as np
    >>> from skattn import multi_head_attention
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    >>> w_q, w_k, w_v = rng.standard_normal((3, 8, 8)) / np.sqrt(8)
    >>> out, w = multi_head_attention(x, w_q, w_k, w_v, n_heads=2,
    ...                               return_weights=True)
    >>> out.shape, out.dtype, w.shape
    ((2, 5, 8), dtype('float32'), (2, 2, 5, 5))
    """
    x = check_kernel_array(x, "x")
    dtype, result_dtype = compute_dtype(x), output_dtype(x)
    x = x.astype(dtype, copy=False)
    causal = check_causal(causal)
    return_weights = check_bool(return_weights, "return_weights")
    pattern = resolve_pattern(pattern, window, dilation)
    pattern = None if pattern is None else pattern._kernels_of()
    if (
        isinstance(n_heads, (bool, np.bool_))
        or not isinstance(n_heads, (int, np.integer))
        or n_heads < 1
    ):
        raise ValueError(f"n_heads must be a positive integer, got {n_heads!r}.")
    weights = {}
    for name, w in (("w_query", w_query), ("w_key", w_key), ("w_value", w_value)):
        w = check_kernel_array(w, name, min_ndim=0)
        if w.ndim != 2 or w.shape[0] != x.shape[-1]:
            raise ValueError(
                f"{name} must have shape (D, n_heads * head_dim) with D = "
                f"{x.shape[-1]}, got {w.shape}."
            )
        if w.shape[1] % n_heads:
            raise ValueError(
                f"n_heads={n_heads} must divide the width of {name}, got {w.shape[1]}."
            )
        weights[name] = w.astype(dtype, copy=False)
    if weights["w_query"].shape != weights["w_key"].shape:
        raise ValueError(
            f"w_query and w_key must have the same shape, got "
            f"{weights['w_query'].shape} and {weights['w_key'].shape}."
        )
    if w_output is not None:
        w_output = check_kernel_array(w_output, "w_output", min_ndim=0)
        if w_output.ndim != 2 or w_output.shape[0] != weights["w_value"].shape[1]:
            raise ValueError(
                f"w_output must have shape ({weights['w_value'].shape[1]}, d_out), "
                f"got {w_output.shape}."
            )
        w_output = w_output.astype(dtype, copy=False)
    mask = as_mask(mask, x.shape[-2], x.shape[-2])
    check_batch_shapes(("x", x.shape), ("mask", None if mask is None else mask.shape))
    n_tokens = x.shape[-2]
    batch_shape = x.shape[:-2]
    if mask is not None:
        batch_shape = np.broadcast_shapes(batch_shape, mask.shape[:-2])
    width_out = (weights["w_value"] if w_output is None else w_output).shape[1]
    out = np.empty(batch_shape + (n_tokens, width_out), dtype=dtype)
    all_weights = None
    if return_weights:
        all_weights = np.empty(batch_shape + (n_heads, n_tokens, n_tokens), dtype)

    def chunk_of(array, rows):
        """The rows ``rows`` of the first batch axis, unless ``array`` broadcasts."""
        if array is None or array.ndim < x.ndim or array.shape[0] == 1:
            return array
        return array[rows]

    def run_chunk(rows):
        """The sequences ``rows`` of the first axis (all of them for 2-D x)."""
        _, cache = multi_head_forward(
            chunk_of(x, rows),
            weights["w_query"],
            weights["w_key"],
            weights["w_value"],
            w_output,
            n_heads=n_heads,
            mask=chunk_of(mask, rows),
            causal=causal,
            return_weights=return_weights,
            pattern=pattern,
            out=out[rows],
        )
        if return_weights:
            all_weights[rows] = cache["weights"]

    if x.ndim < 3 or (mask is not None and mask.ndim > x.ndim):
        run_chunk(...)  # one sequence, or a mask adding leading axes: at once
    else:
        # cache-sized chunks of the first axis, on the threads the BLAS limit
        # allows; each sequence of the first axis counts once per sequence of
        # the others
        n_per_row = math.prod(batch_shape[1:])
        width = max(weights["w_query"].shape[1], weights["w_value"].shape[1])
        row_bytes = n_per_row * layer_bytes(
            n_tokens,
            n_features=x.shape[-1],
            width=width,
            n_heads=n_heads,
            itemsize=dtype.itemsize,
            return_weights=return_weights,
        )
        map_parallel(run_chunk, even_chunks(batch_shape[0], row_bytes, CACHE_BYTES))
    out = out.astype(result_dtype, copy=False)
    if return_weights:
        return out, all_weights.astype(result_dtype, copy=False)
    return out


def multi_head_backward(
    d_out,
    x,
    w_query,
    w_key,
    w_value,
    w_output,
    cache,
    *,
    n_heads,
    mask=None,
    causal=False,
    dropout=None,
    query_key=None,
    pattern=None,
    input_gradient=True,
):
    """Gradients of :func:`multi_head_forward`.

    Parameters
    ----------
    d_out : ndarray of shape (..., T, d_out)
        Gradient of the loss with respect to the output.
    x, w_query, w_key, w_value, w_output, n_heads, mask, causal, dropout, \
            query_key, pattern
        As given to :func:`multi_head_forward`.
    cache : dict
        The cache :func:`multi_head_forward` returned.
    input_gradient : bool, default=True
        Compute ``d_x``; False (``x`` is data): None, without its product.

    Returns
    -------
    d_x : ndarray of shape (..., T, D) or None
    grads : dict
        ``"query"``, ``"key"``, ``"value"`` of shape (D, H*Dh) and ``"output"``
        (None when ``w_output`` is None).
    """
    grads = {"output": None}
    if w_output is None:
        d_merged = d_out  # (..., T, H*Dv)
    else:
        merged = cache["merged"].reshape(-1, w_output.shape[0])  # (N*T, H*Dv)
        grads["output"] = merged.T @ d_out.reshape(-1, w_output.shape[1])
        d_merged = project(d_out, w_output.T)  # (..., T, H*Dv)
    backward = attention_backward if pattern is None else pattern.backward
    d_q, d_k, d_v = backward(
        split_heads(d_merged, n_heads),
        cache["q"],
        cache["k"],
        cache["v"],
        cache["context"],
        cache["lse"],
        mask=mask_with_head_axis(mask),
        causal=causal,
        dropout=dropout,
    )  # (..., H, T, Dh)
    if query_key is not None:
        d_q, d_k = query_key.backward(d_q, d_k, cache["query_key"])
    d_x, grads["query"], grads["key"], grads["value"] = project_qkv_backward(
        d_q, d_k, d_v, x, w_query, w_key, w_value, input_gradient=input_gradient
    )  # (..., T, D)
    return d_x, grads
