"""fit within scikit-learn's working_memory.

tracemalloc's peak of ``fit`` is measured beyond the input (allocated before
tracing starts), on one thread (each thread computes a batch of its own: n
threads hold n batches).
"""

import gc
import tracemalloc
import warnings

import numpy as np
from sklearn import config_context
from threadpoolctl import threadpool_limits

from skattn import RandomAttentionFeatures

MiB = 2**20
# working_memory of these tests, in MiB
BUDGET = 1


def _fit_memory(estimator, X, y):
    """Peak traced by ``estimator.fit(X, y)`` and what is still traced after
    it (the fitted estimator), in bytes, within the budget on one thread."""
    gc.collect()
    with (
        config_context(working_memory=BUDGET),
        threadpool_limits(limits=1, user_api="blas"),
        warnings.catch_warnings(),
    ):
        # a long sequence above the budget
        warnings.simplefilter("ignore")
        tracemalloc.start()
        try:
            estimator.fit(X, y)
            held, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return peak, held


def test_threshold_sample_holds_only_the_kept_tokens():
    """The PPV's thresholds are quantiles of at most 32 outputs a sequence of
    16 sequences (0.25 MiB for 2 models of width 64): fit on 16 sequences of
    512 tokens held every model's outputs on all of them (3.7 MiB more than on
    one sequence)."""
    X = np.random.default_rng(0).standard_normal((16, 512, 1)).astype(np.float32)

    def make():
        return RandomAttentionFeatures(
            n_models=2, patch_size=None, statistics=["ppv"], random_state=0
        )

    _fit_memory(make(), X[:2], None)  # caches and compiled kernels
    one_peak, _ = _fit_memory(make(), X[:1], None)
    peak, _ = _fit_memory(make(), X, None)
    assert peak - one_peak <= 1 * MiB, (one_peak / MiB, peak / MiB)
