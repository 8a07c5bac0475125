"""Matrix products in compiled loops, for the compiled attention
(:mod:`skattn._kernels._numba_attention`, :mod:`skattn._kernels._numba_short`),
the options its numba functions are compiled with, and the stamp of their
cache (:class:`_KernelSources`).

Each product writes rows of a result whose columns are contiguous, in tiles
of rows by vectors of columns (:mod:`._numba_vectors`; for
:func:`product_set` two rows by four vectors, or four by two where four rows
span two vectors; for :func:`product_add` six rows by two vectors) whose
sums stay in registers over all the terms, as a BLAS kernel's do; then tiles
of one vector (two rows, or eight), and the columns past the last whole
vector one by one. A tile unrolls its rows and vectors into named variables,
each a register. Every sum adds its terms in their plain order (no
reassociation), ``a * b + c`` fused where the CPU has FMA, so that a tile
and a single column round alike. The columns each row or term touches are a
slice ``lo:hi`` (a causal mask skips the columns whose terms are 0).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import functools
import hashlib
import os
import warnings

import numba

from ._numba_vectors import (
    absolute,
    broadcast,
    lanes,
    load,
    maximum,
    multiply,
    multiply_add,
    store,
    store_transposed,
    vector_like,
)

# The directory of the compiled kernels' sources (skattn/_kernels).
_DIRECTORY = os.path.dirname(os.path.abspath(__file__))


@functools.cache
def sources_digest(directory=_DIRECTORY):
    """A digest of the contents of every ``_numba_*.py`` in ``directory``:
    the sources of the compiled kernels; None where they cannot be read (a
    frozen application), which leaves numba's own stamp of each file."""
    digest = hashlib.sha256()
    try:
        for name in sorted(os.listdir(directory)):
            if name.startswith("_numba_") and name.endswith(".py"):
                digest.update(name.encode())
                with open(os.path.join(directory, name), "rb") as source:
                    digest.update(source.read())
    except OSError:
        return None
    return digest.hexdigest()


class _KernelSources:
    """The cache of a compiled kernel, fresh while all the kernels' sources
    are unchanged (:func:`sources_digest`), not only its own file.

    numba compares a cached function with its own source file only, and
    compiles into it the functions it calls from other files as they were:
    after a change to ``_numba_products.py`` alone (an editable install, a
    checkout of another commit), the cached kernels of the other files would
    run the products as they were. Mixed into numba's cache locators (where
    a function is cached: numba's choice, unchanged) for the functions of
    this directory."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.path.dirname(os.path.abspath(py_file)) != _DIRECTORY:
            return None  # not a kernel: numba's own locators
        return super().from_function(py_func, py_file)

    def get_source_stamp(self):
        return (super().get_source_stamp(), sources_digest())


def _stamp_caches_with_every_source():
    """Put :class:`_KernelSources` locators first in numba's list, once a
    process; a numba without that list (or those locators) keeps its own
    stamps."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None)
    locators = getattr(impl, "_locator_classes", None)
    names = ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator")
    bases = [getattr(caching, name, None) for name in names]
    if not isinstance(locators, list) or not all(isinstance(b, type) for b in bases):
        return
    if not any(issubclass(locator, _KernelSources) for locator in locators):
        ours = [type(f"Kernel{b.__name__}", (_KernelSources, b), {}) for b in bases]
        locators[:0] = ours


_stamp_caches_with_every_source()


def _cache_probe():
    """Nothing: a function of this directory, for :func:`can_cache`."""


