"""Accuracy benchmark: AttentionTransformer against simple baselines.

For each data set, one stratified train/test split (fixed seeds), then the test
accuracy and the fit time of four pipelines, all ending in
``LogisticRegression(max_iter=1000)``:

- ``learned``: ``AttentionTransformer(random_state=0)``, the default, whose
  projections are learned from ``y`` (``objective="auto"``);
- ``mean``: the mean of each sequence's tokens, standardised;
- ``flatten``: all tokens side by side, standardised (sequences of different
  lengths are zero-padded to the longest training sequence);
- ``seeded``: ``AttentionTransformer(objective=None, random_state=0)``, seeded
  random projections.

Tables are standardised before the transformer, and their columns are scalar
tokens. Runs on demand, never in the test suite::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/accuracy.py --quick
    python benchmarks/accuracy.py --datasets order cooccurrence
    python benchmarks/accuracy.py --methods learned --set max_iter=100

See ``benchmarks/README.md``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import json
import sys
import time
import warnings

import numpy as np
from _machine import machine_lines  # benchmarks/_machine.py
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from skattn import AttentionTransformer
from skattn.datasets import make_sequence_classification

SPLIT_SEED = 0  # train/test split
DATA_SEED = 0  # generated data sets
TEST_SIZE = 0.25

METHODS = {
    "learned": "attention (learned, default)",
    "mean": "mean tokens + LR",
    "flatten": "flat tokens + LR",
    "seeded": "attention (seeded)",
}


# --------------------------------------------------------------------------
# Data sets. Each builder takes ``quick`` and returns a dict with the samples
# ``X`` (3D array, list of 2D arrays, or 2D table), the labels ``y`` and
# ``table`` (True: columns are scalar tokens, standardised first).
# --------------------------------------------------------------------------


def order(quick):
    """Which of two markers comes first, among 16 tokens of width 8."""
    X, y = make_sequence_classification(
        500 if quick else 1000, 16, 8, task="order", random_state=DATA_SEED
    )
    return dict(X=X, y=y, table=False)


def cooccurrence(quick):
    """A XOR B: exactly one of two markers present, among 16 tokens of width 8."""
    X, y = make_sequence_classification(
        500 if quick else 1000, 16, 8, task="cooccurrence", random_state=DATA_SEED
    )
    return dict(X=X, y=y, table=False)


def ragged_order(quick):
    """Which of three markers comes first, sequences of 8 to 24 tokens."""
    X, y = make_sequence_classification(
        500 if quick else 1000,
        24,
        8,
        n_classes=3,
        task="order",
        min_tokens=8,
        random_state=DATA_SEED,
    )
    return dict(X=X, y=y, table=False)


def bursts(quick):
    """Long 3-channel time series: which channel's oscillation burst comes first.

    Each series is Gaussian noise (sd 0.3) on 3 channels. Channel 0 and channel
    1 each hold one burst: a sine wave (period about 8 steps, random phase)
    under a Gaussian envelope (sd 6 steps), at random times at least 18 steps
    apart; channel 2 holds a distractor burst at a random time. The label is 1
    when the burst of channel 0 comes first. The mean of each channel, and any
    fixed linear filter of the series (random phase), carry no label
    information: only the temporal pattern does.
    """
    n_samples, n_steps = (300, 64) if quick else (600, 128)
    rng = np.random.RandomState(DATA_SEED)
    width, omega, margin = 6.0, 0.8, 12
    steps = np.arange(n_steps)
    X = 0.3 * rng.standard_normal((n_samples, n_steps, 3))
    y = rng.randint(2, size=n_samples)

    def burst(center):
        envelope = np.exp(-0.5 * ((steps - center) / width) ** 2)
        return envelope * np.sin(omega * steps + rng.uniform(0, 2 * np.pi))

    for i in range(n_samples):
        while True:
            first, second = rng.randint(margin, n_steps - margin, size=2)
            if abs(first - second) >= 3 * width:
                break
        if (first < second) != bool(y[i]):
            first, second = second, first
        X[i, :, 0] += burst(first)
        X[i, :, 1] += burst(second)
        X[i, :, 2] += burst(rng.randint(margin, n_steps - margin))
    return dict(X=X, y=y, table=False)


def word_vectors(quick):
    """384-d "word vectors": which of two marker words comes first, among 12 words.

    The vocabulary has 50 orthonormal 384-d words; each token is a word plus
    Gaussian noise (sd 0.1 per coordinate).
    """
    X, y = make_sequence_classification(
        400 if quick else 800,
        12,
        384,
        task="order",
        n_symbols=50,
        random_state=DATA_SEED,
    )
    return dict(X=X, y=y, table=False)


def breast_cancer(quick):
    """Table: 30 scalar tokens."""
    X, y = load_breast_cancer(return_X_y=True)
    return dict(X=X, y=y, table=True)


def wine(quick):
    """Table: 13 scalar tokens, 3 classes."""
    X, y = load_wine(return_X_y=True)
    return dict(X=X, y=y, table=True)


def digits(quick):
    """8x8 images as 8 tokens (rows) of 8 pixels, scaled to [0, 1]."""
    X, y = load_digits(return_X_y=True)
    if quick:
        X, _, y, _ = train_test_split(
            X, y, train_size=900, stratify=y, random_state=SPLIT_SEED
        )
    return dict(X=(X / 16.0).reshape(-1, 8, 8), y=y, table=False)


DATASETS = {
    "order": order,
    "cooccurrence": cooccurrence,
    "ragged-order": ragged_order,
    "bursts": bursts,
    "word-vectors": word_vectors,
    "breast-cancer": breast_cancer,
    "wine": wine,
    "digits": digits,
}

# Data sets where the label depends on the order of the tokens or on their
# interactions (not on a per-feature summary).
ORDER_OR_INTERACTION = ("order", "cooccurrence", "ragged-order", "bursts")
ORDER_OR_INTERACTION += ("word-vectors",)


def shape_string(X):
    """``n x T x D``; ``n x T_min..T_max x D`` for a list; ``n x p`` for tables."""
    if isinstance(X, list):
        lengths = [len(seq) for seq in X]
        return f"{len(X)}×{min(lengths)}..{max(lengths)}×{X[0].shape[1]}"
    return "×".join(str(size) for size in np.shape(X))


# --------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------


class MeanTokens(TransformerMixin, BaseEstimator):
    """Mean of each sequence's tokens (of each row for a table: one feature)."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        if isinstance(X, list):
            return np.stack([np.mean(seq, axis=0) for seq in X])
        X = np.asarray(X)
        return X.mean(axis=1) if X.ndim == 3 else X.mean(axis=1, keepdims=True)


