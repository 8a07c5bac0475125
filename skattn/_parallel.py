"""Threads and BLAS limits: how skattn uses the cores it is allowed.

Infrastructure, no numerics. Matrix products of attention are small, so BLAS
runs on one thread inside skattn's computations, and the cores the user allows
(the BLAS thread limit set with ``threadpoolctl.threadpool_limits`` or
``OMP_NUM_THREADS``) compute independent tasks (attention tiles, batches of
sequences) side by side in Python threads: numpy releases the GIL in matmul and
exp. Every task is computed the same way whatever the number of threads, so
results do not depend on it.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache

from threadpoolctl import ThreadpoolController


@cache
def _threadpool_controller():
    """One controller per process: building it inspects the loaded libraries."""
    return ThreadpoolController()


# Tasks (tiles, batches) computed side by side, fixed by the outermost
# single_threaded_blas().
_WORKERS = ContextVar("skattn_workers", default=None)


def parallel_workers():
    """How many tasks (tiles, batches) to compute at once: the BLAS thread limit.

    Each task runs its products on one BLAS thread; several tasks run side by
    side in Python threads (numpy releases the GIL in matmul and exp). So the
    user's limit (``threadpoolctl.threadpool_limits``, ``OMP_NUM_THREADS``)
    still caps the cores used. Inside :func:`single_threaded_blas` this is the
    limit that was in force when the outermost one was entered.
    """
    workers = _WORKERS.get()
    if workers is not None:
        return workers
    blas = _threadpool_controller().select(user_api="blas").lib_controllers
    n_threads = min((lib.num_threads for lib in blas), default=1)
    return max(1, min(n_threads, _available_cpus()))


@cache
def _available_cpus():
    """CPUs this process may run on (its affinity mask, where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@cache
def _executor(n_workers):
    return ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="skattn")


def map_parallel(function, tasks):
    """``[function(task) for task in tasks]``, on :func:`parallel_workers` threads.

    Results do not depend on the number of threads: every task (an attention
    tile, a batch of sequences) is computed the same way, on one BLAS thread.
    When tasks run side by side, a ``map_parallel`` inside ``function`` runs
    its own tasks one by one.
    """
    tasks = list(tasks)
    n_workers = min(parallel_workers(), len(tasks))
    with single_threaded_blas():
        if n_workers <= 1:
            return [function(task) for task in tasks]

        def run_alone(task):
            token = _WORKERS.set(1)  # nested maps: no threads of their own
            try:
                return function(task)
            finally:
                _WORKERS.reset(token)

        return list(_executor(n_workers).map(run_alone, tasks))


@contextmanager
def single_threaded_blas():
    """Context limiting BLAS to one thread (never raising a user's lower limit).

    The tiles' matrix products are small: two BLAS threads on them ran up to 10x
    slower than one on a busy 2-core machine (225 s against 13 s for 32,768
    tokens here). The cores the user allows go to tiles instead (see
    :func:`parallel_workers`).
    """
    if _WORKERS.get() is not None:
        yield  # inside one already (limiting BLAS costs about 40 us)
        return
    token = _WORKERS.set(parallel_workers())
    try:
        with _threadpool_controller().limit(limits=1, user_api="blas"):
            yield
    finally:
        _WORKERS.reset(token)


def map_in_groups(function, tasks):
    """``function(task)`` for each task of an iterator, in order, lazily.

    Like :func:`map_parallel`, but takes a group of as many tasks as there
    are workers at a time, so that only that many tasks (batches of padded
    sequences, say) exist at once.

    Yields
    ------
    result
        ``function(task)``, in the order of ``tasks``.
    """
    tasks = iter(tasks)
    n_workers = parallel_workers()
    while group := list(itertools.islice(tasks, n_workers)):
        yield from map_parallel(function, group)
