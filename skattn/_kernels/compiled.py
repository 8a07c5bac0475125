"""Compiled kernels, with numba: the fused attention passes, the banded
attention passes, the layer norm, and the random features' threshold
statistics.

An optional accelerator (the ``[fast]`` extra). Where numba imports, the
attention of :func:`skattn._kernels.attention.attention_forward` and
:func:`skattn._kernels.attention_backward.attention_backward` runs here for
the cases the model computes (float32 or float64, no broadcast batch axes,
key padding as a number of valid keys, causal or not, no dropout, no weights
returned); everything else, and everything without numba, runs the numpy
path, which stays the reference. Both agree to float rounding.

Why it is faster: the numpy path computes a tile of about a million scores at
once and passes over it three times (the product, the exponential, the product
with the values), out of the CPU's caches. Here each block of ``ROWS`` queries
and ``KEYS`` keys (32 KiB of float32 scores) is multiplied, exponentiated and
multiplied by the values while it stays in the L1 cache, the two products by
the BLAS that scipy ships (``np.dot`` in numba), the exponential a vectorised
polynomial; and a whole batch of attentions is one call that releases the
GIL, so that threads scale and short sequences pay no Python dispatch. Where
that BLAS is an OpenBLAS kernel without AVX-512 (its 256-bit Haswell kernels,
on a CPU with or without AVX-512, or narrower ones), the products are compiled
loops instead, vectorised for the CPU (:func:`products_in_loops`): the forward
pass's in blocks of 256 queries by 32 keys, the backward pass's (but the
gradient of the queries, by BLAS) in blocks of 512 keys by 64 queries.

The forward pass shifts each row by an upper bound of its scores
(``|scale| |q| max |k|``, as the numpy path's folded tile does), which needs
no pass over the scores, so that the key blocks of a row simply add up; a row
whose sum underflows is computed again shifted by its largest score. Its
exponentials can be far below 1: each column of values is multiplied by the
power of two that brings its largest magnitude to at least 1/2 (exact), so
that their products do not underflow, and the output divided back. The
backward pass recomputes the probabilities from the forward pass's
log-sum-exp, key block by key block (Dao, "FlashAttention-2", 2023: the
gradients of a key block accumulate over the query blocks); each attention
first checks the bound of its recomputed scores' error, and where one
exceeds it the numpy path computes the call, renormalising those rows.

Short attentions have passes of their own
(:mod:`skattn._kernels._numba_short`): all the scores of up to 256 queries at
once, with no library call or allocation per attention; with all of a
query's scores at hand, the forward pass shifts them by their largest, and
reads the keys and values where they are. The forward pass
runs there for narrow heads (32 to 127 keys for heads of 16, 16 to 127 for
heads of 8: :func:`forward_kernel`), the backward pass from 8 to 127 keys at
any head width (:func:`backward_kernel`).

Every attention (a sequence's head) is computed by itself, in blocks that
start at its first query and key, so that its result is the same whatever
the batch, the threads or the tasks it is split into.

Banded attention (:mod:`skattn._kernels.banded`) has compiled passes for
the same cases (key padding, the optional global token, no dropout, no
weights returned; :mod:`skattn._kernels.compiled_banded`): each query
gathers the scores of its band's keys and exponentiates them at once; the
gradients of the keys are gathered from the queries that read them
(:mod:`skattn._kernels._numba_banded`).

The threshold statistics of the random features (PPV, LSPV) have a compiled
pass too: one loop over the tokens that counts, exactly as the numpy path does.
So has the layer norm: one pass per token, where numpy makes about ten over the
whole array between which it holds the interpreter's lock.

Set the environment variable ``SKATTN_COMPILED=0`` to use the numpy path with
numba installed. Where numba finds no directory to cache the kernels in (a
read-only install), it compiles them in each process, with one warning; where
it fails to compile them, the numpy path computes instead, with one warning.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import functools
import os
import threading
import warnings

import numpy as np

from .blocks import ROWS

# The fused kernel pays off where the work on each score (its exponential and
# row sum, which the numpy path makes in passes over memory) outweighs the
# matrix products of its head: from MIN_KEYS_PER_SQUARED_DIM * head_dim**2
# keys on (64 for heads of 16 features, 256 for 32, 1024 for 64); below,
# numpy's batched matrix products are as fast or faster
# (benchmarks/compiled_crossover.py; the user guide's performance page).
# The tests set it to 0 to run the compiled kernels at every size.
MIN_KEYS_PER_SQUARED_DIM = 0.25

# For heads of at most SHORT_MAX_HEAD_DIM features the short kernel
# (_numba_short: no library call, no allocation per attention) is faster than
# the numpy path from SHORT_MIN_KEYS_PER_DIM * head_dim keys on (fewer keys pay
# its padding of the queries to 16), and than the blocked kernel below
# SHORT_MAX_KEYS keys; with wider heads its products run at the speed of
# numpy's batched ones (the same table, with OpenBLAS's 256-bit and 512-bit
# kernels alike).
SHORT_MAX_HEAD_DIM = 16
SHORT_MIN_KEYS_PER_DIM = 2
SHORT_MAX_KEYS = 128

# The backward passes (benchmarks/compiled_crossover.py --backward): the short
# kernel is faster than the numpy path from SHORT_BACKWARD_MIN_KEYS keys to
# below SHORT_MAX_KEYS at heads of 8 to 128 features (the numpy path makes
# five batched products and as many passes over the scores; with 4 keys the
# short kernel's cost per attention is the larger). The blocked kernel is
# faster where pays_off() for heads of at most BLOCKED_BACKWARD_MAX_HEAD_DIM
# features; at heads of 64 numpy's products are faster up to 2,048 keys and
# about as fast from 4,096 (measured to 8,192).
SHORT_BACKWARD_MIN_KEYS = 8
BLOCKED_BACKWARD_MAX_HEAD_DIM = 32

# A call of the compiled attention is split into tasks for other threads only
# where each task holds at least MIN_TASK_FLOPS floating-point operations of
# the attention's products: handing a task to a waiting thread (its wake-up,
# and the inputs' move to that core's caches) cost 0.1 to 0.4 ms on a 2-vCPU
# VM, as long as 5 to 20 million such operations; below, the calling thread
# computes alone, as fast as two threads or faster (one Adam epoch on batches
# of 16 and 32 sequences of 32 tokens; batches of 48 gained from a second
# thread in one run and lost in another). Above, a call makes up to
# TASKS_PER_WORKER tasks a thread, which the threads take one after another,
# so that a faster core takes more of them: the cores of a VM, or a CPU's
# performance and efficiency cores, run at different speeds, and an even split
# ends when the slowest core's half does (one sequence of 8,192 tokens on two
# threads: 0.80 to 0.96 of the even split's time in 7 of 10 alternating runs,
# median 0.935).
MIN_TASK_FLOPS = 12e6
TASKS_PER_WORKER = 4

# Set by the tests: "short" or "blocked" runs that forward (or backward)
# kernel at every size; None leaves the choice to forward_kernel() (or
# backward_kernel()).
_FORWARD_KERNEL = None
_BACKWARD_KERNEL = None

# Set by the tests to run the numpy path with numba installed.
_DISABLED = False

# OpenBLAS's kernels of at most 256-bit vectors (its core names, as
# threadpoolctl reports them, lower-cased). At the blocks' sizes the compiled
# loops, which LLVM vectorises for the CPU, are faster than these kernels'
# calls (0.64 to 0.98 of their time with vectors of the same width:
# benchmarks/products_choice.py, user guide, "The BLAS kernels, and the
# compiled loops"), and slower than its AVX-512 ones (SkylakeX). On a CPU with
# AVX-512 that OpenBLAS does not know, it runs one of these.
NARROW_OPENBLAS_KERNELS = frozenset(
    {
        "haswell", "zen", "sandybridge", "nehalem", "core2", "penryn", "dunnington",
        "prescott", "atom", "bulldozer", "piledriver", "steamroller", "excavator",
        "barcelona", "opteron",
    }
)  # fmt: skip

# Set by the tests: True or False forces the forward and backward passes'
# products into the compiled loops or BLAS; None leaves the choice to
# products_in_loops().
_PRODUCTS_IN_LOOPS = None

# Set when numba failed to compile a kernel (see _turn_off).
_FAILED = False
_FAILED_LOCK = threading.Lock()


def enabled():
    """Whether the compiled kernels run: numba imports, compiles them, and
    neither ``SKATTN_COMPILED=0`` nor the tests turned them off."""
    if _DISABLED or _FAILED or os.environ.get("SKATTN_COMPILED", "1") == "0":
        return False
    return kernels() is not None


@functools.cache
def kernels():
    """The compiled functions, or None without numba or where numba fails to
    define them (compiled on first use, then read from numba's cache where
    it has one)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return None
    try:
        from . import (  # noqa: F401
            _numba_attention,
            _numba_banded,
            _numba_layer_norm,
            _numba_short,
        )
    except Exception as error:
        _turn_off(error)
        return None
    return _numba_attention


