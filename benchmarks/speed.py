"""Speed and memory benchmark: skattn against ``torch.nn.MultiheadAttention``.

Runs on demand, never in the test suite. torch is optional (benchmarks only, never
a dependency of skattn): without it the torch rows and ratios are left out.

Reference shapes (batch B, tokens T, width d, heads h; float32)::

    S1 (512, 32, 64, 4)   S2 (64, 256, 128, 8)   S3 (8, 1024, 64, 4)
    S4 (1, 8192, 64, 4)   S5 (1, 32768, 64, 4)   (default S1-S4; S5 is slow)

For each shape and thread count, in one process, after one warm-up call each, the
implementations run alternately (the order rotates every repetition) and the median
time is reported (each timed call after ``--settle`` untimed ones, below):

- ``skattn mha``: ``skattn.multi_head_attention`` with Q/K/V and output projections,
  on the compiled kernels where numba is installed (the ``[fast]`` extra);
- ``skattn mha, numpy``: the same on the numpy path (``SKATTN_COMPILED=0``),
  where numba is installed;
- ``skattn transform``: ``AttentionTransformer(objective=None, ...).transform``, the
  bare layer (no positions, residual, layer norm, feed-forward sublayer or
  scaling; the same weights via ``init``) followed by mean pooling
  (``token_statistics=None``);
- ``torch fast`` / ``torch no-fast``: ``nn.MultiheadAttention`` (eval,
  ``torch.inference_mode``, ``batch_first=True``, ``need_weights=False``, the same
  weights) with its default fast path, and with
  ``torch.backends.mha.set_fastpath_enabled(False)``. torch takes its fast path only
  when the module has biases, so it is built with ``bias=True`` and zero biases (the
  same function as ``bias=False``); the notes under the table say whether the fast
  path ran, and give each output's max abs difference to ``skattn mha``. The fast
  path holds the (B, h, T, T) scores: it is skipped above ``--max-scores-gb``.

In each repetition an implementation's timed call follows ``--settle`` untimed
calls of its own (default 1): a call right after another implementation's runs
beside that one's threads, which go on spinning for a while after their call
(torch's OpenMP workers), so that its time measured the order of the
implementations rather than their speed (S1 at two threads on a 2-vCPU Intel Xeon:
skattn's first call after torch's 10.7 and 11.0 ms, its next three 7.5 to 7.9;
torch's first after skattn's 8.6, its next 7.0). ``--settle 0`` times every call,
as a program alternating the two libraries would see them. The header and the
last line give each CPU's speed (a VM's cores can run at different speeds).

``--threads`` limits numpy's BLAS (and torch's OpenMP) with threadpoolctl and torch
with ``torch.set_num_threads``, in the same process; leave ``OMP_NUM_THREADS``
unset. skattn itself keeps BLAS on one thread inside its attention tiles and in
``transform``.

FLOPs per forward pass (a multiply-add is 2): projections ``4 * 2*B*T*d*d`` (Q, K,
V, output) plus attention ``2 * 2*B*h*T*T*(d/h)`` (scores, weighted values); the
softmax is not counted. Ratios are time / time of the torch row (< 1: faster).

``--memory`` runs each case once in a fresh subprocess (this script with a hidden
``--one-case`` flag, at the first ``--threads`` value) and reports its peak RSS minus
the RSS after allocating the input and weights (libraries included) minus the
output's size: the extra memory above inputs and output (numba and the compiled
kernels, about 100 MB once a process, are loaded before). On Linux the peak is
``VmHWM`` of ``/proc/self/status``, reset just before the case (``clear_refs``):
``getrusage(RUSAGE_SELF).ru_maxrss``, the fallback elsewhere, also counts the
parent's RSS at fork time (over 300 MB once torch is loaded). "<=" marks a case
that did not raise a peak that could not be reset.

``--train`` times one epoch of ``AttentionTransformer(n_heads=4, max_iter=1,
batch_size=b, positional_encoding=None, residual=False, layer_norm=None,
ff_dim=0, token_statistics=None, scale_tokens=False, pooling="mean",
random_state=0).fit(X, y)`` (Adam, linear head, softmax cross-entropy, binary
y; no token statistics, so no refit of the head after the epoch, which the
default fit adds for these tokens of 64 features) against the same model
trained with torch autograd:
``nn.MultiheadAttention(bias=False)``, mean over tokens, ``nn.Linear``,
``nn.CrossEntropyLoss``, ``torch.optim.Adam`` with the same learning rate, batch
size and L2 penalty (weight decay ``alpha / b`` on the weights, none on the head's
bias). Both times include building the model and shuffling. Cases: T32 = (256, 32,
64) with b = 256, 200 (the default "auto") and 32; T4096, T8192 = 2 sequences of
that length, b = 2. ``skattn fit, numpy`` is the same fit on the numpy path.
``--memory --train`` gives the training cases' memory.

``--epochs`` times one training epoch of the default ``AttentionClassifier``
(``partial_fit`` on the whole set: one Adam epoch, no head refit) at each thread
count, the median of ``--repeats`` epochs after one untimed, on both paths of the
kernels: wide tokens (1,000 sequences of 128 tokens of 384 features, the size of
a sentence encoder's token states) and long sequences (8 of 4,096 tokens of 64
features, ``patch_size=None``, ``batch_size=2``). The speed-up is one thread's
time over this row's.

How to run (on shared machines compare ratios within one run, not absolute times
across runs)::

    python benchmarks/speed.py --shapes S1,S2,S3,S4 --threads 1,2 --repeats 5
    python benchmarks/speed.py --memory --shapes S4,S5
    python benchmarks/speed.py --train [--train-cases T32]
    python benchmarks/speed.py --memory --train
    python benchmarks/speed.py --epochs --threads 1,2
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
from functools import cache

import numpy as np
from _machine import (
    cpu_speeds,
    machine_lines,
    numba_target,
    products_choice,
)  # benchmarks/_machine.py
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from skattn import AttentionClassifier, AttentionTransformer, multi_head_attention
from skattn._kernels import compiled

SHAPES = {
    "S1": (512, 32, 64, 4),
    "S2": (64, 256, 128, 8),
    "S3": (8, 1024, 64, 4),
    "S4": (1, 8192, 64, 4),
    "S5": (1, 32768, 64, 4),
}
TRAIN_CASES = {  # (n_samples, T, d, h), batch sizes
    "T32": ((256, 32, 64, 4), (256, 200, 32)),  # 200: batch_size="auto"
    "T4096": ((2, 4096, 64, 4), (2,)),
    "T8192": ((2, 8192, 64, 4), (2,)),
}
LABELS = {
    "mha": "skattn mha",
    "mha-numpy": "skattn mha, numpy",
    "transform": "skattn transform",
    "torch-fast": "torch fast",
    "torch-nofast": "torch no-fast",
    "skattn": "skattn fit",
    "skattn-numpy": "skattn fit, numpy",
    "torch": "torch autograd",
}
ALPHA, LEARNING_RATE = 1e-4, 1e-3  # AttentionTransformer's defaults
EPOCH_CASES = {  # (n_samples, T, d), AttentionClassifier's parameters
    "wide tokens": ((1000, 128, 384), {}),
    "long sequences": ((8, 4096, 64), {"patch_size": None, "batch_size": 2}),
}


@cache
def optional_torch():
    """torch, or None when it is not installed (imported only when needed)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def on_numpy_path(function):
    """``function`` run on the kernels' numpy path, numba installed or not."""

    def run(*args, **kwargs):
        previous = os.environ.get("SKATTN_COMPILED")
        os.environ["SKATTN_COMPILED"] = "0"  # read at every attention call
        try:
            return function(*args, **kwargs)
        finally:
            if previous is None:
                del os.environ["SKATTN_COMPILED"]
            else:
                os.environ["SKATTN_COMPILED"] = previous

    return run


