"""The estimators with banded attention (``attention_window``,
``attention_dilation``): the full model where the band covers the sequence,
dense attention weights zero outside the band, a global class token, padding
and batches that do not matter."""

import tracemalloc

import numpy as np
import pytest
from helpers import make_3d, make_ragged, order_task
from numpy.testing import assert_allclose, assert_array_equal

from skattn import AttentionClassifier, AttentionTransformer
from skattn._kernels.band import band_mask
from skattn.patterns import BandedAttention

SMALL = dict(n_heads=2, head_dim=3, random_state=0)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("causal", [False, True])
def test_a_band_that_covers_the_sequence_is_full_attention(pooling, causal):
    X = make_ragged(width=3)
    longest = max(len(x) for x in X) + 1  # the class token included
    full = AttentionTransformer(pooling=pooling, causal=causal, n_layers=2, **SMALL)
    banded = AttentionTransformer(
        pooling=pooling,
        causal=causal,
        n_layers=2,
        attention_window=2 * longest + 1,
        **SMALL,
    )
    assert_allclose(banded.fit(X).transform(X), full.fit(X).transform(X), atol=1e-12)


@pytest.mark.parametrize("window, dilation", [(3, 1), (5, 2), (2, 3)])
def test_attention_weights_are_zero_outside_the_band(window, dilation):
    X = make_3d(n=4, n_tokens=12, width=3)
    est = AttentionTransformer(
        attention_window=window, attention_dilation=dilation, **SMALL
    ).fit(X)
    weights = est.attention_weights(X)  # (4, 2, 12, 12)
    assert_allclose(weights.sum(axis=-1), 1, atol=1e-12)
    outside = ~band_mask(12, 12, window, dilation)
    assert np.all(weights[..., outside] == 0)
    assert np.all(weights[..., ~outside] > 0)


def test_the_class_token_attends_and_is_attended_globally():
    X = make_ragged(width=3)
    est = AttentionTransformer(attention_window=3, pooling="cls", **SMALL).fit(X)
    for x, weights in zip(X, est.attention_weights(X), strict=True):
        n = len(x)  # the class token is token n
        assert weights.shape == (2, n + 1, n + 1)
        assert np.all(weights[:, n] > 0)  # reads every token
        assert np.all(weights[:, :, n] > 0)  # every token reads it
        band = band_mask(n, n, 3)
        assert np.all(weights[:, :n, :n][:, ~band] == 0)


@pytest.mark.parametrize("window, n_keys", [(4, 5), (5, 5), (6, 7)])
def test_a_token_reads_half_the_window_on_each_side_as_documented(window, n_keys):
    """An even window reads one token more than its width: ``window // 2`` on
    each side and the token itself, as the pattern's docstring says, which
    the parameter's names."""
    X = make_3d(n=2, n_tokens=15, width=3)
    est = AttentionTransformer(attention_window=window, **SMALL).fit(X)
    middle = est.attention_weights(X)[:, :, 7]  # (2, 2, 15)
    assert np.all(np.count_nonzero(middle, axis=-1) == n_keys)
    doc = " ".join(AttentionTransformer.__doc__.split())
    assert "``attention_pattern=BandedAttention(attention_window," in doc
    assert 'of ``pooling="cls"`` is global (:ref:`banded_attention`)' in doc
    pattern_doc = " ".join(BandedAttention.__doc__.split())
    assert "``|i - j| <= (window // 2) * dilation``" in pattern_doc


def test_with_causal_the_class_token_reads_every_token_and_none_reads_it():
    X = make_ragged(width=3)
    est = AttentionTransformer(
        attention_window=3, pooling="cls", causal=True, **SMALL
    ).fit(X)
    for x, weights in zip(X, est.attention_weights(X), strict=True):
        n = len(x)  # the class token is token n, after the last
        assert np.all(weights[:, n] > 0)  # reads every token
        assert np.all(weights[:, :n, n] == 0)  # no token reads it