def narrow_blas_kernels(cpu_flags, blas_libraries):
    """The OpenBLAS kernels among ``blas_libraries`` narrower than the CPU's
    vectors: :func:`openblas_kernels_without_avx512` where ``cpu_flags`` (the
    CPU's feature names, as LLVM or /proc/cpuinfo name them) has
    ``"avx512f"``.

    Parameters
    ----------
    cpu_flags : set of str
    blas_libraries : list of dict
        Entries of threadpoolctl's ``threadpool_info()``.

    Returns
    -------
    list of str
        Sorted, empty where none is narrower.
    """
    if "avx512f" not in cpu_flags:
        return []
    return openblas_kernels_without_avx512(blas_libraries)


def openblas_kernels_without_avx512(blas_libraries):
    """The names, sorted, of the OpenBLAS kernels among ``blas_libraries``
    (threadpoolctl's ``threadpool_info()`` entries) of at most 256-bit vectors
    (``NARROW_OPENBLAS_KERNELS``)."""
    openblas = [i for i in blas_libraries if i.get("internal_api") == "openblas"]
    names = {str(info.get("architecture")) for info in openblas}
    return sorted(name for name in names if name.lower() in NARROW_OPENBLAS_KERNELS)


def products_in_loops():
    """Whether the compiled attention's forward and backward passes multiply
    in their own loops rather than by BLAS.

    They do where the BLAS that numba's ``np.dot`` calls (scipy's) is an
    OpenBLAS kernel without AVX-512 (:func:`openblas_kernels_without_avx512`)
    and numba compiles for the host CPU, a property of the machine and its
    libraries read once a process.

    Returns
    -------
    bool
        True for the compiled loops; the tests' ``_PRODUCTS_IN_LOOPS`` where
        set.
    """
    if _PRODUCTS_IN_LOOPS is not None:
        return _PRODUCTS_IN_LOOPS
    return _machine_prefers_loops()