class FlattenTokens(TransformerMixin, BaseEstimator):
    """All tokens side by side; a list is zero-padded to the longest training one.

    Longer sequences at transform time are truncated to that length.
    """

    def fit(self, X, y=None):
        if isinstance(X, list):
            self.n_tokens_ = max(len(seq) for seq in X)
        return self

    def transform(self, X):
        if isinstance(X, list):
            width = X[0].shape[1]
            out = np.zeros((len(X), self.n_tokens_, width))
            for i, seq in enumerate(X):
                seq = seq[: self.n_tokens_]
                out[i, : len(seq)] = seq
            X = out
        X = np.asarray(X)
        return X.reshape(len(X), -1)


def make_model(method, table, params):
    """The pipeline of ``method``; ``params`` update the learned transformer."""
    classifier = LogisticRegression(max_iter=1000)
    scaler = [StandardScaler()] if table else []
    if method == "learned":
        attention = AttentionTransformer(**{"random_state": 0, **params})
        return make_pipeline(*scaler, attention, classifier)
    if method == "seeded":
        attention = AttentionTransformer(objective=None, random_state=0)
        return make_pipeline(*scaler, attention, classifier)
    if method == "mean":
        return make_pipeline(*scaler, MeanTokens(), StandardScaler(), classifier)
    if method == "flatten":
        return make_pipeline(*scaler, FlattenTokens(), StandardScaler(), classifier)
    raise ValueError(f"Unknown method {method!r}.")


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


def run(dataset, data, methods, params):
    """Fit and score every method on one data set; return a result dict."""
    X_train, X_test, y_train, y_test = train_test_split(
        data["X"],
        data["y"],
        test_size=TEST_SIZE,
        stratify=data["y"],
        random_state=SPLIT_SEED,
    )
    result = dict(dataset=dataset, shape=shape_string(data["X"]), scores={})
    for method in methods:
        model = make_model(method, data["table"], params)
        with warnings.catch_warnings():
            # max_iter reached: the point of the benchmark is the default budget
            warnings.simplefilter("ignore", ConvergenceWarning)
            start = time.perf_counter()
            model.fit(X_train, y_train)
            fit_time = time.perf_counter() - start
        score = model.score(X_test, y_test)
        entry = dict(accuracy=float(score), fit_time=fit_time)
        if method == "learned":
            entry["n_iter"] = int(model[-2].n_iter_)
        result["scores"][method] = entry
    return result