def test_banded_transform_does_not_depend_on_padding_or_batch():
    X = make_ragged(width=3)
    est = AttentionTransformer(attention_window=3, attention_dilation=2, **SMALL)
    together = est.fit(X).transform(X)
    alone = np.vstack([est.transform([x]) for x in X])
    assert_allclose(alone, together, rtol=0, atol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_banded_classifier_learns_and_refuses_another_band_when_continued():
    X, y = order_task(n=80, n_tokens=8, width=4)
    clf = AttentionClassifier(
        attention_window=5, pooling="cls", max_iter=60, learning_rate_init=0.01, **SMALL
    ).fit(X, y)
    assert clf.score(X, y) > 0.8
    clf.set_params(attention_window=7)
    with pytest.raises(ValueError, match="attention_window=7.*fitted with"):
        clf.partial_fit(X, y)


def test_a_longer_band_reads_further():
    """Token 0 of a window-3 model reads tokens 0 and 1 only: what lies after
    them does not change its output; with a dilation of 4 it reads token 4."""
    X = make_3d(n=2, n_tokens=10, width=3)
    moved = X.copy()
    moved[:, 2:] += 5.0
    est = AttentionTransformer(attention_window=3, **SMALL).fit(X)
    assert_array_equal(
        est.transform_sequences(X)[:, 0], est.transform_sequences(moved)[:, 0]
    )
    dilated = AttentionTransformer(attention_window=3, attention_dilation=4, **SMALL)
    dilated.fit(X)
    assert not np.allclose(
        dilated.transform_sequences(X)[:, 0], dilated.transform_sequences(moved)[:, 0]
    )


@pytest.mark.parametrize("dtype, size", [(np.float32, 1e20), (np.float64, 1e155)])
def test_a_banded_transformer_computes_tokens_whose_scores_would_overflow(dtype, size):
    """Unstandardised tokens whose scores exceed the dtype's range: the banded
    model computes them, as the full one does (the scores divided by a power
    of two)."""
    X = make_3d(n=4, n_tokens=6, width=3, dtype=dtype) * dtype(size)
    full = AttentionTransformer(scale_tokens=False, **SMALL).fit(X).transform(X)
    banded = AttentionTransformer(attention_window=3, scale_tokens=False, **SMALL)
    assert np.all(np.isfinite(full))
    assert np.all(np.isfinite(banded.fit(X).transform(X)))


@pytest.mark.parametrize("dilation", [2**62, 2**63 - 1, 2**63, 10**30])
def test_a_dilation_beyond_the_sequence_transforms_as_any_other(dilation):
    """On 6 tokens every dilation from 6 on leaves each token alone in its
    band: the same model, whatever the dilation's size."""
    X = make_3d(n=4, n_tokens=6, width=3)
    expected = AttentionTransformer(
        attention_window=5, attention_dilation=7, pooling="cls", **SMALL
    )
    est = AttentionTransformer(
        attention_window=5, attention_dilation=dilation, pooling="cls", **SMALL
    )
    assert_array_equal(est.fit(X).transform(X), expected.fit(X).transform(X))
    assert_array_equal(est.attention_weights(X), expected.attention_weights(X))


@pytest.mark.parametrize("window", [10**6, 10**12, 2**64])
@pytest.mark.parametrize("causal", [False, True])
def test_a_window_beyond_the_sequence_costs_no_more_than_full_attention(window, causal):
    """A band that covers the sequence is full attention: the same results,
    in the memory of full attention, whatever the window's size."""
    X = make_ragged(width=3)
    results, peaks = [], []
    for band in (None, window):
        est = AttentionTransformer(
            attention_window=band, causal=causal, pooling="cls", **SMALL
        )
        est.fit(X).transform(X)  # the kernels compiled, if so
        tracemalloc.start()
        results.append(est.fit(X).transform(X))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert_array_equal(results[1], results[0])
    assert peaks[1] <= 1.5 * peaks[0]
