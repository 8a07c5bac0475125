"""Work in forked child processes, each stopped after a budget of seconds.

A child runs ``work(connection, *args)``: it sends ``{"status": "started"}``
when its budget starts (after building and warming up, which are not
budgeted), then one result dict. The parent gives it ``warmup_limit`` seconds
to start and ``budget`` seconds after that; a child that runs out of its budget
is stopped and reported as ``{"status": "timeout", "fit": seconds}``, one that
exits without a result as an error. ``realdata.py`` and ``ucr.py`` run their
fits so.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import multiprocessing
import time
from multiprocessing.connection import wait

WARMUP_LIMIT = 1800  # seconds for a child to build its model and warm up


class Child:
    """One forked child running ``work(connection, *args)`` under a budget."""

    def __init__(self, work, args, budget, warmup_limit=WARMUP_LIMIT):
        self.receiver, sender = multiprocessing.Pipe(duplex=False)
        self.process = multiprocessing.get_context("fork").Process(
            target=work, args=(sender, *args)
        )
        self.process.start()
        sender.close()
        self.budget = budget
        self.started = None  # when the child said its budget starts
        self.deadline = time.perf_counter() + warmup_limit
        self.warmup_limit = warmup_limit
        self.result = None

    def poll(self):
        """The child's result once it has one (stopping it when it failed or
        ran out of time), else None; never blocks."""
        if self.result is not None:
            return self.result
        try:
            while self.receiver.poll():
                message = self.receiver.recv()
                if message["status"] != "started":
                    return self._finish(message)
                self.started = time.perf_counter()
                self.deadline = self.started + self.budget
        except EOFError:
            error = "child exited without a result"
            return self._finish(dict(status="error", error=error))
        if time.perf_counter() < self.deadline:
            return None
        if self.started is None:
            error = f"no start in {self.warmup_limit:g} s"
            return self._finish(dict(status="error", error=error))
        elapsed = time.perf_counter() - self.started
        return self._finish(dict(status="timeout", fit=elapsed))

    def _finish(self, result):
        if self.process.is_alive() and result["status"] != "ok":
            self.process.terminate()
        self.process.join()
        self.receiver.close()
        self.result = result
        return result

    def wait(self):
        """Block until the child has a result; return it."""
        while self.poll() is None:
            wait([self.receiver], timeout=max(0.0, self.deadline - time.perf_counter()))
        return self.result


def run_forked(work, args, budget, warmup_limit=WARMUP_LIMIT):
    """Run ``work(connection, *args)`` in a forked child; its result dict."""
    return Child(work, args, budget, warmup_limit).wait()


def run_forked_all(tasks, jobs, budget, warmup_limit=WARMUP_LIMIT):
    """Run ``tasks``, an iterable of ``(key, work, args)``, at most ``jobs``
    children at once; yield ``(key, result)`` as each child finishes.

    One process forks every child, from its only thread: a task's data are
    built in the parent before its child forks (the iterable is read as
    children finish), and no thread of the parent holds a lock a child needs.
    """
    pending = iter(tasks)
    running = {}  # Child -> key
    while True:
        while len(running) < jobs:
            task = next(pending, None)
            if task is None:
                break
            key, work, args = task
            running[Child(work, args, budget, warmup_limit)] = key
        if not running:
            return
        deadline = min(child.deadline for child in running)
        wait(
            [child.receiver for child in running],
            timeout=max(0.0, deadline - time.perf_counter()),
        )
        for child in list(running):
            result = child.poll()
            if result is not None:
                yield running.pop(child), result
