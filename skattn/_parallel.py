"""Threads, BLAS limits and cache-sized chunks: how skattn uses the cores.

Infrastructure, no numerics. Matrix products of attention are small, so BLAS
runs on one thread inside skattn's computations, and the cores the user allows
(the BLAS thread limit set with ``threadpoolctl.threadpool_limits`` or
``OMP_NUM_THREADS``) compute independent tasks (attention tiles, batches of
sequences) side by side in Python threads: numpy releases the GIL in matmul and
exp. Every task is computed the same way whatever the number of threads, so
results do not depend on it.

Guarantee, whichever Python threads call skattn, at once or not, nested or not:

- every matrix product skattn computes runs on one BLAS thread, so a call from
  any thread gives bit for bit the result of the same call from the main
  thread;
- once the last of the calls under way returns, each BLAS library's thread
  limit is what it was before the first of them started;
- a limit already at one (``threadpool_limits(1)`` around the calls) is never
  raised;
- a child process forked at any moment (``multiprocessing``'s fork start
  method, a server's preforked workers) computes on worker threads of its own
  and finds the limits the user set, whatever the parent's threads were
  computing (:func:`_after_fork_in_child`).

Why it takes more than ``threadpool_limits`` around each call. Some BLAS
libraries keep one thread limit for the whole process: OpenBLAS built on
pthreads, the one numpy's and scipy's wheels ship (measured: a limit set from
any thread, ``openblas_set_num_threads_local`` included, applies to the
products of all threads). A limit each call saves and restores is wrong when
calls overlap: a call starting while another holds the limit at one saves that
one, and restores it if it returns last, leaving the process on one BLAS
thread. And threadpoolctl lets only one thread at a time (its "controlling
thread": the first to set a limit, until it leaves its ``threadpool_limits``)
change such a limit and silently ignores the others: a call from a thread pool
inside the main thread's ``threadpool_limits``, or overlapping another call,
ran with a multithreaded BLAS, several times slower and an ulp different.

So a process-wide limit is managed as the process-wide resource it is: a count
of the skattn calls under way in all threads, under a lock; the first to start
lowers the limit to one and the last to return restores what the first found.
skattn sets the library itself, not through threadpoolctl's controlling
thread, so a user's ``threadpool_limits`` in any thread keeps working as
before. A limit that holds for the calling thread only (OpenBLAS built on
OpenMP, MKL as recent threadpoolctl sets it) is lowered and restored in each
thread that computes, skattn's own worker threads included.

A process-wide limit is shared with the rest of the program: while skattn
computes, other threads' BLAS products run on one thread too, and a limit
changed from another thread meanwhile (entering or leaving a
``threadpool_limits`` there) is not skattn's to know: it may change the
threads skattn's products run on, and skattn restores the limit it found only
if the limit is still the one it set.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, partial
from itertools import chain, islice

from threadpoolctl import ThreadpoolController

# Work computed at once by one task (a chunk of sequences, a block of
# attention weights) stays within about this many bytes: chunks that stay in
# the CPU's caches ran faster than one large batch, and did not pay for the
# page faults of large fresh arrays (see the user guide, "How the defaults
# were chosen").
CACHE_BYTES = 4 * 2**20


def even_chunks(n_items, item_bytes, budget_bytes):
    """Slices of ``n_items`` items of ``item_bytes`` each, at most
    ``budget_bytes`` a chunk (at least one item), and as even as possible:
    16 + 16 items, not 24 + 8.

    Returns
    -------
    chunks : list of slice
    """
    if n_items == 0:
        return []
    per_chunk = max(1, int(budget_bytes // max(1, item_bytes)))
    n_chunks = -(-n_items // per_chunk)
    per_chunk = -(-n_items // n_chunks)
    return [
        slice(start, min(start + per_chunk, n_items))
        for start in range(0, n_items, per_chunk)
    ]


@cache
def _threadpool_controller():
    """One controller per process: building it inspects the loaded libraries."""
    return ThreadpoolController()


def _limit_is_process_wide(lib):
    """Whether threadpoolctl's limit on ``lib`` holds for all threads at once.

    OpenBLAS built on OpenMP takes the limit per calling thread, and so does MKL
    where threadpoolctl sets it with ``MKL_Set_Num_Threads_Local`` (which it
    lists among the symbols it checks). OpenBLAS on pthreads or Windows threads
    (numpy's and scipy's wheels), BLIS, FlexiBLAS and older threadpoolctl's MKL
    share one limit across the process.
    """
    if lib.internal_api == "openblas":
        return getattr(lib, "threading_layer", None) != "openmp"
    if lib.internal_api == "mkl":
        return "MKL_Set_Num_Threads_Local" not in getattr(lib, "check_symbols", ())
    return True


@cache
def _blas_libraries():
    """The BLAS libraries loaded: (process-wide limit, per-thread limit)."""
    blas = _threadpool_controller().select(user_api="blas").lib_controllers
    shared = tuple(lib for lib in blas if _limit_is_process_wide(lib))
    return shared, tuple(lib for lib in blas if lib not in shared)


def _set_limit(lib, n_threads):
    """Set ``lib``'s thread limit from whichever thread calls.

    Recent threadpoolctl (3.8 and later) applies a process-wide OpenBLAS limit only
    from its "controlling thread" and silently ignores every other thread;
    skattn coordinates its own calls (see :func:`single_threaded_blas`), so it
    calls the library's setter that threadpoolctl would call (the public
    ``set_num_threads`` of versions without that rule).
    """
    getattr(lib, "_real_set_num_threads", lib.set_num_threads)(n_threads)


# Process-wide limits: the skattn computations under way in all threads, and
# the limits the first of them lowered (library: limit found), restored by the
# last. Both under _SHARED_LOCK.
_SHARED_LOCK = threading.Lock()
_shared_calls = 0
_shared_saved = {}


def _lower_limits(libs):
    """Lower the limit of each of ``libs`` above 1 to 1: [(library, limit found)].

    The limit as the calling thread sees it: the process's, or the calling
    thread's own where the library keeps one per thread.
    """
    lowered = []
    for lib in libs:
        n_threads = lib.get_num_threads()
        if n_threads is not None and n_threads > 1:
            _set_limit(lib, 1)
            lowered.append((lib, n_threads))
    return lowered


def _restore_limits(lowered):
    """Undo :func:`_lower_limits`."""
    for lib, n_threads in reversed(lowered):
        _set_limit(lib, n_threads)


def _user_limit(shared, own):
    """The smallest BLAS limit the user set (before skattn lowered any), or 1."""
    limits = [_shared_saved.get(lib) or lib.get_num_threads() for lib in shared]
    limits += [lib.get_num_threads() for lib in own]
    return min((n for n in limits if n is not None), default=1)


# Tasks (tiles, batches) computed side by side, fixed by the outermost
# single_threaded_blas() of each thread.
_WORKERS = ContextVar("skattn_workers", default=None)


def parallel_workers():
    """How many tasks (tiles, batches) to compute at once: the BLAS thread limit.

    Each task runs its products on one BLAS thread; several tasks run side by
    side in Python threads (numpy releases the GIL in matmul and exp). So the
    user's limit (``threadpoolctl.threadpool_limits``, ``OMP_NUM_THREADS``)
    still caps the cores used. While skattn computes, this is the limit the
    user set, not the one BLAS thread skattn lowered it to; inside
    :func:`single_threaded_blas`, it is the one found on entering the outermost.
    """
    workers = _WORKERS.get()
    if workers is not None:
        return workers
    with _SHARED_LOCK:
        n_threads = _user_limit(*_blas_libraries())
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
        return _shared_map(function, tasks, n_workers)


def _shared_map(function, tasks, n_workers):
    """``[function(task) for task in tasks]`` computed by the calling thread
    and ``n_workers - 1`` worker threads, each taking the next task not yet
    taken: the calling thread's caches hold the arrays it has just made, and
    it does not wait for a worker thread to wake for the first task. A task
    that raises stops the map once the tasks under way finish (no task is
    started after it); the error of the first such task in order is raised.
    """
    results = [None] * len(tasks)
    errors = {}
    taken = iter(range(len(tasks)))
    lock = threading.Lock()

    def work(_):
        while not errors:
            with lock:
                index = next(taken, None)
            if index is None:
                return
            try:
                results[index] = function(tasks[index])
            except BaseException as error:  # raised in the calling thread, below
                errors[index] = error

    share, executor = partial(_run_alone, work), _executor(n_workers - 1)
    futures = [executor.submit(share, None) for _ in range(n_workers - 1)]
    try:
        share(None)
    finally:
        for future in futures:  # every task is taken: a share not started has none
            future.cancel()
        wait(futures)
    for future in futures:
        if not future.cancelled():
            future.result()  # an error of the map itself, not of a task
    if errors:
        raise errors[min(errors)]
    return results


def imap_parallel(function, tasks):
    """``function(task)`` for each task of an iterator, in order, lazily.

    Like :func:`map_parallel`, the calling thread computes tasks beside
    ``n - 1`` worker threads (``n`` the :func:`parallel_workers`), each
    thread taking the next task not yet taken as soon as it is free, but at
    most ``2 * n`` tasks are taken and not yet yielded: ``n`` under way and
    up to ``n`` finished, waiting for an older one, so that only ``n`` tasks
    (batches of padded sequences, say) and ``n`` results exist at once. The
    calling thread yields a result as soon as it is the oldest and finished,
    and computes the next task itself rather than wait for a worker; no
    thread waits for a group of tasks to finish. While the calling thread
    computes a task, the results finished meanwhile wait for it to yield
    them: room for ``n`` of them lets a worker go on, on a core faster than
    the calling thread's (a VM's cores can run at different speeds) or past
    a task of its own that finished early. A lone task runs in the calling
    thread, its nested maps on the workers. A task that raises, or the
    iterator of tasks, stops the map: no task starts after it, and the ones
    under way finish before the error reaches the caller, after the results
    before it.

    Yields
    ------
    result
        ``function(task)``, in the order of ``tasks``.
    """
    n_workers = parallel_workers()
    tasks = iter(tasks)
    first = list(islice(tasks, 2)) if n_workers > 1 else []
    if n_workers <= 1 or len(first) == 1:
        # one worker, or one task (a batch of one long sequence): the task runs
        # in this thread, and its own maps run their tasks on the workers
        for task in chain(first, tasks):
            with single_threaded_blas():  # left before the yield: see _run_alone
                result = function(task)
            yield result
        return
    yield from _SlidingWindow(function, chain(first, tasks), n_workers).results()


class _SlidingWindow:
    """The shared state of one :func:`imap_parallel` of several threads.

    ``started`` tasks have been taken from ``tasks`` and ``yielded`` results
    given to the caller; a thread may take task ``started`` while ``started
    < yielded + 2 * n_workers``. ``finished`` holds the outcome of each task
    done and not yet yielded, ``(result, error)`` by index. ``open`` is
    False once no task may start (the tasks are exhausted, one failed, or the
    caller stopped). ``helpers`` counts the worker threads' loops under way.
    All under ``condition``.
    """

    def __init__(self, function, tasks, n_workers):
        self.run = partial(_run_alone, function)
        self.tasks = tasks
        self.n_workers = n_workers
        self.condition = threading.Condition()
        self.started = self.yielded = self.helpers = 0
        self.finished = {}
        self.open = True

    def _take(self):
        """The next task's ``(index, task)``, or None if none may start now
        (under the condition). An error of the iterator becomes the outcome
        of the task it failed to give."""
        if not self._may_start():
            return None
        index = self.started
        try:
            task = next(self.tasks)
        except StopIteration:
            self.open = False
            return None
        except BaseException as error:
            self.started += 1
            self._finish(index, None, error)
            return None
        self.started += 1
        return index, task

    def _may_start(self):
        """Whether a task may start: the map is open and fewer than
        ``2 * n_workers`` tasks are started and not yielded (under the
        condition)."""
        return self.open and self.started < self.yielded + 2 * self.n_workers

    def _finish(self, index, result, error):
        """Record a task's outcome (under the condition)."""
        self.finished[index] = (result, error)
        if error is not None:
            self.open = False  # no task starts after a failure
        self.condition.notify_all()

    def _compute(self, index, task, caught=BaseException):
        """Compute a task and record its outcome, its error among them if
        of the ``caught`` kind (the calling thread lets an interruption
        through at once)."""
        try:
            result = self.run(task)
        except caught as raised:
            outcome = (None, raised)
        else:
            outcome = (result, None)
        with self.condition:
            self._finish(index, *outcome)

    def _help(self, _):
        """A worker thread's loop: tasks while one may start."""
        while True:
            with self.condition:
                taken = self._take()
                if taken is None:
                    self.helpers -= 1
                    return
            self._compute(*taken)

    def _oldest_under_way(self):
        """Whether the oldest task not yielded is started and not finished
        (under the condition)."""
        return self.yielded < self.started and self.yielded not in self.finished

    def _call_helpers(self, executor):
        """Start worker loops up to ``n_workers - 1``, while a task may
        start (under the condition)."""
        futures = []
        while self.helpers < self.n_workers - 1 and self._may_start():
            self.helpers += 1
            futures.append(executor.submit(self._help, None))
        return futures

    def results(self):
        """The results in order; the calling thread computes tasks while the
        oldest one is under way."""
        executor, futures = _executor(self.n_workers - 1), []
        try:
            while True:
                with self.condition:
                    outcome = taken = None
                    while outcome is None and taken is None:
                        futures = [f for f in futures if not f.done()]
                        futures += self._call_helpers(executor)
                        if self.yielded in self.finished:
                            outcome = self.finished.pop(self.yielded)
                            self.yielded += 1
                            futures += self._call_helpers(executor)
                        elif self.yielded == self.started and not self.open:
                            return
                        else:
                            taken = self._take()
                            if taken is None and self._oldest_under_way():
                                self.condition.wait()
                if taken is not None:
                    self._compute(*taken, caught=Exception)
                    continue
                result, error = outcome
                if error is not None:
                    raise error
                yield result
        finally:  # an error, or a caller that stopped early: no task outlives the map
            with self.condition:
                self.open = False
            for future in futures:
                future.cancel()  # a loop not started yet has no task
            wait(futures)


