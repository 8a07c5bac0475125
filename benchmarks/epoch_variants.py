"""Training epochs of the default classifier with one piece of the package
swapped for a simpler one, side by side in one process.

Runs on demand, never in the test suite. On a shared machine two runs of the
same epoch differ by 10 to 20 %, more than the pieces compared here change;
so the variants alternate epoch by epoch in one process (the order rotating),
at one and at two threads, and each row is the median of ``--rounds``
epochs. Variants:

- ``as is``: the package;
- ``layer norm on numpy``: the layer norm's numpy path, numba installed
  (``skattn._kernels.compiled.layer_norm_applies`` answers False);
- ``batches in groups``: the batches of a minibatch in groups of as many as
  there are threads, each group finished before the next starts, instead of
  :func:`skattn._parallel.imap_parallel`'s sliding window.

The cases are those of ``speed.py --epochs`` (one ``partial_fit`` epoch of
``AttentionClassifier``): wide tokens (1,000 sequences of 128 tokens of 384
features) and long sequences (8 of 4,096 tokens of 64 features). The speed-up
is the variant's one-thread median over its two-thread median.

How to run (about 5 minutes with the default 8 rounds)::

    python benchmarks/epoch_variants.py [--rounds 8] [--cases wide,long]
"""

import argparse
import contextlib
import itertools
import statistics
import time
from unittest import mock

from _machine import machine_lines  # benchmarks/_machine.py
from speed import EPOCH_CASES, set_threads, train_data

import skattn._model.sequences as sequences
from skattn import AttentionClassifier
from skattn._kernels import compiled
from skattn._parallel import map_parallel, parallel_workers

CASES = {"wide": "wide tokens", "long": "long sequences"}


def map_in_groups(function, tasks):
    """The batches in groups of as many as there are workers."""
    tasks = iter(tasks)
    n_workers = parallel_workers()
    while group := list(itertools.islice(tasks, n_workers)):
        yield from map_parallel(function, group)


VARIANTS = {
    "as is": contextlib.nullcontext,
    "layer norm on numpy": lambda: mock.patch.object(
        compiled, "layer_norm_applies", lambda *arrays: False
    ),
    "batches in groups": lambda: mock.patch.object(
        sequences, "imap_parallel", map_in_groups
    ),
}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=8, help="epochs per row")
    parser.add_argument("--cases", default="wide,long", help="among wide,long")
    args = parser.parse_args(argv)
    print("\n".join(machine_lines()))
    print(f"\nMedian of {args.rounds} alternating epochs (ms)\n")
    print("| case | variant | 1 thread | 2 threads | speed-up |")
    print("|---|---|---:|---:|---:|")
    for case in args.cases.split(","):
        shape, params = EPOCH_CASES[CASES[case]]
        x, y = train_data(*shape)
        runs = {}
        for variant in VARIANTS:
            for n_threads in (1, 2):
                est = AttentionClassifier(random_state=0, **params)
                runs[variant, n_threads] = est
        times = {key: [] for key in runs}
        keys = list(runs)
        for round_ in range(args.rounds + 1):  # the first round warms up
            shift = round_ % len(keys)
            for key in keys[shift:] + keys[:shift]:
                variant, n_threads = key
                with VARIANTS[variant](), set_threads(n_threads):
                    start = time.perf_counter()
                    runs[key].partial_fit(x, y, classes=[0, 1])
                    if round_:
                        times[key].append(time.perf_counter() - start)
        for variant in VARIANTS:
            one, two = (statistics.median(times[variant, n]) for n in (1, 2))
            print(
                f"| {CASES[case]} {shape} | {variant} | {one * 1e3:.0f} | "
                f"{two * 1e3:.0f} | {one / two:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