def machine_info(threads):
    """Lines describing the machine, the libraries and the thread limit."""
    limit = f"threads: BLAS/OpenMP limited to {threads} (threadpoolctl)"
    return machine_lines() + [limit]


def format_time(seconds):
    """Seconds with two significant decimals below 10 s, one above."""
    return f"{seconds:.2f}" if seconds < 10 else f"{seconds:.1f}"


def format_table(results, methods):
    """Markdown table: data set, shape, then accuracy and fit time per method."""
    header = ["data set", "shape"]
    for method in methods:
        header += [f"{METHODS[method]} acc", "fit s"]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|",
    ]
    for result in results:
        row = [result["dataset"], result["shape"]]
        for method in methods:
            entry = result["scores"][method]
            mark = "*" if method == "flatten" and ".." in result["shape"] else ""
            row += [f"{entry['accuracy']:.3f}{mark}", format_time(entry["fit_time"])]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def summary(results, methods):
    """Where the learned default stands against the baselines."""
    if "learned" not in methods:
        return []
    lines = []
    baselines = [method for method in methods if method != "learned"]
    for result in results:
        scores = {m: e["accuracy"] for m, e in result["scores"].items()}
        learned = scores["learned"]
        if result["dataset"] in ORDER_OR_INTERACTION and baselines:
            best = max(baselines, key=scores.get)
            verdict = "beats" if learned > scores[best] else "does NOT beat"
            lines.append(
                f"{result['dataset']} (order/interaction): learned {verdict} every "
                f"baseline ({learned:.3f} vs {best} {scores[best]:.3f})"
            )
        elif "mean" in scores:
            lines.append(
                f"{result['dataset']}: learned - mean = {learned - scores['mean']:+.3f}"
            )
    return lines


def parse_value(text):
    """A --set value: JSON (numbers, null, true, quoted strings) or a bare string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller data sets (about 4x faster)",
    )
    parser.add_argument(
        "--datasets",
        nargs="+",
        choices=list(DATASETS),
        default=list(DATASETS),
        metavar="NAME",
        help=f"data sets to run, among: {', '.join(DATASETS)} (default: all)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=list(METHODS),
        default=list(METHODS),
        help="pipelines to run (default: all)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="PARAM=VALUE",
        help="set a parameter of the learned transformer, e.g. --set max_iter=100 "
        "--set positional_encoding=null (values are read as JSON)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS/OpenMP threads (default 1: faster than 2 on small matmuls)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results")
    args = parser.parse_args(argv)
    params = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set expects PARAM=VALUE, got {item!r}")
        params[name] = parse_value(value)

    for line in machine_info(args.threads):
        print(line)
    print(f"mode: {'quick' if args.quick else 'full'}", end="")
    print(f"; learned transformer parameters: {params}" if params else "")
    print()

    results = []
    start = time.perf_counter()
    with threadpool_limits(limits=args.threads):
        for dataset in args.datasets:
            data = DATASETS[dataset](args.quick)
            result = run(dataset, data, args.methods, params)
            results.append(result)
            scores = ", ".join(
                f"{method} {entry['accuracy']:.3f} ({entry['fit_time']:.1f} s)"
                for method, entry in result["scores"].items()
            )
            print(f"{dataset}: {scores}", file=sys.stderr, flush=True)
    total = time.perf_counter() - start

    print(format_table(results, args.methods))
    print()
    if "flatten" in args.methods:
        print("* zero-padded to the longest training sequence (variable lengths).")
    print(
        "acc: test accuracy (25% stratified split, seed 0); fit s: fit time of the "
        "whole pipeline in seconds."
    )
    for line in summary(results, args.methods):
        print(line)
    print(f"total run time: {total:.1f} s")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(
                dict(
                    machine=machine_info(args.threads),
                    quick=args.quick,
                    params=params,
                    results=results,
                    total_time=total,
                ),
                file,
                indent=1,
            )


if __name__ == "__main__":
    main()
