"""Which columns of RandomAttentionFeatures the text sets need, and the ridge's grid.

The features of the default transformer (16 models, then the tokens' own mean and
maximum: ``pool_tokens=True``) are computed once per text set of ``realdata.py``;
the documented head (``StandardScaler`` then ``RidgeClassifierCV``) is refitted on
column subsets: the 16 models alone, the tokens' statistics alone, both, the first
8 or 4 models with the tokens', the models' mean or maximum alone; then all columns
with the grid of alphas on to 1e5. Prints the transformer's fit_transform seconds,
then per subset the test accuracy, the ``alpha_`` chosen and the ridge's fit
seconds (``RidgeClassifierCV`` works on the Gram matrix of the samples when there
are more columns than samples, else on the SVD of the columns: its time is not
monotonic in the number of columns).

Run from the repository root, after ``realdata.py --prepare``::

    PYTHONPATH=.:benchmarks ~/.venvs/skattn-bench/bin/python \\
        benchmarks/text_columns.py --datasets 20ng-ctx,20ng-static
"""

import argparse
import time
from pathlib import Path

import numpy as np
from realdata import RIDGE_ALPHAS, WIDE_RIDGE_ALPHAS, load_text
from sklearn.linear_model import RidgeClassifierCV
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from skattn import RandomAttentionFeatures

TEXTS = ["20ng-ctx", "20ng-static", "tweets-ctx", "tweets-static"]


def subsets(features):
    """Column subsets by name: model m is its mean block, then its max block."""
    widths = [c["n_heads"] * c["head_dim"] for c in features.models_]
    start = np.concatenate([[0], np.cumsum(2 * np.asarray(widths))])
    token_width = features.n_features_out_ - start[-1]
    token_mean = np.arange(start[-1], start[-1] + token_width // 2)
    tokens = np.arange(start[-1], features.n_features_out_)

    def models(n_models, statistics=("mean", "max")):
        blocks = [
            start[m] + offset * widths[m] + np.arange(widths[m])
            for m in range(n_models)
            for offset, name in enumerate(("mean", "max"))
            if name in statistics
        ]
        return np.concatenate(blocks)

    n = len(widths)
    return {
        f"{n} models": (models(n), RIDGE_ALPHAS),
        "tokens' mean and max": (tokens, RIDGE_ALPHAS),
        f"{n} models + tokens (default)": (np.r_[models(n), tokens], RIDGE_ALPHAS),
        "8 models + tokens": (np.r_[models(8), tokens], RIDGE_ALPHAS),
        "4 models + tokens": (np.r_[models(4), tokens], RIDGE_ALPHAS),
        f"{n} models' mean + tokens": (
            np.r_[models(n, ["mean"]), tokens],
            RIDGE_ALPHAS,
        ),
        f"{n} models' max + tokens": (
            np.r_[models(n, ["max"]), tokens],
            RIDGE_ALPHAS,
        ),
        "8 models' max + tokens": (np.r_[models(8, ["max"]), tokens], RIDGE_ALPHAS),
        "8 models' max + tokens' mean": (
            np.r_[models(8, ["max"]), token_mean],
            RIDGE_ALPHAS,
        ),
        "default, alphas to 1e5": (np.r_[models(n), tokens], WIDE_RIDGE_ALPHAS),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default=",".join(TEXTS))
    parser.add_argument("--cache", default=Path.home() / ".cache/skattn-benchmarks")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--random-state", type=int, default=0)
    args = parser.parse_args()
    print("| data set | columns | n columns | accuracy | alpha_ | ridge fit s |")
    print("|---|---|---:|---:|---:|---:|")
    with threadpool_limits(args.threads):
        for name in args.datasets.split(","):
            data = load_text(name, Path(args.cache))
            features = RandomAttentionFeatures(random_state=args.random_state)
            start = time.perf_counter()
            Z_train = features.fit_transform(data.X_train)
            seconds = time.perf_counter() - start
            print(f"| {name} | fit_transform of the training set: {seconds:.1f} s |")
            Z_test = features.transform(data.X_test)
            for label, (columns, alphas) in subsets(features).items():
                scaler = StandardScaler().fit(Z_train[:, columns])
                start = time.perf_counter()
                ridge = RidgeClassifierCV(alphas=alphas)
                ridge.fit(scaler.transform(Z_train[:, columns]), data.y_train)
                seconds = time.perf_counter() - start
                score = ridge.score(scaler.transform(Z_test[:, columns]), data.y_test)
                print(
                    f"| {name} | {label} | {len(columns)} | {score:.3f} | "
                    f"{ridge.alpha_:.0f} | {seconds:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
