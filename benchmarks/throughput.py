"""Transform throughput: RandomAttentionFeatures against MiniRocket and MultiRocket.

For each time-series data set of ``realdata.py`` (all of them by default), the
three transforms are fitted on the training set, then the test set is
transformed ``--repeats`` times at each thread count; the table gives the best
of them in sequences per second, and the number of output features of each.
The series are passed as ``realdata.py`` loads them, in aeon's layout: an ``(n,
channels, T)`` array, or a list of ``(channels, T_i)`` arrays.
RandomAttentionFeatures runs with the defaults and ``random_state=0``,
``data_format="channels_first"``, on those series (float64, as the loaders
return them), its threads set with ``threadpoolctl``. MiniRocket and MultiRocket
are aeon's ``MiniRocket(random_state=0)`` and ``MultiRocket(random_state=0)``
on the same series (unequal lengths padded by aeon's ``Padder``, as in
``realdata.py``), their numba kernels compiled before the clock starts; their
threads are their ``n_jobs``.

Needs the benchmark environment and the data of ``realdata.py --prepare``::

    python benchmarks/throughput.py                 # 1 and 2 threads
    python benchmarks/throughput.py --datasets gunpoint,japanesevowels --threads 1

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
    cache_dir,
    comma_list,
    padder,
)
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_limits

from skattn import RandomAttentionFeatures


def rocket(kind, data, threads):
    """aeon's ``kind`` (MiniRocket or MultiRocket), fitted, its kernels compiled."""
    steps = [*padder(data), kind(n_jobs=threads, random_state=0)]
    model = make_pipeline(*steps).fit(data.X_train)
    model.transform(data.X_test[:2])  # compile before the clock
    return model


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
    from aeon.transformations.collection.convolution_based import (
        MiniRocket,
        MultiRocket,
    )

    for line in machine_lines():
        print(line)
    print()
    threads = [int(n) for n in args.threads]
    names = ["attention", "MiniRocket", "MultiRocket"]
    header = ["data set", "test shape"]
    for n in threads:
        header += [f"{name} {n} thr. seq/s" for name in names]
    header.append("features " + " / ".join(names))
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|")
    for name in args.datasets:
        data = DATASETS[name](name, cache_dir(args))
        X_test = data.X_test
        cells, widths = [], None
        for n in threads:
            with threadpool_limits(limits=n):
                transforms = [
                    RandomAttentionFeatures(
                        random_state=0, data_format="channels_first"
                    ).fit(data.X_train),
                    rocket(MiniRocket, data, n),
                    rocket(MultiRocket, data, n),
                ]
                rates = [
                    best_rate(model.transform, X_test, args.repeats)
                    for model in transforms
                ]
            cells += [f"{rate:.0f}" for rate, _ in rates]
            widths = " / ".join(str(width) for _, width in rates)
        lengths = [x.shape[-1] for x in X_test]  # (channels, T_i) each
        shape = f"{len(X_test)}×{X_test[0].shape[0]}×{min(lengths)}" + (
            f"..{max(lengths)}" if min(lengths) != max(lengths) else ""
        )
        row = [name, shape, *cells, widths]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
