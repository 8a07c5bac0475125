"""Transform throughput: RandomAttentionFeatures against MiniRocket on the series.

For each time-series data set of ``realdata.py``, both transforms are fitted on
the training set, then the test set is transformed ``--repeats`` times at each
thread count; the table gives the best of them in sequences per second (and the
number of output features). MiniRocket is aeon's ``MiniRocket(random_state=0)``
on channels-first series (unequal lengths padded by aeon's ``Padder``, as in
``realdata.py``), its numba kernels compiled before the clock starts; its
threads are its ``n_jobs``. RandomAttentionFeatures runs with the defaults
(``random_state=0``) on the series as given (float64, as the loaders return
them), its threads set with ``threadpoolctl``.

Needs the benchmark environment and the data of ``realdata.py --prepare``::

    python benchmarks/throughput.py                 # 1 and 2 threads
    python benchmarks/throughput.py --datasets gunpoint,osuleaf --threads 1

See "Random attention features" in ``benchmarks/README.md``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import time

from _machine import machine_lines  # benchmarks/_machine.py
from realdata import (  # benchmarks/realdata.py
    DATASETS,
    TIMESERIES,
    ChannelsFirst,
    cache_dir,
    comma_list,
)
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_limits

from skattn import RandomAttentionFeatures


def minirocket(X_train, threads):
    from aeon.transformations.collection.convolution_based import MiniRocket
    from aeon.transformations.collection.unequal_length import Padder

    padder = [Padder()] if isinstance(X_train, list) else []
    steps = [ChannelsFirst(), *padder, MiniRocket(n_jobs=threads, random_state=0)]
    return make_pipeline(*steps).fit(X_train)


def best_rate(transform, X, repeats):
    """Highest sequences per second of ``repeats`` calls, and the output width."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = transform(X)
        best = min(best, time.perf_counter() - start)
    return len(X) / best, out.shape[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--datasets",
        type=comma_list(list(TIMESERIES)),
        default=list(TIMESERIES),
        metavar="A,B",
        help=f"among {', '.join(TIMESERIES)} (default: all)",
    )
    parser.add_argument(
        "--threads",
        type=comma_list(["1", "2", "4", "8"]),
        default=["1", "2"],
        metavar="1,2",
        help="thread counts (default 1,2)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", help="data cache, as for realdata.py")
    args = parser.parse_args(argv)
    for line in machine_lines():
        print(line)
    print()
    threads = [int(n) for n in args.threads]
    header = ["data set", "test shape"]
    for n in threads:
        header += [f"attention {n} thr. seq/s", f"MiniRocket {n} thr. seq/s"]
    print("| " + " | ".join(header) + " | features |")
    print("|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 1)) + "|")
    for name in args.datasets:
        data = DATASETS[name](name, cache_dir(args))
        X_train, X_test = data.X_train, data.X_test
        cells, widths = [], None
        for n in threads:
            with threadpool_limits(limits=n):
                features = RandomAttentionFeatures(random_state=0).fit(X_train)
                rocket = minirocket(X_train, n)
                rocket.transform(X_test[:2])  # compile before the clock
                ours, width = best_rate(features.transform, X_test, args.repeats)
                theirs, rocket_width = best_rate(rocket.transform, X_test, args.repeats)
            cells += [f"{ours:.0f}", f"{theirs:.0f}"]
            widths = f"{width} / {rocket_width}"
        lengths = [len(x) for x in X_test]
        shape = f"{len(X_test)}×{min(lengths)}" + (
            f"..{max(lengths)}" if min(lengths) != max(lengths) else ""
        )
        row = [name, shape, *cells, widths]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
