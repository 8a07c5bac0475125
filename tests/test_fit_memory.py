"""fit within scikit-learn's working_memory: every pass over X in blocks.

tracemalloc's peak of ``fit`` is measured beyond the input (allocated before
tracing starts) at two sizes of X, on one thread (each thread computes a batch
of its own: n threads hold n batches). Beyond what the fitted estimator holds,
the peak stays within a few budgets, and it does not grow with the number of
samples.
"""

import gc
import tracemalloc
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from threadpoolctl import threadpool_limits

from skattn import AttentionClassifier, AttentionTransformer, RandomAttentionFeatures
from skattn._model.sequences import token_moments
from skattn._model.units import SparseRows

MiB = 2**20
# working_memory of these tests, in MiB; X of tokens takes 1 MiB, then 4 MiB
# (float32) or 2 MiB, then 8 MiB (float64)
BUDGET = 1
SMALL, LARGE = 64, 256
# what fit may trace beyond X and the fitted estimator: a batch within the
# budget, and what the budget does not count but X's size does not change
# (the random features' sample of outputs for their thresholds, 0.5 MiB here;
# the parameters' copies of training)
ALLOWED = 2 * BUDGET * MiB
# the growth of the peak from the small X to the large one, beyond the growth
# of the fitted estimator: the blocks are cut evenly within the budget, so
# that their sizes differ between the two inputs
SLACK = BUDGET * MiB // 2

ESTIMATORS = {
    "transformer": lambda: AttentionTransformer(
        objective=None, n_heads=2, head_dim=8, ff_dim=16, random_state=0
    ),
    "classifier": lambda: AttentionClassifier(
        n_heads=1,
        head_dim=8,
        ff_dim=8,
        max_iter=2,
        early_stopping=True,
        random_state=0,
    ),
    "random": lambda: RandomAttentionFeatures(n_models=4, random_state=0),
    # its gradient is of all the samples at once
    "lbfgs": lambda: AttentionClassifier(
        n_heads=1,
        head_dim=8,
        ff_dim=8,
        max_iter=2,
        solver="lbfgs",
        vocabulary_size="auto",
        random_state=0,
    ),
}

# wide tokens (word vectors); a narrow series, read in patches, and beside its
# differences by the random features; token ids, 4 times as many samples of
# 32 ids (0.25 MiB then 1 MiB of int64, whose embeddings' gradient takes 40
# bytes a token)
SHAPES = {"wide": (128, 32), "series": (1024, 4), "ids": (32,)}


def _make(n_samples, shape, dtype):
    rng = np.random.default_rng(0)
    if shape == "ids":
        n_samples *= 4
        X = rng.integers(0, 50, size=(n_samples, *SHAPES[shape]), dtype=dtype)
    else:
        X = rng.standard_normal((n_samples, *SHAPES[shape])).astype(dtype)
    return X, np.arange(n_samples) % 2


def _fit_memory(estimator, X, y, trace=True):
    """Peak traced by ``estimator.fit(X, y)`` and what is still traced after
    it (the fitted estimator), in bytes, within the budget on one thread;
    ``trace=False`` fits the same way untraced (a fit that warms the caches
    and compiled kernels) and returns nothing."""
    gc.collect()
    with (
        config_context(working_memory=BUDGET),
        threadpool_limits(limits=1, user_api="blas"),
        warnings.catch_warnings(),
    ):
        # the classifier's two epochs; a long sequence above the budget
        warnings.simplefilter("ignore")
        if not trace:
            estimator.fit(X, y)
            return None
        tracemalloc.start()
        try:
            estimator.fit(X, y)
            held, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return peak, held


@pytest.mark.parametrize(
    "name, shape, dtype",
    [
        ("transformer", "wide", np.float32),
        # Adam trains in float32: float64 X is cast a batch at a time
        ("classifier", "series", np.float64),
        ("random", "series", np.float32),
        # the embeddings' gradient gathers the rows of every token
        ("lbfgs", "ids", np.int64),
    ],
)
def test_fit_peak_memory_stays_within_working_memory(name, shape, dtype):
    make = ESTIMATORS[name]
    _fit_memory(make(), *_make(8, shape, dtype), trace=False)  # caches, kernels
    small_peak, small_held = _fit_memory(make(), *_make(SMALL, shape, dtype))
    large_peak, large_held = _fit_memory(make(), *_make(LARGE, shape, dtype))
    assert large_peak - large_held <= ALLOWED, (large_peak / MiB, large_held / MiB)
    assert large_peak - small_peak <= large_held - small_held + SLACK, (
        small_peak / MiB,
        large_peak / MiB,
    )


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

    _fit_memory(make(), X[:2], None, trace=False)  # caches and compiled kernels
    one_peak, _ = _fit_memory(make(), X[:1], None)
    peak, _ = _fit_memory(make(), X, None)
    assert peak - one_peak <= 1 * MiB, (one_peak / MiB, peak / MiB)


@pytest.mark.parametrize("differences", [False, True])
@pytest.mark.parametrize("kind", ["3d", "list", "table"])
def test_token_moments_in_blocks_of_a_few_samples_agree_to_rounding(kind, differences):
    """Blocks cut smaller than 256 samples add the same sums in another order:
    float64 moments within a few ulps of the tokens' magnitude, float32 ones
    identical."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 20, 3)) * [1.0, 1e3, 1e-3] + [0.0, 5.0, -2.0]
    weight = rng.uniform(0, 2, size=len(X))
    if kind == "list":
        X = [x[: rng.integers(1, 21)] for x in X]
    kwargs = dict(differences=differences, per_position=kind == "table")
    for dtype in (np.float64, np.float32):
        sequences = [x.astype(dtype) for x in X] if kind == "list" else X.astype(dtype)
        mean, scale = token_moments(sequences, weight, budget_bytes=2**30, **kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a sample above the budget
            blocked = token_moments(sequences, weight, budget_bytes=2000, **kwargs)
        if dtype == np.float32:
            assert_array_equal(blocked[0], mean)
            assert_array_equal(blocked[1], scale)
        else:  # the mean's rounding is relative to the tokens' magnitude
            magnitude = np.maximum(np.abs(mean), scale)
            assert np.all(np.abs(blocked[0] - mean) <= 1e-14 * magnitude)
            assert_allclose(blocked[1], scale, rtol=1e-14)


def test_sparse_gradient_of_many_batches_holds_the_table_rows_at_most():
    """The embeddings' gradient over many batches (all of X for L-BFGS) kept
    an entry per token; summed once per row when the entries outnumber the
    table's rows, it gives the same sums to the bit (each row's values added
    in the order they came)."""
    rng = np.random.default_rng(0)
    shape = (7, 3)
    batches = [
        (rng.integers(0, 7, size=5), rng.standard_normal((5, 3)).astype(np.float32))
        for _ in range(40)
    ]
    gradient = SparseRows.empty(shape, np.float32)
    for rows, values in batches:
        gradient += SparseRows(rows, values, shape)
        assert len(gradient.rows) == len(gradient.values) <= shape[0] + 5
    expected = np.zeros(shape, np.float32)
    for rows, values in batches:
        for row, value in zip(rows, values, strict=True):
            expected[row] += value
    assert_array_equal(gradient.toarray(), expected)
    rows, values = gradient.coalesced()
    assert_array_equal(rows, np.unique(np.concatenate([r for r, _ in batches])))
    assert_array_equal(values, expected[rows])