def _after_fork_in_child():
    """Make a forked child's state that of a process with no skattn thread.

    A child forked from a process gets a copy of its memory but only the
    thread that forked: the cached executor's worker threads do not exist
    there (a task submitted to it would wait for ever), a lock held by another
    thread at the fork stays held, and the computations under way in other
    threads never end, so they never restore the BLAS limits they lowered.
    The one computation that can still be under way in the child is the
    forking thread's own (a callback of a fit that forks).
    """
    global _SHARED_LOCK, _shared_calls
    _executor.cache_clear()
    _SHARED_LOCK = threading.Lock()
    _shared_calls = 0 if _WORKERS.get() is None else 1
    if _shared_calls == 0:
        for lib, n_threads in _shared_saved.items():
            if lib.get_num_threads() == 1:
                _set_limit(lib, n_threads)
        _shared_saved.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _run_alone(function, task):
    """``function(task)`` in one of skattn's worker threads, on one BLAS thread
    (a per-thread limit is lowered in this thread, a process-wide one is
    counted as one more computation under way), with nested maps computing
    their tasks one by one. The context holds for the task only, never across
    a ``yield`` of :func:`imap_parallel`: a context variable set in a
    generator would hold in its caller between the items."""
    with single_threaded_blas():
        token = _WORKERS.set(1)  # nested maps: no threads of their own
        try:
            return function(task)
        finally:
            _WORKERS.reset(token)


