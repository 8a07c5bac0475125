"""Training history: validation_loss_curve_ and an explicit validation set
(fit's X_val and y_val, as HistGradientBoostingClassifier's)."""

import inspect

import numpy as np
import pytest
import sklearn
from helpers import order_task
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import skattn._training.adam
from skattn import AttentionTransformer
from skattn._estimators.base import BaseAttention

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FAST = dict(max_iter=4, n_iter_no_change=10, random_state=0, head_dim=8)


@pytest.fixture
def split_spy(monkeypatch):
    """Record the rows early stopping's internal split picks."""
    picked = []
    split = skattn._training.adam.validation_split

    def spy(*args, **kwargs):
        train, validation = split(*args, **kwargs)
        picked.append((train, validation))
        return train, validation

    monkeypatch.setattr(skattn._training.adam, "validation_split", spy)
    return picked


def penalty(est):
    """0.5 * ||W||^2 over the penalised parameters of the fitted model."""
    model = est._fitted.model
    params = est._fitted.cast(np.float64)
    return sum(
        0.5 * np.sum(params[name] ** 2)
        for name, spec in model.param_specs().items()
        if spec.penalized
    )


def test_curve_lengths_and_absence():
    X, y = order_task(n=40)
    att = AttentionTransformer(early_stopping=True, **FAST).fit(X, y)
    assert att.early_stopping_
    assert len(att.validation_loss_curve_) == len(att.validation_scores_)
    assert len(att.validation_loss_curve_) == att.n_iter_ == 4
    assert all(np.isfinite(att.validation_loss_curve_))
    off = AttentionTransformer(early_stopping=False, **FAST).fit(X, y)
    assert off.validation_loss_curve_ is None and off.validation_scores_ is None


def test_validation_loss_by_hand_at_best_epoch(split_spy):
    """The best epoch's loss is the loss of the kept weights on the held-out rows:
    weighted cross-entropy (times class_weight) plus alpha / 2 ||W||^2 / sum(w)."""
    X, y = order_task(n=60)
    weight = np.random.RandomState(1).uniform(0.5, 3.0, len(y))
    att = AttentionTransformer(
        early_stopping=True,
        alpha=0.5,
        class_weight={0: 1.0, 1: 2.0},
        max_iter=6,
        n_iter_no_change=10,
        random_state=0,
        head_dim=8,
    ).fit(X, y, sample_weight=weight)
    ((_, validation),) = split_spy
    logits = att.transform(X[validation]) @ att.head_coef_ + att.head_intercept_
    log_likelihood = logits[np.arange(len(validation)), y[validation]] - logsumexp(
        logits, axis=1
    )
    w = weight[validation] * np.where(y[validation] == 1, 2.0, 1.0)
    expected = -np.dot(w, log_likelihood) / w.sum() + 0.5 * penalty(att) / w.sum()
    best = int(np.argmax(att.validation_scores_))
    assert att.validation_loss_curve_[best] == pytest.approx(expected, rel=1e-4)
    accuracy = np.mean(logits.argmax(axis=1) == y[validation])
    assert att.validation_scores_[best] == pytest.approx(accuracy)


def test_explicit_validation_loss_by_hand_regression(monkeypatch):
    """y_val is standardised with y's mean and scale (the loss_curve_ scale).

    The head is kept as trained at the best epoch (fit's refit of the head,
    tested in test_predictors.py, turned off) to compute the loss by hand."""
    monkeypatch.setattr(BaseAttention, "_fit_head", lambda self, train: None)
    X, labels = order_task(n=50)
    y = 10.0 + 3.0 * labels + np.random.RandomState(2).standard_normal(50)
    X_val, y_val = X[40:], y[40:]
    att = AttentionTransformer(alpha=0.0, max_iter=3, random_state=0, head_dim=8)
    att.fit(X[:40], y[:40], X_val=X_val, y_val=y_val)
    assert att.early_stopping_  # "auto" turns on with X_val
    target = (y_val - y[:40].mean()) / y[:40].std()
    predictions = att.transform(X_val) @ att.head_coef_ + att.head_intercept_
    expected = 0.5 * np.mean((predictions[:, 0] - target) ** 2)
    best = int(np.argmax(att.validation_scores_))
    assert att.validation_loss_curve_[best] == pytest.approx(expected, rel=1e-4)


def test_explicit_validation_set_equals_internal_split(split_spy):
    """Passing the rows the split picks as X_val trains the same model.

    shuffle=False and scale_tokens=False: then neither the training order nor the
    token statistics depend on where the validation rows come from."""
    X, y = order_task(n=60)
    params = dict(early_stopping=True, shuffle=False, scale_tokens=False, **FAST)
    internal = AttentionTransformer(**params).fit(X, y)
    ((train, validation),) = split_spy
    explicit = AttentionTransformer(**params).fit(
        X[train], y[train], X_val=X[validation], y_val=y[validation]
    )
    assert len(split_spy) == 1  # no split with X_val
    assert explicit.n_iter_ == internal.n_iter_
    assert_array_equal(explicit.loss_curve_, internal.loss_curve_)
    assert_array_equal(explicit.validation_scores_, internal.validation_scores_)
    assert_array_equal(explicit.validation_loss_curve_, internal.validation_loss_curve_)
    assert_array_equal(explicit.head_coef_, internal.head_coef_)


