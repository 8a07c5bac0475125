"""The compiled passes of banded attention (see
:mod:`skattn._kernels.banded`), with numba: the calls of the numba
functions of :mod:`skattn._kernels._numba_banded`, for the cases the model
computes (key padding, the optional global token, no dropout, no weights
returned), on the thread pool as :mod:`skattn._kernels.compiled` runs the
full attention's."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .compiled import _read_only, _run, _tasks, enabled, prefix_lengths, task_count


def banded_lengths(q, k, v, mask, dropout, return_weights, global_index):
    """The number of valid keys of each attention if the compiled banded
    kernels compute this call, else None.

    Parameters
    ----------
    q, k, v : ndarray of shape (B, T, D)
        Flattened attentions (see :func:`skattn._kernels.banded.banded_forward`).
    mask : ndarray of bool of shape (B, 1 or Tq, Tk), or None
    dropout : None or (float, ndarray)
    return_weights : bool
    global_index : ndarray of int of shape (B,), or None

    Returns
    -------
    lengths : ndarray of int64 of shape (B,), or None
        None where the compiled kernels are off, for dropout, returned
        weights, a dtype other than float32 or float64 (or mixed dtypes), a
        mask other than key padding, or a negative global index.
    """
    if return_weights or dropout is not None or not enabled():
        return None
    if q.dtype not in (np.float32, np.float64) or not q.dtype == k.dtype == v.dtype:
        return None
    if global_index is not None and np.any(global_index < 0):
        return None
    return prefix_lengths(mask, (len(q),), k.shape[-2])


def _banded_inputs(arrays, global_index, n_batch):
    """The arrays C-contiguous, and the global index as int64 (-1: none),
    read-only (:func:`_read_only`)."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    if global_index is None:
        glob = np.full(n_batch, -1, dtype=np.int64)
    else:
        glob = np.ascontiguousarray(global_index, dtype=np.int64)
    *arrays, glob = _read_only(*arrays, glob)
    return arrays, glob


def banded_forward(q, k, v, lengths, global_index, offsets, causal, scale):
    """Banded attention forward pass, compiled (see :mod:`._numba_banded`).

    Parameters
    ----------
    q, k, v : ndarray of shape (B, T, D), of one floating dtype
    lengths : ndarray of int64 of shape (B,)
        Valid keys of each attention (from :func:`banded_lengths`).
    global_index : ndarray of int of shape (B,), or None
        The global token of each attention, at least 0 (past the tokens: none).
    offsets : ndarray of int64 of shape (K,)
        The band (:func:`skattn._kernels.band.band_offsets`).
    causal : bool
    scale : float

    Returns
    -------
    (out, lse) or None
        ``out`` (B, Tq, Dv) and ``lse`` (B, Tq) as
        :func:`skattn._kernels.banded.banded_forward` computes them; None
        where numba fails to compile the kernel.
    """
    from . import _numba_banded

    dtype = q.dtype
    (q, k, v, lengths, offsets), glob = _banded_inputs(
        (q, k, v, lengths, offsets), global_index, len(q)
    )
    n_batch, n_queries = q.shape[:2]
    out = np.empty((n_batch, n_queries, v.shape[-1]), dtype=dtype)
    lse = np.empty((n_batch, n_queries), dtype=dtype)
    inputs = (q, k, v, lengths, glob, offsets, causal, dtype.type(scale))
    # each query's products with its band's keys (and the global token's)
    per_dim = 2 * n_batch * n_queries * (len(offsets) + 1)
    n_tasks = task_count(per_dim * (q.shape[-1] + v.shape[-1]))
    calls = [
        (*inputs, attentions.start, attentions.stop, rows.start, rows.stop, out, lse)
        for attentions, rows in _tasks(n_batch, n_queries, n_tasks)
    ]
    if _run(_numba_banded.forward, calls, parallel=True) is None:
        return None
    return out, lse


def banded_backward(
    d_out, q, k, v, out, lse, lengths, global_index, offsets, causal, scale
):
    """Gradients of :func:`banded_forward`, compiled: a pass over the queries
    then one over the keys (see :mod:`._numba_banded`).

    Parameters
    ----------
    d_out : ndarray of shape (B, Tq, Dv)
    q, k, v, lengths, global_index, offsets, causal, scale
        As given to :func:`banded_forward`.
    out, lse : ndarray of shape (B, Tq, Dv) and (B, Tq)
        From :func:`banded_forward` (or the numpy path).

    Returns
    -------
    (d_q, d_k, d_v) or None
        Of the shapes of q, k, v; None where numba fails to compile the
        kernels.
    """
    from . import _numba_banded

    dtype = q.dtype
    (d_out, q, k, v, out, lse, lengths, offsets), glob = _banded_inputs(
        (d_out, q, k, v, out, lse, lengths, offsets), global_index, len(q)
    )
    n_batch, n_queries = q.shape[:2]
    n_keys, n_columns = k.shape[1], len(offsets) + 1
    scale = dtype.type(scale)
    d_q, d_k, d_v = (np.empty(a.shape, dtype=dtype) for a in (q, k, v))
    probs = np.empty((n_batch, n_columns, n_queries), dtype=dtype)
    d_scores = np.empty_like(probs)
    global_probs = np.zeros((n_batch, n_keys), dtype=dtype)
    global_d_scores = np.zeros_like(global_probs)
    kept = (probs, d_scores, global_probs, global_d_scores)
    # the queries' pass: their scores again, and the gradients of the
    # probabilities and of the queries; the keys' pass: of the keys and values
    per_dim = 2 * n_batch * n_queries * n_columns
    dims_q, dims_v = q.shape[-1], v.shape[-1]
    inputs = (d_out, q, k, v, out, lse, lengths, glob, offsets, causal, scale)
    calls = [
        (*inputs, attentions.start, attentions.stop, rows.start, rows.stop, d_q, *kept)
        for attentions, rows in _tasks(
            n_batch, n_queries, task_count(per_dim * (2 * dims_q + dims_v))
        )
    ]
    if _run(_numba_banded.backward_queries, calls, parallel=True) is None:
        return None
    inputs = (d_out, q, glob, offsets)
    calls = [
        (
            *inputs,
            attentions.start,
            attentions.stop,
            rows.start,
            rows.stop,
            *kept,
            d_k,
            d_v,
        )
        for attentions, rows in _tasks(
            n_batch, n_keys, task_count(per_dim * (dims_q + dims_v))
        )
    ]
    if _run(_numba_banded.backward_keys, calls, parallel=True) is None:
        return None
    return d_q, d_k, d_v
