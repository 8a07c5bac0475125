"""What machine and libraries a benchmark ran on: the header of its output."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import datetime
import os
import platform
import statistics
import sys
import time

import numpy as np
import scipy
import sklearn
from threadpoolctl import threadpool_info

import skattn


def cpu_model():
    """The CPU's model name (from /proc/cpuinfo on Linux)."""
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def cpu_vectors():
    """The CPU's widest x86 vector instructions ("AVX-512", "AVX2" or "SSE"),
    from /proc/cpuinfo's flags; "unknown" elsewhere."""
    if not os.path.exists("/proc/cpuinfo"):
        return "unknown"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
        else:
            return "unknown"
    if "avx512f" in flags:
        return "AVX-512"
    return "AVX2" if "avx2" in flags else "SSE"


def blas_note():
    """A warning line where OpenBLAS runs narrower kernels than the CPU has
    (skattn's own rule, ``narrow_blas_kernels``), or None."""
    from skattn._kernels.compiled import narrow_blas_kernels

    flags = {"avx512f"} if cpu_vectors() == "AVX-512" else set()
    narrow = narrow_blas_kernels(flags, threadpool_info())
    if narrow:
        return (
            f"note: OpenBLAS runs its {'/'.join(narrow)} kernels (256-bit) on an "
            "AVX-512 CPU; OPENBLAS_CORETYPE=SkylakeX selects its AVX-512 kernels"
        )
    return None


def numba_target():
    """numba's version and the CPU LLVM compiles for, or "not installed"."""
    try:
        import numba
        from llvmlite import binding
    except ImportError:
        return "not installed"
    return f"numba {numba.__version__}, LLVM target {binding.get_host_cpu_name()}"


def products_choice():
    """How the compiled attention multiplies on this machine (its products in
    compiled loops or by BLAS), for the header of a table."""
    from skattn._kernels import compiled

    def name(loops):
        return "compiled loops" if loops else "BLAS"

    return (
        f"attention products: {name(compiled.products_in_loops())} (the blocked "
        "kernels' forward and backward passes, but for the backward pass's "
        "gradient of the queries, by BLAS; the short kernels' in compiled loops)"
    )


def _spin(n_steps):
    total = 0
    for step in range(n_steps):
        total += step
    return total


def cpu_speeds(repeats=3, n_steps=300_000):
    """Each CPU's time for one fixed loop of Python, the calling thread
    pinned to that CPU (the CPUs in turn, ``repeats`` times; medians in ms),
    as a line: on a VM the CPUs may run at different speeds at one moment
    (the hypervisor shares them), so that work split evenly between two
    threads ends when the slower CPU's share does. "unknown" where the OS
    cannot pin a thread (``os.sched_setaffinity``)."""
    if not hasattr(os, "sched_setaffinity"):
        return "per-CPU speed: unknown"
    allowed = os.sched_getaffinity(0)
    times = {cpu: [] for cpu in sorted(allowed)}
    try:
        for _ in range(repeats):
            for cpu, measured in times.items():
                os.sched_setaffinity(0, {cpu})
                start = time.perf_counter()
                _spin(n_steps)
                measured.append(time.perf_counter() - start)
    finally:
        os.sched_setaffinity(0, allowed)
    speeds = ", ".join(
        f"cpu{cpu} {statistics.median(measured) * 1e3:.1f}"
        for cpu, measured in times.items()
    )
    return f"per-CPU speed (ms of one Python loop, each CPU pinned in turn): {speeds}"


def machine_lines():
    """Date, machine (the CPU and its vector instructions), library versions,
    thread libraries (the BLAS kernel they run), thread settings, each CPU's
    speed at the start (:func:`cpu_speeds`), and a note where the BLAS kernel
    is narrower than the CPU's vectors."""
    libraries = [
        f"{os.path.basename(os.path.dirname(i['filepath']))}: {i['internal_api']} "
        f"{i['version']} ({i.get('architecture')}, {i['num_threads']} threads)"
        for i in threadpool_info()
    ]
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    torch = sys.modules.get("torch")  # reported only when the benchmark uses it
    environment = ", ".join(
        f"{name}={os.environ.get(name, '(unset)')}"
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")
    )
    return [
        f"date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"machine: {platform.platform()}; CPU: {cpu_model()} ({cpu_vectors()}); "
        f"{os.cpu_count()} cpus; load average {load}",
        f"python {platform.python_version()}; skattn {skattn.__version__}; "
        f"numpy {np.__version__}; scipy {scipy.__version__}; "
        f"scikit-learn {sklearn.__version__}"
        + (f"; torch {torch.__version__}" if torch else ""),
        f"thread libraries: {'; '.join(libraries) or 'none'}",
        environment,
        cpu_speeds(),
    ] + [note for note in [blas_note()] if note]