@functools.cache
def _machine_prefers_loops():
    import numba
    import scipy.linalg.cython_blas  # noqa: F401  (loads the BLAS numba calls)
    from threadpoolctl import threadpool_info

    if numba.config.CPU_NAME not in (None, "host"):
        return False  # compiled for another CPU (NUMBA_CPU_NAME): its vectors unknown
    libraries = threadpool_info()
    own = [info for info in libraries if "scipy" in info.get("filepath", "")]
    return bool(openblas_kernels_without_avx512(own or libraries))


def _turn_off(error):
    """Turn the compiled kernels off for the rest of the process, with one
    warning that names numba's ``error``."""
    global _FAILED
    with _FAILED_LOCK:
        if _FAILED:
            return
        _FAILED = True
    warnings.warn(
        f"numba failed to compile skattn's kernels ({type(error).__name__}: "
        f"{error}); the numpy path computes instead. Set SKATTN_COMPILED=0 to "
        "use it without this warning.",
        RuntimeWarning,
        stacklevel=3,
    )


def _run(function, calls, parallel=False, any_layout=False):
    """``function(*arguments)`` for each tuple of ``calls``, on the thread
    pool if ``parallel``: the results, or None where numba fails to compile
    ``function`` (the compiled kernels are then off: :func:`_turn_off`).

    With ``any_layout``, a numba ``function`` runs as compiled for arrays of
    any layout, numba's ``"A"`` (its inputs read-only: :func:`_read_only`):
    numba compiles once per set of argument types, and a contiguous array is
    of another type than a view, so that the model's views and a caller's
    contiguous arrays (and the outputs allocated in their memory order) would
    each compile the kernel (about 10 s each)."""
    from .._parallel import map_parallel

    if not calls:
        return []
    dispatcher = hasattr(function, "overloads")  # else a Python callable
    try:
        kernel = _entry(function, calls[0]) if dispatcher and any_layout else function

        def call(arguments):
            return kernel(*arguments)

        return map_parallel(call, calls) if parallel else [call(a) for a in calls]
    except Exception as error:
        if not dispatcher or _numba_types(calls[0], any_layout) in function.overloads:
            raise  # raised by the compiled code itself
        _turn_off(error)
        return None