def can_cache():
    """Whether numba finds a directory to cache the functions of this
    directory in (``NUMBA_CACHE_DIR``, ``__pycache__`` beside them, or the
    user's cache directory). Where it finds none (a read-only install),
    ``cache=True`` raises: the functions are compiled in each process, with
    one warning."""
    try:
        numba.njit(cache=True)(_cache_probe)
    except RuntimeError as error:  # "cannot cache function ...: no locator"
        warnings.warn(
            f"numba cannot cache skattn's compiled kernels ({error}): they are "
            "compiled again in each process. Set NUMBA_CACHE_DIR to a writable "
            "directory to cache them, or SKATTN_COMPILED=0 to use the numpy "
            "path.",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    return True


# "contract" lets LLVM fuse a * b + c into one instruction; nothing else of
# fast-math (no reordering of sums, no assumption that values are finite).
FASTMATH = {"contract"}
JIT = dict(nogil=True, cache=can_cache(), fastmath=FASTMATH)


@numba.njit(**JIT)
def scaled_rows(x, n_rows, scale, out):
    """``out[:n_rows] = x[:n_rows] * scale``, ``x`` 2-D of any layout,
    ``out`` with contiguous rows: in vectors where the rows of ``x`` are
    contiguous too (a view of heads, as the model passes them), which
    numba's loops over an array of unknown layout are not."""
    width = x.shape[1]
    if width > 1 and x.strides[1] != x.itemsize:
        for r in range(n_rows):
            for c in range(width):
                out[r, c] = x[r, c] * scale
        return
    like = vector_like(out)
    n = lanes(like)
    factor = broadcast(scale, like)
    for r in range(n_rows):
        c = 0
        while c + n <= width:
            store(out, r, c, multiply(load(x, r, c), factor))
            c += n
        for j in range(c, width):
            out[r, j] = x[r, j] * scale


@numba.njit(**JIT)
def copy_rows(x, n_rows, out):
    """``out[:n_rows] = x[:n_rows]``, as :func:`scaled_rows` (times 1: exact)."""
    scaled_rows(x, n_rows, 1.0, out)


@numba.njit(**JIT)
def transposed_into(x, n_rows, scale, out_t):
    """``out_t[:, :n_rows] = x[:n_rows].T * scale``, ``out_t`` with
    contiguous rows, ``x`` of any layout: in square blocks of vectors
    (:func:`store_transposed`) where the rows of ``x`` are contiguous."""
    width = x.shape[1]
    r = 0
    if width == 1 or x.strides[1] == x.itemsize:
        n = lanes(vector_like(out_t))
        while r + n <= n_rows:
            c = 0
            while c + n <= width:
                store_transposed(x, r, c, scale, out_t, c, r)
                c += n
            for e in range(c, width):
                for j in range(r, r + n):
                    out_t[e, j] = x[j, e] * scale
            r += n
    for j in range(r, n_rows):  # the rows past the blocks, or all of them
        for e in range(width):
            out_t[e, j] = x[j, e] * scale


@numba.njit(**JIT)
def zero_rows(out, n_rows):
    """``out[:n_rows] = 0``, ``out`` with contiguous rows, in vectors."""
    like = vector_like(out)
    n = lanes(like)
    zero = broadcast(0.0, like)
    width = out.shape[1]
    for r in range(n_rows):
        c = 0
        while c + n <= width:
            store(out, r, c, zero)
            c += n
        for j in range(c, width):
            out[r, j] = 0.0


@numba.njit(**JIT)
def column_maxima(x, n_rows, out):
    """``out[0, c]``: the largest magnitude of column ``c`` of
    ``x[:n_rows]``, 0 for none (a NaN is not counted), ``x`` 2-D of any
    layout: in vectors where its rows are contiguous (as :func:`scaled_rows`),
    two vectors of columns at a time."""
    width = x.shape[1]
    c = 0
    if width == 1 or x.strides[1] == x.itemsize:
        like = vector_like(out)
        n = lanes(like)
        while c + 2 * n <= width:
            m0 = m1 = broadcast(0.0, like)
            for r in range(n_rows):
                m0 = maximum(absolute(load(x, r, c)), m0)
                m1 = maximum(absolute(load(x, r, c + n)), m1)
            store(out, 0, c, m0)
            store(out, 0, c + n, m1)
            c += 2 * n
        while c + n <= width:
            m0 = broadcast(0.0, like)
            for r in range(n_rows):
                m0 = maximum(absolute(load(x, r, c)), m0)
            store(out, 0, c, m0)
            c += n
    for j in range(c, width):  # the columns past the vectors, or all of them
        out[0, j] = 0.0
        for r in range(n_rows):
            value = abs(x[r, j])
            out[0, j] = value if value > out[0, j] else out[0, j]


@numba.njit(**JIT)
def _span(lo, hi, o, n):
    """The columns of rows (or terms) ``o:o + n``: from the least of their
    ``lo`` to the largest of their ``hi``."""
    start, stop = lo[o], hi[o]
    for x in range(o + 1, o + n):
        start = min(start, lo[x])
        stop = max(stop, hi[x])
    return start, max(start, stop)


@numba.njit(inline="always", **JIT)
def _set_tile(a, b_t, out, o, o2, i, like):
    """``out[r, i:i + 4 lanes] = a[r] @ b_t[:, i:i + 4 lanes]`` for rows
    ``r`` in ``(o, o2)``, the sums in registers."""
    n = lanes(like)
    x0 = load(b_t, 0, i)
    x1 = load(b_t, 0, i + n)
    x2 = load(b_t, 0, i + 2 * n)
    x3 = load(b_t, 0, i + 3 * n)
    c0 = broadcast(a[o, 0], like)
    c1 = broadcast(a[o2, 0], like)
    s00, s01, s02, s03 = (
        multiply(c0, x0),
        multiply(c0, x1),
        multiply(c0, x2),
        multiply(c0, x3),
    )
    s10, s11, s12, s13 = (
        multiply(c1, x0),
        multiply(c1, x1),
        multiply(c1, x2),
        multiply(c1, x3),
    )
    for c in range(1, a.shape[1]):
        x0 = load(b_t, c, i)
        x1 = load(b_t, c, i + n)
        x2 = load(b_t, c, i + 2 * n)
        x3 = load(b_t, c, i + 3 * n)
        c0 = broadcast(a[o, c], like)
        c1 = broadcast(a[o2, c], like)
        s00 = multiply_add(c0, x0, s00)
        s01 = multiply_add(c0, x1, s01)
        s02 = multiply_add(c0, x2, s02)
        s03 = multiply_add(c0, x3, s03)
        s10 = multiply_add(c1, x0, s10)
        s11 = multiply_add(c1, x1, s11)
        s12 = multiply_add(c1, x2, s12)
        s13 = multiply_add(c1, x3, s13)
    store(out, o, i, s00)
    store(out, o, i + n, s01)
    store(out, o, i + 2 * n, s02)
    store(out, o, i + 3 * n, s03)
    store(out, o2, i, s10)
    store(out, o2, i + n, s11)
    store(out, o2, i + 2 * n, s12)
    store(out, o2, i + 3 * n, s13)


@numba.njit(inline="always", **JIT)
def _set_vector(a, b_t, out, o, o2, i, like):
    """:func:`_set_tile` of one vector of columns."""
    x = load(b_t, 0, i)
    s0 = multiply(broadcast(a[o, 0], like), x)
    s1 = multiply(broadcast(a[o2, 0], like), x)
    for c in range(1, a.shape[1]):
        x = load(b_t, c, i)
        s0 = multiply_add(broadcast(a[o, c], like), x, s0)
        s1 = multiply_add(broadcast(a[o2, c], like), x, s1)
    store(out, o, i, s0)
    store(out, o2, i, s1)


@numba.njit(inline="always", **JIT)
def _set_four_rows(a, b_t, out, o, i, like):
    """``out[r, i:i + 2 lanes] = a[r] @ b_t[:, i:i + 2 lanes]`` for the rows
    ``r`` from ``o`` to ``o + 3``, the sums in registers: eight sums, as
    :func:`_set_tile`'s, for blocks of two vectors of columns."""
    n = lanes(like)
    o1, o2, o3 = o + 1, o + 2, o + 3
    x0 = load(b_t, 0, i)
    x1 = load(b_t, 0, i + n)
    c0, c1 = broadcast(a[o, 0], like), broadcast(a[o1, 0], like)
    c2, c3 = broadcast(a[o2, 0], like), broadcast(a[o3, 0], like)
    s00, s01 = multiply(c0, x0), multiply(c0, x1)
    s10, s11 = multiply(c1, x0), multiply(c1, x1)
    s20, s21 = multiply(c2, x0), multiply(c2, x1)
    s30, s31 = multiply(c3, x0), multiply(c3, x1)
    for c in range(1, a.shape[1]):
        x0 = load(b_t, c, i)
        x1 = load(b_t, c, i + n)
        c0 = broadcast(a[o, c], like)
        s00 = multiply_add(c0, x0, s00)
        s01 = multiply_add(c0, x1, s01)
        c1 = broadcast(a[o1, c], like)
        s10 = multiply_add(c1, x0, s10)
        s11 = multiply_add(c1, x1, s11)
        c2 = broadcast(a[o2, c], like)
        s20 = multiply_add(c2, x0, s20)
        s21 = multiply_add(c2, x1, s21)
        c3 = broadcast(a[o3, c], like)
        s30 = multiply_add(c3, x0, s30)
        s31 = multiply_add(c3, x1, s31)
    store(out, o, i, s00)
    store(out, o, i + n, s01)
    store(out, o1, i, s10)
    store(out, o1, i + n, s11)
    store(out, o2, i, s20)
    store(out, o2, i + n, s21)
    store(out, o3, i, s30)
    store(out, o3, i + n, s31)


@numba.njit(**JIT)
def product_set(a, b_t, out, lo, hi):
    """``out[o, lo:hi] = sum over c of a[o, c] * b_t[c, lo:hi]`` for each row
    ``o`` of ``a`` (``lo``, ``hi``: int arrays of its columns; rows computed
    together get the span of theirs, columns outside a row's own may be
    written). ``out`` and ``b_t`` with contiguous rows, ``a`` of any layout;
    the sum over ``c`` in its order.

    Rows in pairs, in tiles of two rows by four vectors; from the first row,
    while four rows span exactly two vectors (a block of 32 queries in
    vectors of 16 lanes, which a tile of four vectors would leave to single
    vectors), tiles of four rows by two vectors."""
    n_out = a.shape[0]
    like = vector_like(out)
    n = lanes(like)
    first = 0
    while first + 4 <= n_out:
        start, stop = _span(lo, hi, first, 4)
        if stop - start != 2 * n:
            break
        _set_four_rows(a, b_t, out, first, start, like)
        first += 4
    for o in range(first, n_out, 2):
        o2 = min(o + 1, n_out - 1)  # a last row alone is computed twice
        start, stop = _span(lo, hi, o, o2 - o + 1)
        i = start
        while i + 4 * n <= stop:
            _set_tile(a, b_t, out, o, o2, i, like)
            i += 4 * n
        while i + n <= stop:
            _set_vector(a, b_t, out, o, o2, i, like)
            i += n
        for r in range(o, o2 + 1):
            for j in range(i, stop):
                total = a[r, 0] * b_t[0, j]
                for c in range(1, a.shape[1]):
                    total += a[r, c] * b_t[c, j]
                out[r, j] = total


@numba.njit(inline="always", **JIT)
def _six_rows(e, n_rows):
    """The rows ``e`` to ``e + 5`` of a tile of :func:`product_add`, the last
    row (``n_rows - 1``) in place of those past it."""
    last = n_rows - 1
    return (
        e,
        min(e + 1, last),
        min(e + 2, last),
        min(e + 3, last),
        min(e + 4, last),
        min(e + 5, last),
    )


@numba.njit(inline="always", **JIT)
def _add_tile(a, b, out, e, i, like):
    """``out[r, i:i + 2 lanes] += a[:, r] @ b[:, i:i + 2 lanes]`` for the
    6 rows ``r`` from ``e`` (the last row of ``out`` in place of those past
    it, computed once more), the sums in registers."""
    n = lanes(like)
    e0, e1, e2, e3, e4, e5 = _six_rows(e, a.shape[1])
    s00, s01 = load(out, e0, i), load(out, e0, i + n)
    s10, s11 = load(out, e1, i), load(out, e1, i + n)
    s20, s21 = load(out, e2, i), load(out, e2, i + n)
    s30, s31 = load(out, e3, i), load(out, e3, i + n)
    s40, s41 = load(out, e4, i), load(out, e4, i + n)
    s50, s51 = load(out, e5, i), load(out, e5, i + n)
    for t in range(a.shape[0]):
        x0 = load(b, t, i)
        x1 = load(b, t, i + n)
        c0 = broadcast(a[t, e0], like)
        s00 = multiply_add(c0, x0, s00)
        s01 = multiply_add(c0, x1, s01)
        c1 = broadcast(a[t, e1], like)
        s10 = multiply_add(c1, x0, s10)
        s11 = multiply_add(c1, x1, s11)
        c2 = broadcast(a[t, e2], like)
        s20 = multiply_add(c2, x0, s20)
        s21 = multiply_add(c2, x1, s21)
        c3 = broadcast(a[t, e3], like)
        s30 = multiply_add(c3, x0, s30)
        s31 = multiply_add(c3, x1, s31)
        c4 = broadcast(a[t, e4], like)
        s40 = multiply_add(c4, x0, s40)
        s41 = multiply_add(c4, x1, s41)
        c5 = broadcast(a[t, e5], like)
        s50 = multiply_add(c5, x0, s50)
        s51 = multiply_add(c5, x1, s51)
    store(out, e0, i, s00)
    store(out, e0, i + n, s01)
    store(out, e1, i, s10)
    store(out, e1, i + n, s11)
    store(out, e2, i, s20)
    store(out, e2, i + n, s21)
    store(out, e3, i, s30)
    store(out, e3, i + n, s31)
    store(out, e4, i, s40)
    store(out, e4, i + n, s41)
    store(out, e5, i, s50)
    store(out, e5, i + n, s51)


@numba.njit(inline="always", **JIT)
def _add_vector(a, b, out, e, i, like):
    """``out[r, i:i + lanes] += a[:, r] @ b[:, i:i + lanes]`` for the 8 rows
    ``r`` from ``e`` (the last row of ``out`` in place of those past it,
    computed once more): eight sums, as :func:`_add_tile`'s twelve, enough
    to keep both of a core's FMA units busy over their latency."""
    last = a.shape[1] - 1
    e0, e1, e2, e3 = e, min(e + 1, last), min(e + 2, last), min(e + 3, last)
    e4, e5 = min(e + 4, last), min(e + 5, last)
    e6, e7 = min(e + 6, last), min(e + 7, last)
    s0, s1 = load(out, e0, i), load(out, e1, i)
    s2, s3 = load(out, e2, i), load(out, e3, i)
    s4, s5 = load(out, e4, i), load(out, e5, i)
    s6, s7 = load(out, e6, i), load(out, e7, i)
    for t in range(a.shape[0]):
        x = load(b, t, i)
        s0 = multiply_add(broadcast(a[t, e0], like), x, s0)
        s1 = multiply_add(broadcast(a[t, e1], like), x, s1)
        s2 = multiply_add(broadcast(a[t, e2], like), x, s2)
        s3 = multiply_add(broadcast(a[t, e3], like), x, s3)
        s4 = multiply_add(broadcast(a[t, e4], like), x, s4)
        s5 = multiply_add(broadcast(a[t, e5], like), x, s5)
        s6 = multiply_add(broadcast(a[t, e6], like), x, s6)
        s7 = multiply_add(broadcast(a[t, e7], like), x, s7)
    store(out, e0, i, s0)
    store(out, e1, i, s1)
    store(out, e2, i, s2)
    store(out, e3, i, s3)
    store(out, e4, i, s4)
    store(out, e5, i, s5)
    store(out, e6, i, s6)
    store(out, e7, i, s7)


@numba.njit(**JIT)
def product_add(a, b, out, lo, hi):
    """``out[e, lo:hi] += sum over t of a[t, e] * b[t, lo:hi]`` for each
    column ``e`` of ``a``, over the span of all the terms' columns (``lo``,
    ``hi``: int arrays of the columns of each term ``t``): in that span a
    term's row of ``b`` is 0 past its own columns. ``out`` and ``b`` with
    contiguous rows, ``a`` of any layout; the sum over ``t`` in its order."""
    n_terms, width = a.shape
    if n_terms == 0:
        return
    like = vector_like(out)
    n = lanes(like)
    start, stop = _span(lo, hi, 0, n_terms)
    i = start
    while i + 2 * n <= stop:  # a strip of b stays in the L1 cache over the rows
        for e in range(0, width, 6):
            _add_tile(a, b, out, e, i, like)
        i += 2 * n
    while i + n <= stop:
        for e in range(0, width, 8):
            _add_vector(a, b, out, e, i, like)
        i += n
    for e in range(width):
        for j in range(i, stop):
            total = out[e, j]
            for t in range(n_terms):
                total += a[t, e] * b[t, j]
            out[e, j] = total
