"""One fitted object per estimator: it holds what ``predict`` and
``transform`` need (the model, the target's encoding, how X is read; the
random features' built models), pickles as plain types, and the random
features build their models once per fit."""

import pickle

import numpy as np
import pytest
from helpers import make_3d, make_table
from numpy.testing import assert_array_equal

from skattn import (
    AttentionClassifier,
    AttentionRegressor,
    AttentionTransformer,
    RandomAttentionFeatures,
)
from skattn._random_features import fitted as fitted_module

PLAIN = (dict, list, tuple, str, int, float, bool, type(None), np.ndarray, np.generic)


def assert_plain(value, path="state"):
    """Every value of a nested state is a dict, list, number, str or array."""
    assert isinstance(value, PLAIN), f"{path} is a {type(value).__name__}"
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str | int), f"{path} has a key {key!r}"
            assert_plain(item, f"{path}[{key!r}]")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            assert_plain(item, f"{path}[{index}]")
    elif isinstance(value, np.ndarray):
        assert value.dtype != object, f"{path} is an array of objects"


def test_the_fitted_model_holds_the_classes_and_the_input_format():
    X = make_3d(n=12, n_tokens=5, width=4)
    y = np.array(["b", "a", "c"] * 4)
    clf = AttentionClassifier(max_iter=2, random_state=0).fit(X, y)
    fitted = clf._fitted
    assert_array_equal(fitted.target.classes, ["a", "b", "c"])
    assert clf.classes_ is fitted.target.classes
    assert clf.objective_ == fitted.target.objective == "classification"
    assert fitted.input_format == {
        "kind": "sequences",
        "features_per_token": None,
        "data_format": "channels_last",
    }
    assert {"classes_", "objective_", "_input_format"}.isdisjoint(vars(clf))
    assert_plain(fitted.to_state())


def test_the_fitted_model_holds_the_target_scaling():
    X = make_table(n=20, n_features=6)
    y = np.column_stack([np.arange(20.0), 100 + 10 * np.arange(20.0)])
    reg = AttentionRegressor(max_iter=2, random_state=0).fit(X, y)
    target = reg._fitted.target
    assert reg.classes_ is None
    np.testing.assert_allclose(target.mean, y.mean(axis=0))
    np.testing.assert_allclose(target.scale, y.std(axis=0))
    assert reg._fitted.input_format["kind"] == "table"
    restored = pickle.loads(pickle.dumps(reg))
    assert_array_equal(restored.predict(X), reg.predict(X))
    assert_plain(reg._fitted.to_state())


def test_a_seeded_transformer_has_no_target_and_no_classes():
    X = make_3d(n=6, n_tokens=5, width=4)
    est = AttentionTransformer(random_state=0).fit(X)
    assert est._fitted.target is None and est.objective_ is None
    with pytest.raises(AttributeError, match="classes_"):
        est.classes_  # noqa: B018


def test_random_features_build_their_models_once_per_fit(monkeypatch):
    X = make_3d(n=10, n_tokens=40, width=1)
    calls = []
    build = fitted_module.build_models
    monkeypatch.setattr(
        fitted_module, "build_models", lambda *a: calls.append(1) or build(*a)
    )
    features = RandomAttentionFeatures(n_models=4, random_state=0).fit(X)
    first = features.transform(X)
    assert_array_equal(features.transform(X), first)
    assert len(calls) == 1  # in fit, for the thresholds; transform reuses them
    restored = pickle.loads(pickle.dumps(features))
    assert "built" not in vars(restored._fitted)  # a pickle holds no built model
    assert_plain(features._fitted.to_state())
    assert_array_equal(restored.transform(X), first)
    assert len(calls) == 2  # the first transform after unpickling


def test_assigned_weights_are_the_weights_transform_reads():
    X = make_3d(n=8, n_tokens=30, width=1)
    features = RandomAttentionFeatures(n_models=3, random_state=0).fit(X)
    before = features.transform(X)
    weights = [dict(w) for w in features.weights_]
    weights[0]["input"] = 2 * weights[0]["input"]
    features.weights_ = weights
    after = features.transform(X)
    assert features.weights_ is weights
    _, width, labels = features._column_blocks()[0]
    n_first = width * len(labels)  # the first model's columns
    assert not np.allclose(after[:, :n_first], before[:, :n_first])
    assert_array_equal(after[:, n_first:], before[:, n_first:])


@pytest.mark.parametrize(
    "estimator",
    [AttentionTransformer(max_iter=1, random_state=0), RandomAttentionFeatures()],
    ids=["attention", "random features"],
)
def test_a_failed_fit_leaves_the_fitted_input_format_in_force(estimator):
    # a fit that reads X and then fails keeps no format of its own beside the
    # fitted object's
    X_table = make_table(n=12, n_features=8)
    estimator.fit(X_table, np.arange(12) % 2)
    with pytest.raises(ValueError, match="sample_weight"):  # after X is read
        estimator.fit(
            make_3d(n=12, n_tokens=5, width=8),
            np.arange(12) % 2,
            sample_weight=np.ones(11),
        )
    assert "_input_format" not in vars(estimator)
    assert estimator._fitted.input_format["kind"] == "table"