def skattn_impls(base):
    """``base``, and its numpy-path twin where the compiled kernels run."""
    return [base, f"{base}-numpy"] if compiled.enabled() else [base]


def set_threads(n_threads):
    """Context limiting numpy's BLAS, torch's OpenMP and torch to ``n_threads``."""
    torch = sys.modules.get("torch")  # never imported just for this
    if torch is not None:
        torch.set_num_threads(n_threads)
    return threadpool_limits(limits=n_threads)


def flops(batch, n_tokens, width, n_heads):
    projections = 4 * 2 * batch * n_tokens * width * width
    return projections + 2 * 2 * batch * n_heads * n_tokens**2 * (width // n_heads)


def make_data(batch, n_tokens, width, seed=0):
    """Tokens (B, T, d) and the four projections (d, d), float32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, n_tokens, width), dtype=np.float32)
    weights = {
        name: rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)
        for name in ("query", "key", "value", "output")
    }
    return x, weights


def fast_path_too_big(shape, max_gb):
    batch, n_tokens, _, n_heads = shape
    return batch * n_heads * n_tokens**2 * 4 > max_gb * 2**30


def torch_mha(weights, n_heads):
    """``nn.MultiheadAttention`` (eval) computing the same function as skattn."""
    torch = optional_torch()
    width = weights["query"].shape[0]
    module = torch.nn.MultiheadAttention(width, n_heads, bias=True, batch_first=True)
    in_proj = np.concatenate([weights[n].T for n in ("query", "key", "value")])
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.from_numpy(in_proj))  # (3d, d)
        module.out_proj.weight.copy_(torch.from_numpy(weights["output"].T.copy()))
        module.in_proj_bias.zero_()
        module.out_proj.bias.zero_()
    return module.eval()


def run_torch(module, xt, fast):
    torch = optional_torch()
    torch.backends.mha.set_fastpath_enabled(fast)
    try:
        with torch.inference_mode():
            return module(xt, xt, xt, need_weights=False)[0]
    finally:
        torch.backends.mha.set_fastpath_enabled(True)


def inference_cases(x, weights, n_heads, impls):
    """Callables running each implementation of ``impls`` on ``x``."""
    cases = {}
    w = [weights[n] for n in ("query", "key", "value", "output")]
    if "mha" in impls:
        cases["mha"] = lambda: multi_head_attention(x, *w, n_heads=n_heads)
    if "mha-numpy" in impls:
        mha = on_numpy_path(multi_head_attention)
        cases["mha-numpy"] = lambda: mha(x, *w, n_heads=n_heads)
    if "transform" in impls:
        est = AttentionTransformer(
            n_heads=n_heads,
            head_dim=x.shape[-1] // n_heads,
            objective=None,
            init=weights,
            positional_encoding=None,
            residual=False,
            layer_norm=None,
            ff_dim=0,
            token_statistics=None,
            scale_tokens=False,
        ).fit(x)
        cases["transform"] = lambda: est.transform(x)
    if "torch-fast" in impls or "torch-nofast" in impls:
        module, xt = torch_mha(weights, n_heads), optional_torch().from_numpy(x)
        for impl, fast in (("torch-fast", True), ("torch-nofast", False)):
            if impl in impls:
                cases[impl] = lambda fast=fast: run_torch(module, xt, fast)
    return cases


def verify(cases):
    """Max abs difference of each output to ``skattn mha``; did the fast path run?"""
    reference = cases["mha"]()  # (B, T, d)
    notes = [f"max|out| {np.abs(reference).max():.3g}"]
    if "mha-numpy" in cases:
        diff = np.abs(cases["mha-numpy"]() - reference).max()
        notes.append(f"numpy path {diff:.1e}")
    if "transform" in cases:
        diff = np.abs(cases["transform"]() - reference.mean(axis=1)).max()
        notes.append(f"transform vs mean(mha) {diff:.1e}")
    torch = optional_torch()
    for impl in ("torch-fast", "torch-nofast"):
        if impl not in cases:
            continue
        native, calls = torch._native_multi_head_attention, []

        def counted(*args, native=native, calls=calls, **kwargs):
            calls.append(1)
            return native(*args, **kwargs)

        torch._native_multi_head_attention = counted  # the fast path's kernel
        try:
            diff = np.abs(cases[impl]().numpy() - reference).max()
        finally:
            torch._native_multi_head_attention = native
        ran = "ran" if calls else "not taken"
        notes.append(f"{LABELS[impl]} {diff:.1e} (fast path {ran})")
    return "; ".join(notes)


def train_data(n_samples, n_tokens, width):
    x, _ = make_data(n_samples, n_tokens, width, seed=1)
    y = np.random.default_rng(1).permutation(np.arange(n_samples) % 2)
    return x, y


def skattn_fit(x, y, n_heads, batch_size):
    est = AttentionTransformer(
        n_heads=n_heads,
        max_iter=1,
        batch_size=batch_size,
        positional_encoding=None,
        residual=False,
        layer_norm=None,
        ff_dim=0,
        token_statistics=None,
        scale_tokens=False,
        pooling="mean",
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter=1 on purpose
        return est.fit(x, y)


def torch_fit(x, y, n_heads, batch_size):
    """One epoch of the equivalent torch model, with autograd and Adam."""
    torch = optional_torch()
    nn = torch.nn
    torch.manual_seed(0)
    width, n_classes = x.shape[-1], int(y.max()) + 1
    attention = nn.MultiheadAttention(width, n_heads, bias=False, batch_first=True)
    head = nn.Linear(width, n_classes)
    decayed = [attention.in_proj_weight, attention.out_proj.weight, head.weight]
    groups = [{"params": decayed, "weight_decay": ALPHA / batch_size}]
    groups.append({"params": [head.bias], "weight_decay": 0.0})
    optimizer = torch.optim.Adam(groups, lr=LEARNING_RATE)
    loss_function = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    order = torch.randperm(len(x))
    for start in range(0, len(x), batch_size):
        rows = order[start : start + batch_size]
        xb = xt[rows]  # (b, T, d)
        tokens = attention(xb, xb, xb, need_weights=False)[0]  # (b, T, d)
        loss = loss_function(head(tokens.mean(dim=1)), yt[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return loss


def train_cases(x, y, n_heads, batch_size, impls):
    fits = {
        "skattn": skattn_fit,
        "skattn-numpy": on_numpy_path(skattn_fit),
        "torch": torch_fit,
    }
    return {i: lambda f=fits[i]: f(x, y, n_heads, batch_size) for i in impls}


def time_cases(cases, n_threads, repeats, settle=1):
    """Median seconds of each case; the implementations alternate, each timed
    call after ``settle`` untimed ones of its own where there are several."""
    names, times = list(cases), {name: [] for name in cases}
    settle = settle if len(names) > 1 else 0
    with set_threads(n_threads):
        for case in cases.values():
            case()  # warm-up
        for rep in range(repeats):
            shift = rep % len(names)  # rotate the order
            for name in names[shift:] + names[:shift]:
                for _ in range(settle):  # the implementation before stops its threads
                    cases[name]()
                start = time.perf_counter()
                cases[name]()
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def rss_bytes():
    """Current and peak resident set size of this process, in bytes."""
    try:
        with open("/proc/self/status") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        return [int(fields[key].split()[0]) * 1024 for key in ("VmRSS", "VmHWM")]
    except OSError:  # not Linux: ru_maxrss (KiB, bytes on macOS) for both
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return [peak * (1 if sys.platform == "darwin" else 1024)] * 2


def reset_peak_rss():
    """Reset the peak RSS to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        pass


def one_case(spec, n_threads):
    """Run one case once, in this fresh process; print its memory as JSON."""
    kind, name, impl = spec.split(":")
    if kind == "infer":
        batch, n_tokens, width, n_heads = SHAPES[name]
        x, weights = make_data(batch, n_tokens, width)
        case = inference_cases(x, weights, n_heads, [impl])[impl]
    else:
        if impl == "torch":
            optional_torch()  # loaded before the baseline, as for inference
        (n_samples, n_tokens, width, n_heads), _ = TRAIN_CASES[name]
        x, y = train_data(n_samples, n_tokens, width)
        case = train_cases(x, y, n_heads, n_samples, [impl])[impl]
    if compiled.enabled():  # numba and its compiled code, loaded once a process
        multi_head_attention(*make_data(1, 8, 8)[:1], *[np.eye(8, dtype="f4")] * 3,
                             n_heads=2)  # fmt: skip
    with set_threads(n_threads):
        reset_peak_rss()
        base, peak_before = rss_bytes()
        start = time.perf_counter()
        out = case()
        seconds = time.perf_counter() - start
        _, peak = rss_bytes()
    out_bytes = 0  # a training epoch's output (the weights) is small
    if kind == "infer":
        is_tensor = hasattr(out, "element_size")
        out_bytes = out.numel() * out.element_size() if is_tensor else out.nbytes
    result = dict(base=base, peak=peak, peak_before=peak_before, out=out_bytes)
    print(json.dumps(result | {"seconds": seconds}))


def memory_table(specs, n_threads):
    mib = 2**20
    print(f"\nPeak memory, one run per fresh process, {n_threads} thread(s)\n")
    print("| case | impl | s | RSS before (inputs, libs) MB | output MB | extra MB |")
    print("|---|---|---:|---:|---:|---:|")
    for spec, label in specs:
        impl = spec.split(":")[2]
        command = [sys.executable, os.path.abspath(__file__), "--one-case", spec]
        command += ["--threads", str(n_threads)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode:
            error = (result.stderr.strip().splitlines() or ["killed?"])[-1]
            print(f"| {label} | {LABELS[impl]} | failed: {error} | | | |", flush=True)
            continue
        m = json.loads(result.stdout.strip().splitlines()[-1])
        extra = (m["peak"] - m["base"] - m["out"]) / mib
        bound = "<= " if m["base"] < m["peak_before"] >= m["peak"] else ""
        print(
            f"| {label} | {LABELS[impl]} | {m['seconds']:.2f} | {m['base'] / mib:.0f} "
            f"| {m['out'] / mib:.1f} | {bound}{extra:.0f} |",
            flush=True,
        )


def speed(args, torch_impls):
    print(
        "\n| shape (B, T, d, h) | threads | impl | ms | tokens/s | GFLOP/s | "
        "/ torch fast | / torch no-fast |\n|---|---:|---|---:|---:|---:|---:|---:|"
    )
    notes = []
    for name in args.shapes:
        shape = SHAPES[name]
        impls = skattn_impls("mha") + ["transform"] + torch_impls
        if "torch-fast" in impls and fast_path_too_big(shape, args.max_scores_gb):
            impls.remove("torch-fast")
            notes.append(f"{name}: torch fast path skipped (scores > --max-scores-gb)")
        x, weights = make_data(*shape[:3])
        cases = inference_cases(x, weights, shape[3], impls)
        with set_threads(args.threads[0]):
            notes.append(f"{name} max abs diff to skattn mha: {verify(cases)}")
        for n_threads in args.threads:
            times = time_cases(cases, n_threads, args.repeats, args.settle)
            refs = [times.get("torch-fast"), times.get("torch-nofast")]
            for impl, seconds in times.items():
                ratios = " | ".join(f"{seconds / r:.2f}" if r else "-" for r in refs)
                print(
                    f"| {name} {shape} | {n_threads} | {LABELS[impl]} | "
                    f"{seconds * 1e3:.1f} | {shape[0] * shape[1] / seconds:,.0f} | "
                    f"{flops(*shape) / seconds / 1e9:.1f} | {ratios} |",
                    flush=True,
                )
    print("\n" + "\n".join(f"- {note}" for note in notes))


def train(args, torch_impls):
    print("\nOne Adam epoch (fit, max_iter=1) against torch autograd\n")
    print("| case (n, T, d, h) | batch | threads | impl | ms | tokens/s | / torch |")
    print("|---|---:|---:|---|---:|---:|---:|")
    impls = skattn_impls("skattn") + (["torch"] if torch_impls else [])
    for name in args.train_cases:
        shape, batch_sizes = TRAIN_CASES[name]
        x, y = train_data(*shape[:3])
        for batch_size in batch_sizes:
            cases = train_cases(x, y, shape[3], batch_size, impls)
            for n_threads in args.threads:
                times = time_cases(cases, n_threads, args.repeats, args.settle)
                for impl, seconds in times.items():
                    torch_s = times.get("torch")
                    ratio = f"{seconds / torch_s:.2f}" if torch_s else "-"
                    print(
                        f"| {name} {shape} | {batch_size} | {n_threads} | "
                        f"{LABELS[impl]} | {seconds * 1e3:.1f} | "
                        f"{shape[0] * shape[1] / seconds:,.0f} | {ratio} |",
                        flush=True,
                    )


def epochs(args):
    print("\nOne epoch of AttentionClassifier().partial_fit, median of --repeats\n")
    print("| case (n, T, d) | kernels | threads | ms | speed-up |")
    print("|---|---|---:|---:|---:|")
    for name, (shape, params) in EPOCH_CASES.items():
        x, y = train_data(*shape)
        for impl in skattn_impls("skattn"):
            one_thread = None
            for n_threads in args.threads:
                est = AttentionClassifier(random_state=0, **params)

                def epoch(est=est, x=x, y=y):
                    return est.partial_fit(x, y, classes=[0, 1])

                if impl.endswith("-numpy"):
                    epoch = on_numpy_path(epoch)
                seconds = time_cases({impl: epoch}, n_threads, args.repeats)[impl]
                one_thread = one_thread or seconds
                kernels = "numpy" if impl.endswith("-numpy") else "compiled"
                if not compiled.enabled():
                    kernels = "numpy (no numba)"
                print(
                    f"| {name} {shape} | {kernels} | {n_threads} | "
                    f"{seconds * 1e3:.0f} | {one_thread / seconds:.2f} |",
                    flush=True,
                )


def comma_list(choices=None, cast=str):
    def parse(text):
        items = [cast(item) for item in text.split(",")]
        if choices is not None and not set(items) <= set(choices):
            raise argparse.ArgumentTypeError(f"choose among {','.join(choices)}")
        return items

    return parse


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--shapes",
        type=comma_list(SHAPES),
        default=["S1", "S2", "S3", "S4"],
        help="comma-separated, among S1..S5 (default S1-S4: S5 is slow)",
    )
    add(
        "--threads",
        type=comma_list(cast=int),
        default=[1, 2],
        help="thread counts (default 1,2); --memory uses the first",
    )
    add("--repeats", type=int, default=5, help="timed runs per case (median)")
    add(
        "--settle",
        type=int,
        default=1,
        help="untimed calls of each implementation before its timed one (default 1)",
    )
    add("--memory", action="store_true", help="peak RSS, each case in a subprocess")
    add("--train", action="store_true", help="one Adam epoch against torch autograd")
    add(
        "--train-cases",
        type=comma_list(TRAIN_CASES),
        default=list(TRAIN_CASES),
        help="comma-separated, among T32,T4096,T8192 (default all)",
    )
    add(
        "--max-scores-gb",
        type=float,
        default=4.0,
        help="skip torch's fast path above this many GiB of scores (default 4)",
    )
    add("--epochs", action="store_true", help="epoch time at each thread count")
    add("--no-torch", action="store_true", help="skattn rows only")
    add("--one-case", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.one_case:
        return one_case(args.one_case, args.threads[0])
    with_torch = not args.no_torch and optional_torch() is not None
    torch_impls = ["torch-fast", "torch-nofast"] if with_torch else []
    print("\n".join(machine_lines()))
    if compiled.enabled():
        print(f"# compiled kernels: {numba_target()}; {products_choice()}")
    else:
        print(f"# compiled kernels: off ({numba_target()})")
    if args.memory and args.train:
        memory_table(
            [
                (f"train:{name}:{impl}", f"{name} {TRAIN_CASES[name][0]} fit")
                for name in args.train_cases
                for impl in ["skattn"] + (["torch"] if with_torch else [])
            ],
            args.threads[0],
        )
    elif args.memory:
        memory_table(
            [
                (f"infer:{name}:{impl}", f"{name} {SHAPES[name]}")
                for name in args.shapes
                for impl in ["mha", "transform"] + torch_impls
                if impl != "torch-fast"
                or not fast_path_too_big(SHAPES[name], args.max_scores_gb)
            ],
            args.threads[0],
        )
    elif args.epochs:
        epochs(args)
    elif args.train:
        train(args, torch_impls)
    else:
        speed(args, torch_impls)
    if not args.memory:
        print(f"\nat the end: {cpu_speeds()}")


if __name__ == "__main__":
    main()
