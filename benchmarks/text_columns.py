"""Which columns of RandomAttentionFeatures the text sets need, and the ridge's grid.

The features of the default transformer (16 models, then the tokens' own mean and
maximum: ``pool_tokens=True``) are computed once per text set of ``realdata.py``;
the documented head (``StandardScaler`` then ``RidgeClassifierCV``) is refitted on
column subsets: the 16 models alone, the tokens' statistics alone, both, the first
8 or 4 models with the tokens'; then all columns with the grid of alphas on to 1e5.
Prints test accuracy, the ``alpha_`` chosen and the ridge's fit seconds.

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
    """Column subsets by name: models are blocks of 2 statistics x their width."""
    widths = [2 * c["n_heads"] * c["head_dim"] for c in features.models_]
    start = np.concatenate([[0], np.cumsum(widths)])
    tokens = np.arange(start[-1], features.n_features_out_)
    models = {k: np.arange(start[k]) for k in (4, 8, len(widths))}
    return {
        f"{len(widths)} models": (models[len(widths)], RIDGE_ALPHAS),
        "tokens' mean and max": (tokens, RIDGE_ALPHAS),
        f"{len(widths)} models + tokens (default)": (
            np.r_[models[len(widths)], tokens],
            RIDGE_ALPHAS,
        ),
        "8 models + tokens": (np.r_[models[8], tokens], RIDGE_ALPHAS),
        "4 models + tokens": (np.r_[models[4], tokens], RIDGE_ALPHAS),
        "default, alphas to 1e5": (
            np.r_[models[len(widths)], tokens],
            WIDE_RIDGE_ALPHAS,
        ),
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
            Z_train = features.fit_transform(data.X_train)
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
