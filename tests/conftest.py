"""Shared fixtures: seeds and small data sets."""

import os

import numpy as np
import pytest


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


@pytest.fixture
def rng(global_random_seed):
    """A numpy Generator seeded from ``global_random_seed``."""
    return np.random.default_rng(global_random_seed)
