"""Two versions of skattn side by side, in one process: outputs and CPU time.

Runs on demand, never in the test suite. A refactor must change neither what
the estimators compute nor how fast. This script imports both versions into
one process (the old one copied under the name ``skattn_old``) and:

- ``--outputs``: fits every public estimator with its defaults (and
  ``random_state=0``) on fixed data of each input kind (3D sequences, a
  ragged list, a table, a long univariate series, wide tokens), in both
  versions, and says whether each output is bit-identical (else the largest
  difference): ``transform`` of the seeded and of the learned transformer,
  its ``transform_sequences`` and ``attention_weights``, the classifier's
  ``predict_proba`` and ``predict``, the regressor's ``predict``, the random
  features' ``transform``.
- ``--timing`` (the default): the median process CPU time of each version,
  alternating call by call (BLAS limited to one thread, so CPU time is the
  work done; on a shared machine wall-clock times of two separate runs differ
  by up to 30 %), for ``transform`` of the default seeded transformer on the
  shapes of ``speed.py`` (S1-S4, float32) and three epochs of the default
  learned transformer on (256, 32, 64).

``--new-params`` gives the new version's estimators the parameters of the
old version's defaults where a default changed between the two (JSON:
``{"attention": {"pooling": "mean"}, "features": {"attention_window":
null}}``), so that what the refactor changed is told from what the new
defaults compute.

How to run (``OLD`` a checkout or worktree of the older commit)::

    git worktree add /tmp/skattn-old <commit>
    python benchmarks/compare_versions.py --old /tmp/skattn-old --outputs
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python benchmarks/compare_versions.py --old /tmp/skattn-old --repeats 11
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

SHAPES = {
    "S1": (512, 32, 64, 4),
    "S2": (64, 256, 128, 8),
    "S3": (8, 1024, 64, 4),
    "S4": (1, 8192, 64, 4),
}


def import_old(checkout):
    """The package of another checkout, importable as ``skattn_old``."""
    target = Path(tempfile.mkdtemp()) / "skattn_old"
    shutil.copytree(Path(checkout) / "skattn", target)
    sys.path.insert(0, str(target.parent))
    import skattn_old

    return skattn_old


def alternate(calls, repeats):
    """Median CPU seconds of each call, run in alternating order."""
    times = {label: [] for label in calls}
    labels = list(calls)
    for repeat in range(repeats):
        for label in labels if repeat % 2 == 0 else labels[::-1]:
            start = time.process_time()
            calls[label]()
            times[label].append(time.process_time() - start)
    return {label: statistics.median(values) for label, values in times.items()}


def datasets():
    """Fixed data of each input kind, with a class and a continuous target."""
    rng = np.random.default_rng(0)
    n = 60
    sequences = rng.standard_normal((n, 12, 5))
    ragged = [rng.standard_normal((length, 5)) for length in rng.integers(3, 20, n)]
    table = rng.standard_normal((n, 10))
    series = np.cumsum(rng.standard_normal((n, 150, 1)), axis=1)
    wide = rng.standard_normal((n, 8, 48))
    data = {
        "3d": sequences,
        "3d-float32": sequences.astype(np.float32),
        "ragged": ragged,
        "table": table,
        "series": series,
        "wide": wide,
    }
    for name, X in data.items():
        first = np.array([x[:, 0].mean() if np.ndim(x) == 2 else x[0] for x in X])
        y_class = (first > np.median(first)).astype(int)
        yield name, X, y_class, first


def outputs(module, X, y_class, y_value, attention=None, features=None):
    """Every default output of one version on one data set, by name; the
    attention estimators and the random features with the parameters
    ``attention`` and ``features`` (dicts; None: their defaults)."""
    results = {}
    attention, features = attention or {}, features or {}
    seeded = module.AttentionTransformer(random_state=0, **attention).fit(X)
    results["transformer (seeded) transform"] = seeded.transform(X)
    results["transformer (seeded) transform_sequences"] = seeded.transform_sequences(X)
    results["transformer (seeded) attention_weights"] = seeded.attention_weights(X)
    learned = module.AttentionTransformer(random_state=0, **attention)
    learned.fit(X, y_class)
    results["transformer (learned) transform"] = learned.transform(X)
    classifier = module.AttentionClassifier(random_state=0, **attention)
    classifier.fit(X, y_class)
    results["classifier predict_proba"] = classifier.predict_proba(X)
    results["classifier predict"] = classifier.predict(X)
    regressor = module.AttentionRegressor(random_state=0, **attention)
    regressor.fit(X, y_value)
    results["regressor predict"] = regressor.predict(X)
    random_features = module.RandomAttentionFeatures(random_state=0, **features)
    results["random features transform"] = random_features.fit(X).transform(X)
    return results


def difference(old, new):
    """0.0 for bit-identical outputs, else the largest absolute difference."""
    if isinstance(old, list):
        return max(difference(a, b) for a, b in zip(old, new, strict=True))
    if old.shape != new.shape:
        return np.inf
    if np.array_equal(old, new):
        return 0.0
    return float(np.max(np.abs(old.astype(float) - new.astype(float))))


def compare_outputs(versions, new_params):
    print("| data | output | identical | largest difference |\n|---|---|---|---:|")
    for name, X, y_class, y_value in datasets():
        old = outputs(versions["old"], X, y_class, y_value)
        new = outputs(versions["new"], X, y_class, y_value, **new_params)
        for output, old_values in old.items():
            gap = difference(old_values, new[output])
            print(f"| {name} | {output} | {gap == 0.0} | {gap:.3g} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="checkout of the old version")
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument(
        "--outputs", action="store_true", help="compare outputs, not CPU time"
    )
    parser.add_argument(
        "--new-params",
        default="{}",
        help="JSON of the new version's parameters with --outputs: "
        '{"attention": {...}, "features": {...}} (the old version\'s defaults, '
        "where a default changed)",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import skattn

    versions = {"old": import_old(args.old), "new": skattn}
    if args.outputs:
        compare_outputs(versions, json.loads(args.new_params))
        return
    rng = np.random.default_rng(0)
    print(
        "| case | old ms | new ms | new / old | identical |\n|---|---:|---:|---:|---|"
    )
    with threadpool_limits(1):
        for name, (n, n_tokens, width, n_heads) in SHAPES.items():
            X = rng.standard_normal((n, n_tokens, width)).astype(np.float32)
            fitted = {
                label: module.AttentionTransformer(
                    n_heads=n_heads, objective=None, random_state=0
                ).fit(X)
                for label, module in versions.items()
            }
            medians = alternate(
                {
                    label: (lambda est=est, X=X: est.transform(X))
                    for label, est in fitted.items()
                },
                args.repeats,
            )
            same = np.array_equal(
                fitted["old"].transform(X), fitted["new"].transform(X)
            )
            print(
                f"| {name} transform | {medians['old'] * 1e3:.1f} | "
                f"{medians['new'] * 1e3:.1f} | {medians['new'] / medians['old']:.3f} | "
                f"{same} |"
            )
        X = rng.standard_normal((256, 32, 64)).astype(np.float32)
        y = rng.integers(0, 2, len(X))
        medians = alternate(
            {
                label: (
                    lambda module=module: module.AttentionTransformer(
                        max_iter=3, random_state=0
                    ).fit(X, y)
                )
                for label, module in versions.items()
            },
            args.repeats,
        )
        trained = [
            module.AttentionTransformer(max_iter=3, random_state=0).fit(X, y)
            for module in versions.values()
        ]
        same = np.array_equal(trained[0].transform(X), trained[1].transform(X))
        print(
            f"| T32 fit, 3 epochs | {medians['old'] * 1e3:.1f} | "
            f"{medians['new'] * 1e3:.1f} | {medians['new'] / medians['old']:.3f} | "
            f"{same} |"
        )


if __name__ == "__main__":
    main()
