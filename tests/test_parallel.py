"""skattn called from several Python threads at once.

Whichever threads call, at once or not, nested or not: results bit for bit those
of the main thread, and each BLAS library's thread limit as it was once the last
call returns, a user's limit of one never raised. Overlaps are forced with
barriers and with scripted turns, never with timing.

The data are float32: OpenBLAS rounds float32 products on two threads
differently from one thread (by an ulp), so a call that ran with a
multithreaded BLAS shows in its result bits.
"""

import itertools
import os
import threading

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from threadpoolctl import ThreadpoolController, threadpool_info, threadpool_limits

from skattn import AttentionTransformer, _parallel
from skattn._parallel import (
    _available_cpus,
    imap_parallel,
    map_parallel,
    parallel_workers,
    single_threaded_blas,
)

TIMEOUT = 60  # seconds: a turn or a barrier not reached is a failure, not a hang


def blas_limits():
    """Each loaded BLAS library's thread limit, by file."""
    return {
        info["filepath"]: info["num_threads"]
        for info in threadpool_info()
        if info["user_api"] == "blas"
    }


@pytest.fixture(scope="module")
def fitted():
    """A transformer and float32 sequences (tiny: calls take milliseconds)."""
    X = np.random.default_rng(0).standard_normal((8, 16, 8), dtype=np.float32)
    return AttentionTransformer(objective=None, random_state=0).fit(X), X


def run_at_once(n_threads, function):
    """``function()`` in ``n_threads`` threads released together by a barrier."""
    barrier = threading.Barrier(n_threads, timeout=TIMEOUT)
    results, errors = [None] * n_threads, []

    def run(index):
        try:
            barrier.wait()
            results[index] = function()
        except BaseException as error:  # re-raised in the calling thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    if errors:
        raise errors[0]
    return results


