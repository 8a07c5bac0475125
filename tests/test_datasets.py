"""Tests of skattn.datasets: shapes, label rules, chance level and errors.

The label rules are checked from ``X`` alone: each token is decoded to its
nearest symbol of the vocabulary, and the label recomputed from the decoded
symbols with plain numpy.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler
from threadpoolctl import threadpool_limits

from skattn import AttentionTransformer
from skattn.datasets import make_sequence_classification

TASKS = ["order", "cooccurrence"]


@pytest.fixture(autouse=True)
def single_blas_thread():
    """The arrays are small: BLAS threads only add contention (seconds per test on
    a busy machine)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def decode(X, vocabulary):
    """Nearest symbol of each token: an array like X without its last axis."""
    if isinstance(X, list):
        return [decode(seq, vocabulary) for seq in X]
    sq_dist = ((X[..., None, :] - vocabulary) ** 2).sum(axis=-1)
    return sq_dist.argmin(axis=-1)


def label_from_symbols(symbols, task, n_classes):
    """Recompute the label of one sequence from its symbols."""
    if task == "order":
        return symbols[symbols < n_classes][0]  # the marker that comes first
    return int((0 in symbols) != (1 in symbols))  # A XOR B


def mean_pool(X):
    return np.array([seq.mean(axis=0) for seq in X])


@pytest.mark.parametrize("task", TASKS)
def test_shapes_and_dtypes(task):
    X, y, symbols, vocabulary = make_sequence_classification(
        n_samples=30, n_tokens=7, n_features=5, task=task, return_symbols=True
    )
    assert isinstance(X, np.ndarray)
    assert X.shape == (30, 7, 5)
    assert X.dtype == np.float64
    assert y.shape == (30,)
    assert y.dtype.kind == "i"
    assert set(np.unique(y)) <= {0, 1}
    assert symbols.shape == (30, 7)
    assert symbols.dtype.kind == "i"
    assert vocabulary.shape == (8, 5)
    assert vocabulary.dtype == np.float64


@pytest.mark.parametrize("task", TASKS)
def test_ragged_lengths(task):
    X, y, symbols, _ = make_sequence_classification(
        n_samples=200,
        n_tokens=8,
        n_features=4,
        task=task,
        min_tokens=3,
        return_symbols=True,
        random_state=0,
    )
    assert isinstance(X, list)
    assert isinstance(symbols, list)
    assert len(X) == len(symbols) == len(y) == 200
    lengths = np.array([len(seq) for seq in X])
    assert lengths.min() == 3
    assert lengths.max() == 8
    for seq, seq_symbols in zip(X, symbols, strict=True):
        assert seq.dtype == np.float64
        assert seq.shape == (len(seq_symbols), 4)
        assert seq_symbols.ndim == 1


def test_min_tokens_equal_to_n_tokens():
    X, _ = make_sequence_classification(
        n_samples=5, n_tokens=4, min_tokens=4, random_state=0
    )
    assert isinstance(X, list)
    assert [seq.shape for seq in X] == [(4, 8)] * 5


@pytest.mark.parametrize(
    "task, n_classes", [("order", 2), ("order", 3), ("cooccurrence", 2)]
)
@pytest.mark.parametrize("min_tokens", [None, 3])
def test_label_rule(task, n_classes, min_tokens):
    X, y, symbols, vocabulary = make_sequence_classification(
        n_samples=300,
        n_tokens=10,
        n_classes=n_classes,
        task=task,
        min_tokens=min_tokens,
        return_symbols=True,
        random_state=0,
    )
    decoded = decode(X, vocabulary)
    for seq_decoded, seq_symbols in zip(decoded, symbols, strict=True):
        assert_array_equal(seq_decoded, seq_symbols)

    n_markers = n_classes if task == "order" else 2
    for seq_symbols, label in zip(decoded, y, strict=True):
        counts = np.bincount(seq_symbols, minlength=8)[:n_markers]
        if task == "order":
            assert_array_equal(counts, 1)  # each marker exactly once
        else:
            assert counts.max() <= 1  # each marker at most once
        assert label_from_symbols(seq_symbols, task, n_classes) == label


