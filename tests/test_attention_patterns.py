"""The estimators with an attention pattern object (``attention_pattern``):
the shorthand ``attention_window`` is the banded pattern, BigBird's weights
are zero outside its layout, its random layout is drawn from
``random_state`` in fit and kept, padding and batches do not matter, and a
pattern is a value for clone, grid searches and continued training."""

import pickle

import numpy as np
import pytest
from helpers import make_3d, make_ragged, order_task
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import InvalidParameterError

from skattn import AttentionClassifier, AttentionTransformer
from skattn._model.options import ATTENTION_PATTERNS
from skattn.patterns import BandedAttention, BigBirdAttention, FullAttention

SMALL = dict(n_heads=2, head_dim=3, random_state=0, patch_size=None)
BIGBIRD = BigBirdAttention(block_size=3, window_blocks=1, n_random_blocks=1)

# an object of every registered pattern, and the shorthand's band
PATTERNS = {
    "full": FullAttention(),
    "banded": BandedAttention(window=3, dilation=2),
    "bigbird": BIGBIRD,
}


def test_every_registered_pattern_is_tested_and_public():
    import skattn.patterns

    assert set(PATTERNS) == set(ATTENTION_PATTERNS.names())
    for name, pattern in PATTERNS.items():
        assert type(pattern) is ATTENTION_PATTERNS.get(name)
        assert getattr(skattn.patterns, type(pattern).__name__) is type(pattern)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_window_is_the_shorthand_of_the_banded_pattern(pooling):
    X = make_ragged(width=3)
    shorthand = AttentionTransformer(
        attention_window=3, attention_dilation=2, pooling=pooling, **SMALL
    ).fit(X)
    pattern = AttentionTransformer(
        attention_pattern=BandedAttention(3, dilation=2), pooling=pooling, **SMALL
    ).fit(X)
    assert_array_equal(pattern.transform(X), shorthand.transform(X))
    full = AttentionTransformer(attention_pattern=FullAttention(), **SMALL).fit(X)
    default = AttentionTransformer(**SMALL).fit(X)
    assert_array_equal(full.transform(X), default.transform(X))


@pytest.mark.parametrize("causal", [False, True])
def test_bigbird_weights_are_zero_outside_its_layout(causal):
    X = make_3d(n=3, n_tokens=14, width=3)
    pattern = BigBirdAttention(block_size=2, window_blocks=1, n_random_blocks=2)
    est = AttentionTransformer(attention_pattern=pattern, causal=causal, **SMALL)
    weights = est.fit(X).attention_weights(X)  # (3, 2, 14, 14)
    assert_allclose(weights.sum(axis=-1), 1, atol=1e-12)
    fitted = pattern.set_params(seed=est._fitted.config.attention_pattern["seed"])
    allowed = fitted.mask(14, causal=causal)
    assert np.all(weights[..., ~allowed] == 0)
    assert np.all(weights[..., allowed] > 0)


def test_bigbird_class_token_attends_and_is_attended_globally():
    X = make_ragged(width=3)
    est = AttentionTransformer(attention_pattern=BIGBIRD, pooling="cls", **SMALL)
    for x, weights in zip(X, est.fit(X).attention_weights(X), strict=True):
        n = len(x)  # the class token is token n
        assert np.all(weights[:, n] > 0)  # reads every token
        assert np.all(weights[:, :, n] > 0)  # every token reads it


def test_bigbird_transform_does_not_depend_on_padding_or_batch():
    X = make_ragged(width=3)
    est = AttentionTransformer(attention_pattern=BIGBIRD, n_layers=2, **SMALL).fit(X)
    together = est.transform(X)
    alone = np.vstack([est.transform([x]) for x in X])
    assert_allclose(together, alone, rtol=0, atol=1e-12)


def test_the_random_layout_is_drawn_in_fit_and_kept():
    X = make_3d(n=4, n_tokens=20, width=3)
    fits = [
        AttentionTransformer(attention_pattern=BIGBIRD, **{**SMALL, "random_state": s})
        for s in (0, 0, 1)
    ]
    seeds = [est.fit(X)._fitted.config.attention_pattern["seed"] for est in fits]
    assert seeds[0] == seeds[1] != seeds[2]
    assert BIGBIRD.seed is None  # the caller's pattern is not modified
    restored = pickle.loads(pickle.dumps(fits[0]))
    assert_array_equal(restored.transform(X), fits[0].transform(X))
    # a seed given is the seed used
    given = BigBirdAttention(block_size=3, window_blocks=1, n_random_blocks=1, seed=7)
    est = AttentionTransformer(attention_pattern=given, **SMALL).fit(X)
    assert est._fitted.config.attention_pattern["seed"] == 7


def test_a_pattern_is_a_value_for_clone_and_grid_search():
    X, y = order_task(n=40, n_tokens=12)
    est = AttentionClassifier(max_iter=3, **SMALL)
    assert clone(est.set_params(attention_pattern=BIGBIRD)).attention_pattern == BIGBIRD
    grid = GridSearchCV(
        est, {"attention_pattern": [None, BIGBIRD, BandedAttention(5)]}, cv=2
    )
    with pytest.warns(Warning):  # three iterations do not converge
        grid.fit(X, y)
    assert len(grid.cv_results_["params"]) == 3
    nested = GridSearchCV(est, {"attention_pattern__block_size": [2, 4]}, cv=2)
    with pytest.warns(Warning):
        nested.fit(X, y)
    assert nested.best_params_["attention_pattern__block_size"] in (2, 4)


def test_a_bigbird_classifier_learns_and_continues_its_layout():
    X, y = order_task(n=80, n_tokens=12, width=4)
    pattern = BigBirdAttention(block_size=2, window_blocks=1, n_random_blocks=2)
    clf = AttentionClassifier(
        attention_pattern=pattern,
        pooling="cls",
        max_iter=150,
        learning_rate_init=0.01,
        **SMALL,
    )
    clf.fit(X, y)
    assert clf.score(X, y) > 0.8
    seed = clf._fitted.config.attention_pattern["seed"]
    clf.set_params(warm_start=True, max_iter=2).fit(X, y)  # seed=None: the fitted
    assert clf._fitted.config.attention_pattern["seed"] == seed
    clf.set_params(attention_pattern=pattern.set_params(seed=seed)).fit(X, y)
    with pytest.raises(ValueError, match=r"attention_pattern=BigBirdAttention\(bl"):
        clf.set_params(attention_pattern=BIGBIRD).fit(X, y)


def test_a_pattern_given_with_its_shorthand_or_of_another_type_is_refused():
    X = make_3d(n=4, n_tokens=6, width=3)
    est = AttentionTransformer(attention_pattern=BIGBIRD, attention_window=3)
    with pytest.raises(ValueError, match="shorthand of attention_pattern=Banded"):
        est.fit(X)
    with pytest.raises(InvalidParameterError, match="attention_pattern"):
        AttentionTransformer(attention_pattern="bigbird").fit(X)
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"):
        AttentionTransformer(attention_pattern=BigBirdAttention(0)).fit(X)
