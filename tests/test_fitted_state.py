"""The fitted state: one fitted model, built once per fit, read by the
fitted attributes.

An attention estimator keeps what ``fit`` learned in one fitted model (its
description, parameters, history and Adam's state). Its public attributes read
that model; assigning one replaces that parameter for this estimator only; a
pickle holds it as plain dicts and arrays.
"""

import copy
import pickle

import numpy as np
import pytest
from helpers import make_3d, order_task
from numpy.testing import assert_array_equal

import skattn._model.model
from skattn import AttentionClassifier, AttentionTransformer


def count_builds(monkeypatch):
    """A list that grows by one per model built."""
    calls = []
    build = skattn._model.model.build_model

    def counting(config):
        calls.append(config)
        return build(config)

    monkeypatch.setattr("skattn._estimators.base.build_model", counting)
    monkeypatch.setattr("skattn._training.state.build_model", counting)
    return calls


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        # the model trains with its head on the pooled outputs alone
        {"token_statistics": ["mean", "max"]},
        {"solver": "lbfgs", "max_iter": 3},
        {"early_stopping": True, "max_iter": 3},
    ],
    ids=["adam", "token_statistics", "lbfgs", "early_stopping"],
)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fit_builds_the_model_once(monkeypatch, kwargs):
    X, y = order_task(n=40, n_tokens=4, width=3)
    calls = count_builds(monkeypatch)
    est = AttentionClassifier(n_heads=2, head_dim=2, random_state=0, **kwargs)
    est.set_params(**{"max_iter": kwargs.get("max_iter", 2)})
    est.fit(X, y)
    assert len(calls) == 1
    est.predict_proba(X)
    est.transform_sequences(X)
    assert len(calls) == 1  # the fitted model is reused, not rebuilt


def test_fitted_attributes_are_the_models_parameters():
    X, y = order_task(n=40, n_tokens=4, width=3)
    est = AttentionTransformer(n_heads=2, head_dim=2, max_iter=2, random_state=0)
    est.fit(X, y)
    params = est._fitted.params
    assert est.head_coef_ is params["head_coef"]
    assert est.layers_[0]["query"] is params["layers.0.query"]
    assert est.cls_token_ is None  # this model has no class token
    assert est.n_iter_ == 2 and len(est.loss_curve_) == 2
    assert (est.n_heads_, est.head_dim_, est.d_model_) == (2, 2, 4)


def test_assigning_a_parameter_changes_the_model_of_this_estimator_only():
    X = make_3d(n=6, n_tokens=4, width=3)
    est = AttentionTransformer(n_heads=2, head_dim=2, layer_norm="pre", random_state=0)
    est.fit(X)
    before = est.transform(X)
    other = copy.copy(est)  # shallow: shares the fitted model
    other.final_norm_weight_ = 2 * est.final_norm_weight_
    assert not np.allclose(other.transform(X), before)
    assert_array_equal(est.transform(X), before)  # the original is untouched
    layers = [dict(layer) for layer in est.layers_]
    layers[0]["value"] = np.zeros_like(layers[0]["value"])
    other.layers_ = layers
    assert not np.array_equal(other.layers_[0]["value"], est.layers_[0]["value"])
    with pytest.raises(AttributeError, match="cls_token_ cannot be set"):
        other.cls_token_ = np.ones(4)


def test_fitted_attributes_are_absent_before_fit():
    est = AttentionTransformer()
    for name in ("layers_", "head_coef_", "n_iter_", "d_model_"):
        assert not hasattr(est, name)
    with pytest.raises(AttributeError, match="layers_.*set by fit"):
        est.layers_  # noqa: B018


def test_a_pickle_holds_the_fitted_model_as_plain_types():
    X, y = order_task(n=40, n_tokens=4, width=3)
    est = AttentionClassifier(n_heads=2, head_dim=2, max_iter=2, random_state=0)
    est.fit(X, y)
    state = est.__getstate__()
    plain = (dict, list, tuple, str, int, float, bool, type(None), np.ndarray)

    def walk(value):
        assert isinstance(value, plain), type(value)
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(state["_fitted"])
    restored = pickle.loads(pickle.dumps(est))
    assert_array_equal(restored.predict_proba(X), est.predict_proba(X))
    assert restored.loss_curve_ == est.loss_curve_
    assert restored._fitted.optimizer_state["t"] == est._fitted.optimizer_state["t"]
