"""Banded attention by sequence length, against full attention and torch: time
and peak memory.

The attention kernels alone (no projections): one sequence of ``T`` tokens,
4 heads of 16 features, float32, no mask, at one thread, at T = 1,024 to
131,072 (``--lengths``). Banded attention
(:func:`skattn._kernels.banded.banded_forward` and its backward pass) with
windows of 17 and 65 and, at 65, dilations 1 and 4; full attention
(:func:`skattn._kernels.attention.attention_forward` and its backward pass)
up to 16,384 tokens (``--full-max``: it is quadratic; at 32,768 tokens a
forward and backward call took 19 s compiled and 34 s on the numpy path; "–"
beyond). ``forward`` times the forward pass, ``forward+backward`` the forward
pass followed by the backward pass; the best of ``--repeats`` runs, or of as
many as fit in 2 seconds (at most 100), the numpy and compiled paths
alternating run by run, each kernel called once beforehand on 256 tokens
(numba compiles on a first call). On a shared machine a best of 3 single runs
of a row may all fall in a busy second: one row of a run took 6.3 or 6.5
times the time of a quarter of its tokens where the next run measured 4.4;
the extra runs find the quiet moments. ``compiled`` runs
the compiled kernels at every size (the rule ``pays_off`` of full attention
runs them from 64 keys for heads of 16 features, so at all these sizes too);
``numpy`` sets ``compiled._DISABLED``.

Columns of the time table: milliseconds on each path, ``compiled / numpy``
(below 1: the compiled kernels are faster), for the banded rows the time over
full attention's on the same path (``/ full``), and ``T→4T``: the time over
the same row's at a quarter of the tokens (4 for a time linear in ``T``, 16
for a quadratic one).

torch (``--no-torch`` skips it; skipped with a note where torch does not
import): ``torch.nn.functional.scaled_dot_product_attention`` given the band
of window 17 as a ``(T, T)`` boolean mask (True: attend), forward and
forward+backward (autograd; the gradients set to None between runs), at one
torch thread, alternating with the banded kernels of that band. torch
computes every score of the ``(T, T)`` grid whatever the mask (its time
grows 16 times with 4 times the tokens), and holds 4 bytes a pair more during
a call (a float copy of the mask, by its size): with the boolean mask, 5 GiB
at 32,768 tokens and 20 GiB at 65,536, so it runs up to 32,768 tokens
(``--torch-max``; "–" beyond). A first check at 2,048 tokens prints the
largest difference between the banded kernels (both paths) and torch, output
and gradients: the tables compare the same computation.

``--memory`` adds a table of the peak memory of one call beyond its inputs
(q, k, v, the output's gradient, and torch's mask), results included
(``results MiB``: the output and log-sum-exp, and the three gradients for
forward+backward). skattn's: ``tracemalloc``'s peak over the call, started
after the inputs exist; it counts numpy's arrays and those numba allocates
inside the compiled kernels (numba's runtime allocates through Python's raw
allocator, which tracemalloc traces), every byte allocated whether touched or
not. torch's: the growth of the resident set, in a fresh process per
measurement (the peak ``VmHWM`` after ``/proc/self/clear_refs`` resets it,
less ``VmRSS`` before the call; ``ru_maxrss`` where there is no ``/proc``),
since torch allocates outside tracemalloc's view. Measured that way, the
banded kernels' peaks at 131,072 tokens are within 4 MiB of tracemalloc's.

The last lines check two criteria of banded attention: (a) at a fixed band,
four times the tokens take at most six times the time (the largest ``T→4T``
of each row); (b) at 131,072 tokens and a window of 17, forward and
forward+backward hold under 100 MiB beyond their inputs and results, on both
paths (with ``--memory``).

Needs numba (the ``[fast]`` extra); torch for its rows. Run from
``benchmarks/`` (about 6 minutes with ``--memory``, 2 of them torch at 32,768
tokens, 1 full attention at 16,384)::

    python banded_speed.py --memory
    python banded_speed.py --lengths 1024,4096 --repeats 5 --no-torch
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import functools
import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np
from _machine import machine_lines  # benchmarks/_machine.py
from threadpoolctl import threadpool_limits

from skattn._kernels import compiled
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward
from skattn._kernels.band import band_mask, band_offsets
from skattn._kernels.banded import banded_backward, banded_forward

N_HEADS, HEAD_DIM = 4, 16
KERNELS = {  # name: band (window, dilation), None for full attention
    "full": None,
    "banded w17 d1": (17, 1),
    "banded w65 d1": (65, 1),
    "banded w65 d4": (65, 4),
}
TORCH_BAND = "banded w17 d1"  # the band torch gets as its mask
PASSES = ("forward", "forward+backward")
PATHS = ("numpy", "compiled")
CHECK_TOKENS = 2048
MIN_SECONDS, MAX_ROUNDS = 2.0, 100  # the runs of short calls
MiB = 2**20


def run(band, q, k, v, d_out, backward):
    """One forward pass of full (``band`` None) or banded attention, and its
    backward pass if ``backward``: the results."""
    if band is None:
        out, lse, _ = attention_forward(q, k, v)
        grads = attention_backward(d_out, q, k, v, out, lse) if backward else ()
        return (out, lse, *grads)
    window, dilation = band
    out, lse, _ = banded_forward(q, k, v, window=window, dilation=dilation)
    if not backward:
        return out, lse
    grads = banded_backward(d_out, q, k, v, out, lse, window=window, dilation=dilation)
    return (out, lse, *grads)


def inputs(rng, n_tokens):
    """q, k, v and the output's gradient: (1, heads, T, head width), float32."""
    shape = (1, N_HEADS, n_tokens, HEAD_DIM)
    return [rng.standard_normal(shape, dtype=np.float32) for _ in range(4)]


