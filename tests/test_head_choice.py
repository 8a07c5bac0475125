"""The predictors' head chosen on a validation set: among penalties, and
between the whole head and the linear model of the tokens' statistics alone."""

import types
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import log_loss, mean_squared_error

from skattn import AttentionClassifier, AttentionRegressor
from skattn._estimators.predictors import head_outputs
from skattn._training import head
from skattn._training.head import (
    HEAD_ALPHAS,
    HEAD_VALIDATION_ALPHAS,
    fit_linear_head,
    rows_of,
)

pytestmark = pytest.mark.filterwarnings("ignore", category=ConvergenceWarning)


def targets(y, sample_weight, objective):
    """What the head reads of a training set."""
    return types.SimpleNamespace(
        y=y, sample_weight=sample_weight, objective=objective, weight_exponent=0
    )


def features_task(objective, informative, seed=0, n=240, n_pooled=30, n_stats=4):
    """Features of ``n_pooled`` pooled columns then ``n_stats`` statistics;
    the target depends on the ``informative`` block only."""
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((n, n_pooled + n_stats))
    block = (
        features[:, :n_pooled] if informative == "pooled" else features[:, n_pooled:]
    )
    signal = block[:, :3].sum(axis=1) + 0.5 * rng.standard_normal(n)
    if objective == "classification":
        y = np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3]))
    else:
        y = signal[:, None]
    weight = rng.uniform(0.5, 2.0, n)
    return features, targets(y, weight, objective), n_pooled


def reference_choice(features, data, n_pooled, fit_rows, val_rows):
    """Every candidate fitted by scikit-learn on the fit rows and scored on the
    validation rows; the first of least loss (the default first)."""
    classes = data.objective == "classification"
    alphas = HEAD_VALIDATION_ALPHAS if classes else HEAD_ALPHAS
    ordered = sorted(alphas, key=lambda a: (a != 1.0, a))
    w_fit, w_val = data.sample_weight[fit_rows], data.sample_weight[val_rows]
    best, best_loss = None, np.inf
    for start in (0, n_pooled):
        X_fit, X_val = features[fit_rows, start:], features[val_rows, start:]
        for alpha in ordered:
            if classes:
                model = LogisticRegression(C=1 / alpha, max_iter=1000)
                model.fit(X_fit, data.y[fit_rows], sample_weight=w_fit)
                loss = log_loss(
                    data.y[val_rows], model.predict_proba(X_val), sample_weight=w_val
                )
            else:
                model = Ridge(alpha=alpha).fit(
                    X_fit, data.y[fit_rows], sample_weight=w_fit
                )
                loss = mean_squared_error(
                    data.y[val_rows], model.predict(X_val), sample_weight=w_val
                )
            if loss < best_loss - 1e-9:
                best, best_loss = (alpha, start), loss
    return best


@pytest.mark.parametrize("objective", ["classification", "regression"])
@pytest.mark.parametrize("informative", ["pooled", "statistics"])
def test_head_is_the_candidate_of_least_validation_loss(objective, informative):
    """The chosen head is scikit-learn's candidate of least weighted
    validation loss, refitted on all the rows; the statistics alone put the
    pooled rows at zero."""
    features, data, n_pooled = features_task(objective, informative)
    val_rows = np.arange(0, len(features), 4)
    fit_rows = np.setdiff1d(np.arange(len(features)), val_rows)
    validation = (fit_rows, features[val_rows], rows_of(data, val_rows))
    coef, intercept = fit_linear_head(
        features, data, n_pooled=n_pooled, validation=validation
    )
    alpha, start = reference_choice(features, data, n_pooled, fit_rows, val_rows)
    if informative == "statistics":  # the pooled columns are noise
        assert start == n_pooled
    else:
        assert start == 0
    X = features[:, start:]
    if objective == "classification":
        model = LogisticRegression(C=1 / alpha, max_iter=1000)
        model.fit(X, data.y, sample_weight=data.sample_weight)
        expected = model.decision_function(X)
    else:
        model = Ridge(alpha=alpha).fit(X, data.y, sample_weight=data.sample_weight)
        expected = model.predict(X).reshape(len(X), -1)
    np.testing.assert_array_equal(coef[:start], 0)
    np.testing.assert_allclose(
        features @ coef + intercept, expected, rtol=1e-4, atol=1e-4
    )


def test_head_without_validation_keeps_the_default_penalty():
    features, data, _ = features_task("classification", "statistics")
    coef, intercept = fit_linear_head(features, data, n_pooled=30)
    model = LogisticRegression(C=1.0, max_iter=1000)
    model.fit(features, data.y, sample_weight=data.sample_weight)
    np.testing.assert_allclose(
        features @ coef + intercept,
        model.decision_function(features),
        rtol=1e-4,
        atol=1e-4,
    )


def test_class_missing_from_the_fit_rows_keeps_the_default_head():
    features, data, n_pooled = features_task("classification", "statistics")
    val_rows = np.flatnonzero(data.y == 2)  # a class held out whole
    fit_rows = np.flatnonzero(data.y != 2)
    choice = head.choose_head(
        features, data, n_pooled, fit_rows, features[val_rows], rows_of(data, val_rows)
    )
    assert choice == (1.0, 0)


def wide_task(n=120, n_tokens=4, width=12, seed=0):
    """Tokens wide enough for the tokens' statistics (``token_statistics``)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_tokens, width))
    signal = X[:, :, 0].mean(axis=1)
    return X, (signal > np.median(signal)).astype(int), signal


@pytest.mark.parametrize("make", [AttentionClassifier, AttentionRegressor])
def test_predictors_choose_the_head_on_early_stoppings_held_out_rows(make, monkeypatch):
    """With early stopping the head is chosen on the held-out rows, among
    candidates fitted on the rows the model trained on; with X_val, on X_val's
    features, among candidates fitted on all of X; without early stopping,
    nothing is chosen."""
    calls = []
    choose = head.choose_head

    def recording(features, data, n_pooled, fit_rows, val_features, val_data):
        calls.append((len(features), n_pooled, fit_rows, val_features, val_data))
        return choose(features, data, n_pooled, fit_rows, val_features, val_data)

    monkeypatch.setattr(head, "choose_head", recording)
    X, labels, signal = wide_task()
    y = labels if make is AttentionClassifier else signal
    kwargs = dict(n_heads=2, head_dim=4, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = make(early_stopping=True, validation_fraction=0.25, **kwargs).fit(X, y)
        n, n_pooled, fit_rows, val_features, val_data = calls.pop()
        assert n == len(X) and n_pooled == est.d_model_
        assert len(fit_rows) + len(val_features) == len(X)
        assert len(val_data.y) == len(val_features) == 30
        est_val = make(early_stopping=True, **kwargs).fit(
            X[:90], y[:90], X_val=X[90:], y_val=y[90:]
        )
        n, _, fit_rows, val_features, _ = calls.pop()
        assert n == 90 and fit_rows == slice(None) and len(val_features) == 30
        # the validation features are those of X_val under the fitted model
        outputs = val_features @ est_val.head_coef_ + est_val.head_intercept_
        np.testing.assert_allclose(
            outputs, head_outputs(est_val, X[90:]), rtol=1e-5, atol=1e-6
        )
        make(early_stopping=False, **kwargs).fit(X, y)
    assert calls == []