# The forward kernels' range (by the dtype's size): a quarter of the largest
# number, as the numpy path's score_exponents and value_exponent bound it.
# An attention whose scores (their bound |q| max|scale k| in the blocked
# kernel, their largest in the short one) or sum of values over its keys
# reach it, or are NaN, is left to the numpy path.
RANGE_CEILING = {
    np.dtype(dtype).itemsize: 2.0 ** (np.finfo(dtype).maxexp - 2)
    for dtype in (np.float32, np.float64)
}


# The compiled entry points of :func:`_entry`, by function and argument kinds.
_ENTRIES = {}

# The flags numba types an array of layout "A" by (numpy's NPY_ARRAY_ALIGNED
# and NPY_ARRAY_WRITEABLE), read from ``ndarray.flags.num`` in one access.
_TYPED_FLAGS = 0x100 | 0x400


def _entry(function, arguments):
    """The entry point of the numba ``function`` compiled for ``arguments``
    (arrays of layout "A"), kept by what numba types them by (an array's
    dtype, dimensions, alignment and whether it is writeable; a scalar's
    type): typing each call's arguments with numba (about 15 us an argument)
    costs more than a short kernel's work."""
    key = (function,) + tuple(
        (a.dtype, a.ndim, a.flags.num & _TYPED_FLAGS)
        if isinstance(a, np.ndarray) else type(a)
        for a in arguments
    )  # fmt: skip
    entry = _ENTRIES.get(key)
    if entry is None:
        entry = _ENTRIES[key] = function.compile(_numba_types(arguments, True))
    return entry


def _numba_types(arguments, any_layout):
    """numba's types of ``arguments``, its arrays of layout "A" with
    ``any_layout``."""
    import numba

    types = [numba.typeof(a) for a in arguments]
    if any_layout:
        array = numba.types.Array
        types = [t.copy(layout="A") if isinstance(t, array) else t for t in types]
    return tuple(types)


def _read_only(*arrays):
    """Read-only views of a kernel's input arrays: numba compiles a kernel
    once per set of argument types, which say whether an array is writeable,
    so a caller's read-only array (a memory map, a broadcast length) would
    compile it again (and numba refuses a kernel that writes into one)."""
    views = [array.view() for array in arrays]
    for view in views:
        view.flags.writeable = False
    return views


