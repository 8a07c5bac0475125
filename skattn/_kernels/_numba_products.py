"""Matrix products in numba loops that LLVM vectorises for the host CPU, for
the compiled attention (:mod:`skattn._kernels._numba_attention`), and the
options its numba functions are compiled with.

Each product writes rows of a result whose columns are contiguous, and its
innermost loop runs over those columns, which LLVM vectorises (numba turns
off LLVM's SLP vectoriser: a loop of a small fixed width would run in
scalars). A pass adds four terms to four rows of the result, each sum in its
plain order (no reassociation), so that a row's terms are loaded once for
four rows. The columns each row or term touches are a slice ``lo:hi`` (a
causal mask skips the columns whose terms are 0).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numba


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
def _span(lo, hi, o, n):
    """The columns of rows (or terms) ``o:o + n``: from the least of their
    ``lo`` to the largest of their ``hi``."""
    start, stop = lo[o], hi[o]
    for x in range(o + 1, o + n):
        start = min(start, lo[x])
        stop = max(stop, hi[x])
    return start, max(start, stop)


@numba.njit(**JIT)
def product_set(a, b_t, out, lo, hi):
    """``out[o, lo:hi] = sum over c of a[o, c] * b_t[c, lo:hi]`` for each row
    ``o`` of ``a`` (``lo``, ``hi``: int arrays of its columns; four rows
    computed together get the span of theirs). ``out`` and ``b_t``
    C-contiguous, ``a`` of any layout; the sum over ``c`` in its order."""
    n_out, width = a.shape
    o = 0
    while o + 4 <= n_out:
        start, stop = _span(lo, hi, o, 4)
        s0 = out[o, start:stop]
        s1 = out[o + 1, start:stop]
        s2 = out[o + 2, start:stop]
        s3 = out[o + 3, start:stop]
        b0 = a[o, 0]
        b1 = a[o + 1, 0]
        b2 = a[o + 2, 0]
        b3 = a[o + 3, 0]
        brow = b_t[0, start:stop]
        for i in range(s0.shape[0]):
            x = brow[i]
            s0[i] = b0 * x
            s1[i] = b1 * x
            s2[i] = b2 * x
            s3[i] = b3 * x
        c = 1
        while c + 4 <= width:
            a0_0 = a[o, c]
            a0_1 = a[o, c + 1]
            a0_2 = a[o, c + 2]
            a0_3 = a[o, c + 3]
            a1_0 = a[o + 1, c]
            a1_1 = a[o + 1, c + 1]
            a1_2 = a[o + 1, c + 2]
            a1_3 = a[o + 1, c + 3]
            a2_0 = a[o + 2, c]
            a2_1 = a[o + 2, c + 1]
            a2_2 = a[o + 2, c + 2]
            a2_3 = a[o + 2, c + 3]
            a3_0 = a[o + 3, c]
            a3_1 = a[o + 3, c + 1]
            a3_2 = a[o + 3, c + 2]
            a3_3 = a[o + 3, c + 3]
            q0 = b_t[c, start:stop]
            q1 = b_t[c + 1, start:stop]
            q2 = b_t[c + 2, start:stop]
            q3 = b_t[c + 3, start:stop]
            for i in range(s0.shape[0]):
                x0 = q0[i]
                x1 = q1[i]
                x2 = q2[i]
                x3 = q3[i]
                s0[i] = (((s0[i] + a0_0 * x0) + a0_1 * x1) + a0_2 * x2) + a0_3 * x3
                s1[i] = (((s1[i] + a1_0 * x0) + a1_1 * x1) + a1_2 * x2) + a1_3 * x3
                s2[i] = (((s2[i] + a2_0 * x0) + a2_1 * x1) + a2_2 * x2) + a2_3 * x3
                s3[i] = (((s3[i] + a3_0 * x0) + a3_1 * x1) + a3_2 * x2) + a3_3 * x3
            c += 4
        first = c
        for c in range(first, width):
            b0 = a[o, c]
            b1 = a[o + 1, c]
            b2 = a[o + 2, c]
            b3 = a[o + 3, c]
            brow = b_t[c, start:stop]
            for i in range(s0.shape[0]):
                x = brow[i]
                s0[i] += b0 * x
                s1[i] += b1 * x
                s2[i] += b2 * x
                s3[i] += b3 * x
        o += 4
    first = o
    for o in range(first, n_out):
        start, stop = _span(lo, hi, o, 1)
        srow = out[o, start:stop]
        b = a[o, 0]
        brow = b_t[0, start:stop]
        for i in range(srow.shape[0]):
            srow[i] = b * brow[i]
        for c in range(1, width):
            b = a[o, c]
            brow = b_t[c, start:stop]
            for i in range(srow.shape[0]):
                srow[i] += b * brow[i]


@numba.njit(**JIT)
def product_add(a, b, out, lo, hi):
    """``out[e, lo:hi] += sum over t of a[t, e] * b[t, lo:hi]`` for each
    column ``e`` of ``a`` (``lo``, ``hi``: int arrays of the columns of each
    term ``t``, the terms past them 0; four terms added together get the span
    of theirs). ``out`` and ``b`` C-contiguous, ``a`` of any layout; the sum
    over ``t`` in its order."""
    n_terms, width = a.shape
    t = 0
    while t + 4 <= n_terms:
        start, stop = _span(lo, hi, t, 4)
        p0 = b[t, start:stop]
        p1 = b[t + 1, start:stop]
        p2 = b[t + 2, start:stop]
        p3 = b[t + 3, start:stop]
        e = 0
        while e + 4 <= width:
            a0_0 = a[t, e]
            a0_1 = a[t + 1, e]
            a0_2 = a[t + 2, e]
            a0_3 = a[t + 3, e]
            a1_0 = a[t, e + 1]
            a1_1 = a[t + 1, e + 1]
            a1_2 = a[t + 2, e + 1]
            a1_3 = a[t + 3, e + 1]
            a2_0 = a[t, e + 2]
            a2_1 = a[t + 1, e + 2]
            a2_2 = a[t + 2, e + 2]
            a2_3 = a[t + 3, e + 2]
            a3_0 = a[t, e + 3]
            a3_1 = a[t + 1, e + 3]
            a3_2 = a[t + 2, e + 3]
            a3_3 = a[t + 3, e + 3]
            o0 = out[e, start:stop]
            o1 = out[e + 1, start:stop]
            o2 = out[e + 2, start:stop]
            o3 = out[e + 3, start:stop]
            for i in range(p0.shape[0]):
                x0 = p0[i]
                x1 = p1[i]
                x2 = p2[i]
                x3 = p3[i]
                o0[i] = (((o0[i] + a0_0 * x0) + a0_1 * x1) + a0_2 * x2) + a0_3 * x3
                o1[i] = (((o1[i] + a1_0 * x0) + a1_1 * x1) + a1_2 * x2) + a1_3 * x3
                o2[i] = (((o2[i] + a2_0 * x0) + a2_1 * x1) + a2_2 * x2) + a2_3 * x3
                o3[i] = (((o3[i] + a3_0 * x0) + a3_1 * x1) + a3_2 * x2) + a3_3 * x3
            e += 4
        first = e
        for e in range(first, width):
            c0 = a[t, e]
            c1 = a[t + 1, e]
            c2 = a[t + 2, e]
            c3 = a[t + 3, e]
            arow = out[e, start:stop]
            for i in range(arow.shape[0]):
                arow[i] = (
                    ((arow[i] + c0 * p0[i]) + c1 * p1[i]) + c2 * p2[i]
                ) + c3 * p3[i]
        t += 4
    first = t
    for t in range(first, n_terms):
        start, stop = _span(lo, hi, t, 1)
        prow = b[t, start:stop]
        for e in range(width):
            c = a[t, e]
            arow = out[e, start:stop]
            for i in range(prow.shape[0]):
                arow[i] += c * prow[i]
