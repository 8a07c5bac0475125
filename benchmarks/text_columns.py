"""Which columns of RandomAttentionFeatures the text sets need, and the ridge's grid.

The features of the default transformer (16 models, then the tokens' own
statistics: ``token_statistics="auto"``; on word vectors the mean, max, min, first and
last of each) are computed once per text set of ``realdata.py``; the documented
head (``StandardScaler`` then ``RidgeClassifierCV``) is refitted on column
subsets, found by the feature names: the 16 models alone, the tokens' statistics
alone, both, the first 8 or 4 models with the tokens', the mean and max alone (the
statistics of the earlier defaults), each statistic of the models alone with the
tokens'; then all columns with the grid of alphas on to 1e5. Prints the
transformer's fit_transform seconds, then per subset the test accuracy, the
``alpha_`` chosen and the ridge's fit
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
    """Column subsets by name, from the feature names: ``m{model}`` blocks of
    each statistic of ``statistics_``, then the ``tokens`` block."""
    names = features.get_feature_names_out()
    block = np.array([name.split("_")[1] for name in names])
    statistic = np.array([name.split("_")[2] for name in names])
    model = np.array([int(b[1:]) if b != "tokens" else -1 for b in block])
    tokens = block == "tokens"
    n = len(features.models_)

    def columns(n_models=n, statistics=None, token_statistics=None):
        """The first ``n_models`` models' columns of ``statistics`` (all: None),
        then the tokens' of ``token_statistics`` (all: None; none: ())."""
        keep = (model >= 0) & (model < n_models)
        if statistics is not None:
            keep &= np.isin(statistic, statistics)
        keep_tokens = tokens.copy()
        if token_statistics is not None:
            keep_tokens &= np.isin(statistic, token_statistics)
        return np.flatnonzero(keep | keep_tokens)

    found = {
        f"{n} models": (columns(token_statistics=()), RIDGE_ALPHAS),
        "the tokens' statistics": (columns(0), RIDGE_ALPHAS),
        f"{n} models + tokens (default)": (columns(), RIDGE_ALPHAS),
        "8 models + tokens": (columns(8), RIDGE_ALPHAS),
        "4 models + tokens": (columns(4), RIDGE_ALPHAS),
        # the statistics of the previous defaults, within these features
        "mean and max of the models and tokens": (
            columns(statistics=["mean", "max"], token_statistics=["mean", "max"]),
            RIDGE_ALPHAS,
        ),
    }
    for name in features.statistics_:
        found[f"{n} models' {name} + tokens"] = (
            columns(statistics=[name]),
            RIDGE_ALPHAS,
        )
    found["default, alphas to 1e5"] = (columns(), WIDE_RIDGE_ALPHAS)
    return found


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