def prefix_lengths(mask, batch_shape, n_keys):
    """The number of valid keys of each attention, when ``mask`` is key padding.

    Parameters
    ----------
    mask : ndarray of bool or None
        Broadcastable to ``batch_shape + (Tq, Tk)``.
    batch_shape : tuple of int
    n_keys : int

    Returns
    -------
    lengths : ndarray of int64 of shape batch_shape, or None
        When every query of an attention may attend to its first
        ``lengths`` keys and to no other; None for any other mask.
    """
    if mask is None:
        return np.full(batch_shape, n_keys, dtype=np.int64)
    if mask.shape[-2] != 1:  # a mask per query: not key padding
        return None
    keys = mask[..., 0, :]  # (..., Tk)
    lengths = keys.sum(axis=-1)
    if not np.array_equal(keys, np.arange(n_keys) < lengths[..., None]):
        return None
    return np.ascontiguousarray(np.broadcast_to(lengths, batch_shape), np.int64)


def applies(q, k, v, dropout, return_weights, backward=False):
    """Whether a forward (or, with ``backward``, a backward) pass of these
    arrays runs compiled: the forward pass where :func:`forward_kernel` names
    a kernel, the backward pass where :func:`backward_kernel` does."""
    if return_weights or dropout is not None or not enabled():
        return False
    if q.dtype not in (np.float32, np.float64) or not q.dtype == k.dtype == v.dtype:
        return False
    # no broadcast batch axes; one or two of them (sequences, heads)
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and 1 <= q.ndim - 2 <= 2):
        return False
    choose = backward_kernel if backward else forward_kernel
    return choose(k.shape[-2], q.shape[-1]) is not None


def forward_kernel(n_keys, head_dim):
    """The compiled forward kernel faster than the numpy path.

    Parameters
    ----------
    n_keys : int
        Keys of each attention.
    head_dim : int
        Features of a head's queries and keys.

    Returns
    -------
    {"short", "blocked"} or None
        ``"short"`` (:mod:`._numba_short`) for heads of at most
        ``SHORT_MAX_HEAD_DIM`` features from ``SHORT_MIN_KEYS_PER_DIM *
        head_dim`` keys to below ``SHORT_MAX_KEYS``, else ``"blocked"``
        (:mod:`._numba_attention`) where :func:`pays_off`, else None (the
        numpy path).
    """
    if _FORWARD_KERNEL is not None:
        return _FORWARD_KERNEL
    narrow = head_dim <= SHORT_MAX_HEAD_DIM
    if narrow and SHORT_MIN_KEYS_PER_DIM * head_dim <= n_keys < SHORT_MAX_KEYS:
        return "short"
    if pays_off(n_keys, head_dim):
        return "blocked"
    return None


def backward_kernel(n_keys, head_dim):
    """The compiled backward kernel faster than the numpy path.

    Parameters
    ----------
    n_keys : int
        Keys of each attention.
    head_dim : int
        Features of a head's queries and keys.

    Returns
    -------
    {"short", "blocked"} or None
        ``"short"`` (:func:`skattn._kernels._numba_short.backward`) from
        ``SHORT_BACKWARD_MIN_KEYS`` to below ``SHORT_MAX_KEYS`` keys, else
        ``"blocked"`` where :func:`pays_off` for heads of at most
        ``BLOCKED_BACKWARD_MAX_HEAD_DIM`` features, else None (the numpy
        path).
    """
    if _BACKWARD_KERNEL is not None:
        return _BACKWARD_KERNEL
    if SHORT_BACKWARD_MIN_KEYS <= n_keys < SHORT_MAX_KEYS:
        return "short"
    if head_dim <= BLOCKED_BACKWARD_MAX_HEAD_DIM and pays_off(n_keys, head_dim):
        return "blocked"
    return None