@contextmanager
def single_threaded_blas():
    """Context limiting BLAS to one thread (never raising a user's lower limit).

    The tiles' matrix products are small: two BLAS threads on them ran many
    times slower than one on a busy 2-core machine. The cores the user allows
    go to tiles instead (see :func:`parallel_workers`).

    Safe from any number of threads at once (see the module docstring): a
    process-wide limit is lowered by the first of the calls under way in all
    threads and restored by the last, a per-thread limit in each thread.
    """
    global _shared_calls
    if _WORKERS.get() is not None:
        yield  # inside one already in this thread
        return
    shared, own = _blas_libraries()
    with _SHARED_LOCK:
        workers = max(1, min(_user_limit(shared, own), _available_cpus()))
        if _shared_calls == 0:
            _shared_saved.update(_lower_limits(shared))
        _shared_calls += 1
    try:
        lowered = _lower_limits(own)
        token = _WORKERS.set(workers)
        try:
            yield
        finally:
            _WORKERS.reset(token)
            _restore_limits(lowered)
    finally:
        with _SHARED_LOCK:
            _shared_calls -= 1
            if _shared_calls == 0:
                for lib, n_threads in _shared_saved.items():
                    # changed by someone else meanwhile: theirs to restore
                    if lib.get_num_threads() == 1:
                        _set_limit(lib, n_threads)
                _shared_saved.clear()
