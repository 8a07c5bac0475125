"""What machine and libraries a benchmark ran on: the header of its output."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import datetime
import os
import platform
import sys

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


def machine_lines():
    """Date, machine, library versions, thread libraries and thread settings."""
    libraries = [
        f"{os.path.basename(os.path.dirname(i['filepath']))}: {i['internal_api']} "
        f"{i['version']} ({i.get('architecture')}, {i['num_threads']} threads)"
        for i in threadpool_info()
    ]
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    torch = sys.modules.get("torch")  # reported only when the benchmark uses it
    environment = ", ".join(
        f"{name}={os.environ.get(name, '(unset)')}"
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    )
    return [
        f"date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"machine: {platform.platform()}; CPU: {cpu_model()}; "
        f"{os.cpu_count()} cpus; load average {load}",
        f"python {platform.python_version()}; skattn {skattn.__version__}; "
        f"numpy {np.__version__}; scipy {scipy.__version__}; "
        f"scikit-learn {sklearn.__version__}"
        + (f"; torch {torch.__version__}" if torch else ""),
        f"thread libraries: {'; '.join(libraries) or 'none'}",
        environment,
    ]
