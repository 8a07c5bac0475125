"""Tests of AttentionTransformer: input formats, invariances, numbers and errors.

Every numerical expectation is computed here with plain numpy (softmax, the
sinusoidal table, layer norm) from the fitted weights or from weights given
through ``init``, independently of the kernels in ``skattn``.
"""

import math
import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from helpers import LENGTHS, make_3d, make_input, make_ragged, make_table, object_array
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError
from threadpoolctl import threadpool_limits

from skattn import AttentionClassifier, AttentionTransformer, RandomAttentionFeatures
from skattn._model.evaluate import model_row_bytes
from skattn._model.options import REGISTRIES
from skattn._model.pooling import needs_fixed_length
from skattn._model.sequences import padded_batches
from skattn._model.units import LAYER_NORM_EPS

FIVE = ["mean", "max", "min", "first", "last"]  # the tokens' statistics

POOLINGS = REGISTRIES["pooling"].names()
RAGGED_POOLINGS = [pooling for pooling in POOLINGS if not needs_fixed_length(pooling)]
POSITIONAL_ENCODINGS = [*REGISTRIES["positional_encoding"].names(), None]
PER_TOKEN_METHODS = ["transform_sequences", "attention_weights"]
METHODS = ["transform", *PER_TOKEN_METHODS]
TOLERANCE = {
    np.float64: dict(rtol=1e-12, atol=1e-12),
    np.float32: dict(rtol=2e-5, atol=2e-5),
}

# The textbook example: three one-hot tokens, one head of width 3.
TEXTBOOK_A = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
TEXTBOOK_V = np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 0.0], [5.0, 6.0, 0.0]])
TEXTBOOK_INIT = {
    "query": math.sqrt(3 / 2) * TEXTBOOK_A,
    "key": TEXTBOOK_A,
    "value": TEXTBOOK_V,
    "output": np.eye(3),
}
# Attention alone: raw tokens, no positions, residual, norm or feed-forward.
BARE = dict(
    positional_encoding=None,
    residual=False,
    layer_norm=None,
    ff_dim=0,
    scale_tokens=False,
    patch_size=None,
)


# Data and references
# -------------------


def cast(X, dtype):
    """X (array or list of arrays) in another dtype."""
    if isinstance(X, list):
        return [x.astype(dtype) for x in X]
    return X.astype(dtype)


