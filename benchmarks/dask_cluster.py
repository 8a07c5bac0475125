"""Beyond one machine: grid search, blocked transform and training on dask.

Starts a ``distributed.LocalCluster`` of ``--workers`` single-threaded worker
processes and measures:

- a grid search (``GridSearchCV`` of a pipeline ``AttentionTransformer`` ->
  ``LogisticRegression``) under joblib's ``"dask"`` backend against
  ``n_jobs=1`` in this process (where skattn's own threads use every core
  the BLAS limit allows, as a user's ``n_jobs=1`` does); the scores are
  checked equal;
- the blocked transform of a 3D dask array generated on the workers (the
  client never holds it), larger than ``working_memory`` (set small with
  ``sklearn.config_context``, which skattn forwards to the workers): time,
  sequences per second, and each worker's peak memory during the call, traced
  by ``tracemalloc`` in the worker (numpy's arrays included) and its peak RSS;
- the blocked transform once more on workers with dask's default
  environment (``MALLOC_TRIM_THRESHOLD_``, which slows numpy's temporaries:
  see :func:`start_cluster`);
- blocked training (``fit`` of a dask array: ``partial_fit`` of one block
  after another) against the same ``partial_fit`` calls in memory.

Needs the ``[dask]`` extra::

    python benchmarks/dask_cluster.py
    python benchmarks/dask_cluster.py --workers 2 --sequences 40000

See "Beyond one machine" in ``benchmarks/README.md``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import contextlib
import resource
import time
import tracemalloc
import warnings

import dask
import dask.array as da
import distributed
import joblib
import numpy as np
from _machine import machine_lines  # benchmarks/_machine.py
from distributed import Client, LocalCluster
from sklearn import config_context
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_limits

from skattn import AttentionClassifier, AttentionTransformer
from skattn.datasets import make_sequence_classification


def _start_tracing():
    tracemalloc.start()
    tracemalloc.reset_peak()


def _peak_memory():
    """(tracemalloc peak, peak RSS) of this worker, in MiB; stops tracing."""
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return peak / 2**20, rss


def grid_search(client, repeats):
    X, y = make_sequence_classification(
        n_samples=400, n_tokens=16, n_features=8, n_classes=3, random_state=0
    )
    pipe = make_pipeline(
        AttentionTransformer(max_iter=15, random_state=0), LogisticRegression()
    )
    grid = {
        "attentiontransformer__n_heads": [2, 4],
        "attentiontransformer__positional_encoding": ["sinusoidal", None],
    }
    times = {}
    scores = {}
    for name in ("n_jobs=1", "n_jobs=1, 1 thread", "dask"):
        best = float("inf")
        for _ in range(repeats):
            search = GridSearchCV(pipe, grid, cv=3, n_jobs=-1 if name == "dask" else 1)
            start = time.perf_counter()
            if name == "dask":
                context = joblib.parallel_backend("dask")
            elif name == "n_jobs=1":
                context = contextlib.nullcontext()
            else:
                context = threadpool_limits(1)
            with context, warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                search.fit(X, y)
            best = min(best, time.perf_counter() - start)
        times[name] = best
        scores[name] = search.cv_results_["mean_test_score"]
    for name in scores:
        assert np.array_equal(scores[name], scores["dask"]), scores
    n_workers = len(client.nthreads())
    notes = {
        "n_jobs=1": "one process; skattn's threads on every core",
        "n_jobs=1, 1 thread": "one process, threadpool_limits(1)",
        "dask": f"{n_workers} worker processes of 1 thread; scores equal",
    }
    return [
        (
            f"grid search ({4 * 3} fits + refit), {name}",
            f"{times[name]:.2f} s",
            f"{times['n_jobs=1'] / times[name]:.2f}x, "
            f"{times['n_jobs=1, 1 thread'] / times[name]:.2f}x",
            notes[name],
        )
        for name in times
    ]


def blocked_transform(client, n_sequences, block, working_memory):
    n_tokens, n_features = 32, 16
    rng = da.random.default_rng(0)
    X = rng.standard_normal(
        (n_sequences, n_tokens, n_features),
        chunks=(block, n_tokens, n_features),
        dtype=np.float32,
    )
    fit_X = X[:block].compute()
    est = AttentionTransformer(random_state=0).fit(fit_X)
    size_mib = X.nbytes / 2**20
    # warm the workers (imports, first tasks), then measure
    est.transform(X[: 2 * block]).compute()
    start = time.perf_counter()
    with config_context(working_memory=working_memory):
        out = est.transform(X).compute()
    elapsed = time.perf_counter() - start
    # memory in a second run: tracing slows numpy's allocations
    client.run(_start_tracing)
    with config_context(working_memory=working_memory):
        est.transform(X).compute()
    peaks = client.run(_peak_memory)
    assert out.shape == (n_sequences, est.d_model_)
    traced = max(p[0] for p in peaks.values())
    rss = max(p[1] for p in peaks.values())
    start = time.perf_counter()
    with config_context(working_memory=working_memory):
        est.transform(fit_X)
    one_block = time.perf_counter() - start
    return [
        (
            f"transform {n_sequences} x {n_tokens} x {n_features} float32 "
            f"({size_mib:.0f} MiB, blocks of {block}, "
            f"working_memory={working_memory} MiB)",
            f"{elapsed:.2f} s",
            f"{n_sequences / elapsed:,.0f} seq/s",
            f"peak per worker: {traced:.0f} MiB traced, {rss:.0f} MiB RSS",
        ),
        (
            f"  in memory, one block of {block} (this process)",
            f"{one_block:.2f} s",
            f"{block / one_block:,.0f} seq/s",
            "",
        ),
    ]


def blocked_training(client, n_sequences, block, epochs):
    # generated on the workers, as data read there would be: a dask array
    # from_array of this process's memory would ship its array at every step
    rng = da.random.default_rng(1)
    dX = rng.standard_normal((n_sequences, 32, 16), chunks=(block, 32, 16), dtype="f4")
    dy = (dX[:, :, 0].mean(axis=1) > 0).astype(int)
    X, y = dask.compute(dX, dy)
    est = AttentionClassifier(max_iter=epochs, shuffle=False, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        est.fit(dX, dy)
        elapsed = time.perf_counter() - start
        client.run(_start_tracing)  # a second fit: tracing slows numpy
        clone(est).fit(dX, dy)
        peaks = client.run(_peak_memory)
    reference = clone(est)
    start = time.perf_counter()
    for _ in range(epochs):
        for i in range(0, n_sequences, block):
            reference.partial_fit(X[i : i + block], y[i : i + block], classes=[0, 1])
    in_memory = time.perf_counter() - start
    assert np.array_equal(est.head_coef_, reference.head_coef_)
    traced = max(p[0] for p in peaks.values())
    n_blocks = -(-n_sequences // block)
    return [
        (
            f"fit {n_sequences} x 32 x 16 float32, {n_blocks} blocks, {epochs} epochs",
            f"{elapsed:.2f} s",
            f"{n_sequences * epochs / elapsed:,.0f} seq/s",
            f"peak per worker: {traced:.0f} MiB traced",
        ),
        (
            "  in memory, the same partial_fit calls (this process)",
            f"{in_memory:.2f} s",
            f"{n_sequences * epochs / in_memory:,.0f} seq/s",
            "weights equal",
        ),
    ]


@contextlib.contextmanager
def start_cluster(n_workers, tuned):
    """A local cluster of single-threaded worker processes, and its client.

    ``tuned``: the workers start with ``MALLOC_MMAP_THRESHOLD_`` at 32 MiB. The
    nanny sets ``MALLOC_TRIM_THRESHOLD_``, which also fixes glibc's mmap
    threshold at 128 KiB: every temporary array above it is then mapped and
    unmapped, and skattn ran 2.2x slower in the workers (user guide, "Beyond
    one machine").
    """
    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
    if tuned:
        environ["MALLOC_MMAP_THRESHOLD_"] = 2**25
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cluster = LocalCluster(
                n_workers=n_workers,
                processes=True,
                threads_per_worker=1,
                host="127.0.0.1",
                dashboard_address=None,
            )
        with cluster, Client(cluster) as client:
            yield client


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sequences", type=int, default=40_000)
    parser.add_argument("--block", type=int, default=2_000)
    parser.add_argument("--working-memory", type=int, default=4, help="MiB")
    parser.add_argument("--train-sequences", type=int, default=4_000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--skip-default-allocator",
        action="store_true",
        help="skip the transform with dask's default allocator settings",
    )
    args = parser.parse_args(argv)
    print("\n".join(machine_lines()))
    print(f"dask {dask.__version__}; distributed {distributed.__version__}")
    rows = []
    if not args.skip_default_allocator:
        # dask's default worker environment (MALLOC_TRIM_THRESHOLD_ alone)
        with start_cluster(args.workers, tuned=False) as client:
            rows += [
                (f"{what} [dask's default allocator settings]", *rest)
                for what, *rest in blocked_transform(
                    client, args.sequences, args.block, args.working_memory
                )[:1]
            ]
    with start_cluster(args.workers, tuned=True) as client:
        rows += grid_search(client, args.repeats)
        rows += blocked_transform(
            client, args.sequences, args.block, args.working_memory
        )
        rows += blocked_training(client, args.train_sequences, 1_000, args.epochs)
    print()
    print("| what | time | rate or speed-up (vs n_jobs=1, vs 1 thread) | notes |")
    print("|---|---:|---:|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