def dense_band(n_tokens, window, dilation):
    """The band as a (T, T) boolean mask, diagonal by diagonal (``band_mask``
    holds a (T, T) int64 array on the way: 8 GiB at 32,768 tokens)."""
    mask = np.zeros((n_tokens, n_tokens), dtype=bool)
    for offset in band_offsets(window, dilation, n_queries=n_tokens, n_keys=n_tokens):
        rows = np.arange(max(0, -offset), min(n_tokens, n_tokens - offset))
        mask[rows, rows + offset] = True
    return mask


class Torch:
    """torch's scaled_dot_product_attention with the band as its mask."""

    def __init__(self, torch):
        self.torch = torch
        self.attention = torch.nn.functional.scaled_dot_product_attention

    def tensors(self, arrays, band):
        """The arrays as tensors (sharing their memory) and the band's mask."""
        q, k, v, d_out = (self.torch.from_numpy(a) for a in arrays)
        mask = self.torch.from_numpy(dense_band(q.shape[-2], *band))
        return q, k, v, d_out, mask

    def run(self, q, k, v, d_out, mask, backward):
        """One call, with autograd's backward pass if ``backward``."""
        for a in (q, k, v):
            a.requires_grad_(bool(backward))
            a.grad = None
        out = self.attention(q, k, v, attn_mask=mask)
        if not backward:
            return (out.detach(),)
        out.backward(d_out)
        return out.detach(), q.grad, k.grad, v.grad


def import_torch():
    """torch, or None where it does not import."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def timed(function):
    """Seconds of ``function()``."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def best_ms(calls, repeats):
    """The best of ``repeats`` runs of each call, in milliseconds, the calls
    alternating run by run; more runs while they take under MIN_SECONDS."""
    best = [np.inf] * len(calls)
    start, rounds = time.perf_counter(), 0
    while rounds < repeats or (
        rounds < MAX_ROUNDS and time.perf_counter() - start < MIN_SECONDS
    ):
        for i, call in enumerate(calls):
            best[i] = min(best[i], timed(call))
        rounds += 1
    return [b * 1e3 for b in best]


def on_path(path, band, arrays, backward):
    """A call of :func:`run` on the numpy or compiled path."""

    def call():
        compiled._DISABLED = path == "numpy"
        return run(band, *arrays, backward)

    return call


