"""AttentionClassifier and AttentionRegressor: predictions of the head that
AttentionTransformer trains and sets aside, and their per-token methods."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from skattn import AttentionClassifier, AttentionRegressor, AttentionTransformer

pytestmark = pytest.mark.filterwarnings("ignore", category=ConvergenceWarning)

PARAMS = dict(n_heads=2, head_dim=4, max_iter=15, random_state=0)


def make_data(n=60, n_tokens=5, width=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_tokens, width))
    signal = X[:, :, 0].mean(axis=1)
    return X, signal


def head(transformer, X):
    return (
        transformer.transform(X) @ transformer.head_coef_ + transformer.head_intercept_
    )


@pytest.mark.parametrize("width", [3, 12])  # 12: with the tokens' statistics
@pytest.mark.parametrize("solver", ["lbfgs", "adam"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_agrees_with_transformer_head(solver, n_classes, width):
    X, signal = make_data(width=width)
    y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, n_classes + 1)[1:-1]))
    labels = np.array(["a", "b", "c"])[y]
    clf = AttentionClassifier(solver=solver, **PARAMS).fit(X, labels)
    att = AttentionTransformer(objective="classification", solver=solver, **PARAMS).fit(
        X, labels
    )
    logits = head(att, X)
    np.testing.assert_array_equal(clf.classes_, att.classes_)
    np.testing.assert_array_equal(clf.predict(X), att.classes_[logits.argmax(1)])
    proba = np.exp(logits - logits.max(1, keepdims=True))
    proba /= proba.sum(1, keepdims=True)
    np.testing.assert_allclose(clf.predict_proba(X), proba, rtol=0, atol=1e-12)
    expected = logits[:, 1] - logits[:, 0] if n_classes == 2 else logits
    np.testing.assert_allclose(clf.decision_function(X), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        clf.predict_log_proba(X), np.log(proba), rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("width", [3, 12])
@pytest.mark.parametrize("solver", ["lbfgs", "adam"])
@pytest.mark.parametrize("n_outputs", [None, 2])
def test_regressor_agrees_with_transformer_head(solver, n_outputs, width):
    X, signal = make_data(width=width)
    y = 100 + 7 * signal
    if n_outputs:
        y = np.column_stack([y, -3 * signal])
    reg = AttentionRegressor(solver=solver, **PARAMS).fit(X, y)
    att = AttentionTransformer(objective="regression", solver=solver, **PARAMS).fit(
        X, y
    )
    mean, scale = att._target_scaling()
    expected = head(att, X) * scale + mean
    y_pred = reg.predict(X)
    assert y_pred.shape == y.shape  # 1-D for a 1-D y
    np.testing.assert_allclose(y_pred, expected.reshape(y.shape), rtol=1e-12, atol=0)


def test_partial_fit_leaves_the_statistics_out_of_the_head():
    """partial_fit trains the model and its head on the pooled vector: the
    head's rows of the tokens' statistics stay zero (fit fits them)."""
    X, signal = make_data(width=12)
    y = (signal > 0).astype(int)
    clf = AttentionClassifier(**PARAMS).partial_fit(X, y, classes=[0, 1])
    n_pooled = clf.d_model_
    assert clf.head_coef_.shape[0] == n_pooled + 5 * 12
    assert not clf.head_coef_[n_pooled:].any()
    without = AttentionClassifier(token_statistics=None, **PARAMS)
    without.partial_fit(X, y, classes=[0, 1])  # the same draws, the same training
    np.testing.assert_array_equal(clf.head_coef_[:n_pooled], without.head_coef_)
    clf.fit(X, y)
    assert clf.head_coef_[n_pooled:].any()


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
@pytest.mark.parametrize("make", [AttentionClassifier, AttentionRegressor])
def test_the_model_with_statistics_trains_as_the_model_without(make, solver):
    """The head's rows of the tokens' statistics start at zero and the rest
    is drawn as without statistics: the model trains to the same weights
    (fit then fits the whole head)."""
    X, signal = make_data(width=12)
    y = (signal > 0).astype(int) if make is AttentionClassifier else signal
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with_statistics, without = (
            make(token_statistics=statistics, solver=solver, **PARAMS).fit(X, y)
            for statistics in (["mean", "max"], None)
        )
    assert with_statistics.head_coef_.shape[0] == without.d_model_ + 2 * 12
    for trained, reference in zip(
        with_statistics.layers_, without.layers_, strict=True
    ):
        assert trained.keys() == reference.keys()
        for key in trained:
            np.testing.assert_array_equal(trained[key], reference[key])
    np.testing.assert_array_equal(
        with_statistics.input_weights_, without.input_weights_
    )


def test_classifier_proba_and_score():
    X, signal = make_data(n=80)
    y = (signal > 0).astype(int)
    clf = AttentionClassifier(solver="lbfgs", max_iter=50, random_state=0).fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (80, 2)
    np.testing.assert_allclose(proba.sum(1), 1, rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(1)], clf.predict(X))
    assert clf.decision_function(X).shape == (80,)
    np.testing.assert_array_equal(clf.decision_function(X) > 0, clf.predict(X) == 1)
    assert clf.score(X, y) > 0.9
    assert clf.score(X, y) == np.mean(clf.predict(X) == y)


def test_regressor_score_and_column_target():
    X, signal = make_data(n=80)
    y = 5 + 2 * signal
    reg = AttentionRegressor(solver="lbfgs", max_iter=50, random_state=0)
    assert reg.fit(X, y).score(X, y) > 0.9
    column = clone(reg).fit(X, y[:, None])
    assert column.predict(X).shape == (80,)
    np.testing.assert_allclose(column.predict(X), reg.predict(X), rtol=1e-12)


def test_ragged_sequences_and_float32():
    X, signal = make_data()
    ragged = [x[: 2 + i % 4] for i, x in enumerate(X)]
    y = (signal > 0).astype(int)
    clf = AttentionClassifier(**PARAMS).fit(ragged, y)
    assert clf.predict_proba(ragged).shape == (len(ragged), 2)
    reg = AttentionRegressor(**PARAMS).fit(X.astype(np.float32), signal)
    assert reg.predict(X.astype(np.float32)).shape == (len(X),)


def test_partial_fit():
    X, signal = make_data(n=90)
    y = np.digitize(signal, [-0.3, 0.3])
    clf = AttentionClassifier(**PARAMS)
    clf.partial_fit(X[:30], y[:30], classes=[0, 1, 2])
    for start in (30, 60):
        clf.partial_fit(X[start : start + 30], y[start : start + 30])
    assert clf.n_iter_ == 3
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2])
    assert clf.predict_proba(X).shape == (90, 3)

    reg = AttentionRegressor(**PARAMS)
    losses = [reg.partial_fit(X, signal).loss_ for _ in range(5)]
    assert reg.n_iter_ == 5 and losses[-1] < losses[0]
    assert reg.predict(X).shape == (90,)

    assert not hasattr(AttentionRegressor(solver="lbfgs"), "partial_fit")


def test_no_objective_parameter():
    for cls in (AttentionClassifier, AttentionRegressor):
        params = cls().get_params()
        assert "objective" not in params
        transformer = set(AttentionTransformer().get_params()) - {"objective"}
        assert set(params) == transformer
        assert "objective :" not in cls.__doc__
        assert "token_statistics :" in cls.__doc__
        assert "random_state :" in cls.__doc__


def test_regressor_refuses_class_labels_and_classifier_continuous():
    X, signal = make_data()
    with pytest.raises(ValueError, match="Unknown label type"):
        AttentionClassifier(**PARAMS).fit(X, signal)
    with pytest.raises(ValueError, match="numeric"):
        AttentionRegressor(**PARAMS).fit(X, np.array(["a", "b"] * 30))


def _wide_task(n=80, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5, 12))
    y = np.digitize(X[:, :, 0].mean(axis=1), [-0.2, 0.2])[:n] % n_classes
    return X, y


def test_head_with_token_statistics_is_a_logistic_regression_of_transform():
    """token_statistics: once the model is trained, the head is the logistic
    regression (C=1) of the pooled vector and the tokens' statistics."""
    from sklearn.linear_model import LogisticRegression

    X, y = _wide_task()
    kwargs = dict(n_heads=2, head_dim=4, max_iter=3, random_state=0)
    clf = AttentionClassifier(**kwargs).fit(X, y)  # "auto": 12 features
    transformer = AttentionTransformer(**kwargs).fit(X, y)
    Z = transformer.transform(X)
    assert Z.shape[1] == 8 + 5 * 12 == clf.head_coef_.shape[0]
    np.testing.assert_array_equal(transformer.head_coef_, clf.head_coef_)
    reference = LogisticRegression(max_iter=1000).fit(Z, y)
    np.testing.assert_allclose(clf.head_coef_, reference.coef_.T, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(
        clf.predict_proba(X), reference.predict_proba(Z), atol=1e-6
    )


@pytest.mark.parametrize("make", [AttentionClassifier, AttentionRegressor])
def test_head_of_a_table_reads_its_row_beside_the_pooled_vector(make):
    """With token_statistics=["flatten"] (the "auto" of a table) the
    refitted head reads the standardised row beside the pooled vector, so
    that on a target linear in the columns a short fit scores as the linear
    model does, where the pooled vector alone does not."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 6))
    w = rng.standard_normal(6)
    y = X @ w + 0.01 * rng.standard_normal(80)
    if make is AttentionClassifier:
        y = (y > 0).astype(int)
    kwargs = dict(max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = make(**kwargs).fit(X[:60], y[:60])
        pooled_only = make(token_statistics=None, **kwargs).fit(X[:60], y[:60])
    assert est.token_statistics_ == ("flatten",)
    assert est.head_coef_.shape[0] == est.d_model_ + 6
    scores = est.score(X[60:], y[60:]), pooled_only.score(X[60:], y[60:])
    assert scores[0] >= 0.95 > scores[1] + 0.1


def test_flatten_statistic_needs_a_table_without_patches():
    X = np.random.default_rng(0).standard_normal((6, 8, 2))
    with pytest.raises(ValueError, match="needs a table read without patches"):
        AttentionTransformer(token_statistics=["flatten"]).fit(X)
    with pytest.raises(ValueError, match="got patches of a table"):
        AttentionTransformer(token_statistics=["flatten"], patch_size=2).fit(
            X.reshape(6, -1)
        )
    # "auto" on patches of a table trained on y: no statistics
    y = np.linspace(0.1, 1.3, 6)
    est = AttentionTransformer(
        patch_size=2, n_heads=2, max_iter=2, objective="regression"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert est.fit(X.reshape(6, -1), y).token_statistics_ == ()


def test_head_of_two_classes_is_the_log_odds_of_the_second():
    from sklearn.linear_model import LogisticRegression

    X, y = _wide_task(n_classes=2)
    transformer = AttentionTransformer(n_heads=2, head_dim=4, max_iter=2).fit(X, y)
    reference = LogisticRegression(max_iter=1000).fit(transformer.transform(X), y)
    np.testing.assert_array_equal(transformer.head_coef_[:, 0], 0)
    np.testing.assert_allclose(
        transformer.head_coef_[:, 1], reference.coef_[0], rtol=1e-4, atol=1e-6
    )


@pytest.mark.parametrize("width", [3, 12])  # 12: with the tokens' statistics
def test_regressor_head_is_the_ridge_of_least_leave_one_out_error(width):
    """Once the model is trained, the head is refitted, with or without the
    tokens' statistics: the ridge of the standardised targets on transform's
    features, its penalty the one of HEAD_ALPHAS of least leave-one-out error
    (a fit stopped early gets a head fitted to its features)."""
    from sklearn.linear_model import Ridge, RidgeCV

    from skattn._training.head import HEAD_ALPHAS

    X, _ = _wide_task()
    X = X[:, :, :width]
    y = X[:, :, :2].mean(axis=1) * 3 + 5  # two targets
    kwargs = dict(n_heads=2, head_dim=4, max_iter=3, random_state=0)
    reg = AttentionRegressor(**kwargs).fit(X, y)
    Z = AttentionTransformer(**kwargs).fit(X, y).transform(X)
    standardised = (y - y.mean(axis=0)) / y.std(axis=0)
    reference = RidgeCV(alphas=HEAD_ALPHAS).fit(Z, standardised)
    assert reference.alpha_ != 1.0  # scikit-learn's default would differ
    np.testing.assert_allclose(reg.head_coef_, reference.coef_.T, rtol=1e-6, atol=1e-9)
    prediction = reference.predict(Z) * y.std(axis=0) + y.mean(axis=0)
    np.testing.assert_allclose(reg.predict(X), prediction, rtol=1e-6)
    default = Ridge(alpha=1.0).fit(Z, standardised)
    assert not np.allclose(reg.head_coef_, default.coef_.T, rtol=1e-3)


@pytest.mark.parametrize("make", [AttentionClassifier, AttentionRegressor])
def test_refitted_head_counts_a_weight_of_two_as_two_samples(make, monkeypatch):
    """The head's penalty is against the weights as given (times 2**k as
    normalised): weights of 0, 1 and 2 fit the head of the repeated samples,
    at one penalty (the regressor's choice among several is by leave-one-out
    error, which repetition changes)."""
    from skattn._training import head

    monkeypatch.setattr(head, "HEAD_ALPHAS", np.array([0.3]))
    X, y = _wide_task()
    if make is AttentionRegressor:
        y = X[:, :, :2].mean(axis=(1, 2)) * 3 + 5
    weight = np.random.default_rng(0).integers(0, 3, len(y)).astype(float)
    repeated = np.repeat(np.arange(len(y)), weight.astype(int))
    kwargs = dict(n_heads=2, head_dim=4, max_iter=5, solver="lbfgs", random_state=0)
    weighted = make(**kwargs).fit(X, y, sample_weight=weight * 8.0)
    weighted_once = make(**kwargs).fit(X, y, sample_weight=weight)
    twice = make(**kwargs).fit(X[repeated], y[repeated])
    np.testing.assert_allclose(
        weighted_once.head_coef_, twice.head_coef_, rtol=1e-4, atol=1e-6
    )
    # eight times the weights: eight times the data against the same penalty
    assert not np.allclose(weighted.head_coef_, twice.head_coef_, rtol=1e-3)


def test_partial_fit_trains_the_model_and_leaves_the_statistics_head():
    X, y = _wide_task()
    clf = AttentionClassifier(n_heads=2, head_dim=4, max_iter=2, random_state=0)
    clf.fit(X, y)
    head = clf.head_coef_.copy()
    clf.partial_fit(X, y)
    np.testing.assert_array_equal(clf.head_coef_[8:], head[8:])  # statistics
    assert not np.array_equal(clf.head_coef_[:8], head[:8])  # the pooled vector


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "make, methods",
    [
        (AttentionClassifier, ["predict_proba", "decision_function"]),
        (AttentionRegressor, ["predict"]),
    ],
    ids=["classifier", "regressor"],
)
def test_a_row_is_predicted_as_if_alone_to_float_rounding(make, methods, dtype):
    """A sample's prediction alone, in batches of seven or with all sixty
    agrees to float rounding, not to the bit: BLAS sums a row's products in
    an order that depends on the rows multiplied with it (measured: at most
    16 units in the last place of float32, 24 of float64). The documented
    guarantee (user guide, "Performance" and "dask") is this one."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 9, 24)).astype(dtype)
    y = (X[:, 0, :3].sum(axis=1) > 0).astype(int)
    target = y if make is AttentionClassifier else y + 0.5
    est = make(max_iter=2, random_state=0).fit(X, target)
    rtol = 64 * np.finfo(dtype).eps
    for method in methods:
        full = getattr(est, method)(X)
        alone = np.concatenate([getattr(est, method)(X[i : i + 1]) for i in range(60)])
        blocks = np.concatenate(
            [getattr(est, method)(X[i : i + 7]) for i in range(0, 60, 7)]
        )
        for split in (alone, blocks):
            np.testing.assert_allclose(
                split, full, rtol=rtol, atol=rtol * np.abs(full).max(), err_msg=method
            )