def test_cooccurrence_covers_all_four_cases():
    _, y, symbols, _ = make_sequence_classification(
        n_samples=400, task="cooccurrence", return_symbols=True, random_state=0
    )
    present = np.column_stack([(symbols == m).any(axis=1) for m in (0, 1)])
    cases = np.unique(present, axis=0, return_counts=True)[1]
    assert len(cases) == 4
    assert cases.min() > 60  # about 100 each
    assert_array_equal(y, present[:, 0] ^ present[:, 1])


@pytest.mark.parametrize(
    "task, n_classes", [("order", 2), ("order", 4), ("cooccurrence", 2)]
)
def test_classes_balanced(task, n_classes, global_random_seed):
    _, y = make_sequence_classification(
        n_samples=2000,
        n_tokens=6,
        n_classes=n_classes,
        task=task,
        random_state=global_random_seed,
    )
    fractions = np.bincount(y, minlength=n_classes) / len(y)
    assert len(fractions) == n_classes
    assert_allclose(fractions, 1 / n_classes, atol=0.05)


def test_noise():
    kwargs = dict(n_samples=50, n_tokens=20, return_symbols=True, random_state=0)
    X, _, symbols, vocabulary = make_sequence_classification(noise=0.0, **kwargs)
    assert_array_equal(X, vocabulary[symbols])
    X, _, symbols, vocabulary = make_sequence_classification(noise=0.3, **kwargs)
    assert (X - vocabulary[symbols]).std() == pytest.approx(0.3, rel=0.05)


@pytest.mark.parametrize("n_symbols, n_features", [(3, 3), (8, 8), (5, 16)])
def test_vocabulary_orthonormal(n_symbols, n_features):
    """Up to n_features symbols are orthonormal."""
    *_, vocabulary = make_sequence_classification(
        n_samples=2,
        n_features=n_features,
        n_symbols=n_symbols,
        return_symbols=True,
        random_state=0,
    )
    assert_allclose(vocabulary @ vocabulary.T, np.eye(n_symbols), atol=1e-12)


@pytest.mark.parametrize(
    "n_symbols, n_features, min_dist",
    # Best known: regular hexagon 1, icosahedron 1.05, cross-polytope sqrt(2).
    [(6, 2, 0.95), (12, 3, 1.0), (16, 8, 1.3), (32, 8, 1.0)],
)
def test_vocabulary_spread(n_symbols, n_features, min_dist):
    """More symbols than dimensions: unit vectors pushed apart."""
    *_, vocabulary = make_sequence_classification(
        n_samples=2,
        n_features=n_features,
        n_symbols=n_symbols,
        return_symbols=True,
        random_state=0,
    )
    assert_allclose(np.linalg.norm(vocabulary, axis=1), 1)
    dist = np.linalg.norm(vocabulary[:, None] - vocabulary, axis=-1)
    assert dist[~np.eye(n_symbols, dtype=bool)].min() > min_dist


def test_vocabulary_scalar_tokens():
    X, y, symbols, vocabulary = make_sequence_classification(
        n_samples=100,
        n_features=1,
        n_symbols=5,
        noise=0.02,  # the symbols are 0.5 apart
        return_symbols=True,
        random_state=0,
    )
    assert X.shape == (100, 16, 1)
    assert_allclose(np.sort(vocabulary.ravel()), [-1, -0.5, 0, 0.5, 1])
    assert_array_equal(decode(X, vocabulary), symbols)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("min_tokens", [None, 4])
def test_determinism(task, min_tokens):
    kwargs = dict(n_samples=20, task=task, min_tokens=min_tokens, return_symbols=True)
    first = make_sequence_classification(random_state=0, **kwargs)
    again = make_sequence_classification(random_state=0, **kwargs)
    from_instance = make_sequence_classification(
        random_state=np.random.RandomState(0), **kwargs
    )
    other = make_sequence_classification(random_state=1, **kwargs)
    for a, b, c in zip(first, again, from_instance, strict=True):
        for a_i, b_i, c_i in zip(a, b, c, strict=True):
            assert_array_equal(a_i, b_i)
            assert_array_equal(a_i, c_i)
    assert not np.array_equal(first[-1], other[-1])  # vocabulary
    assert not np.array_equal(first[1], other[1])  # labels


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("min_tokens", [None, 4])
def test_mean_pooling_at_chance(task, min_tokens, global_random_seed):
    """Logistic regression on the mean-pooled tokens stays near chance."""
    X, y = make_sequence_classification(
        n_samples=1000,
        task=task,
        min_tokens=min_tokens,
        random_state=global_random_seed,
    )
    accuracy = cross_val_score(LogisticRegression(), mean_pool(X), y).mean()
    assert accuracy < 0.6


