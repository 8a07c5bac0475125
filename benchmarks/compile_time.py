"""How long numba takes to compile skattn's kernels, from an empty cache.

Runs on demand, never in the test suite (numba). A user's first fit compiles
the kernels it runs, and every run of the test suite from a clean checkout
compiles them all (each pytest-xdist worker one dtype,
``tests/conftest.py``): their compilation time is a cost of its own, apart
from their speed. Each repeat runs one fresh process per dtype with an empty
numba cache (a temporary ``NUMBA_CACHE_DIR``), which compiles the kernels as
the test suite does when it starts (``skattn._kernels.warm_up``), in this
order, on small arrays, and prints the seconds of each:

- ``short forward``, ``short backward``: the short kernels
  (``compiled.forward``/``backward`` with the short kernel chosen);
- ``blocked forward``, ``blocked backward``: the blocked kernels (their
  products by BLAS and by compiled loops are one function each);
- ``banded forward``, ``banded backward``: the banded kernels, without and
  with a global token;
- ``layer norm``, ``threshold statistics``: the rest.

A kernel's time includes the functions it shares with the kernels before it
only where they come first (the short kernels compile the products the
blocked kernels use), so compare a row with itself. ``LLVM`` is the part of
the total that numba spends in LLVM (optimisation and machine code), the rest
its own typing and lowering, in Python. ``--versions`` compares checkouts,
alternating them in each repeat (each a directory holding a ``skattn``
package, such as a ``git worktree``); the machine's speed drifts from minute
to minute, so compare versions only within one run. Run::

    python benchmarks/compile_time.py --repeats 3
    git worktree add /tmp/old HEAD~1
    python benchmarks/compile_time.py --versions /tmp/old,. --repeats 3
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _machine import machine_lines  # benchmarks/_machine.py

from skattn._kernels.warm_up import KERNELS

CHECKOUT = Path(__file__).resolve().parent.parent


# Run in a fresh process: compiles every kernel of one dtype (sys.argv[1]) as
# the test suite does, prints {kernel: seconds} and the seconds spent in LLVM,
# as JSON.
CHILD = """
import json, sys, time
import numpy as np
from numba.core import event
from skattn._kernels.warm_up import compile_kernels

llvm = event.TimingListener()
event.register("numba:llvm_lock", llvm)
seconds = {}


def timed(name, function, *arguments):
    start = time.perf_counter()
    result = function(*arguments)
    seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
    return result


compile_kernels(np.dtype(sys.argv[1]).type, timed)
json.dump({"seconds": seconds, "llvm": llvm.duration}, sys.stdout)
"""


def compile_once(version, dtype):
    """Compile every kernel of ``dtype`` in a fresh process, from an empty
    numba cache, with the ``skattn`` of directory ``version``."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(version)}
        env.pop("SKATTN_COMPILED", None)
        result = subprocess.run(
            [sys.executable, "-c", CHILD, dtype],
            env=env,
            cwd=cache,  # away from any skattn of the current directory
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        raise RuntimeError(f"{version}, {dtype}:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--versions",
        default=str(CHECKOUT),
        help="comma-separated directories holding a skattn package (default: "
        "this script's checkout)",
    )
    parser.add_argument("--dtypes", default="float32,float64")
    args = parser.parse_args(argv)
    versions = [Path(v).resolve() for v in args.versions.split(",")]
    for version in versions:
        if not (version / "skattn" / "__init__.py").is_file():
            parser.error(f"{version} holds no skattn package")
    dtypes = args.dtypes.split(",")
    runs = {(v, d): [] for v in versions for d in dtypes}
    for _ in range(args.repeats):
        for dtype in dtypes:
            for version in versions:  # alternating the versions
                runs[version, dtype].append(compile_once(version, dtype))
    print("\n".join(machine_lines()))
    print(f"median of {args.repeats} compilations from an empty numba cache, seconds")
    columns = [(v, d) for v in versions for d in dtypes]
    names = [f"{v.name or v} {d}" for v, d in columns]
    print("| kernel | " + " | ".join(names) + " |")
    print("|---" * (len(columns) + 1) + "|")

    def row(label, value):
        medians = [statistics.median(value(run) for run in runs[c]) for c in columns]
        cells = [f"{median:.1f}" for median in medians]
        print(f"| {label} | " + " | ".join(cells) + " |")

    for kernel in KERNELS:  # one list with the test suite's warm-up
        row(kernel, lambda run, kernel=kernel: run["seconds"][kernel])
    row("total", lambda run: sum(run["seconds"].values()))
    row("of which LLVM", lambda run: run["llvm"])


if __name__ == "__main__":
    main()