def test_stacking_with_a_linear_model_keeps_its_score_on_a_linear_target():
    """The user guide's stack (learning.rst): AttentionRegressor beside RidgeCV
    in scikit-learn's StackingRegressor. On a few samples of a noisy linear
    target the stack scores within 0.05 of the ridge alone, and leans on the
    ridge."""
    from sklearn.ensemble import StackingRegressor
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.standard_normal((150, 6))
    y = X @ rng.standard_normal(6) + rng.standard_normal(150)
    alphas = np.logspace(-3, 3, 13)
    attention = AttentionRegressor(n_heads=2, head_dim=4, max_iter=5, random_state=0)
    linear = make_pipeline(StandardScaler(), RidgeCV(alphas=alphas))
    stack = StackingRegressor(
        [("attention", make_pipeline(StandardScaler(), attention)), ("linear", linear)],
        final_estimator=RidgeCV(alphas=alphas),
        cv=3,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter=5
        stack.fit(X[:100], y[:100])
    ridge_score = clone(linear).fit(X[:100], y[:100]).score(X[100:], y[100:])
    assert stack.score(X[100:], y[100:]) >= ridge_score - 0.05
    weight_attention, weight_linear = stack.final_estimator_.coef_
    assert weight_linear > weight_attention


def make_series(n=40, n_tokens=100, seed=0):
    """Univariate series with a bump somewhere in the positive class."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_tokens, 1))
    y = np.arange(n) % 2
    starts = rng.integers(0, n_tokens - 10, size=n)
    for row in np.flatnonzero(y):
        X[row, starts[row] : starts[row] + 10, 0] += 3.0
    return X, y


@pytest.mark.parametrize("solver", ["lbfgs", "adam"])
def test_auto_pooling_takes_the_maximum_of_series_read_in_patches(solver):
    """pooling="auto" (the classifier's default) on series read in patches
    (a median length above 64) trains and predicts as pooling="max": the same
    model, the same decision function bit for bit."""
    X, y = make_series()
    auto = AttentionClassifier(solver=solver, **PARAMS).fit(X, y)
    explicit = clone(auto).set_params(pooling="max").fit(X, y)
    assert auto.patch_size_ is not None and auto.pooling_ == "max"
    assert auto._fitted.config == explicit._fitted.config
    np.testing.assert_array_equal(
        auto.decision_function(X), explicit.decision_function(X)
    )


@pytest.mark.parametrize(
    "X",
    [make_series(n_tokens=64)[0], make_data(n=40)[0], make_data(n=40)[0][:, :, 0]],
    ids=["series-too-short-for-patches", "wide-tokens", "table"],
)
def test_auto_pooling_takes_the_mean_of_other_input(X):
    """pooling="auto" pools the mean of input read without patches."""
    y = np.arange(len(X)) % 2
    auto = AttentionClassifier(**PARAMS).fit(X, y)
    explicit = clone(auto).set_params(pooling="mean").fit(X, y)
    assert auto.pooling_ == "mean"
    np.testing.assert_array_equal(
        auto.decision_function(X), explicit.decision_function(X)
    )


def test_auto_pooling_continues_the_model_it_resolved_to():
    """partial_fit with pooling="auto" continues a model whose "auto" became
    "max"; another pooling is refused, naming the fitted one."""
    X, y = make_series()
    model = AttentionClassifier(**PARAMS).fit(X, y)
    model.partial_fit(X, y)
    assert model.pooling_ == "max"
    with pytest.raises(ValueError, match="fitted with pooling='max'"):
        model.set_params(pooling="mean").partial_fit(X, y)