def test_mean_pooling_at_chance_multiclass(global_random_seed):
    X, y = make_sequence_classification(
        n_samples=1500, n_classes=3, random_state=global_random_seed
    )
    accuracy = cross_val_score(LogisticRegression(), mean_pool(X), y).mean()
    assert accuracy < 1 / 3 + 0.08


def test_order_learnable_from_positions(global_random_seed):
    """A linear model of the flattened tokens sees the order: it can weight the
    markers by decreasing weights along the sequence."""
    X, y = make_sequence_classification(
        n_samples=1000, n_tokens=6, random_state=global_random_seed
    )
    accuracy = cross_val_score(LogisticRegression(), X.reshape(len(X), -1), y)
    assert accuracy.mean() > 0.9


def test_cooccurrence_learnable_from_interactions(global_random_seed):
    """Products of pooled features (interactions between tokens) give A AND B,
    which a linear model then combines into A XOR B."""
    X, y = make_sequence_classification(
        n_samples=1000, task="cooccurrence", random_state=global_random_seed
    )
    model = make_pipeline(StandardScaler(), PolynomialFeatures(2), LogisticRegression())
    assert cross_val_score(model, mean_pool(X), y).mean() > 0.7


@pytest.mark.parametrize("min_tokens", [None, 3])
def test_input_to_attention_transformer(min_tokens):
    X, y = make_sequence_classification(
        n_samples=20, n_tokens=6, min_tokens=min_tokens, random_state=0
    )
    model = make_pipeline(AttentionTransformer(random_state=0), LogisticRegression())
    model.fit(X, y)
    assert model[0].transform(X).shape == (20, model[0].d_model_)


@pytest.mark.parametrize(
    "params, error, message",
    [
        ({"n_samples": 0}, ValueError, "n_samples == 0, must be >= 1."),
        ({"n_samples": 2.5}, TypeError, "n_samples must be an instance of int"),
        ({"n_tokens": 0}, ValueError, "n_tokens == 0, must be >= 1."),
        ({"n_features": 0}, ValueError, "n_features == 0, must be >= 1."),
        ({"n_classes": 1}, ValueError, "n_classes == 1, must be >= 2."),
        ({"min_tokens": 0}, ValueError, "min_tokens == 0, must be >= 1."),
        ({"noise": -0.1}, ValueError, "noise == -0.1, must be >= 0."),
        ({"noise": float("inf")}, ValueError, "noise must be finite, got noise=inf."),
        ({"noise": "0.1"}, TypeError, "noise must be an instance of"),
        ({"return_symbols": 1}, TypeError, "return_symbols must be an instance of"),
        (
            {"task": "xor"},
            ValueError,
            "task must be one of ['cooccurrence', 'order'], got task='xor'.",
        ),
        (
            {"task": "cooccurrence", "n_classes": 3},
            ValueError,
            "task='cooccurrence' is binary and needs n_classes=2, got n_classes=3.",
        ),
        (
            {"n_classes": 8, "n_symbols": 8},
            ValueError,
            "n_symbols=8 must be greater than the 8 marker symbols of task='order' "
            "(n_classes=8), to leave at least one distractor symbol.",
        ),
        (
            {"task": "cooccurrence", "n_symbols": 2},
            ValueError,
            "n_symbols=2 must be greater than the 2 marker symbols of "
            "task='cooccurrence'",
        ),
        (
            {"min_tokens": 17},
            ValueError,
            "min_tokens=17 must be at most n_tokens=16.",
        ),
        (
            {"n_tokens": 3, "n_classes": 4},
            ValueError,
            "n_tokens=3 leaves no room for the 4 markers of task='order' "
            "(n_classes=4): every sequence needs at least 4 tokens.",
        ),
        (
            {"min_tokens": 1, "task": "cooccurrence"},
            ValueError,
            "min_tokens=1 leaves no room for the 2 markers of task='cooccurrence'",
        ),
    ],
)
def test_invalid_params(params, error, message):
    with pytest.raises(error, match=re.escape(message)):
        make_sequence_classification(**params)
