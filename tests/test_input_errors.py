"""Weights that are not weights, and input whose message must name the problem.

Each test failed on the code before its fix: with NaN weights, a
ZeroDivisionError, a constant model, or a message of numpy or of an internal
helper instead of one that names the parameter.
"""

import warnings

import numpy as np
import pytest
from helpers import make_3d
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from skattn import AttentionClassifier, AttentionTransformer, RandomAttentionFeatures

FAST = dict(max_iter=3, random_state=0)


def _classification(n=30):
    X = make_3d(n=n, n_tokens=5, width=3)
    return X, np.arange(n) % 2


def _regression(n=30):
    X = make_3d(n=n, n_tokens=5, width=3)
    return X, np.random.default_rng(1).standard_normal(n)


def _fit(est, *args, **kwargs):
    """Fit without the ConvergenceWarning of three epochs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*args, **kwargs)


# Weights that are not weights
# -------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0, "heavy"])
def test_class_weight_values_are_checked(bad):
    # NaN and inf trained to NaN, a negative weight was accepted (a negative
    # sample_weight is not) and a string failed in numpy's float conversion
    X, y = _classification()
    est = AttentionTransformer(class_weight={0: bad, 1: 1.0}, **FAST)
    with pytest.raises(ValueError, match=r"class_weight\[0\] .*finite.*non-negative"):
        _fit(est, X, y)


def test_class_weight_of_zero_for_every_class_is_an_error():
    # ZeroDivisionError in the loss before
    X, y = _classification()
    est = AttentionTransformer(class_weight={0: 0, 1: 0.0}, **FAST)
    with pytest.raises(ValueError, match="class_weight=.* gives every sample"):
        _fit(est, X, y)


def test_class_weight_of_zero_on_every_sample_of_a_partial_fit_batch():
    # a batch of class 0 only, which class_weight weighs 0: ZeroDivisionError
    X, y = _classification()
    est = AttentionTransformer(class_weight={0: 0, 1: 1}, **FAST)
    with pytest.raises(ValueError, match="class_weight=.* gives every sample"):
        est.partial_fit(X[y == 0], y[y == 0], classes=[0, 1])


def test_balanced_class_weight_names_the_missing_class_in_partial_fit():
    # scikit-learn's "classes should have valid labels that are in y" before
    X, y = _classification()
    est = AttentionTransformer(class_weight="balanced", **FAST)
    with pytest.raises(ValueError, match=r"class_weight='balanced'.*\[1\]"):
        est.partial_fit(X[y == 0], y[y == 0], classes=[0, 1])


def test_a_validation_split_of_zero_weight_is_named(monkeypatch):
    """Early stopping whose held-out samples all weigh zero raised
    ZeroDivisionError (their validation loss is 0 / 0)."""
    import skattn._training.adam

    X, y = _classification()
    picked = []
    split = skattn._training.adam.validation_split

    def spy(*args, **kwargs):
        picked.append(split(*args, **kwargs))
        return picked[-1]

    monkeypatch.setattr(skattn._training.adam, "validation_split", spy)
    est = AttentionTransformer(early_stopping=True, **FAST).fit(X, y)
    ((_, validation),) = picked  # the same rows at the next fit: the same seed
    weight = np.ones(len(y))
    weight[validation] = 0
    with pytest.raises(ValueError, match=r"held out \d+ sample\(s\).*all weigh zero"):
        est.fit(X, y, sample_weight=weight)


def test_minibatch_of_zero_weight_is_skipped():
    # a minibatch whose samples all weigh 0 divided by zero
    X, y = _classification()
    weight = np.zeros(len(y))
    weight[:4] = 1.0
    est = AttentionTransformer(batch_size=4, shuffle=False, **FAST)
    _fit(est, X, y, sample_weight=weight)
    # the same model as training on the weighted samples alone, one batch an epoch
    alone = _fit(
        AttentionTransformer(batch_size=4, shuffle=False, **FAST), X[:4], y[:4]
    )
    np.testing.assert_allclose(est.transform(X), alone.transform(X), rtol=1e-5)


@pytest.mark.parametrize(
    "solver, factor",
    [("adam", 2.0**1020), ("adam", 2.0**-1040), ("lbfgs", 2.0**1020)],
    ids=["adam-2**1020", "adam-2**-1040", "lbfgs-2**1020"],
)
def test_sample_weight_scale_moves_only_the_penalty(solver, factor):
    # weights of 2**1020 overflowed float32 (NaN; in float64 their sum) and
    # 2**-1040 rounded to zero in float32 (ZeroDivisionError). All weights times
    # c is the objective of unit weights with alpha / c, the weights counting
    # as repeated samples: for a power of two c, the same model to the bit
    X, y = _classification()
    kwargs = dict(solver=solver, **FAST)
    unit = _fit(AttentionTransformer(alpha=2.0**-13, **kwargs), X, y)
    scaled = _fit(
        AttentionTransformer(alpha=2.0**-13 * factor, **kwargs),
        X,
        y,
        sample_weight=np.full(len(y), factor),
    )
    np.testing.assert_array_equal(scaled.transform(X), unit.transform(X))
    assert scaled.loss_ == unit.loss_


@pytest.mark.parametrize("factor", [1e308, 1e-320])
def test_extreme_sample_weight_without_penalty_trains_as_unit_weights(factor):
    X, y = _classification()
    unit = _fit(AttentionTransformer(alpha=0, **FAST), X, y)
    scaled = _fit(
        AttentionTransformer(alpha=0, **FAST), X, y, sample_weight=np.full(30, factor)
    )
    # float32 rounding: sum(c * loss) / sum(c) is not sum(loss) / n to the bit
    np.testing.assert_allclose(scaled.transform(X), unit.transform(X), atol=1e-6)


def test_penalty_that_overflows_names_sample_weight_and_alpha():
    # alpha / sum(sample_weight) = 1e-4 / 3e-319 is beyond any float
    X, y = _classification()
    est = AttentionTransformer(**FAST)
    with pytest.raises(ValueError, match=r"alpha / sum\(sample_weight\).*alpha=0"):
        _fit(est, X, y, sample_weight=np.full(len(y), 1e-320))


def test_random_features_token_statistics_with_huge_sample_weight():
    # w * x overflowed: token_mean_ was NaN
    X, _ = _classification()
    unit = RandomAttentionFeatures(n_models=2, random_state=0).fit(X)
    huge = RandomAttentionFeatures(n_models=2, random_state=0).fit(
        X, sample_weight=np.full(len(X), 1e308)
    )
    np.testing.assert_allclose(huge.token_mean_, unit.token_mean_, rtol=1e-12)
    np.testing.assert_allclose(huge.token_scale_, unit.token_scale_, rtol=1e-12)


@pytest.mark.parametrize("factor", [1e200, 1e-250])
@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_regression_target_of_any_scale(factor, solver):
    # beyond 1e155 the variance overflowed (every target standardised to 0),
    # below 1e-160 it underflowed (scale 1: targets of 1e-250 are all 0)
    X, y = _regression()
    plain = _fit(AttentionTransformer(solver=solver, **FAST), X, y)
    scaled = _fit(AttentionTransformer(solver=solver, **FAST), X, y * factor)
    np.testing.assert_allclose(scaled.transform(X), plain.transform(X), rtol=1e-6)
    assert scaled.loss_ == pytest.approx(plain.loss_, rel=1e-6)


def test_regression_target_near_the_largest_float():
    # y - mean overflowed to inf for targets of either sign near 1.8e308
    X, y = _regression()
    est = AttentionTransformer(objective="regression", **FAST)
    plain = _fit(clone(est), X, np.sign(y))
    scaled = _fit(clone(est), X, np.sign(y) * 1.7e308)
    np.testing.assert_allclose(scaled.transform(X), plain.transform(X), rtol=1e-6)


# Messages that name the problem
# ----------------------------------------------------


def test_ragged_list_whose_first_element_is_1d():
    # numpy's "inhomogeneous shape" before; a later 1-D element was named
    X = [np.ones(3), np.ones((2, 3))]
    with pytest.raises(ValueError, match=r"X\[0\] must be a 2D array"):
        AttentionTransformer(**FAST).fit(X)
    with pytest.raises(ValueError, match=r"X\[0\] must be a 2D array"):
        RandomAttentionFeatures().fit(X)


def test_table_rows_of_different_lengths():
    with pytest.raises(ValueError, match=r"X\[1\] has shape \(2,\), but X\[0\]"):
        AttentionTransformer(**FAST).fit([[1.0, 2.0, 3.0], [1.0, 2.0]])


@pytest.mark.parametrize(
    "make", [lambda X: (x for x in X), lambda X: iter(list(X))], ids=["gen", "iter"]
)
def test_iterator_as_x(make):
    # "float() argument must be a string or a real number, not 'generator'"
    X, y = _classification()
    with pytest.raises(TypeError, match=r"X must be an array-like.*list\(X\)"):
        AttentionTransformer(**FAST).fit(make(X), y)
    with pytest.raises(TypeError, match=r"X must be an array-like"):
        RandomAttentionFeatures().fit(make(X))
    with pytest.raises(TypeError, match=r"X must be an array-like.*set"):
        AttentionTransformer(**FAST).fit({1.0, 2.0}, y)


def test_generator_as_y_or_sample_weight():
    X, y = _classification()
    with pytest.raises(TypeError, match=r"y must be an array-like.*list\(y\)"):
        AttentionTransformer(**FAST).fit(X, (v for v in y))
    with pytest.raises(TypeError, match=r"sample_weight must be an array-like"):
        AttentionTransformer(**FAST).fit(X, y, sample_weight=(1.0 for _ in y))


@pytest.mark.parametrize(
    "param, value",
    [("n_heads", True), ("head_dim", True), ("max_iter", True), ("alpha", False)],
)
def test_bool_is_not_a_number(param, value):
    # n_heads=True built a one-head model: bool is an Integral
    X, y = _classification()
    est = AttentionTransformer(**{**FAST, param: value})
    with pytest.raises(InvalidParameterError, match=f"'{param}' parameter.*Got"):
        _fit(est, X, y)


def test_bool_is_not_a_number_of_models():
    with pytest.raises(InvalidParameterError, match="'n_models' parameter"):
        RandomAttentionFeatures(n_models=True).fit(make_3d())


def test_early_stopping_split_without_a_sample_per_class():
    # train_test_split's "test_size=5 should be either positive and smaller
    # than the number of samples 5" before: a parameter skattn does not have
    X = make_3d(n=5, n_tokens=4, width=3)
    est = AttentionTransformer(early_stopping=True, validation_fraction=0.5, **FAST)
    with pytest.raises(ValueError, match=r"early_stopping.*validation_fraction") as exc:
        est.fit(X, np.array([0, 1, 2, 0, 1]))
    assert "test_size" not in str(exc.value)


def test_early_stopping_split_that_leaves_fewer_samples_than_classes():
    # "The train_size = 1 should be greater or equal to the number of classes"
    X = make_3d(n=4, n_tokens=4, width=3)
    est = AttentionTransformer(early_stopping=True, validation_fraction=0.6, **FAST)
    with pytest.raises(ValueError, match=r"validation_fraction=0.6.*leaves 1"):
        est.fit(X, np.array([0, 1, 0, 1]))


def test_early_stopping_split_with_only_classes_of_one_sample():
    # "The least populated classes in y have only 1 member" before; a class
    # of one sample beside larger ones trains (test_training.py)
    X = make_3d(n=3, n_tokens=4, width=3)
    est = AttentionTransformer(early_stopping=True, **FAST)
    with pytest.raises(ValueError, match=r"early_stopping.*only one sample"):
        est.fit(X, np.array([0, 1, 2]))


def test_early_stopping_split_of_one_sample():
    X, y = _regression(n=1)
    est = AttentionTransformer(early_stopping=True, **FAST)
    with pytest.raises(ValueError, match=r"early_stopping.*leaves no sample"):
        est.fit(X, y)


def test_partial_fit_classes_with_a_continuous_target():
    # classes were silently ignored, and the model learned a regression
    X, y = _regression()
    with pytest.raises(ValueError, match=r"classes=\[0, 1\] .*continuous"):
        AttentionTransformer(**FAST).partial_fit(X, y, classes=[0, 1])


def test_partial_fit_classes_that_change_between_calls():
    # as SGDClassifier: the second call's classes were silently ignored
    X, y = _classification()
    est = AttentionTransformer(**FAST).partial_fit(X, y, classes=[0, 1])
    est.partial_fit(X, y, classes=[1, 0])  # the same classes
    with pytest.raises(ValueError, match=r"classes=\[0, 1, 2\] .*\[0, 1\]"):
        est.partial_fit(X, y, classes=[0, 1, 2])


def test_partial_fit_with_no_classes():
    # IndexError while formatting the message of one class before
    X, y = _classification()
    with pytest.raises(ValueError, match=r"classes=\[\] has no class"):
        AttentionTransformer(**FAST).partial_fit(X, y, classes=[])


def test_adam_gradient_overflow_is_an_error():
    """A penalty huge against the sum of the weights (alpha / sum(w) ~ 1e26)
    gives float32 gradients above 1.8e19: Adam's second moment became inf and
    those weights silently never moved again."""
    X, y = make_3d(n=40, n_tokens=5, width=3, dtype=np.float32), np.arange(40) % 2
    est = AttentionTransformer(max_iter=3, random_state=0)
    with pytest.raises(ValueError, match=r"Adam's gradients of \d+ weight array"):
        est.fit(X, y, sample_weight=np.full(40, 1e-30))


@pytest.mark.parametrize("objective", ["auto", "classification"])
def test_a_continuous_target_of_a_classification_is_named_in_y_and_y_val(objective):
    """The classification target is checked once, by scikit-learn's check,
    where y is checked (objective="auto" reads its type there) and where the
    validation set is made: continuous labels in y or y_val, or in y at a
    later partial_fit, name their type (or, read by "auto", the objective
    they would need)."""
    X, y = _classification()
    continuous = np.linspace(0.1, 0.9, len(y))
    est = AttentionTransformer(objective="classification", **FAST)
    with pytest.raises(ValueError, match="Unknown label type"):
        est.fit(X, continuous)
    with pytest.raises(ValueError, match="Unknown label type"):
        AttentionClassifier(early_stopping=True, **FAST).fit(
            X, y, X_val=X, y_val=continuous
        )
    fitted = AttentionTransformer(objective=objective, **FAST).partial_fit(X, y)
    # "auto" reads the continuous target as a regression's
    message = {"auto": "fitted for classification", "classification": "Unknown label"}
    with pytest.raises(ValueError, match=message[objective]):
        fitted.partial_fit(X, continuous)


def test_training_on_another_kind_of_input_says_what_was_asked():
    """partial_fit, a warm start and X_val of the wrong kind said "cannot
    transform a table"."""
    X, y = _classification()
    table = X.reshape(len(X), -1)
    est = AttentionClassifier(**FAST).fit(X, y)
    with pytest.raises(ValueError, match=r"partial_fit goes on training .* \(fit\)"):
        est.partial_fit(table, y)
    est.set_params(warm_start=True)
    with pytest.raises(ValueError, match=r"warm_start=True .*\(warm_start=False\)"):
        est.fit(table, y)
    with pytest.raises(ValueError, match="X_val: it is a table, and X is sequences"):
        AttentionClassifier(**FAST).fit(X, y, X_val=table, y_val=y)
    with pytest.raises(ValueError, match="cannot transform a table"):
        est.predict(table)


@pytest.mark.parametrize(
    "X, where",
    [
        (np.array([[1.0, 2.0], [3.0, "x"], [1, 2], [3, 4]]), r"X\[1, 1\] is 'x'"),
        (
            np.array([[[1.0], [2.0]], [[3.0], ["x"]], [[1], [2]], [[3], [4]]]),
            r"X\[1, 1, 0\]",
        ),
        ([np.array(["1", "2"]), np.array(["3", "n/a"])] * 2, r"X\[1, 1\] is 'n/a'"),
    ],
)
@pytest.mark.parametrize(
    "estimator", [AttentionClassifier(max_iter=1), RandomAttentionFeatures(n_models=1)]
)
def test_a_stray_non_number_among_numbers_is_named_not_called_text(estimator, X, where):
    with pytest.raises(ValueError, match=f"{where}.*not a number.*dtype=float"):
        clone(estimator).fit(X, [0, 1, 0, 1])


def test_numbers_written_as_strings_are_named_with_their_conversion():
    X = np.array([["1", "2"], ["3", "4.5"]] * 2)
    with pytest.raises(
        ValueError, match=r"numbers written as strings \('1'.*dtype=float"
    ):
        AttentionClassifier(max_iter=1).fit(X, [0, 1, 0, 1])