def pays_off(n_keys, head_dim):
    """Whether the fused kernel is faster than the numpy path for attentions
    of ``n_keys`` keys and heads of ``head_dim`` features (see
    ``MIN_KEYS_PER_SQUARED_DIM``)."""
    return n_keys >= MIN_KEYS_PER_SQUARED_DIM * head_dim**2


def _empty_in_order_of(array, shape):
    """An empty array of ``shape`` in the dtype and memory order of
    ``array`` where its rows are contiguous (heads split from the tokens'
    features, as the model passes them: results whose heads merge back into
    ``(N, T, H * D)`` without a copy), else C-ordered: the kernels write
    whole rows with vector stores."""
    out = np.empty_like(array, shape=shape)
    if out.ndim and out.shape[-1] > 1 and out.strides[-1] != out.itemsize:
        return np.empty(shape, dtype=array.dtype)
    return out


def task_count(flops):
    """Into how many tasks a call of ``flops`` floating-point operations of
    products is split (``MIN_TASK_FLOPS``): one, which the calling thread
    computes, on one worker (:func:`skattn._parallel.parallel_workers`) or
    for less than two tasks' work; else ``TASKS_PER_WORKER`` a worker, at most
    one per ``MIN_TASK_FLOPS``. Results do not depend on it: each attention
    is computed by itself, whichever task holds it."""
    from .._parallel import parallel_workers

    n_workers = parallel_workers()
    if n_workers == 1:
        return 1
    n_tasks = TASKS_PER_WORKER * n_workers
    if MIN_TASK_FLOPS > 0:  # the tests set 0: every call split
        n_tasks = min(n_tasks, int(flops // MIN_TASK_FLOPS))
    return max(1, n_tasks)


def _as_4d(array):
    """``(N, H, T, D)``: a batch of one axis gets a head axis of 1."""
    return array if array.ndim == 4 else array[:, None]


def _tasks(n_attentions, n_queries, n_tasks):
    """``(attentions, query rows)`` of about ``n_tasks`` tasks, as slices:
    ranges of whole attentions, or, with fewer attentions than tasks, of whole
    blocks of ``ROWS`` queries of each."""
    if n_attentions == 0:
        return []
    if n_attentions >= n_tasks or n_queries <= ROWS:
        per_task = -(-n_attentions // n_tasks)
        return [
            (slice(start, min(start + per_task, n_attentions)), slice(0, n_queries))
            for start in range(0, n_attentions, per_task)
        ]
    n_blocks = -(-n_queries // ROWS)
    per_task = ROWS * -(-n_blocks // -(-n_tasks // n_attentions))
    return [
        (slice(a, a + 1), slice(start, min(start + per_task, n_queries)))
        for a in range(n_attentions)
        for start in range(0, n_queries, per_task)
    ]


def forward(q, k, v, lengths, causal, scale):
    """Fused attention forward pass.

    Parameters
    ----------
    q, k, v : ndarray of shape (N, [H,] T, D), of one floating dtype
        Of any strides.
    lengths : ndarray of int64 of shape (N, [H])
        Valid keys of each attention (from :func:`prefix_lengths`).
    causal : bool
    scale : float

    Returns
    -------
    (out, lse) or None
        ``out`` of shape (N, [H,] Tq, Dv) and ``lse`` of shape (N, [H,] Tq),
        as :func:`skattn._kernels.attention.attention_forward` returns them;
        None where numba fails to compile the kernel, or where some
        attention's scores or sums of values may exceed a quarter of the
        dtype's largest number, NaN included (``RANGE_CEILING``; the numpy
        path computes them divided by powers of two).
    """
    dtype = q.dtype
    out = _empty_in_order_of(q, q.shape[:-1] + (v.shape[-1],))
    lse = np.empty(q.shape[:-1], dtype=dtype)
    q4, k4, v4, out4 = (_as_4d(a) for a in (q, k, v, out))
    lse3 = lse if lse.ndim == 3 else lse[:, None]
    lengths2 = np.ascontiguousarray(lengths, np.int64).reshape(q4.shape[:2])
    q4, k4, v4, lengths2 = _read_only(q4, k4, v4, lengths2)
    scale = dtype.type(scale)
    n_attentions = q4.shape[0] * q4.shape[1]
    exceeded = np.zeros(1, dtype=np.bool_)  # set by any task, read after all
    inputs = (q4, k4, v4, lengths2, causal, scale)
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    flops = 2 * n_attentions * n_queries * n_keys * (q.shape[-1] + v.shape[-1])
    tasks = _tasks(n_attentions, n_queries, task_count(flops))
    checks = (exceeded, RANGE_CEILING[dtype.itemsize])
    calls = [
        (*inputs, attentions.start, attentions.stop, rows.start, rows.stop, out4, lse3,
         *checks)
        for attentions, rows in tasks
    ]  # fmt: skip
    if forward_kernel(k.shape[-2], q.shape[-1]) == "blocked":
        function = kernels().forward
        calls = [call + (products_in_loops(),) for call in calls]
    else:
        from . import _numba_short

        function = _numba_short.forward
    if _run(function, calls, parallel=True, any_layout=True) is None or exceeded[0]:
        return None
    return out, lse


def backward(d_out, q, k, v, lse, delta, lengths, causal, scale, error_max):
    """Fused attention backward pass: the gradients of :func:`forward`.

    Parameters
    ----------
    d_out : ndarray of shape (N, [H,] Tq, Dv)
    q, k, v, lengths, causal, scale
        As given to :func:`forward`.
    lse : ndarray of shape (N, [H,] Tq)
        From :func:`forward` (or the numpy path).
    delta : ndarray of shape (N, [H,] Tq)
        ``rowsum(d_out * out)``.
    error_max : float
        The largest error of a recomputed score the kernels accept (the
        numpy path's ``RECOMPUTE_ERROR_MAX``): each attention checks its
        bound first (as ``recompute_error_bound`` computes it).

    Returns
    -------
    (d_q, d_k, d_v) or None
        Of the shapes of q, k, v; None where numba fails to compile the
        kernel, or where some attention's bound exceeds ``error_max`` (the
        numpy path then normalises its rows from their own scores).
    """
    dtype = q.dtype
    # a gradient of another dtype (a float64 loss of float32 outputs) is
    # rounded to the attention's, in which its gradients are returned
    d_out, lse, delta = (np.asarray(a, dtype=dtype) for a in (d_out, lse, delta))
    grads = [_empty_in_order_of(a, a.shape) for a in (q, k, v)]
    d_out4, q4, k4, v4, d_q4, d_k4, d_v4 = (_as_4d(a) for a in (d_out, q, k, v, *grads))
    lse3, delta3 = (a if a.ndim == 3 else a[:, None] for a in (lse, delta))
    lengths2 = np.ascontiguousarray(lengths, np.int64).reshape(q4.shape[:2])
    d_out4, q4, k4, v4, lse3, delta3, lengths2 = _read_only(
        d_out4, q4, k4, v4, lse3, delta3, lengths2
    )
    scale = dtype.type(scale)
    n_attentions = q4.shape[0] * q4.shape[1]
    exceeded = np.zeros(1, dtype=np.bool_)  # set by any task, read after all
    error_factor = dtype.type((q.shape[-1] + 2) * np.finfo(dtype).eps)
    # the gradients of a key accumulate over all queries: whole attentions
    inputs = (d_out4, q4, k4, v4, lse3, delta3, lengths2, causal, scale)
    checks = (exceeded, error_factor, float(error_max))
    # five products: the scores again, and the gradients of the values, the
    # probabilities, the queries and the keys
    per_dim = 2 * n_attentions * q.shape[-2] * k.shape[-2]
    flops = per_dim * (3 * q.shape[-1] + 2 * v.shape[-1])
    calls = [
        (*inputs, attentions.start, attentions.stop, d_q4, d_k4, d_v4, *checks)
        for attentions, _ in _tasks(n_attentions, 0, task_count(flops))
    ]
    if backward_kernel(k.shape[-2], q.shape[-1]) == "blocked":
        function = kernels().backward
        calls = [call + (products_in_loops(),) for call in calls]
    else:
        from . import _numba_short

        function = _numba_short.backward
    if _run(function, calls, parallel=True, any_layout=True) is None or exceeded[0]:
        return None
    return tuple(grads)


def threshold_statistics(tokens, lengths, thresholds, longest_stretch):
    """The counts behind the PPV and LSPV statistics, in one pass over the
    tokens and without their boolean arrays (see
    :func:`skattn._model.pooling.pool_ppv`).

    Parameters
    ----------
    tokens : ndarray of shape (N, T, E), float32 or float64
    lengths : ndarray of int of shape (N,)
    thresholds : ndarray of shape (K, E), of the dtype of ``tokens``
    longest_stretch : bool
        The longest run of consecutive tokens above each threshold (LSPV)
        instead of their number (PPV).

    Returns
    -------
    ndarray of shape (N, K, E), in the dtype of ``tokens``: whole numbers,
    the same as the numpy path's.
    """
    lengths = np.ascontiguousarray(lengths, np.int64)
    inputs = _read_only(tokens, lengths, thresholds)
    return kernels().threshold_statistics(*inputs, longest_stretch)


def layer_norm_applies(*arrays):
    """Whether the compiled layer norm runs on these arrays (the tokens or
    gradients, and the parameters): numba runs, one floating dtype, tokens
    of at least one feature."""
    dtype = arrays[0].dtype
    return (
        enabled()
        and dtype in (np.float32, np.float64)
        and all(a.dtype == dtype for a in arrays)
        and arrays[0].shape[-1] > 0
    )


def layer_norm_forward(x, weight, bias, eps):
    """Layer normalisation over the last axis, compiled (see
    :func:`skattn._model.units.layer_norm_forward`, where
    :func:`layer_norm_applies`).

    Returns
    -------
    (out, x_hat, inv_std) or None
        ``out`` and ``x_hat`` of the shape of ``x``, ``inv_std`` of shape
        (..., 1); None where a row's variance is not finite (squares that
        overflow float64, NaN or infinite tokens), or where numba fails to
        compile the kernel: the numpy path computes those arrays.
    """
    from . import _numba_layer_norm

    rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    out, x_hat = np.empty_like(rows), np.empty_like(rows)
    inv_std = np.empty((rows.shape[0], 1), dtype=x.dtype)
    call = (*_read_only(rows, weight, bias), eps, out, x_hat, inv_std)
    finite = _run(_numba_layer_norm.forward, [call])
    if not (finite and finite[0]):
        return None
    return (
        out.reshape(x.shape),
        x_hat.reshape(x.shape),
        inv_std.reshape(x.shape[:-1] + (1,)),
    )


def layer_norm_backward(d_out, weight, x_hat, inv_std):
    """Gradients of :func:`layer_norm_forward`: ``d_x`` of the shape of
    ``d_out``, ``d_weight`` and ``d_bias`` of shape (E,)."""
    from . import _numba_layer_norm

    width = d_out.shape[-1]
    rows = np.ascontiguousarray(d_out).reshape(-1, width)
    d_x = np.empty_like(rows)
    d_weight, d_bias = np.empty(width, d_out.dtype), np.empty(width, d_out.dtype)
    x_hat, inv_std = (np.ascontiguousarray(a) for a in (x_hat, inv_std))
    inputs = _read_only(rows, weight, x_hat.reshape(-1, width), inv_std.reshape(-1, 1))
    _numba_layer_norm.backward(*inputs, d_x, d_weight, d_bias)
    return d_x.reshape(d_out.shape), d_weight, d_bias