def run_script(script, transform):
    """Play ``script``, (thread, action) steps, in its order, each in its thread.

    ``"enter"`` and ``"exit"`` enter and leave :func:`single_threaded_blas` (as
    a transform does on starting and on returning, so a thread can be held
    inside while others start and finish); ``"transform"`` calls
    ``transform()``. Returns the transforms' results in script order.
    """
    turn = threading.Condition()
    step = [0]
    results, errors = {}, []

    def play(me):
        contexts = []
        for index, (thread, action) in enumerate(script):
            if thread != me:
                continue
            with turn:
                if not turn.wait_for(lambda i=index: step[0] == i, TIMEOUT):
                    errors.append(TimeoutError(f"step {index} never came"))
                    return
            try:
                if action == "enter":
                    contexts.append(single_threaded_blas())
                    contexts[-1].__enter__()
                elif action == "exit":
                    contexts.pop().__exit__(None, None, None)
                else:
                    results[index] = transform()
            except BaseException as error:  # re-raised in the calling thread
                errors.append(error)
            finally:
                with turn:
                    step[0] += 1
                    turn.notify_all()

    n_threads = 1 + max(thread for thread, _ in script)
    threads = [threading.Thread(target=play, args=(i,)) for i in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    if errors:
        raise errors[0]
    return [results[index] for index in sorted(results)]


def test_transforms_from_threads_at_once_equal_the_main_thread(fitted):
    """Four threads transform at once: the main thread's result bit for bit and
    the BLAS limit it found, without a user limit, within one of 2 (around
    the pool, as threadpoolctl advises for Python thread pools) and within one
    of 1, which is never raised."""
    est, X = fitted
    before = blas_limits()
    expected = est.transform(X)  # main thread

    results = run_at_once(4, lambda: est.transform(X))
    assert blas_limits() == before
    for result in results:
        assert_array_equal(result, expected)

    for limit in (2, 1):
        with threadpool_limits(limits=limit, user_api="blas"):
            inside = blas_limits()
            results = run_at_once(4, lambda: est.transform(X))
            assert blas_limits() == inside
        for result in results:
            assert_array_equal(result, expected)
    assert blas_limits() == before


# Thread 0 holds the first call and leaves while the others compute; threads
# enter and leave in other orders than they came, one of them nested.
SCRIPTS = {
    "first in, first out": [
        (0, "enter"),
        (1, "enter"),
        (0, "exit"),
        (1, "transform"),
        (1, "exit"),
    ],
    "four threads, nested and overlapping": [
        (0, "enter"),
        (1, "enter"),
        (2, "enter"),
        (1, "enter"),
        (0, "exit"),
        (2, "transform"),
        (1, "exit"),
        (3, "enter"),
        (2, "exit"),
        (3, "transform"),
        (3, "exit"),
        (1, "transform"),
        (1, "exit"),
    ],
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_overlapping_calls_restore_the_limit_the_first_found(fitted, name):
    """Calls overlapping in any order compute on one BLAS thread throughout
    (the main thread's bits), and the last to return restores the limit the
    first found, whichever thread each ran in."""
    est, X = fitted
    with threadpool_limits(limits=2, user_api="blas"):  # a multithreaded BLAS
        before = blas_limits()
    expected = est.transform(X)
    with threadpool_limits(limits=2, user_api="blas"):
        results = run_script(SCRIPTS[name], lambda: est.transform(X))
        assert blas_limits() == before
    for result in results:
        assert_array_equal(result, expected)


def test_workers_follow_the_user_limit_while_another_thread_computes():
    """A call starting while another thread computes gets as many workers as
    the user's limit allows, not the one BLAS thread skattn set meanwhile."""
    entered, done = threading.Event(), threading.Event()

    def hold():
        with threadpool_limits(limits=2, user_api="blas"), single_threaded_blas():
            entered.set()
            done.wait(TIMEOUT)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert entered.wait(TIMEOUT)
        seen = run_at_once(1, parallel_workers)
    finally:
        done.set()
        holder.join(TIMEOUT)
    assert seen == [min(2, _available_cpus())]


class PerThreadBLAS:
    """A BLAS whose limit holds per calling thread (as OpenBLAS on OpenMP)."""

    user_api = "blas"
    internal_api = "openblas"
    threading_layer = "openmp"
    prefix = filepath = "per-thread-blas"
    version = None
    default = 4

    def __init__(self):
        self._local = threading.local()

    def get_num_threads(self):
        return getattr(self._local, "n_threads", self.default)

    def set_num_threads(self, n_threads):
        self._local.n_threads = n_threads

    @property
    def num_threads(self):
        return self.get_num_threads()

    def info(self, debugging_info=False):
        keys = ("user_api", "internal_api", "prefix", "filepath", "version")
        return {key: getattr(self, key) for key in keys} | {
            "num_threads": self.num_threads,
            "threading_layer": self.threading_layer,
        }


def test_per_thread_limits_hold_in_every_computing_thread(monkeypatch):
    """With a library limited per thread, every thread computing skattn's tasks
    (callers and skattn's workers) runs it on one thread; each caller finds its
    own limit it found, a limit of 1 included."""
    per_thread = PerThreadBLAS()
    controller = ThreadpoolController()
    controller.lib_controllers.append(per_thread)
    monkeypatch.setattr(_parallel, "_threadpool_controller", lambda: controller)
    blas_libraries = getattr(_parallel, "_blas_libraries", None)
    if blas_libraries is not None:  # cached from the real controller
        blas_libraries.cache_clear()
    try:
        seen, lock = [], threading.Lock()

        def task(index):
            with lock:
                seen.append(per_thread.get_num_threads())
            return index

        def call(own_limit):
            if own_limit is not None:
                per_thread.set_num_threads(own_limit)
            out = map_parallel(task, range(8))
            return out, per_thread.get_num_threads()

        with threadpool_limits(limits=2, user_api="blas"):
            results = run_at_once(3, lambda: call(None))
            results += run_at_once(1, lambda: call(1))  # a thread limited to 1
    finally:
        if blas_libraries is not None:
            blas_libraries.cache_clear()
    assert [out for out, _ in results] == [list(range(8))] * 4
    assert [after for _, after in results] == [4, 4, 4, 1]
    assert seen == [1] * 32


class Tasks:
    """Tasks that count how many started and how many are under way."""

    def __init__(self, function=lambda index: index):
        self.function, self.lock = function, threading.Lock()
        self.started = self.running = 0

    def __call__(self, index):
        with self.lock:
            self.started += 1
            self.running += 1
        try:
            return self.function(index)
        finally:
            with self.lock:
                self.running -= 1


def waiting_until_run(waiter, awaited):
    """A task function returning its index, whose task ``waiter`` waits until
    task ``awaited`` has run (a failure after ``TIMEOUT``, never a hang)."""
    awaited_ran = threading.Event()

    def function(index):
        if index == waiter:
            assert awaited_ran.wait(TIMEOUT), f"task {awaited} never ran"
        if index == awaited:
            awaited_ran.set()
        return index

    return function


two_workers = pytest.mark.skipif(
    _available_cpus() < 2, reason="needs two CPUs for two workers"
)


def imap_in_a_list(function, tasks):
    return list(imap_parallel(function, tasks))


@two_workers
@pytest.mark.parametrize("parallel_map", [map_parallel, imap_in_a_list])
def test_maps_compute_tasks_in_the_calling_thread_beside_a_worker(parallel_map):
    """The first task waits until the second has run: both threads compute
    tasks (the calling thread among them, rather than waiting for the
    worker's results), and the results come in order."""
    function = waiting_until_run(waiter=0, awaited=1)
    in_caller = []

    def task(index):
        in_caller.append(threading.current_thread() is threading.main_thread())
        return function(index)

    with threadpool_limits(limits=2, user_api="blas"):
        assert parallel_map(Tasks(task), range(6)) == list(range(6))
    assert set(in_caller) == {True, False}


@two_workers
def test_map_parallel_raises_the_first_failed_task_once_the_others_finish():
    """Task 2 fails while task 1 runs, then task 1 fails: the caller gets
    task 1's error (the first in order) once no task is under way, and no
    task starts after a failure."""
    failed = threading.Event()

    def function(index):
        if index == 1:
            assert failed.wait(TIMEOUT), "task 2 never ran"
            raise ValueError("task 1 failed")
        if index == 2:
            failed.set()
            raise ValueError("task 2 failed")
        return index

    tasks = Tasks(function)
    with threadpool_limits(limits=2, user_api="blas"):
        with pytest.raises(ValueError, match="task 1 failed"):
            map_parallel(tasks, range(1000))
    assert tasks.running == 0
    assert tasks.started == 3


@two_workers
def test_imap_parallel_yields_in_task_order_when_a_later_task_finishes_first():
    """The first task waits until the second has finished: the results still
    come in the order of the tasks, and the second ran while the first was
    under way."""
    function = waiting_until_run(waiter=0, awaited=1)
    with threadpool_limits(limits=2, user_api="blas"):
        assert list(imap_parallel(Tasks(function), range(6))) == list(range(6))


@two_workers
def test_imap_parallel_starts_at_most_twice_as_many_tasks_as_workers_ahead():
    """An endless iterator of tasks: when the caller takes each result, at
    most twice as many tasks as there are workers have started beyond those
    taken (one under way in each thread, and as many finished, waiting for
    an older one); once the caller stops, no task is under way."""
    tasks = Tasks()
    with threadpool_limits(limits=2, user_api="blas"):
        n_workers = parallel_workers()
        results = imap_parallel(tasks, itertools.count())
        for taken, result in enumerate(itertools.islice(results, 20), start=1):
            assert result == taken - 1
            assert tasks.started <= taken + 2 * n_workers
        results.close()
    assert tasks.running == 0
    assert tasks.started <= 20 + 2 * n_workers


@two_workers
def test_imap_parallel_worker_goes_on_while_the_calling_thread_computes():
    """The calling thread's first task waits until three tasks have finished
    in the worker (two of them finished and waiting for an older one, the
    calling thread's or the worker's first): a worker is not held up by
    results waiting for the calling thread to yield them."""
    finished_elsewhere = threading.Semaphore(0)
    waited = []

    def function(index):
        if threading.current_thread() is threading.main_thread():
            if not waited:
                waited.append(
                    all(finished_elsewhere.acquire(timeout=TIMEOUT) for _ in range(3))
                )
        else:
            finished_elsewhere.release()
        return index

    with threadpool_limits(limits=2, user_api="blas"):
        assert list(imap_parallel(Tasks(function), range(8))) == list(range(8))
    assert waited == [True]


@two_workers
@pytest.mark.parametrize("n_tasks", [2, 3, 4, 5])
def test_imap_parallel_ends_whichever_thread_finds_the_tasks_exhausted(n_tasks):
    """Instant tasks, many times: the calling thread or a worker finds the
    end of the tasks, with results under way or all yielded; every map
    returns all its results (a map that never returns fails the test)."""
    outcomes = []

    def maps():
        with threadpool_limits(limits=2, user_api="blas"):
            for _ in range(200):
                outcomes.append(list(imap_parallel(Tasks(), range(n_tasks))))

    caller = threading.Thread(target=maps, daemon=True)
    caller.start()
    caller.join(TIMEOUT)
    assert not caller.is_alive(), "a map never returned"
    assert outcomes == [list(range(n_tasks))] * 200


@two_workers
def test_imap_parallel_raises_a_task_error_once_the_tasks_under_way_finish():
    """The third task raises: the caller gets its error after the results
    before it, no task is left under way, and the tasks not started never
    start."""

    def function(index):
        if index == 2:
            raise ValueError("task 2 failed")
        return index

    tasks = Tasks(function)
    taken = []
    with threadpool_limits(limits=2, user_api="blas"):
        n_workers = parallel_workers()
        with pytest.raises(ValueError, match="task 2 failed"):
            for result in imap_parallel(tasks, range(1000)):
                taken.append(result)
    assert taken == [0, 1]
    assert tasks.running == 0
    assert tasks.started <= 3 + n_workers


@two_workers
def test_imap_parallel_starts_the_next_task_while_a_slower_one_runs():
    """The second task waits until the third has run: whichever thread is
    free (the calling thread or a worker) takes the third while the second
    is under way, without waiting for it (a map by groups of two tasks would
    never start it)."""
    function = waiting_until_run(waiter=1, awaited=2)
    with threadpool_limits(limits=2, user_api="blas"):
        assert list(imap_parallel(Tasks(function), range(5))) == [0, 1, 2, 3, 4]


@two_workers
def test_imap_parallel_raises_the_iterators_error_after_its_tasks_results():
    """The iterator of tasks fails after three tasks: the caller gets the
    three results, then the iterator's error, with no task under way."""

    def failing_after_three():
        yield from range(3)
        raise ValueError("no fourth task")

    tasks = Tasks()
    taken = []
    with threadpool_limits(limits=2, user_api="blas"):
        with pytest.raises(ValueError, match="no fourth task"):
            for result in imap_parallel(tasks, failing_after_three()):
                taken.append(result)
    assert taken == [0, 1, 2]
    assert tasks.running == 0
    assert tasks.started == 3


@two_workers
def test_a_lone_task_of_imap_parallel_leaves_its_nested_maps_the_workers():
    """One task (a batch of one long sequence): its nested maps (the heads of
    its attention) run on the workers; with several tasks, one by one."""

    def nested_workers(task):
        return parallel_workers()

    with threadpool_limits(limits=2, user_api="blas"):
        n_workers = parallel_workers()
        assert list(imap_parallel(nested_workers, [0])) == [n_workers]
        assert list(imap_parallel(nested_workers, range(3))) == [1, 1, 1]
        assert list(imap_parallel(nested_workers, [])) == []


def test_one_long_sequence_transforms_alike_on_one_and_two_threads(fitted):
    """A lone sequence's heads split over the workers: the same result."""
    model, _ = fitted
    X = np.random.default_rng(1).standard_normal((1, 600, 8), dtype=np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        one = model.transform_sequences(X)
    with threadpool_limits(limits=2, user_api="blas"):
        two = model.transform_sequences(X)
    assert_array_equal(one, two)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_imap_parallel_leaves_no_context_in_the_caller_between_results(n_threads):
    """Between two results the caller is outside skattn's computation: no
    worker count of skattn's holds in its context, whose nested maps would
    otherwise run one task at a time. On one thread, each task starts only
    when its result is asked for."""
    tasks = Tasks()
    with threadpool_limits(limits=n_threads, user_api="blas"):
        results = imap_parallel(tasks, itertools.count())
        for expected in range(3):
            assert next(results) == expected
            assert _parallel._WORKERS.get() is None
            if n_threads == 1:
                assert tasks.started == expected + 1
        results.close()


def limits_around_a_computation():
    """The BLAS limits before and after a skattn computation."""
    before = blas_limits()
    with single_threaded_blas():
        pass
    return before, blas_limits()


def in_forked_child(function, *args):
    """``function(*args)`` in a child process forked from this one, or a
    failure if the child has not returned within ``TIMEOUT`` seconds."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        try:
            return pool.apply_async(function, args).get(timeout=TIMEOUT)
        except multiprocessing.TimeoutError:
            pytest.fail(f"the forked child did not return within {TIMEOUT} s")


@two_workers
@pytest.mark.filterwarnings("ignore:.*use of fork\\(\\) may lead to deadlocks")
def test_transform_in_a_forked_child_returns_the_parents_result():
    """The parent's worker threads do not survive a fork: a child forked after
    the parent computed on two threads computes on threads of its own, and
    gives the parent's result (multiprocessing's fork start method, gunicorn's
    preload, celery's prefork)."""
    X = np.random.default_rng(0).standard_normal((64, 64, 8)).astype(np.float32)
    with threadpool_limits(limits=2, user_api="blas"):
        est = AttentionTransformer(objective=None, random_state=0).fit(X)
        expected = est.transform(X)  # the parent's worker threads exist
        assert_array_equal(in_forked_child(est.transform, X), expected)


@pytest.mark.filterwarnings("ignore:.*use of fork\\(\\) may lead to deadlocks")
def test_a_child_forked_during_another_threads_computation_has_the_users_limits():
    """Another thread is inside a skattn computation (BLAS lowered to one
    thread) when the process forks: that computation does not exist in the
    child, so the child finds the limits the user set, and its own
    computations leave them so."""
    entered, release = threading.Event(), threading.Event()

    def compute():
        with single_threaded_blas():
            entered.set()
            release.wait(TIMEOUT)

    with threadpool_limits(limits=2, user_api="blas"):
        users = blas_limits()
        worker = threading.Thread(target=compute)
        worker.start()
        try:
            assert entered.wait(TIMEOUT)
            assert set(blas_limits().values()) == {1}  # lowered in the parent
            before, after = in_forked_child(limits_around_a_computation)
        finally:
            release.set()
            worker.join(TIMEOUT)
        assert before == after == users


@pytest.mark.skipif(
    "PYTEST_XDIST_WORKER_COUNT" not in os.environ, reason="not under pytest-xdist"
)
def test_xdist_workers_limit_every_thread_library_to_their_share():
    """conftest.py's limit reaches scipy's BLAS and scikit-learn's OpenMP,
    which load after numpy's: a worker's libraries (torch's aside, which the
    torch fixture limits) never run more threads than its share of the
    cores."""
    n_workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    share = max(1, (os.cpu_count() or 1) // n_workers)
    libraries = [info for info in threadpool_info() if "torch" not in info["filepath"]]
    assert {info["internal_api"] for info in libraries} >= {"openblas", "openmp"}
    assert all(info["num_threads"] <= share for info in libraries), libraries