def traced_peak(call):
    """Peak bytes tracemalloc traces during ``call()`` (started after the
    inputs exist), and the bytes of its results."""
    tracemalloc.start()
    try:
        results = call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, sum(r.nbytes for r in results)


def status_kib(key):
    """A field of /proc/self/status, in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def torch_peak_child(n_tokens, backward):
    """In a fresh process: the resident set's growth over one torch call, and
    the bytes of its results (printed)."""
    import resource

    torch = import_torch()
    torch.set_num_threads(1)
    runner = Torch(torch)
    small = runner.tensors(inputs(np.random.default_rng(1), 64), KERNELS[TORCH_BAND])
    runner.run(*small, backward)  # torch's first call allocates its own state
    tensors = runner.tensors(
        inputs(np.random.default_rng(0), n_tokens), KERNELS[TORCH_BAND]
    )
    if os.path.exists("/proc/self/clear_refs"):
        before = status_kib("VmRSS")
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # VmHWM := VmRSS
        results = runner.run(*tensors, backward)
        growth = status_kib("VmHWM") - before
    else:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        results = runner.run(*tensors, backward)
        growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    size = sum(r.numel() * r.element_size() for r in results)
    print(growth * 1024, size)


def torch_peak(n_tokens, backward):
    """:func:`torch_peak_child` in a fresh process: (peak bytes, result bytes)."""
    command = [sys.executable, __file__, "--torch-peak", f"{n_tokens},{int(backward)}"]
    output = subprocess.run(command, capture_output=True, text=True, check=True)
    growth, size = output.stdout.split()
    return int(growth), int(size)


def check_against_torch(torch, rng):
    """The largest differences between the banded kernels and torch at
    CHECK_TOKENS tokens, as lines to print."""
    runner = Torch(torch)
    arrays = inputs(rng, CHECK_TOKENS)
    lines = []
    for name, band in KERNELS.items():
        if band is None:
            continue
        tensors = runner.tensors(arrays, band)
        assert np.array_equal(
            tensors[-1].numpy(), band_mask(CHECK_TOKENS, CHECK_TOKENS, *band)
        )
        expected = [t.numpy() for t in runner.run(*tensors, True)]
        found = []
        for path in PATHS:
            compiled._DISABLED = path == "numpy"
            results = run(band, *arrays, True)
            out, grads = results[0], results[2:]
            error = max(
                np.abs(g - e).max() for g, e in zip(grads, expected[1:], strict=True)
            )
            found.append(
                f"{path}: output {np.abs(out - expected[0]).max():.1e}, "
                f"gradients {error:.1e}"
            )
        lines.append(
            f"{name} at {CHECK_TOKENS:,} tokens, largest |banded - torch|: "
            + "; ".join(found)
        )
    return lines


def ratio(times, key, n_tokens, index):
    """The time over the same row's at a quarter of the tokens, as text."""
    before = times.get((n_tokens // 4, *key))
    now = times.get((n_tokens, *key))
    if n_tokens % 4 or before is None or now is None:
        return ""
    if np.isnan(before[index]) or np.isnan(now[index]):
        return ""
    return f"{now[index] / before[index]:.2f}"


def cell(value, digits=1):
    """A number of the table, or "–" where not measured."""
    return "–" if value is None or np.isnan(value) else f"{value:,.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="1024,4096,16384,32768,65536,131072")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--full-max", type=int, default=16384)
    parser.add_argument("--torch-max", type=int, default=32768)
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--torch-peak", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_peak:
        n_tokens, backward = map(int, args.torch_peak.split(","))
        return torch_peak_child(n_tokens, bool(backward))
    if compiled.kernels() is None:
        raise SystemExit("numba is not installed: pip install '.[fast]'")
    torch = None if args.no_torch else import_torch()
    lengths = [int(n) for n in args.lengths.split(",")]
    rng = np.random.default_rng(0)
    for line in machine_lines():
        print(f"> {line}")
    if torch is None:
        why = "--no-torch" if args.no_torch else "torch does not import"
        print(f"> torch: skipped ({why})")
    else:
        torch.set_num_threads(1)
    print()
    rule = compiled.MIN_KEYS_PER_SQUARED_DIM
    compiled.MIN_KEYS_PER_SQUARED_DIM = 0
    with threadpool_limits(1):
        for path in PATHS:  # warm-up: numba compiles
            compiled._DISABLED = path == "numpy"
            for band in KERNELS.values():
                run(band, *inputs(rng, 256), True)
        if torch is not None:
            for line in check_against_torch(torch, rng):
                print(f"> check: {line}")
            print()
        times = time_table(lengths, args, rng)
        torch_times = {}
        if torch is not None:
            torch_times = torch_table(Torch(torch), lengths, args, rng)
        peaks = memory_table(lengths, args, rng, torch) if args.memory else {}
    compiled._DISABLED = False
    compiled.MIN_KEYS_PER_SQUARED_DIM = rule
    criteria(lengths, times, torch_times, peaks)


def time_table(lengths, args, rng):
    """Times every kernel on both paths: {(T, name, pass): (numpy, compiled)}."""
    print(
        "| T | attention | pass | numpy ms | compiled ms | compiled / numpy "
        "| numpy / full | compiled / full | numpy T→4T | compiled T→4T |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    times = {}
    for n_tokens in lengths:
        arrays = inputs(rng, n_tokens)
        for name, band in KERNELS.items():
            for backward, label in enumerate(PASSES):
                if band is None and n_tokens > args.full_max:
                    row = (np.nan, np.nan)
                else:
                    calls = [on_path(p, band, arrays, backward) for p in PATHS]
                    row = tuple(best_ms(calls, args.repeats))
                times[n_tokens, name, label] = row
                full = times[n_tokens, "full", label]
                relative = [
                    "" if band is None else cell(t / f, 3)
                    for t, f in zip(row, full, strict=True)
                ]
                key = (name, label)
                print(
                    f"| {n_tokens:,} | {name} | {label} | {cell(row[0])} | "
                    f"{cell(row[1])} | {cell(row[1] / row[0], 2)} | "
                    f"{relative[0]} | {relative[1]} | "
                    f"{ratio(times, key, n_tokens, 0)} | "
                    f"{ratio(times, key, n_tokens, 1)} |",
                    flush=True,
                )
        del arrays
    print()
    return times


def torch_table(runner, lengths, args, rng):
    """Times torch with the band as its mask, alternating with the banded
    kernels of that band: {(T, "torch", pass): (torch, numpy, compiled)}."""
    print(
        f"torch `scaled_dot_product_attention` with the band of {TORCH_BAND} "
        "as its boolean mask, against the banded kernels (alternating):"
    )
    print()
    print(
        "| T | pass | torch ms | banded numpy ms | banded compiled ms "
        "| torch / numpy | torch / compiled | torch T→4T | mask MiB |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    band = KERNELS[TORCH_BAND]
    times = {}
    for n_tokens in lengths:
        arrays = inputs(rng, n_tokens)
        tensors = None
        if n_tokens <= args.torch_max:
            tensors = runner.tensors(arrays, band)
        for backward, label in enumerate(PASSES):
            calls = [on_path(p, band, arrays, backward) for p in PATHS]
            if tensors is None:
                row = (np.nan, *best_ms(calls, args.repeats))
            else:
                calls.insert(0, functools.partial(runner.run, *tensors, backward))
                row = tuple(best_ms(calls, args.repeats))
            times[n_tokens, "torch", label] = row
            print(
                f"| {n_tokens:,} | {label} | {cell(row[0])} | {cell(row[1])} | "
                f"{cell(row[2])} | {cell(row[0] / row[1], 2)} | "
                f"{cell(row[0] / row[2], 2)} | "
                f"{ratio(times, ('torch', label), n_tokens, 0)} | "
                f"{cell(n_tokens**2 / MiB, 0) if tensors is not None else '–'} |",
                flush=True,
            )
        del arrays, tensors
    print()
    return times


def memory_table(lengths, args, rng, torch):
    """Peak bytes beyond the inputs: {(T, name, pass): (results, numpy,
    compiled, torch)}, printed in MiB."""
    print(
        "Peak memory of one call beyond its inputs, results included "
        "(skattn: tracemalloc; torch: resident set growth, a fresh process "
        "per call; torch with the mask of "
        f"{TORCH_BAND}):"
    )
    print()
    print(
        "| T | attention | pass | results MiB | numpy MiB | compiled MiB | torch MiB |"
    )
    print("|---:|---|---|---:|---:|---:|---:|")
    peaks = {}
    for n_tokens in lengths:
        arrays = inputs(rng, n_tokens)
        for name, band in KERNELS.items():
            for backward, label in enumerate(PASSES):
                row = [np.nan] * 4
                if band is not None or n_tokens <= args.full_max:
                    for i, path in enumerate(PATHS):
                        call = on_path(path, band, arrays, backward)
                        row[i + 1], row[0] = traced_peak(call)
                if name == TORCH_BAND and torch is not None:
                    if n_tokens <= args.torch_max:
                        row[3], _ = torch_peak(n_tokens, backward)
                peaks[n_tokens, name, label] = row
                print(
                    f"| {n_tokens:,} | {name} | {label} | "
                    + " | ".join(cell(b / MiB) for b in row)
                    + " |",
                    flush=True,
                )
        del arrays
    print()
    return peaks


def criteria(lengths, times, torch_times, peaks):
    """Print criteria (a) and (b), and torch against the banded kernels at
    the most tokens it ran."""
    print("Criteria:")
    print()
    for label in PASSES:
        measured = [
            n
            for n in lengths
            if not np.isnan(torch_times.get((n, "torch", label), [np.nan])[0])
        ]
        if measured:
            n_tokens = max(measured)
            mine, numpy_ms, compiled_ms = torch_times[n_tokens, "torch", label]
            print(
                f"- torch with the mask, {label}, {n_tokens:,} tokens: {mine:,.1f} ms, "
                f"{mine / compiled_ms:.0f} times the banded compiled kernels' "
                f"({compiled_ms:,.1f} ms), {mine / numpy_ms:.0f} times the numpy "
                f"path's ({numpy_ms:,.1f} ms)"
            )
    worst = []
    for name, band in KERNELS.items():
        if band is None:
            continue
        for label in PASSES:
            for index, path in enumerate(PATHS):
                ratios = [
                    (float(ratio(times, (name, label), n, index)), n)
                    for n in lengths
                    if ratio(times, (name, label), n, index)
                ]
                if ratios:
                    worst.append((max(ratios), name, label, path))
    if worst:
        (value, n_tokens), name, label, path = max(worst)
        verdict = "holds" if value <= 6 else "fails"
        print(
            f"- (a) four times the tokens at most six times the time: {verdict}; "
            f"the largest T→4T of the banded rows is {value:.2f} ({name}, {label}, "
            f"{path}, {n_tokens // 4:,} to {n_tokens:,} tokens)"
        )
    else:
        print("- (a) not measured: no two lengths four times apart")
    n_tokens = 131072
    if not peaks or (n_tokens, "banded w17 d1", "forward") not in peaks:
        print("- (b) not measured: run with --memory and 131,072 in --lengths")
        return
    parts, holds = [], True
    for label in PASSES:
        results, *paths = peaks[n_tokens, "banded w17 d1", label]
        for path, peak in zip(PATHS, paths, strict=False):
            working = (peak - results) / MiB
            holds &= working < 100
            parts.append(
                f"{label} {path} {peak / MiB:.1f} MiB, {working:.1f} beyond its "
                f"results ({results / MiB:.1f} MiB)"
            )
    verdict = "holds" if holds else "fails"
    print(
        f"- (b) 131,072 tokens, window 17, under 100 MiB beyond the inputs and "
        f"results: {verdict}; " + "; ".join(parts)
    )


if __name__ == "__main__":
    main()
