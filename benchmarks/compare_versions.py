"""CPU time of two versions of skattn side by side, in one process.

Runs on demand, never in the test suite. A refactor must not slow the model
down; on a shared machine wall-clock times of two separate runs differ by up to
30 %, so this script imports both versions into one process (the old one copied
under the name ``skattn_old``), alternates them call by call, and reports the
median process CPU time of each (BLAS limited to one thread, so CPU time is the
work done). Cases: ``transform`` of the default seeded transformer on the
shapes of ``speed.py`` (S1-S4, float32), and three epochs of the default
learned transformer on (256, 32, 64). The last column says whether the two
versions' outputs (the transform, and the trained model's transform) are
bit-identical.

How to run (``OLD`` a checkout or worktree of the older commit)::

    git worktree add /tmp/skattn-old <commit>
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python benchmarks/compare_versions.py --old /tmp/skattn-old --repeats 11
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="checkout of the old version")
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import skattn

    versions = {"old": import_old(args.old), "new": skattn}
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