def softmax(scores):
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def sinusoidal_table(n_tokens, width):
    """P[t, 2i] = sin(t / 10000^(2i/E)), P[t, 2i+1] = cos(t / 10000^(2i/E))."""
    table = np.empty((n_tokens, width))
    for t in range(n_tokens):
        for j in range(width):
            angle = t / 10000.0 ** (2 * (j // 2) / width)
            table[t, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return table


def reference_attention(h, est):
    """Multi-head attention of one sequence h (T, E) with est's fitted weights.

    Full (T, T) score matrices, one head at a time, softmax in place.
    """
    q, k, v = (
        h @ est.layers_[0]["query"],
        h @ est.layers_[0]["key"],
        h @ est.layers_[0]["value"],
    )
    width = est.head_dim_
    heads = []
    for head in range(est.n_heads):
        cols = slice(head * width, (head + 1) * width)
        scores = q[:, cols] @ k[:, cols].T  # (T, T)
        scores /= math.sqrt(width)
        scores -= scores.max(axis=1, keepdims=True)
        np.exp(scores, out=scores)
        heads.append(scores @ v[:, cols] / scores.sum(axis=1, keepdims=True))
        del scores
    return np.hstack(heads) @ est.layers_[0]["output"]


def assert_same_outputs(actual, expected, **tolerance):
    """Compare arrays, or lists of arrays element-wise."""
    if isinstance(expected, list):
        assert isinstance(actual, list)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert a.shape == e.shape
            assert_allclose(a, e, **tolerance)
    else:
        assert actual.shape == expected.shape
        assert_allclose(actual, expected, **tolerance)


# 1. Input formats
# ----------------


@pytest.mark.parametrize("method", ["transform", "transform_sequences"])
def test_features_per_token_reads_consecutive_columns_as_one_token(method):
    X = make_table(n=6, n_features=12)
    # scale_tokens=False: a table is standardised per column, sequences per feature
    est = AttentionTransformer(
        n_heads=2, features_per_token=3, scale_tokens=False, random_state=0
    )
    from_table = getattr(clone(est).fit(X), method)(X)
    X_seq = X.reshape(6, 4, 3)
    from_sequences = getattr(clone(est).fit(X_seq), method)(X_seq)
    assert_allclose(from_table, from_sequences, rtol=1e-14, atol=1e-14)


def test_table_default_reads_each_column_as_a_scalar_token():
    X = make_table(n=6, n_features=5)
    # scale_tokens=False: a table is standardised per column, sequences per feature
    est = AttentionTransformer(n_heads=2, scale_tokens=False, random_state=0).fit(X)
    assert est.transform_sequences(X).shape == (6, 5, est.d_model_)
    X_seq = X[:, :, None]
    expected = clone(est).fit(X_seq).transform(X_seq)
    assert_allclose(est.transform(X), expected, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_table_trained_on_y_puts_its_row_after_the_pooled_vector(task):
    """token_statistics="auto" of a table trained on targets or classes is
    ["flatten"]: transform puts the standardised row after the pooled
    vector; for seeded weights, none."""
    X = make_table(n=6, n_features=5)
    y = X[:, 0] + X[:, 1]
    if task == "classification":
        y = (y > 0).astype(int)
    kwargs = dict(n_heads=2, scale_tokens=False, max_iter=2, random_state=0)
    est = AttentionTransformer(**kwargs).fit(X, y)
    assert est.objective_ == task
    assert est.token_statistics_ == ("flatten",)
    X_new = est.transform(X)
    assert X_new.shape == (6, est.d_model_ + 5)
    assert_array_equal(X_new[:, est.d_model_ :], X)
    names = est.get_feature_names_out()[est.d_model_ :]
    expected = [f"attentiontransformer_tokens_flatten_{i}_0" for i in range(5)]
    assert_array_equal(names, expected)
    assert AttentionTransformer(**kwargs).fit(X).token_statistics_ == ()
    seeded = AttentionTransformer(objective=None, **kwargs).fit(X, y)
    assert seeded.token_statistics_ == ()


def test_dataframe_input_sets_feature_names_and_matches_array():
    X = make_table(n=6, n_features=4)
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    est = AttentionTransformer(n_heads=2, random_state=0).fit(df)
    assert_array_equal(est.feature_names_in_, ["a", "b", "c", "d"])
    assert est.n_features_in_ == 4
    from_array = clone(est).fit(X).transform(X)
    assert_allclose(est.transform(df), from_array, rtol=1e-14, atol=1e-14)


def test_3d_array_output_shapes():
    X = make_3d(n=5, n_tokens=6, width=4)
    est = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    assert est.d_model_ == 64  # whatever the token width
    assert est.transform(X).shape == (5, 64)
    assert est.transform_sequences(X).shape == (5, 6, 64)
    assert est.attention_weights(X).shape == (5, 2, 6, 6)


@pytest.mark.parametrize("container", [list, tuple, object_array])
@pytest.mark.parametrize("method", METHODS)
def test_ragged_containers_give_same_results(container, method):
    X = make_ragged()
    est = AttentionTransformer(n_heads=2, random_state=0).fit(container(X))
    result = getattr(est, method)(container(X))
    expected = getattr(clone(est).fit(X), method)(X)
    if method == "transform":
        assert result.shape == (len(LENGTHS), est.d_model_)
    else:
        assert isinstance(result, list)
        n_rows = [r.shape[-2] for r in result]
        assert n_rows == list(LENGTHS)
    assert_same_outputs(result, expected, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("method", METHODS)
def test_3d_batch_equals_list_of_its_rows(method):
    X = make_3d()
    est = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    from_array = getattr(est, method)(X)
    from_list = getattr(est, method)(list(X))
    if method == "transform":
        assert_allclose(from_list, from_array, rtol=1e-12, atol=1e-12)
    else:
        assert isinstance(from_list, list)
        assert_allclose(np.stack(from_list), from_array, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "X, n_features_in",
    [
        (make_table(n_features=6), 6),
        (make_3d(width=4), 4),
        (make_ragged(width=3), 3),
        (pd.DataFrame(make_table(n_features=7)), 7),
    ],
    ids=["table", "3d", "ragged", "dataframe"],
)
def test_n_features_in(X, n_features_in):
    est = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    assert est.n_features_in_ == n_features_in


def test_n_features_in_of_table_with_features_per_token_counts_columns():
    est = AttentionTransformer(features_per_token=3, random_state=0).fit(
        make_table(n_features=12)
    )
    assert est.n_features_in_ == 12
    assert est.max_tokens_ == 4


# 2. Padding invariance
# ---------------------

padding_cases = pytest.mark.parametrize(
    "pooling, causal, positional_encoding, dtype",
    [
        (pooling, causal, positional_encoding, dtype)
        for pooling in RAGGED_POOLINGS
        for causal in (False, True)
        for positional_encoding in POSITIONAL_ENCODINGS
        for dtype in (np.float64, np.float32)
    ],
)


def _fit_ragged(pooling, causal, positional_encoding, dtype):
    X = make_ragged(dtype=dtype)
    est = AttentionTransformer(
        n_heads=2,
        pooling=pooling,
        causal=causal,
        positional_encoding=positional_encoding,
        random_state=0,
    )
    return X, est.fit(X)


@padding_cases
def test_padding_invariance_transform(pooling, causal, positional_encoding, dtype):
    X, est = _fit_ragged(pooling, causal, positional_encoding, dtype)
    together = est.transform(X)
    alone = np.vstack([est.transform([seq]) for seq in X])
    assert_allclose(together, alone, **TOLERANCE[dtype])


@padding_cases
def test_padding_invariance_transform_sequences(
    pooling, causal, positional_encoding, dtype
):
    X, est = _fit_ragged(pooling, causal, positional_encoding, dtype)
    together = est.transform_sequences(X)
    alone = [est.transform_sequences([seq])[0] for seq in X]
    assert_same_outputs(together, alone, **TOLERANCE[dtype])


@padding_cases
def test_padding_invariance_attention_weights(
    pooling, causal, positional_encoding, dtype
):
    X, est = _fit_ragged(pooling, causal, positional_encoding, dtype)
    together = est.attention_weights(X)
    alone = [est.attention_weights([seq])[0] for seq in X]
    assert_same_outputs(together, alone, **TOLERANCE[dtype])


# 3. Batch-size invariance and working memory
# -------------------------------------------


@pytest.mark.filterwarnings("ignore:Could not adhere to working_memory")
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_small_working_memory_gives_same_result_in_several_batches(kind, method):
    X = make_input(kind)
    est = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    expected = getattr(est, method)(X)
    with config_context(working_memory=0.001):  # about one row per batch
        batched = getattr(est, method)(X)
    assert_same_outputs(batched, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["3d", "ragged"])
@pytest.mark.parametrize("training", [False, True])
def test_batches_stay_within_working_memory(kind, training):
    """The batch plan of a fitted model: every sample once, each batch padded
    to its own longest sequence and within the budget, consecutive rows of an
    array as views."""
    rng = np.random.default_rng(0)
    n, budget = 2000, 0.01 * 2**20
    if kind == "3d":
        X = rng.standard_normal((n, 4, 2))
        lengths = np.full(n, 4)
    else:
        lengths = rng.integers(1, 6, size=n)
        X = [rng.standard_normal((length, 2)) for length in lengths]
    est = AttentionTransformer(
        n_heads=1, head_dim=2, ff_dim=0, scale_tokens=False, random_state=0
    ).fit(X)
    row_bytes = model_row_bytes(est._fitted.model, X, training=training)
    plan = list(padded_batches(X, lengths, np.arange(n), row_bytes, budget))
    assert len(plan) > 1
    assert_array_equal(
        np.sort(np.concatenate([rows for rows, _ in plan])), np.arange(n)
    )
    for rows, x in plan:
        assert x.shape == (len(rows), lengths[rows].max(), 2)
        assert len(rows) == 1 or len(rows) * row_bytes(x.shape[1]) <= budget
        if kind == "3d":
            assert np.shares_memory(x, X)
    assert max(len(rows) for rows, _ in plan) > 1  # not one row at a time


def test_row_bytes_grow_with_depth_width_and_training():
    X = make_3d(width=4)
    kwargs = dict(n_heads=2, head_dim=8, scale_tokens=False, random_state=0)
    shallow = AttentionTransformer(ff_dim=0, **kwargs).fit(X)._fitted.model
    deep = AttentionTransformer(n_layers=3, ff_dim=32, **kwargs).fit(X)._fitted.model
    options = dict(n_features=4, itemsize=8)
    inference = shallow.row_bytes(10, training=False, **options)
    assert inference == 10 * (4 + 10 * 16 + 2) * 8  # tokens, 10 activations, scores
    assert shallow.row_bytes(10, training=True, **options) > inference
    assert deep.row_bytes(10, training=False, **options) > inference
    assert deep.row_bytes(10, training=True, **options) > 3 * inference


def test_blas_thread_count_does_not_change_results():
    X = make_3d(n=6, n_tokens=40, width=8)
    est = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    expected = est.transform_sequences(X)
    with threadpool_limits(limits=1, user_api="blas"):
        single = est.transform_sequences(X)
    assert_allclose(single, expected, rtol=1e-12, atol=1e-12)


# 4. dtypes
# ---------


def _outputs(est, method, X):
    if method == "fit_transform":
        out = est.fit_transform(X)
    else:
        out = getattr(est.fit(X), method)(X)
    return out if isinstance(out, list) else [out]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["table", "3d", "ragged"])
@pytest.mark.parametrize("method", ["fit_transform", *METHODS])
def test_float_dtype_is_preserved(method, kind, dtype):
    X = make_input(kind, dtype)
    outputs = _outputs(AttentionTransformer(n_heads=2, random_state=0), method, X)
    assert all(out.dtype == dtype for out in outputs)


@pytest.mark.parametrize("kind", ["table", "3d", "ragged"])
@pytest.mark.parametrize("method", ["fit_transform", *METHODS])
def test_integer_input_becomes_float64(method, kind):
    X = cast(make_input(kind), np.int64)
    outputs = _outputs(AttentionTransformer(n_heads=2, random_state=0), method, X)
    assert all(out.dtype == np.float64 for out in outputs)


@pytest.mark.parametrize("kind", ["table", "3d", "ragged"])
def test_float32_results_close_to_float64(kind):
    X64 = make_input(kind)
    X32 = cast(X64, np.float32)
    est = AttentionTransformer(n_heads=2, random_state=0)
    out64 = clone(est).fit(X64).transform(X64)
    out32 = clone(est).fit(X32).transform(X32)
    assert_allclose(out32, out64, rtol=1e-4, atol=1e-4)


# 5. Textbook numbers
# -------------------


def test_single_head_equals_softmax_formula():
    rng = np.random.default_rng(0)
    width = 5
    X = rng.standard_normal((3, 7, width))
    w_query, w_key, w_value = rng.standard_normal((3, width, width))
    est = AttentionTransformer(
        n_heads=1,
        head_dim=width,
        init={"query": w_query, "key": w_key, "value": w_value, "output": np.eye(5)},
        **BARE,
    ).fit(X)
    assert est.input_weights_ is None
    q, k, v = X @ w_query, X @ w_key, X @ w_value
    scores = np.einsum("nid,njd->nij", q, k) / math.sqrt(width)
    expected = softmax(scores) @ v
    assert_allclose(est.transform_sequences(X), expected, rtol=1e-12, atol=1e-12)


def _textbook_estimator():
    X = np.eye(3)[None]  # one sequence of three one-hot tokens
    est = AttentionTransformer(n_heads=1, head_dim=3, init=TEXTBOOK_INIT, **BARE)
    return X, est.fit(X)


def _textbook_weights():
    # (sqrt(3/2) A)(A)^T / sqrt(3) = A A^T / sqrt(2)
    scores = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 2.0]])
    unnormalised = np.exp(scores / np.sqrt(2.0))
    return unnormalised / unnormalised.sum(axis=1, keepdims=True)


def test_textbook_attention_weights():
    X, est = _textbook_estimator()
    weights = est.attention_weights(X)
    assert weights.shape == (1, 1, 3, 3)
    assert_allclose(weights[0, 0], _textbook_weights(), rtol=1e-12)
    published = [[0.401, 0.198, 0.401], [0.198, 0.401, 0.401], [0.248, 0.248, 0.503]]
    assert_allclose(weights[0, 0], published, atol=5e-4)  # 3 decimals


def test_textbook_outputs():
    X, est = _textbook_estimator()
    tokens = est.transform_sequences(X)
    assert tokens.shape == (1, 3, 3)
    assert_allclose(tokens[0], _textbook_weights() @ TEXTBOOK_V, rtol=1e-12, atol=1e-15)
    published = [[3.0, 4.0, 0.0], [3.407, 4.407, 0.0], [3.51, 4.51, 0.0]]
    assert_allclose(tokens[0], published, atol=5e-4)  # 3 decimals


def layer_norm(z, weight, bias):
    z = (z - z.mean(axis=1, keepdims=True)) / np.sqrt(
        z.var(axis=1, keepdims=True) + LAYER_NORM_EPS
    )
    return z * weight + bias


def test_default_block_matches_numpy_reference():
    """Token standardisation, input projection to width 64, sinusoidal positions,
    attention, residual, layer norm, ReLU feed-forward of width 128, residual,
    layer norm, mean."""
    X = make_3d(n=3, n_tokens=6, width=5)
    est = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    assert est.input_weights_.shape == (5, 64)
    layer = est.layers_[0]
    assert layer["linear1"].shape == (64, 128)
    mean, std = X.reshape(-1, 5).mean(axis=0), X.reshape(-1, 5).std(axis=0)
    tokens = est.transform_sequences(X)
    for x, out in zip(X, tokens, strict=True):
        h = (x - mean) / std @ est.input_weights_ + sinusoidal_table(6, 64)
        z = reference_attention(h, est) + h
        z = layer_norm(z, layer["norm1_weight"], layer["norm1_bias"])
        hidden = np.maximum(z @ layer["linear1"] + layer["linear1_bias"], 0)
        z = z + hidden @ layer["linear2"] + layer["linear2_bias"]
        z = layer_norm(z, layer["norm2_weight"], layer["norm2_bias"])
        assert_allclose(out, z, rtol=1e-10, atol=1e-12)
    assert_allclose(est.transform(X), tokens.mean(axis=1), rtol=1e-12, atol=1e-14)


def test_attention_block_matches_numpy_reference():
    """Without feed-forward sublayer, on raw tokens: input projection,
    sinusoidal positions, attention, residual, layer norm, mean."""
    X = make_3d(n=3, n_tokens=6, width=5)
    est = AttentionTransformer(
        n_heads=2, head_dim=8, ff_dim=0, scale_tokens=False, random_state=0
    ).fit(X)
    assert est.input_weights_.shape == (5, 16)
    tokens = est.transform_sequences(X)
    for x, out in zip(X, tokens, strict=True):
        h = x @ est.input_weights_ + sinusoidal_table(6, 16)
        z = reference_attention(h, est) + h
        z = (z - z.mean(axis=1, keepdims=True)) / np.sqrt(
            z.var(axis=1, keepdims=True) + LAYER_NORM_EPS
        )
        assert_allclose(out, z, rtol=1e-10, atol=1e-12)
    assert_allclose(est.transform(X), tokens.mean(axis=1), rtol=1e-12, atol=1e-14)


# 6. Invariants
# -------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_attention_weights_rows_sum_to_one(kind, causal):
    X = make_input(kind)
    est = AttentionTransformer(n_heads=3, causal=causal, random_state=0).fit(X)
    for weights in est.attention_weights(X):
        assert weights.shape[0] == 3
        assert np.all(weights >= 0)
        assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_causal_attention_weights_vanish_above_diagonal(kind):
    X = make_input(kind)
    est = AttentionTransformer(n_heads=2, causal=True, random_state=0).fit(X)
    for weights in est.attention_weights(X):
        n_tokens = weights.shape[-1]
        above = np.triu(np.ones((n_tokens, n_tokens), dtype=bool), k=1)
        assert np.all(weights[:, above] == 0)
        assert np.all(weights[:, ~above] > 0)


@pytest.mark.parametrize("residual, layer_norm", [(True, "post"), (False, None)])
def test_tokens_are_permutation_equivariant_without_positions(residual, layer_norm):
    X = make_3d(n=4, n_tokens=7)
    perm = np.random.default_rng(1).permutation(7)
    est = AttentionTransformer(
        n_heads=2,
        positional_encoding=None,
        residual=residual,
        layer_norm=layer_norm,
        random_state=0,
    ).fit(X)
    assert_allclose(
        est.transform_sequences(X[:, perm]),
        est.transform_sequences(X)[:, perm],
        rtol=1e-12,
        atol=1e-12,
    )


def test_attention_weights_are_permutation_equivariant_without_positions():
    X = make_3d(n=4, n_tokens=7)
    perm = np.random.default_rng(1).permutation(7)
    est = AttentionTransformer(n_heads=2, positional_encoding=None, random_state=0)
    weights = est.fit(X).attention_weights(X)
    assert_allclose(
        est.attention_weights(X[:, perm]),
        weights[:, :, perm][:, :, :, perm],
        rtol=1e-12,
        atol=1e-12,
    )


# The poolings that read tokens by their place.
ORDERED_POOLINGS = ("first", "last", "flatten")


@pytest.mark.parametrize(
    "pooling", [pooling for pooling in POOLINGS if pooling not in ORDERED_POOLINGS]
)
def test_pooled_output_is_permutation_invariant_without_positions(pooling):
    X = make_3d(n=4, n_tokens=7)
    perm = np.random.default_rng(1).permutation(7)
    est = AttentionTransformer(
        n_heads=2, pooling=pooling, positional_encoding=None, random_state=0
    ).fit(X)
    assert_allclose(est.transform(X[:, perm]), est.transform(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "positional_encoding", REGISTRIES["positional_encoding"].names()
)
def test_positions_break_permutation_invariance(positional_encoding):
    X = make_3d(n=4, n_tokens=7)
    perm = np.random.default_rng(1).permutation(7)
    est = AttentionTransformer(
        n_heads=2, positional_encoding=positional_encoding, random_state=0
    ).fit(X)
    assert not np.allclose(est.transform(X[:, perm]), est.transform(X), atol=1e-3)


@pytest.mark.parametrize("positional_encoding", POSITIONAL_ENCODINGS)
@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_causal_output_ignores_later_tokens(kind, positional_encoding):
    n_tokens, t = 7, 3
    X = make_3d(n=4, n_tokens=n_tokens)
    X_changed = X.copy()
    X_changed[:, t + 1 :] = np.random.default_rng(1).standard_normal(
        X_changed[:, t + 1 :].shape
    )
    if kind == "ragged":  # the padded batch is longer than the first sequence
        X, X_changed = [X[0], *X[1:, :5]], [X_changed[0], *X_changed[1:, :5]]
    est = AttentionTransformer(
        n_heads=2, causal=True, positional_encoding=positional_encoding, random_state=0
    ).fit(X)
    before, after = est.transform_sequences(X), est.transform_sequences(X_changed)
    for old, new in zip(before, after, strict=True):
        assert_allclose(new[: t + 1], old[: t + 1], rtol=1e-12, atol=1e-12)
        assert not np.allclose(new[t + 1 :], old[t + 1 :], atol=1e-6)


def test_non_causal_output_depends_on_later_tokens():
    X = make_3d(n=4, n_tokens=7)
    X_changed = X.copy()
    X_changed[:, 4:] += 1.0
    est = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    before, after = est.transform_sequences(X), est.transform_sequences(X_changed)
    assert not np.allclose(after[:, :4], before[:, :4], atol=1e-6)


# 7. Poolings
# -----------


@pytest.mark.parametrize("pooling", POOLINGS)
def test_n_features_out_of_each_pooling(pooling):
    X = make_3d(n=4, n_tokens=5, width=4)
    est = AttentionTransformer(n_heads=2, pooling=pooling, random_state=0).fit(X)
    expected = 5 * 64 if pooling == "flatten" else 64
    assert est.d_model_ == 64
    assert est.transform(X).shape == (4, expected)
    assert len(est.get_feature_names_out()) == expected


@pytest.mark.parametrize("pooling, row", [("first", 0), ("last", -1)])
def test_first_and_last_pooling_pick_the_token(pooling, row):
    X = make_ragged()
    est = AttentionTransformer(n_heads=2, pooling=pooling, random_state=0).fit(X)
    expected = np.stack([tokens[row] for tokens in est.transform_sequences(X)])
    assert_allclose(est.transform(X), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pooling", ["mean", "max"])
@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_mean_and_max_pooling_over_valid_tokens(kind, pooling):
    X = make_input(kind)
    est = AttentionTransformer(n_heads=2, pooling=pooling, random_state=0).fit(X)
    reduce = np.mean if pooling == "mean" else np.max
    expected = np.stack([reduce(t, axis=0) for t in est.transform_sequences(X)])
    assert_allclose(est.transform(X), expected, rtol=1e-12, atol=1e-12)


def test_cls_pooling_returns_the_class_token_output():
    X = make_ragged()
    est = AttentionTransformer(n_heads=2, pooling="cls", random_state=0).fit(X)
    tokens = est.transform_sequences(X)
    assert [len(t) for t in tokens] == [n + 1 for n in LENGTHS]
    assert [w.shape for w in est.attention_weights(X)] == [
        (2, n + 1, n + 1) for n in LENGTHS
    ]
    assert est.cls_token_.shape == (est.d_model_,)
    # the class token follows the last token of each sequence
    assert_allclose(est.transform(X), np.stack([t[-1] for t in tokens]), rtol=1e-12)


def test_cls_pooling_with_causal_depends_on_the_sequence():
    """The class token comes last, so a causal mask still lets it see every token."""
    X = make_3d(n=5)
    est = AttentionTransformer(
        n_heads=2, pooling="cls", causal=True, random_state=0
    ).fit(X)
    X_new = est.transform(X)
    assert np.ptp(X_new, axis=0).max() > 1e-3


def test_attention_pooling_is_a_convex_combination_of_tokens():
    X = make_ragged()
    est = AttentionTransformer(n_heads=2, pooling="attention", random_state=0).fit(X)
    pooled = est.transform(X)
    for row, tokens in zip(pooled, est.transform_sequences(X), strict=True):
        assert np.all(row >= tokens.min(axis=0) - 1e-12)
        assert np.all(row <= tokens.max(axis=0) + 1e-12)


def test_attention_pooling_formula():
    X = make_ragged()
    est = AttentionTransformer(n_heads=2, pooling="attention", random_state=0).fit(X)
    query = est.pooling_query_
    assert query.shape == (est.d_model_,)
    expected = [
        softmax(tokens @ query / math.sqrt(est.d_model_)) @ tokens
        for tokens in est.transform_sequences(X)
    ]
    assert_allclose(est.transform(X), np.stack(expected), rtol=1e-12, atol=1e-12)


def test_flatten_pooling_concatenates_the_tokens():
    X = make_3d(n=4, n_tokens=5)
    est = AttentionTransformer(n_heads=2, pooling="flatten", random_state=0).fit(X)
    expected = est.transform_sequences(X).reshape(4, -1)
    assert_allclose(est.transform(X), expected, rtol=1e-12, atol=1e-12)


def test_flatten_pooling_rejects_ragged_lengths_at_fit():
    est = AttentionTransformer(pooling="flatten")
    with pytest.raises(ValueError, match="one length; got lengths from 1 to 7"):
        est.fit(make_ragged())


@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_flatten_pooling_rejects_other_length_at_transform(kind):
    est = AttentionTransformer(pooling="flatten", random_state=0).fit(make_3d())
    X = make_3d(n_tokens=4) if kind == "3d" else [make_3d()[0], make_3d()[1, :4]]
    with pytest.raises(ValueError, match="sequences of 6 tokens.*got 4"):
        est.transform(X)


def _token_statistics(X, mean=None, scale=None):
    """Mean, max, min, first and last of each sequence's tokens (standardised
    with mean and scale when given), side by side, by hand."""
    rows = []
    for x in X:
        x = np.asarray(x, dtype=np.float64)
        if mean is not None:
            x = (x - mean) / scale
        statistics = [x.mean(axis=0), x.max(axis=0), x.min(axis=0), x[0], x[-1]]
        rows.append(np.concatenate(statistics))
    return np.array(rows)


@pytest.mark.parametrize("scale_tokens", [True, False])
@pytest.mark.parametrize("kind", ["3d", "ragged", "table"])
def test_token_statistics_appends_the_tokens_statistics(kind, scale_tokens):
    """token_statistics of all five: the model's pooled outputs, then the mean,
    max, min, first and last of the (standardised) valid tokens, feature by feature,
    which the head reads with them; each sequence alone gives the same row
    (padding does not matter)."""
    X = {
        "3d": make_3d(n=6, width=3),
        "ragged": make_ragged(width=3),
        "table": make_table(n=6, n_features=6),  # three tokens of 2 features
    }[kind]
    y = np.arange(len(X)) % 2
    kwargs = dict(
        n_heads=2,
        scale_tokens=scale_tokens,
        features_per_token=2 if kind == "table" else None,
        max_iter=3,
        random_state=0,
    )
    with_tokens = AttentionTransformer(token_statistics=FIVE, **kwargs).fit(X, y)
    X_new = with_tokens.transform(X)
    width = 2 if kind == "table" else 3
    assert X_new.shape == (len(X), with_tokens.d_model_ + 5 * width)
    assert with_tokens.head_coef_.shape == (X_new.shape[1], 2)
    # the head reads every column: its logits are transform's times its weights
    logits = X_new @ with_tokens.head_coef_ + with_tokens.head_intercept_
    clf = AttentionClassifier(token_statistics=FIVE, **kwargs).fit(X, y)
    assert_allclose(clf.decision_function(X), logits[:, 1] - logits[:, 0], rtol=1e-6)
    sequences = X.reshape(len(X), 3, 2) if kind == "table" else X
    mean = scale = None
    if scale_tokens:  # per column of a table, per feature of sequences
        mean, scale = with_tokens.token_mean_, with_tokens.token_scale_
    expected = _token_statistics(sequences, mean, scale)
    assert_allclose(X_new[:, with_tokens.d_model_ :], expected, rtol=1e-12)
    if kind == "ragged":
        alone = np.vstack([with_tokens.transform([x]) for x in X])
        assert_allclose(alone, X_new, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("width, pools", [(1, False), (8, False), (9, True)])
def test_token_statistics_auto_is_on_for_tokens_wider_than_8(width, pools):
    X = make_3d(width=width)
    auto = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    explicit = AttentionTransformer(
        n_heads=2, token_statistics=FIVE if pools else None, random_state=0
    )
    assert_array_equal(auto.transform(X), explicit.fit(X).transform(X))
    assert auto.transform(X).shape[1] == auto.d_model_ + 5 * width * pools
    assert auto.token_statistics_ == (tuple(FIVE) if pools else ())


def test_token_statistics_takes_any_of_the_five_in_its_order():
    X = make_3d(width=3)
    est = AttentionTransformer(n_heads=2, token_statistics=["last", "max"])
    est.set_params(random_state=0).fit(X)
    names = est.get_feature_names_out()[est.d_model_ :]
    assert list(names) == [
        f"attentiontransformer_tokens_{statistic}_{feature}"
        for statistic in ["last", "max"]
        for feature in range(3)
    ]
    five = AttentionTransformer(n_heads=2, token_statistics=FIVE, random_state=0)
    tokens = five.fit(X).transform(X)[:, five.d_model_ :]  # 5 blocks of 3 columns
    chosen = est.transform(X)[:, est.d_model_ :]
    assert_array_equal(chosen, np.hstack([tokens[:, 12:15], tokens[:, 3:6]]))


@pytest.mark.parametrize(
    "value, problem",
    [(["mean", "median"], "unknown \\['median'\\]"), (["max", "max"], "repeated")],
)
def test_token_statistics_refuses_unknown_or_repeated_names(value, problem):
    with pytest.raises(ValueError, match=f"token_statistics=.*has {problem}"):
        AttentionTransformer(token_statistics=value).fit(make_3d(width=3))


def test_token_statistics_feature_names():
    X = make_3d(width=9)
    est = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    names = est.get_feature_names_out()
    model = [f"attentiontransformer{i}" for i in range(64)]
    tokens = [
        f"attentiontransformer_tokens_{statistic}_{feature}"
        for statistic in ["mean", "max", "min", "first", "last"]
        for feature in range(9)
    ]
    assert_array_equal(names, model + tokens)
    assert names.dtype == object
    frame = est.set_output(transform="pandas").transform(X)
    assert list(frame.columns) == model + tokens


def test_token_statistics_dtype_and_float32():
    X = make_3d(width=9)
    est = AttentionTransformer(n_heads=2, max_iter=2, random_state=0)
    X32 = X.astype(np.float32)
    out32 = est.fit(X32, np.arange(5) % 2).transform(X32)
    assert out32.dtype == np.float32
    expected = _token_statistics(X, est.token_mean_, est.token_scale_)
    assert_allclose(out32[:, 64:], expected, rtol=1e-5, atol=1e-5)


# 8. Parameters and init
# ----------------------


@pytest.mark.filterwarnings("ignore:X \\(of shape:UserWarning")
@pytest.mark.parametrize(
    "width, n_heads, head_dim",
    [(1, 4, 16), (20, 4, 16), (384, 4, 16), (64, 4, 16), (9, 1, 64), (3, 3, 22)],
)
def test_default_head_dim_rule(width, n_heads, head_dim):
    """A model of width 64 (or just above, when n_heads does not divide 64),
    whatever the token width."""
    X = make_3d(n=2, n_tokens=3, width=width)
    est = AttentionTransformer(n_heads=n_heads, random_state=0).fit(X)
    assert est.head_dim_ == head_dim == math.ceil(64 / n_heads)
    assert est.d_model_ == n_heads * head_dim
    assert est.layers_[0]["query"].shape == (est.d_model_, est.d_model_)
    # token_statistics="auto": the tokens' 5 statistics after the model's outputs
    # for tokens of more than 8 features
    tokens = 5 * width if width > 8 else 0
    assert est.transform(X).shape == (2, est.d_model_ + tokens)
    # tokens as wide as the model enter unprojected
    assert (est.input_weights_ is None) == (width == est.d_model_)


def test_head_dim_given():
    X = make_3d(width=4)
    est = AttentionTransformer(n_heads=3, head_dim=5, random_state=0).fit(X)
    assert (est.head_dim_, est.d_model_) == (5, 15)
    assert est.input_weights_.shape == (4, 15)
    assert est.attention_weights(X).shape == (5, 3, 6, 6)
    assert est.transform_sequences(X).shape == (5, 6, 15)


def fitted_weight(est, name):
    """The fitted weight given as ``init[name]`` to a one-layer model."""
    return est.input_weights_ if name == "input" else est.layers_[0][name]


def test_init_arrays_are_used_and_copied():
    X = make_3d(width=4)
    rng = np.random.default_rng(1)
    init = {name: rng.standard_normal((8, 8)) for name in ("query", "key", "value")}
    init["input"] = rng.standard_normal((4, 8))
    originals = {name: value.copy() for name, value in init.items()}
    est = AttentionTransformer(n_heads=2, init=init, random_state=0).fit(X)
    expected = est.transform(X)
    for name in init:
        assert_array_equal(init[name], originals[name])  # fit did not modify them
        assert_array_equal(fitted_weight(est, name), originals[name])
        init[name] += 1.0  # the caller mutates its arrays after fit
    for name in init:
        assert_array_equal(fitted_weight(est, name), originals[name])
    assert_array_equal(est.transform(X), expected)


def test_init_dict_sets_head_dim_from_its_width():
    init = {"query": np.eye(6)}
    est = AttentionTransformer(n_heads=2, init=init, random_state=0).fit(make_3d())
    assert (est.head_dim_, est.d_model_) == (3, 6)


@pytest.mark.parametrize(
    "key, shape, expected",
    [
        ("input", (8, 8), (6, 8)),
        ("input", (6, 4), (6, 8)),
        ("query", (6, 8), (8, 8)),
        ("value", (8, 7), (8, 8)),
        ("output", (9, 8), (8, 8)),
    ],
    ids=["input-8x8", "input-6x4", "query-6x8", "value-8x7", "output-9x8"],
)
def test_init_wrong_shape_names_key_and_expected_shape(key, shape, expected):
    X = make_3d(width=6)
    est = AttentionTransformer(n_heads=2, head_dim=4, init={key: np.ones(shape)})
    msg = f"init['{key}'] has shape {shape}, expected {expected}"
    with pytest.raises(ValueError, match=re.escape(msg)):
        est.fit(X)


@pytest.mark.parametrize("key, value", [("query", 1.0), ("value", np.ones((8, 8, 1)))])
def test_init_value_that_is_not_an_array_is_a_value_error(key, value):
    est = AttentionTransformer(n_heads=2, init={key: value})
    msg = f"init['{key}'] must be a 1D or 2D array, got shape {np.shape(value)}"
    with pytest.raises(ValueError, match=re.escape(msg)):
        est.fit(make_3d())


def test_init_vector_of_a_matrix_names_the_expected_shape():
    est = AttentionTransformer(n_heads=2, init={"key": np.ones(8)})
    msg = "init['key'] has shape (8,), expected (8, 8)"
    with pytest.raises(ValueError, match=re.escape(msg)):
        est.fit(make_3d())


def test_init_unknown_key():
    est = AttentionTransformer(init={"query": np.eye(8), "weights": np.eye(8)})
    msg = "init['weights'] is not a parameter of this model; its parameters are"
    with pytest.raises(ValueError, match=re.escape(msg)):
        est.fit(make_3d())


@pytest.mark.filterwarnings("ignore:X \\(of shape:UserWarning")
@pytest.mark.parametrize(
    "width, n_heads, head_dim, init_input, has_input",
    [
        (64, 1, None, False, False),  # d_model = 64 = D
        (8, 2, 4, False, False),  # d_model = 8 = D
        (8, 2, None, False, True),  # d_model = 64
        (4, 1, None, False, True),  # d_model = 64
        (8, 2, 4, True, True),  # d_model = D but init gives an input projection
    ],
)
def test_input_projection_iff_width_differs_or_given(
    width, n_heads, head_dim, init_input, has_input
):
    X = make_3d(width=width)
    d_model = n_heads * (head_dim or math.ceil(64 / n_heads))
    init = {"input": 0.5 * np.eye(width, d_model)} if init_input else "random"
    est = AttentionTransformer(
        n_heads=n_heads, head_dim=head_dim, init=init, random_state=0
    ).fit(X)
    if has_input:
        assert est.input_weights_.shape == (width, d_model)
    else:
        assert est.input_weights_ is None
    if init_input:
        assert_array_equal(est.input_weights_, 0.5 * np.eye(width))


def _fitted_weights(random_state, pooling="attention"):
    est = AttentionTransformer(n_heads=2, pooling=pooling, random_state=random_state)
    est.fit(make_3d())
    projections = [est.layers_[0][name] for name in ("query", "key", "value", "output")]
    return [est.input_weights_, *projections, est.pooling_query_]


def test_same_random_state_gives_identical_weights():
    for first, second in zip(_fitted_weights(0), _fitted_weights(0), strict=True):
        assert_array_equal(first, second)


def test_different_random_state_gives_different_weights():
    for first, second in zip(_fitted_weights(0), _fitted_weights(1), strict=True):
        assert not np.allclose(first, second)


def test_random_state_instance_draws_new_weights_on_refit():
    X = make_3d()
    est = AttentionTransformer(n_heads=2, random_state=np.random.RandomState(0))
    first = est.fit(X).layers_[0]["query"].copy()
    assert not np.allclose(est.fit(X).layers_[0]["query"], first)


def test_learned_positions_start_sinusoidal():
    X = make_3d(n_tokens=6, width=4)
    learned = AttentionTransformer(
        n_heads=2, positional_encoding="learned", random_state=0
    ).fit(X)
    sinusoidal = clone(learned).set_params(positional_encoding="sinusoidal").fit(X)
    assert sinusoidal.position_embeddings_ is None
    assert learned.d_model_ == 64
    assert_allclose(
        learned.position_embeddings_, sinusoidal_table(6, 64), rtol=1e-12, atol=1e-15
    )
    assert_allclose(learned.transform(X), sinusoidal.transform(X), rtol=1e-14)


def test_learned_positions_handle_sequences_longer_than_fit():
    X = make_ragged(lengths=(2, 4, 3))
    learned = AttentionTransformer(
        n_heads=2, positional_encoding="learned", random_state=0
    ).fit(X)
    assert learned.position_embeddings_.shape == (4, 64)
    sinusoidal = clone(learned).set_params(positional_encoding="sinusoidal").fit(X)
    longer = make_ragged(lengths=(9, 3, 6), seed=1)
    assert_allclose(
        learned.transform(longer), sinusoidal.transform(longer), rtol=1e-12, atol=1e-14
    )
    assert [len(t) for t in learned.transform_sequences(longer)] == [9, 3, 6]


# 9. Bad input
# ------------


def _with(X, index, value):
    X = X.copy()
    X[index] = value
    return X


def _ragged_with(index, value):
    X = make_ragged()
    X[1] = _with(X[1], index, value)
    return X


BAD_INPUTS = {
    "nan-table": (_with(make_table(), (1, 2), np.nan), r"Input X contains NaN"),
    "inf-table": (_with(make_table(), (1, 2), np.inf), r"Input X contains infinity"),
    "nan-3d": (_with(make_3d(), (1, 2, 0), np.nan), r"Input X contains NaN"),
    "inf-3d": (_with(make_3d(), (1, 2, 0), -np.inf), r"Input X contains infinity"),
    "nan-ragged": (_ragged_with((2, 1), np.nan), r"Input X\[1\] contains NaN"),
    "inf-ragged": (_ragged_with((2, 1), np.inf), r"Input X\[1\] contains infinity"),
    "complex": (make_table() + 1j, "Complex data not supported"),
    "complex-ragged": ([x + 1j for x in make_ragged()], "Complex data not supported"),
    "empty-table": (np.empty((0, 4)), r"0 sample\(s\)"),
    "empty-3d": (np.empty((0, 4, 3)), r"0 sample\(s\)"),
    "empty-list": ([], "X is empty"),
    "empty-tuple": ((), "X is empty"),
    "no-columns": (np.empty((3, 0)), r"0 feature\(s\)"),
    "zero-length-sequence": (
        [np.ones((2, 3)), np.empty((0, 3))],
        r"X\[1\] is a zero-length sequence",
    ),
    "no-tokens": (np.empty((3, 0, 2)), r"shape \(3, 0, 2\) has no tokens"),
    "no-features": (np.empty((3, 2, 0)), r"shape \(3, 2, 0\) has no tokens or no"),
    "4d": (np.zeros((2, 3, 4, 5)), r"X has 4 dimensions \(shape \(2, 3, 4, 5\)\)"),
    "1d": (np.zeros(5), "Expected 2D array, got 1D array"),
    "mixed-widths": (
        [np.ones((2, 4)), np.ones((3, 4)), np.ones((2, 5))],
        r"X\[2\] has 5 features per token, but X\[0\] has 4",
    ),
    "not-2d-sequence": ([np.ones((2, 4)), np.ones(4)], r"X\[1\] must be a 2D array"),
}


@pytest.mark.parametrize(
    "X, match", list(BAD_INPUTS.values()), ids=list(BAD_INPUTS.keys())
)
def test_bad_input_raises_value_error_at_fit(X, match):
    with pytest.raises(ValueError, match=match):
        AttentionTransformer().fit(X)


@pytest.mark.parametrize(
    "X",
    [np.array([["a", "b"], ["c", "d"]]), [np.array([["a", "b"], ["c", "d"]])]],
    ids=["table", "ragged"],
)
def test_strings_raise_a_type_error_naming_skattn_text(X):
    with pytest.raises(TypeError, match="raw text.*skattn.text.TokenIds"):
        AttentionTransformer().fit(X)


@pytest.mark.parametrize(
    "X, match",
    [
        (_with(make_table(), (0, 0), np.nan), r"Input X contains NaN"),
        (_with(make_table(), (0, 0), np.inf), r"Input X contains infinity"),
    ],
    ids=["nan", "inf"],
)
@pytest.mark.parametrize("method", METHODS)
def test_bad_input_raises_value_error_at_transform(X, match, method):
    est = AttentionTransformer(random_state=0).fit(make_table())
    with pytest.raises(ValueError, match=match):
        getattr(est, method)(X)


@pytest.mark.parametrize("method", ["fit", *METHODS])
def test_sparse_input_raises_type_error(method):
    X = make_table()
    est = AttentionTransformer(random_state=0).fit(X)
    with pytest.raises(TypeError, match="Sparse data was passed"):
        getattr(est, method)(sp.csr_matrix(X))


def test_empty_object_array_says_x_is_empty():
    with pytest.raises(ValueError, match="X is empty: got an empty ndarray"):
        AttentionTransformer().fit(np.empty(0, dtype=object))


def test_features_per_token_must_divide_the_number_of_columns():
    est = AttentionTransformer(features_per_token=4)
    msg = "features_per_token=4 does not divide the number of columns of X, 6"
    with pytest.raises(ValueError, match=re.escape(msg)):
        est.fit(make_table(n_features=6))


def test_transform_checks_the_column_count_before_features_per_token():
    """A table of another width names both widths, as scikit-learn's checks expect,
    even when features_per_token would not divide it."""
    est = AttentionTransformer(features_per_token=2).fit(make_table(n_features=6))
    msg = "X has 5 features, but AttentionTransformer is expecting 6 features"
    with pytest.raises(ValueError, match=re.escape(msg)):
        est.transform(make_table(n_features=5))


@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_features_per_token_with_sequences_of_another_width(kind):
    est = AttentionTransformer(features_per_token=2)
    msg = "features_per_token=2 is for 2D tables only; sequences of width 4"
    with pytest.raises(ValueError, match=re.escape(msg)):
        est.fit(make_input(kind))


@pytest.mark.parametrize(
    "params, name",
    [
        ({"n_heads": 0}, "n_heads"),
        ({"head_dim": 0}, "head_dim"),
        ({"features_per_token": 0}, "features_per_token"),
        ({"pooling": "bogus"}, "pooling"),
        ({"positional_encoding": "x"}, "positional_encoding"),
        ({"init": "zeros"}, "init"),
        ({"causal": "yes"}, "causal"),
    ],
)
def test_invalid_parameters(params, name):
    est = AttentionTransformer(**params)
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter"):
        est.fit(make_3d())


@pytest.mark.parametrize("method", METHODS)
def test_table_after_sequences_is_rejected(method):
    est = AttentionTransformer(random_state=0).fit(make_3d())
    msg = "was fitted on sequences and cannot transform a table"
    with pytest.raises(ValueError, match=msg):
        getattr(est, method)(make_table(n_features=4))


@pytest.mark.parametrize("kind", ["3d", "ragged"])
@pytest.mark.parametrize("method", METHODS)
def test_sequences_after_table_are_rejected(method, kind):
    est = AttentionTransformer(random_state=0).fit(make_table(n_features=4))
    msg = "was fitted on a table and cannot transform sequences"
    with pytest.raises(ValueError, match=msg):
        getattr(est, method)(make_input(kind))


@pytest.mark.parametrize("kind", ["3d", "ragged"])
@pytest.mark.parametrize("method", METHODS)
def test_sequences_of_another_token_width(method, kind):
    est = AttentionTransformer(random_state=0).fit(make_input(kind))
    X = make_3d(width=5) if kind == "3d" else make_ragged(width=5)
    msg = "X has 5 features per token, but AttentionTransformer is expecting 4"
    with pytest.raises(ValueError, match=msg):
        getattr(est, method)(X)


def test_table_with_another_number_of_columns():
    est = AttentionTransformer(random_state=0).fit(make_table(n_features=6))
    msg = "X has 8 features, but AttentionTransformer is expecting 6 features"
    with pytest.raises(ValueError, match=msg):
        est.transform(make_table(n_features=8))


@pytest.mark.parametrize("method", METHODS)
def test_not_fitted(method):
    with pytest.raises(NotFittedError):
        getattr(AttentionTransformer(), method)(make_3d())


def _copy_input(X):
    if isinstance(X, list):
        return [x.copy() for x in X]
    if isinstance(X, np.ndarray) and X.dtype == object:
        return object_array([x.copy() for x in X])
    return X.copy()


def _assert_input_unchanged(X, original):
    if isinstance(X, pd.DataFrame):
        pd.testing.assert_frame_equal(X, original)
    elif isinstance(X, np.ndarray) and X.ndim > 1:
        assert_array_equal(X, original)
    else:
        for x, o in zip(X, original, strict=True):
            assert_array_equal(x, o)


CALLER_INPUTS = {
    "table": lambda: make_table(n_features=16),
    "3d": lambda: make_3d(width=8),
    "list": lambda: make_ragged(width=8),
    "object-array": lambda: object_array(make_ragged(width=8)),
    "dataframe": lambda: pd.DataFrame(make_table(n_features=16)),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("pooling", ["mean", "cls", "attention"])
@pytest.mark.parametrize("positional_encoding", POSITIONAL_ENCODINGS)
@pytest.mark.parametrize("n_heads", [1, 2])  # d_model == D (no projection) or not
@pytest.mark.parametrize("kind", list(CALLER_INPUTS))
def test_caller_input_is_never_modified(kind, n_heads, positional_encoding, pooling):
    """Also where the block reads the caller's rows in place (no projection, no
    positions: batches of consecutive rows are views), seeded and trained."""
    X = CALLER_INPUTS[kind]()
    original = _copy_input(X)
    est = AttentionTransformer(
        n_heads=n_heads,
        features_per_token=8 if kind in ("table", "dataframe") else None,
        pooling=pooling,
        positional_encoding=positional_encoding,
        random_state=0,
    )
    est.fit_transform(X)
    for method in METHODS:
        getattr(est, method)(X)
    y = np.arange(len(X)) % 2
    est.set_params(max_iter=2).fit(X, y)
    est.set_params(solver="lbfgs").fit(X, y)
    _assert_input_unchanged(X, original)


# 10. Pipelines and output containers
# -----------------------------------


def _classification_data(kind):
    """Two classes of sequences, told apart by the mean of their tokens."""
    rng = np.random.default_rng(0)
    n = 60
    y = np.repeat([0, 1], n // 2)
    if kind == "dataframe":
        return pd.DataFrame(rng.standard_normal((n, 6)) + y[:, None]), y
    if kind == "3d":
        return rng.standard_normal((n, 5, 4)) + y[:, None, None], y
    lengths = rng.integers(2, 8, size=n)
    X = [
        rng.standard_normal((length, 4)) + label
        for length, label in zip(lengths, y, strict=True)
    ]
    return (object_array(X) if kind == "object-array" else X), y


PIPELINE_KINDS = ["3d", "list", "object-array", "dataframe"]


def _pipeline():
    # The former defaults: width 8, no feed-forward sublayer, raw tokens. On the
    # 40-sample training folds of the table, the wider default model overfits
    # (mean score 0.77). 40 epochs are enough on this easy task (scores of
    # 0.9 and more) and keep the 19 pipeline fits of these tests short.
    transformer = AttentionTransformer(
        n_heads=1, head_dim=8, ff_dim=0, scale_tokens=False, patch_size=None,
        early_stopping=False, max_iter=40, random_state=0,
    )  # fmt: skip
    return make_pipeline(transformer, LogisticRegression())


@pytest.mark.parametrize("kind", PIPELINE_KINDS)
def test_pipeline_grid_search(kind):
    X, y = _classification_data(kind)
    grid = GridSearchCV(
        _pipeline(), {"attentiontransformer__pooling": ["mean", "max"]}, cv=3
    ).fit(X, y)
    scores = grid.cv_results_["mean_test_score"]
    poolings = list(grid.cv_results_["param_attentiontransformer__pooling"])
    assert poolings == ["mean", "max"]
    best = poolings[int(np.argmax(scores))]
    assert grid.best_params_ == {"attentiontransformer__pooling": best}
    assert grid.best_score_ >= 0.8
    assert grid.predict(X).shape == (60,)
    assert grid.score(X, y) >= 0.8


@pytest.mark.parametrize("kind", PIPELINE_KINDS)
def test_pipeline_cross_val_score(kind):
    X, y = _classification_data(kind)
    scores = cross_val_score(_pipeline(), X, y, cv=3)
    assert scores.shape == (3,)
    assert scores.mean() >= 0.8


def test_set_output_pandas_keeps_the_dataframe_index():
    X = pd.DataFrame(make_table(n_features=6), index=[10, 11, 12, 13, 14])
    est = AttentionTransformer(n_heads=2, random_state=0).fit(X)
    expected = est.transform(X)
    est.set_output(transform="pandas")
    X_new = est.transform(X)
    assert isinstance(X_new, pd.DataFrame)
    assert list(X_new.columns) == [f"attentiontransformer{i}" for i in range(64)]
    assert_array_equal(X_new.index, [10, 11, 12, 13, 14])
    assert_allclose(X_new.to_numpy(), expected, rtol=1e-14)


@pytest.mark.parametrize("kind", ["3d", "ragged"])
def test_set_output_pandas_for_sequences(kind):
    X = make_input(kind)
    est = AttentionTransformer(n_heads=2, random_state=0).set_output(transform="pandas")
    X_new = est.fit_transform(X)
    assert isinstance(X_new, pd.DataFrame)
    assert X_new.shape == (len(X), 64)
    assert list(X_new.columns) == list(est.get_feature_names_out())


@pytest.mark.parametrize("pooling, n_out", [("mean", 64), ("flatten", 6 * 64)])
def test_get_feature_names_out(pooling, n_out):
    est = AttentionTransformer(n_heads=2, pooling=pooling, random_state=0)
    names = est.fit(make_3d()).get_feature_names_out()
    assert names.dtype == object
    assert_array_equal(names, [f"attentiontransformer{i}" for i in range(n_out)])


@pytest.mark.parametrize(
    "make",
    [
        lambda: AttentionTransformer(objective=None, patch_size=None, random_state=0),
        lambda: RandomAttentionFeatures(n_models=4, random_state=0),
    ],
    ids=["transformer", "random-features"],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_row_is_transformed_as_if_alone(make, dtype):
    """A row's features are the same, to the bit, alone, in a batch of five or
    of all thirty (scikit-learn's check_methods_subset_invariance): long
    series (300 time points) are tiled by the rows of one sequence, not by
    the batch's; once, a PPV of 1/300 flipped with the batch."""
    X = (3 * np.random.RandomState(0).uniform(size=(30, 300))).astype(dtype)
    est = make().fit(X)
    full = est.transform(X)
    np.testing.assert_array_equal(
        np.vstack([est.transform(X[i : i + 1]) for i in range(30)]), full
    )
    np.testing.assert_array_equal(
        np.vstack([est.transform(X[i : i + 5]) for i in range(0, 30, 5)]), full
    )


def test_flatten_pooling_rejects_a_validation_set_of_other_length():
    X, y = make_3d(n=20), np.arange(20) % 2
    est = AttentionClassifier(pooling="flatten", max_iter=2, random_state=0)
    with pytest.raises(ValueError, match="X_val: .*6 tokens, the length of X's; got 4"):
        est.fit(X, y, X_val=make_3d(n=6, n_tokens=4), y_val=y[:6])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_swiglu_classifier_holds_its_three_matrices_and_learns_the_order_task():
    from skattn.datasets import make_sequence_classification

    X, y = make_sequence_classification(n_samples=200, random_state=0)
    clf = AttentionClassifier(
        feed_forward="swiglu", ff_dim=16, max_iter=30, random_state=0
    ).fit(X, y)
    layer = clf.layers_[0]
    d_model = clf.d_model_
    assert {name: layer[name].shape for name in ("linear1", "linear3", "linear2")} == {
        "linear1": (d_model, 16),
        "linear3": (d_model, 16),
        "linear2": (16, d_model),
    }
    assert "linear1_bias" not in layer and "linear2_bias" not in layer
    assert clf.score(X, y) > 0.8  # chance is 0.5