def test_X_val_read_as_X_with_data_format():
    """X_val goes through X's checks: a list of channels-first arrays is the
    same validation set as the 3D channels-first panel (and its own transpose)."""
    X, y = order_task(n=50)
    panel = np.ascontiguousarray(X.transpose(0, 2, 1))  # (n, C, T)
    att = AttentionTransformer(data_format="channels_first", **FAST)
    as_array = att.fit(panel[:40], y[:40], X_val=panel[40:], y_val=y[40:])
    scores, losses = as_array.validation_scores_, as_array.validation_loss_curve_
    as_list = att.fit(panel[:40], y[:40], X_val=list(panel[40:]), y_val=y[40:])
    assert_array_equal(as_list.validation_scores_, scores)
    assert_array_equal(as_list.validation_loss_curve_, losses)
    last = AttentionTransformer(**FAST).fit(X[:40], y[:40], X_val=X[40:], y_val=y[40:])
    assert_allclose(last.validation_loss_curve_, losses, rtol=1e-6)


def test_labels_of_y_val_encoded_as_y():
    X, y = order_task(n=50)
    labels = np.array(["no", "yes"])[y]
    att = AttentionTransformer(**FAST).fit(X[:40], y[:40], X_val=X[40:], y_val=y[40:])
    named = AttentionTransformer(**FAST).fit(
        X[:40], labels[:40], X_val=X[40:], y_val=labels[40:]
    )
    assert_array_equal(named.validation_loss_curve_, att.validation_loss_curve_)


@pytest.mark.skipif(
    "transform_input" not in inspect.signature(Pipeline).parameters,
    reason="Pipeline's transform_input needs scikit-learn 1.7",
)
def test_metadata_routing_in_a_pipeline():
    """set_fit_request routes X_val and y_val; transform_input scales X_val."""
    X, y = order_task(n=50)
    table = X.reshape(len(X), -1)
    with sklearn.config_context(enable_metadata_routing=True):
        att = AttentionTransformer(features_per_token=4, **FAST)
        pipe = Pipeline(
            [
                ("scale", StandardScaler()),
                ("att", att.set_fit_request(X_val=True, y_val=True)),
                ("clf", LogisticRegression()),
            ],
            transform_input=["X_val"],
        ).fit(table[:40], y[:40], X_val=table[40:], y_val=y[40:])
    fitted = pipe.named_steps["att"]
    assert fitted.early_stopping_ and len(fitted.validation_loss_curve_) == 4
    scaler = StandardScaler().fit(table[:40])
    direct = AttentionTransformer(features_per_token=4, **FAST).fit(
        scaler.transform(table[:40]),
        y[:40],
        X_val=scaler.transform(table[40:]),
        y_val=y[40:],
    )
    assert_array_equal(fitted.validation_loss_curve_, direct.validation_loss_curve_)


def test_partial_fit_takes_no_validation_set():
    assert "X_val" not in inspect.signature(AttentionTransformer.partial_fit).parameters
    X, y = order_task(n=30)
    att = AttentionTransformer(early_stopping=True, **FAST).partial_fit(X, y)
    assert att.validation_loss_curve_ is None and att.validation_scores_ is None


@pytest.mark.parametrize(
    "params, fit_params, message",
    [
        ({}, dict(X_val="X"), "X_val is provided, but y_val was not provided"),
        ({}, dict(y_val="y"), "y_val is provided, but X_val was not provided"),
        (dict(early_stopping=False), dict(X_val="X", y_val="y"), "early_stopping"),
        (dict(solver="lbfgs"), dict(X_val="X", y_val="y"), "solver='adam'"),
        ({}, dict(X_val="narrow", y_val="y"), "X_val: .*features"),
        ({}, dict(X_val="X", y_val="short"), "inconsistent numbers of samples"),
        ({}, dict(X_val="X", y_val="unseen"), r"y_val has labels \[7\]"),
        ({}, dict(X_val="X", y_val="2d"), "y_val must be 1-D"),
    ],
)
def test_validation_set_errors(params, fit_params, message):
    X, y = order_task(n=30)
    values = {
        "X": X[20:],
        "y": y[20:],
        "narrow": X[20:, :, :3],
        "short": y[20:25],
        "unseen": np.r_[y[20:29], 7],
        "2d": np.c_[y[20:], y[20:]],
    }
    fit_params = {key: values[value] for key, value in fit_params.items()}
    att = AttentionTransformer(**{**FAST, **params})
    with pytest.raises(ValueError, match=message):
        att.fit(X[:20], y[:20], **fit_params)


def test_validation_set_errors_without_target_or_with_wrong_outputs():
    X, y = order_task(n=30)
    with pytest.raises(ValueError, match="nothing is learned"):
        AttentionTransformer(**FAST).fit(X[:20], X_val=X[20:], y_val=y[20:])
    targets = np.random.RandomState(0).standard_normal((30, 2))
    with pytest.raises(ValueError, match="y_val has 1 outputs, but y has 2"):
        AttentionTransformer(**FAST).fit(
            X[:20], targets[:20], X_val=X[20:], y_val=targets[20:, 0]
        )
