"""
=================================================
Beyond one machine: a dask cluster
=================================================

Three ways skattn runs on a :mod:`dask.distributed` cluster, here a local one
of two single-threaded worker processes (a cluster of many machines is used
the same way, through its scheduler's address):

1. a grid search, each fit a task on a worker, through joblib's ``"dask"``
   backend;
2. the blocked transform of a 3D :class:`dask.array.Array` generated on the
   workers, never held by this process, larger than ``working_memory``;
3. training on a dask array: Adam streamed over its blocks.

Each is timed, and the memory of the workers measured. Worker processes start
by importing this script again: the code that starts and uses the cluster is
under ``if __name__ == "__main__":``, as dask asks of scripts.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The cluster
# -----------
# Dask's nannies start each worker with ``OMP_NUM_THREADS=1``: skattn then
# computes each task on one core, and two workers use the two cores. They
# also set ``MALLOC_TRIM_THRESHOLD_``, which fixes glibc's mmap threshold at
# 128 KiB: every temporary array above it is then mapped afresh, and skattn
# ran 2.2 times slower in the workers. ``MALLOC_MMAP_THRESHOLD_`` at 32 MiB
# gives its speed back.
import time
import tracemalloc
import warnings

import dask
import dask.array as da
import joblib
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster
from sklearn import config_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skattn import AttentionClassifier, AttentionTransformer
from skattn.datasets import make_sequence_classification


def start_tracing():
    """Trace allocations in a worker, numpy's arrays included."""
    tracemalloc.start()
    tracemalloc.reset_peak()


def peak_mib():
    """The peak traced since :func:`start_tracing`, in MiB; stops tracing."""
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


if __name__ == "__main__":
    warnings.simplefilter("ignore", ConvergenceWarning)  # short trainings
    environ = dask.config.get("distributed.nanny.pre-spawn-environ")
    environ = {**environ, "MALLOC_MMAP_THRESHOLD_": 2**25}
    dask.config.set({"distributed.nanny.pre-spawn-environ": environ})
    cluster = LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=None,
    )
    client = Client(cluster)
    print(client.run(lambda: __import__("os").environ["OMP_NUM_THREADS"]))

# %%
# 1. Grid search
# --------------
# The same search with ``n_jobs=1`` in this process (where skattn's own
# threads already use both cores) and on the cluster: 4 candidates x 3 folds.
# The scores are equal, fit for fit.
if __name__ == "__main__":
    X, y = make_sequence_classification(
        n_samples=300, n_tokens=12, n_features=8, n_classes=3, random_state=0
    )
    pipe = make_pipeline(
        AttentionTransformer(max_iter=10, random_state=0), LogisticRegression()
    )
    grid = {
        "attentiontransformer__n_heads": [1, 4],
        "attentiontransformer__positional_encoding": ["sinusoidal", None],
    }
    times = {}
    start = time.perf_counter()
    local = GridSearchCV(pipe, grid, cv=3).fit(X, y)
    times["n_jobs=1"] = time.perf_counter() - start
    start = time.perf_counter()
    with joblib.parallel_backend("dask"):
        remote = GridSearchCV(pipe, grid, cv=3, n_jobs=-1).fit(X, y)
    times["dask, 2 workers"] = time.perf_counter() - start
    same = np.array_equal(
        local.cv_results_["mean_test_score"], remote.cv_results_["mean_test_score"]
    )
    print({name: f"{seconds:.1f} s" for name, seconds in times.items()})
    print(f"speed-up {times['n_jobs=1'] / times['dask, 2 workers']:.2f}x")
    print(f"same scores: {same}; best: {remote.best_params_}")

# %%
# 2. Blocked transform
# --------------------
# 20,000 sequences of 32 tokens of width 16 in float32 (39 MiB), generated on
# the workers in blocks of 2,000. ``transform`` returns a lazy array at once,
# its chunks, shape and dtype known; computing it runs one task per block,
# each in batches within ``working_memory``, which skattn forwards to the
# workers. The model is fitted on one block.
if __name__ == "__main__":
    rng = da.random.default_rng(0)
    big = rng.standard_normal((20_000, 32, 16), chunks=(2_000, 32, 16), dtype="f4")
    encoder = AttentionTransformer(random_state=0).fit(big[:2_000].compute())
    lazy = encoder.transform(big)
    print(lazy)
    client.run(start_tracing)
    start = time.perf_counter()
    with config_context(working_memory=4):  # MiB: the array is 10 times more
        pooled = lazy.compute()
    seconds = time.perf_counter() - start
    peaks = client.run(peak_mib)
    print(
        f"{pooled.shape} in {seconds:.1f} s ({len(pooled) / seconds:,.0f} sequences "
        f"per second, with tracing on); peak per worker: "
        + ", ".join(f"{peak:.1f} MiB" for peak in peaks.values())
    )

# %%
# A worker's peak is that of the few blocks it held at once (4 MiB each),
# their outputs and a batch: it depends on the size of the blocks and on
# ``working_memory``, not on how many blocks the array has. How many blocks a
# worker holds at once is the scheduler's choice, and the peak varies from one
# run to the next.
#
# 3. Training on a dask array
# ---------------------------
# ``fit`` streams the blocks through Adam: each epoch is a ``partial_fit`` of
# every block, in an order permuted from ``random_state``. The step runs on
# the worker that holds the block, and the model travels with the steps.
if __name__ == "__main__":
    X, y = make_sequence_classification(
        n_samples=3_000, n_tokens=12, n_features=8, n_classes=3, random_state=1
    )
    # persisted: the blocks go to the workers once, not with every step
    X_blocks = da.from_array(X[:2_400], chunks=(400, 12, 8)).persist()
    y_blocks = da.from_array(y[:2_400], chunks=400).persist()
    clf = AttentionClassifier(max_iter=8, random_state=0)
    start = time.perf_counter()
    clf.fit(X_blocks, y_blocks)
    seconds = time.perf_counter() - start
    print(
        f"{clf.n_iter_} epochs of {X_blocks.numblocks[0]} blocks in {seconds:.1f} s "
        f"({2_400 * clf.n_iter_ / seconds:,.0f} sequences per second)"
    )
    accuracy = np.mean(clf.predict(da.from_array(X[2_400:], chunks=300)) == y[2_400:])
    print(f"held-out accuracy {accuracy.compute():.3f}")

    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 2.8), layout="constrained")
    left.barh(list(times), list(times.values()), color="tab:blue")
    left.set(xlabel="grid search (s)")
    right.plot(range(1, clf.n_iter_ + 1), clf.loss_curve_, marker="o")
    right.set(xlabel="epoch", ylabel="training loss (blocked fit)")
    plt.show()

    client.close()
    cluster.close()

# %%
# On two cores the grid search gains little or nothing over skattn's own
# threads; it gains with every machine added. The blocked transform keeps each worker's
# memory at a few blocks and a batch, whatever the size of the array; see
# :ref:`dask` for the design and what changes at a hundred machines.
