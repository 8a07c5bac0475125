"""Where the time of ``multi_head_attention`` goes, part by part, against the
machine's sgemm peak.

Runs on demand, never in the test suite (numpy and skattn only). For each shape
of ``speed.py`` and thread count, ``skattn.multi_head_attention`` (Q/K/V and
output projections, as ``speed.py``'s "skattn mha" row: compiled where numba is
installed and the crossover rule says so) runs ``--repeats`` times with two of
its internal functions timed in every thread that calls them:

- ``projections``: ``project``, the products ``x @ W`` of each chunk of
  sequences (Q, K, V and the output);
- ``attention``: ``attention_forward``, the kernel on the chunk's heads
  (compiled or numpy);
- ``rest``: the threads' time minus the two: splitting and merging the heads,
  copies, the chunks' dispatch and the threads' waits.

The threads' time is the wall time times the number of threads; the parts'
times are summed over the threads, so that a part's GFLOP/s is its rate on
one thread (where the batch is one chunk, as S4's one sequence, the kernel
runs its heads on the workers itself: its time is then its wall time, its
rate that of all threads, and the other threads' time counts as "rest"),
compared with ``sgemm peak``: ``np.matmul`` of two 2048 x 2048
float32 matrices on one thread. FLOPs as in ``speed.py`` (a multiply-add is
2; the softmax is not counted). Run::

    python benchmarks/attention_parts.py --shapes S1,S2,S3,S4 --threads 1,2
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import statistics
import threading
import time
from collections import defaultdict

import numpy as np
from _machine import machine_lines, products_choice  # benchmarks/_machine.py
from threadpoolctl import threadpool_limits

import skattn._kernels.multi_head as multi_head
from skattn import multi_head_attention
from skattn._kernels import compiled

SHAPES = {
    "S1": (512, 32, 64, 4),
    "S2": (64, 256, 128, 8),
    "S3": (8, 1024, 64, 4),
    "S4": (1, 8192, 64, 4),
}
PARTS = {"projections": "project", "attention": "attention_forward"}
PEAK_SIZE = 2048


class PartTimes:
    """Seconds spent in the timed functions, summed over the threads."""

    def __init__(self):
        self.seconds = defaultdict(float)
        self.lock = threading.Lock()

    def wrap(self, part, function):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                with self.lock:
                    self.seconds[part] += time.perf_counter() - start

        return timed


def sgemm_peak(repeats):
    """GFLOP/s of a large float32 matrix product on one thread."""
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((PEAK_SIZE, PEAK_SIZE), dtype=np.float32) for _ in range(2)
    )
    with threadpool_limits(limits=1):
        a @ b
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
    return 2 * PEAK_SIZE**3 / statistics.median(times) / 1e9


def shape_parts(batch, n_tokens, width, n_heads, n_threads, repeats):
    """Median wall seconds of one call, and each part's seconds a call."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, n_tokens, width), dtype=np.float32)
    weights = [
        rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)
        for _ in range(4)
    ]
    timer = PartTimes()
    originals = {name: getattr(multi_head, name) for name in PARTS.values()}
    try:
        for part, name in PARTS.items():
            setattr(multi_head, name, timer.wrap(part, originals[name]))
        with threadpool_limits(limits=n_threads):
            multi_head_attention(x, *weights, n_heads=n_heads)  # warm-up
            timer.seconds.clear()
            walls = []
            for _ in range(repeats):
                start = time.perf_counter()
                multi_head_attention(x, *weights, n_heads=n_heads)
                walls.append(time.perf_counter() - start)
    finally:
        for name, function in originals.items():
            setattr(multi_head, name, function)
    return statistics.median(walls), {
        part: seconds / repeats for part, seconds in timer.seconds.items()
    }


def checked_shapes(parser, text):
    """The shapes named in ``text`` (comma-separated), or the parser's error
    for a name that is not one of SHAPES."""
    shapes = text.split(",")
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown:
        parser.error(f"unknown shapes {unknown}: choose among {sorted(SHAPES)}")
    return shapes


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--shapes", default="S1,S2,S3,S4", help="among S1..S4")
    parser.add_argument("--threads", default="1,2", help="thread counts")
    parser.add_argument("--repeats", type=int, default=9, help="timed calls a case")
    args = parser.parse_args(argv)
    shapes = checked_shapes(parser, args.shapes)
    print("\n".join(machine_lines()))
    if compiled.enabled():
        print(f"# compiled kernels: on; {products_choice()}")
    else:
        print("# compiled kernels: off")
    peak = sgemm_peak(args.repeats)
    print(f"# sgemm peak, one thread: {peak:.0f} GFLOP/s")
    print(
        "\n| shape (B, T, d, h) | threads | wall ms | part | thread ms | "
        "GFLOP/s a thread | of the peak | share |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for n_threads in map(int, args.threads.split(",")):
        for name in shapes:
            batch, n_tokens, width, n_heads = SHAPES[name]
            wall, seconds = shape_parts(*SHAPES[name], n_threads, args.repeats)
            flops = {
                "projections": 4 * 2 * batch * n_tokens * width * width,
                "attention": 2 * 2 * batch * n_heads * n_tokens**2 * (width // n_heads),
            }
            total = wall * n_threads
            seconds["rest"] = max(0.0, total - sum(seconds.values()))
            for part in ("projections", "attention", "rest"):
                rate = flops[part] / seconds[part] / 1e9 if part in flops else None
                cells = [
                    f"{name} {SHAPES[name]}",
                    str(n_threads),
                    f"{1e3 * wall:.2f}",
                    part,
                    f"{1e3 * seconds[part]:.2f}",
                    "-" if rate is None else f"{rate:.1f}",
                    "-" if rate is None else f"{rate / peak:.2f}",
                    f"{seconds[part] / total:.2f}",
                ]
                print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
