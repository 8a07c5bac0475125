"""The learned classifier on series a user cut into patches of 16 points.

A user with long univariate series may cut each into consecutive patches of
16 points (the last one zero-padded) and pass the patches as tokens of 16
features: wide tokens, for which ``early_stopping="auto"`` and
``token_statistics="auto"`` decide otherwise than for the series themselves.
This script fits ``AttentionClassifier(random_state=seed, **params)`` on the
series sets of ``realdata.py`` read that way and prints the test accuracy
over seeds and the mean fit seconds, for the skattn on ``PYTHONPATH``, so
that two versions compare (``git worktree add /tmp/skattn-old <commit>``)::

    PYTHONPATH=. python benchmarks/user_patches.py --datasets pickup,osuleaf,plaid
    PYTHONPATH=/tmp/skattn-old python benchmarks/user_patches.py --seeds 0,1,2
    PYTHONPATH=. python benchmarks/user_patches.py --set early_stopping=False

Runs in the benchmark environment (``realdata.py``'s cache), one thread,
about 2 minutes for the three sets above over three seeds.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from _machine import machine_lines  # benchmarks/_machine.py
from realdata import TIMESERIES, cache_dir, comma_list, load_timeseries, parse_set
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

import skattn
from skattn import AttentionClassifier

PATCH = 16


def patches(X, width=PATCH):
    """Each univariate series as consecutive patches of ``width`` points, the
    last zero-padded: an array of shape (ceil(T / width), width)."""
    out = []
    for x in X:
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        n = -(-len(x) // width) * width
        out.append(np.pad(x, (0, n - len(x))).reshape(-1, width))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    classification = [n for n, s in TIMESERIES.items() if s.task != "regression"]
    parser.add_argument(
        "--datasets",
        type=comma_list(classification),
        default=["pickup", "osuleaf", "plaid"],
    )
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")],
                        default=[0, 1, 2])  # fmt: skip
    parser.add_argument("--cache", default=None)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    params = parse_set(parser, args.set)
    cache = Path(cache_dir(args))
    for line in machine_lines():
        print(f"# {line}")
    print(f"# skattn from {Path(skattn.__file__).parent}; --set {params}")
    print("| data set | accuracy (mean) | per seed | fit s (mean) |")
    print("|---|---:|---|---:|")
    warnings.simplefilter("ignore", ConvergenceWarning)
    with threadpool_limits(1):
        for name in args.datasets:
            data = load_timeseries(name, cache)
            X_train, X_test = patches(data.X_train), patches(data.X_test)
            scores, seconds = [], []
            for seed in args.seeds:
                start = time.perf_counter()
                model = AttentionClassifier(**{"random_state": seed, **params})
                model.fit(X_train, data.y_train)
                seconds.append(time.perf_counter() - start)
                scores.append(model.score(X_test, data.y_test))
            print(
                f"| {name} | {statistics.mean(scores):.3f} | "
                f"{' / '.join(f'{s:.3f}' for s in scores)} | "
                f"{statistics.mean(seconds):.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
