"""Shared fixtures: seeds and small data sets."""

import os
import sys

# the tests read no network: the pretrained encoder of the test extra is a
# local directory (tests/test_text.py)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings

# Property tests (test_properties.py): the same examples on every run in CI
# ("ci", the default: derandomized, no example database); "long" searches
# afresh with 24x the examples:
#     pytest tests/test_properties.py --hypothesis-profile=long
settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=2400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


def pytest_generate_tests(metafunc):
    """Run tests asking for ``global_random_seed`` with one seed, or with the seeds
    in ``SKATTN_TESTS_GLOBAL_RANDOM_SEED`` ("0-9" or "3,7"), as scikit-learn does."""
    if "global_random_seed" not in metafunc.fixturenames:
        return
    spec = os.environ.get("SKATTN_TESTS_GLOBAL_RANDOM_SEED", "42")
    if "-" in spec:
        low, high = map(int, spec.split("-"))
        seeds = list(range(low, high + 1))
    else:
        seeds = [int(seed) for seed in spec.split(",")]
    metafunc.parametrize("global_random_seed", seeds)


@pytest.fixture(autouse=True)
def torch_threads_within_the_workers_share():
    """Under pytest-xdist, torch (the pretrained encoder of test_text.py, the
    reference of test_torch_parity.py) computes on the worker's share of the
    cores, as scikit-learn's conftest limits its threads. By default each
    worker's torch takes every core, and its threads spin waiting for each
    other while the other workers hold the cores: the pretrained encoder's
    tests took 2 to 4 times as long with 2 workers on 2 cores."""
    torch = sys.modules.get("torch")
    n_workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if torch is not None and n_workers is not None:
        share = max(1, (os.cpu_count() or 1) // int(n_workers))
        if torch.get_num_threads() > share:
            torch.set_num_threads(share)


def pytest_configure(config):
    """Under pytest-xdist, each worker's BLAS and OpenMP libraries and
    skattn's threads (which follow the BLAS limit) compute on the worker's
    share of the cores, as scikit-learn's conftest limits them. By default
    each worker takes every core, and with 2 workers on 2 cores their threads
    wait for each other: the cross-validated unions of test_compose.py took
    3 to 15 times as long. The limit holds for the libraries loaded when it
    is set: skattn is imported first, with scipy's BLAS and scikit-learn's
    OpenMP. Tests of threads set their own limits (``threadpool_limits``)."""
    n_workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if n_workers is not None:
        from threadpoolctl import threadpool_limits

        import skattn  # noqa: F401  (loads scipy's BLAS and scikit-learn's OpenMP)

        threadpool_limits(max(1, (os.cpu_count() or 1) // int(n_workers)))


def pytest_sessionstart(session):
    """Under pytest-xdist, with numba, each worker first compiles its share of
    the compiled kernels (those of one dtype), which numba caches on disk,
    and reads the others from the cache when its tests run them. Left to the
    tests, every worker compiled every kernel (about 10 s each) on a first
    run, at the same time as the others."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    from skattn._kernels import compiled

    if worker is None or not compiled.enabled():  # no numba, or SKATTN_COMPILED=0
        return
    from skattn._kernels.warm_up import compile_kernels

    index = int(worker.removeprefix("gw"))
    count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    for dtype in (np.float32, np.float64)[index::count]:
        compile_kernels(dtype)


@pytest.fixture
def rng(global_random_seed):
    """A numpy Generator seeded from ``global_random_seed``."""
    return np.random.default_rng(global_random_seed)


@pytest.fixture
def without_matplotlib(monkeypatch):
    """The test runs as if matplotlib were not installed: it is dropped from
    the imported modules, and importing it raises ImportError."""
    import builtins
    import sys

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    for module in list(sys.modules):
        if module == "matplotlib" or module.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
