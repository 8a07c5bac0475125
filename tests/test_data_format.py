"""Time-series layouts of the ecosystem: ``data_format`` and its messages.

The structures are built here as aeon, sktime and tslearn build them (none of
them is installed, nothing is downloaded): aeon's ``numpy3D`` panel
``(n_cases, n_channels, n_timepoints)`` and its unequal-length collection, a
list of ``(n_channels, n_timepoints_i)`` arrays; tslearn's
``to_time_series_dataset``, one ``(n_ts, max_sz, d)`` array padded with NaN;
sktime's ``nested_univ`` DataFrame, a column per channel with a
``pd.Series`` of the time points in each cell.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal, assert_equal
from sklearn.utils._param_validation import InvalidParameterError

from skattn import AttentionTransformer, RandomAttentionFeatures
from skattn._input.formats import check_input

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FAST = dict(
    n_heads=2, head_dim=4, ff_dim=8, max_iter=2, early_stopping=False, random_state=0
)


def aeon_panel(n=12, n_channels=3, n_timepoints=20, dtype=np.float64, seed=0):
    """aeon's / sktime's numpy3D: (n_cases, n_channels, n_timepoints)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n_channels, n_timepoints)).astype(dtype)


def aeon_unequal(lengths=(20, 26, 9, 14, 31, 17), n_channels=3, dtype=np.float64):
    """aeon's unequal-length collection: a list of (n_channels, n_timepoints_i)."""
    rng = np.random.default_rng(1)
    return [rng.standard_normal((n_channels, n)).astype(dtype) for n in lengths]


def tslearn_padded(lengths=(20, 26, 9, 14), n_channels=2):
    """tslearn's to_time_series_dataset: (n_ts, max_sz, d), NaN after each series."""
    rng = np.random.default_rng(2)
    X = np.full((len(lengths), max(lengths), n_channels), np.nan)
    for row, n in zip(X, lengths, strict=True):
        row[:n] = rng.standard_normal((n, n_channels))
    return X


def sktime_nested(panel):
    """sktime's nested_univ: a column per channel, a pd.Series per cell."""
    return pd.DataFrame(
        {
            f"dim_{c}": [pd.Series(case[c]) for case in panel]
            for c in range(panel.shape[1])
        }
    )


def _transposed(X):
    if isinstance(X, np.ndarray):
        return np.ascontiguousarray(X.transpose(0, 2, 1))
    return [np.ascontiguousarray(x.T) for x in X]


def _fitted_attributes(est):
    return {
        name: value
        for name, value in vars(est).items()
        if name.endswith("_") and not name.startswith("_")
    }


def _labels(n):
    return np.arange(n) % 2


def _assert_close(actual, expected):
    """assert_equal, but floats to 1e-12 (relative) inside dicts and lists."""
    if isinstance(actual, dict):
        assert actual.keys() == expected.keys()
        for key in actual:
            _assert_close(actual[key], expected[key])
    elif isinstance(actual, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            _assert_close(a, e)
    elif isinstance(actual, float) or (
        isinstance(actual, np.ndarray) and actual.dtype.kind == "f"
    ):
        assert_allclose(actual, expected, rtol=1e-12, atol=1e-15)
    else:
        assert_equal(actual, expected)


# Channels-first input trains as its transpose, to the bit (Adam)
# ---------------------------------------------------------------

LAYOUTS = {
    "numpy3D": aeon_panel,
    "numpy3D-long": lambda dtype: aeon_panel(n=8, n_timepoints=70, dtype=dtype),
    "unequal-list": lambda dtype: aeon_unequal(dtype=dtype),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_transformer_channels_first_trains_as_the_transpose(layout, dtype, solver):
    # an aeon panel passed as is was read as n_channels tokens of n_timepoints
    # features, silently; the long panel is patched (patch_size="auto").
    # L-BFGS to 1e-12, not to the bit: with numpy 1.26 (the lowest version
    # supported) its float64 input-weight gradient, x.T @ d, on the transposed
    # view of channels-first input differed from the contiguous transpose's in
    # the last bit in 3 to 4 fits of 20 (1.4e-17 after one iteration), run to
    # run: numpy copies the view into a buffer for BLAS, whose alignment
    # varies; with numpy 2 it never did
    same = assert_equal if solver == "adam" else _assert_close
    X = LAYOUTS[layout](dtype=dtype)
    y = _labels(len(X))
    first = AttentionTransformer(data_format="channels_first", solver=solver, **FAST)
    last = AttentionTransformer(solver=solver, **FAST)
    first.fit(X, y)
    last.fit(_transposed(X), y)
    assert first.n_features_in_ == 3
    same(_fitted_attributes(first), _fitted_attributes(last))
    assert first.transform(X).dtype == dtype
    same(first.transform(X), last.transform(_transposed(X)))
    for method in ("transform_sequences", "attention_weights"):
        same(getattr(first, method)(X), getattr(last, method)(_transposed(X)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_random_features_channels_first_equals_the_transpose(layout, dtype):
    X = LAYOUTS[layout](dtype=dtype)
    first = RandomAttentionFeatures(n_models=3, data_format="channels_first")
    last = RandomAttentionFeatures(n_models=3)
    first.set_params(random_state=0).fit(X)
    last.set_params(random_state=0).fit(_transposed(X))
    assert_equal(_fitted_attributes(first), _fitted_attributes(last))
    out = first.transform(X)
    assert out.dtype == dtype
    assert_array_equal(out, last.transform(_transposed(X)))


@pytest.mark.parametrize("layout", ["numpy3D", "unequal-list"])
def test_partial_fit_channels_first(layout):
    X = LAYOUTS[layout](dtype=np.float64)
    y = _labels(len(X))
    first = AttentionTransformer(data_format="channels_first", **FAST)
    last = AttentionTransformer(**FAST)
    for _ in range(2):
        first.partial_fit(X, y, classes=[0, 1])
        last.partial_fit(_transposed(X), y, classes=[0, 1])
    assert_array_equal(first.transform(X), last.transform(_transposed(X)))


def test_per_token_outputs_are_token_major_in_both_layouts():
    # the documented orientation: one row per time point, (n, T, d_model)
    panel = aeon_panel(n=4, n_channels=3, n_timepoints=10)
    est = AttentionTransformer(data_format="channels_first", **FAST).fit(panel)
    assert est.transform_sequences(panel).shape == (4, 10, est.d_model_)
    assert est.attention_weights(panel).shape == (4, 2, 10, 10)
    unequal = aeon_unequal(lengths=(10, 4, 7))
    est = AttentionTransformer(data_format="channels_first", **FAST).fit(unequal)
    assert [t.shape for t in est.transform_sequences(unequal)] == [
        (10, 8),
        (4, 8),
        (7, 8),
    ]
    assert [w.shape for w in est.attention_weights(unequal)] == [
        (2, 10, 10),
        (2, 4, 4),
        (2, 7, 7),
    ]


def test_channels_first_reads_views_not_copies():
    est = AttentionTransformer(data_format="channels_first")
    panel = aeon_panel(dtype=np.float32)
    checked = check_input(est, panel, reset=True)
    assert checked.shape == (12, 20, 3) and np.shares_memory(checked, panel)
    unequal = aeon_unequal()
    checked = check_input(est, unequal, reset=True)
    assert all(np.shares_memory(c, x) for c, x in zip(checked, unequal, strict=True))


def test_data_format_is_a_validated_parameter():
    assert AttentionTransformer().get_params()["data_format"] == "channels_last"
    assert RandomAttentionFeatures().get_params()["data_format"] == "channels_last"
    for est in (AttentionTransformer(), RandomAttentionFeatures()):
        with pytest.raises(InvalidParameterError, match="'data_format' parameter"):
            est.set_params(data_format="NCT").fit(aeon_panel())


def test_nothing_is_guessed_from_the_shapes_but_a_panel_shape_warns():
    """3 "tokens" of 100 features look transposed: read as given, with a
    warning that names channels_first; so does a sequence of one token (an
    aeon panel of one channel read as one token of 150 features trained
    attention over a single token, silently)."""
    message = r"sequences of 3 token\(s\) of 100 features.*data_format='channels_f"
    panel = aeon_panel(n=6, n_channels=3, n_timepoints=100)
    with pytest.warns(UserWarning, match=message):
        est = AttentionTransformer(**FAST).fit(panel)
    assert est.n_features_in_ == 100
    assert est.transform_sequences(panel).shape == (6, 3, 8)
    univariate = aeon_panel(n=6, n_channels=1, n_timepoints=150)
    for est in (AttentionTransformer(**FAST), RandomAttentionFeatures(n_models=2)):
        with pytest.warns(UserWarning, match=r"1 token\(s\) of 150 features"):
            est.fit(univariate)
    with pytest.warns(UserWarning, match=r"1 token\(s\)"):
        AttentionTransformer(**FAST).fit([np.ones((1, 3)), np.zeros((1, 3))])
    with warnings.catch_warnings():  # read as they are meant: no warning
        warnings.simplefilter("error")
        AttentionTransformer(data_format="channels_first", **FAST).fit(panel)
        AttentionTransformer(**FAST).fit(panel.transpose(0, 2, 1))


def test_channels_first_with_a_table():
    # a column is one time point of a single channel in both layouts: ignored;
    # wider tokens are interleaved channels, which channels_first cannot mean
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((10, 8)), _labels(10)
    first = AttentionTransformer(data_format="channels_first", **FAST).fit(X, y)
    last = AttentionTransformer(**FAST).fit(X, y)
    assert_array_equal(first.transform(X), last.transform(X))
    features = RandomAttentionFeatures(n_models=2, random_state=0)
    assert_array_equal(
        features.set_params(data_format="channels_first").fit_transform(X),
        features.set_params(data_format="channels_last").fit_transform(X),
    )
    for est in (AttentionTransformer(**FAST), RandomAttentionFeatures()):
        est.set_params(data_format="channels_first", features_per_token=2)
        with pytest.raises(ValueError, match=r"channels_first.*applies to 3D.*Reshape"):
            est.fit(X)


# The messages of the other layouts
# ---------------------------------


@pytest.mark.parametrize("Estimator", [AttentionTransformer, RandomAttentionFeatures])
def test_unequal_list_in_the_wrong_layout_points_to_data_format(Estimator):
    aeon = aeon_unequal(lengths=(20, 26), n_channels=6)
    message = (
        r"X\[1\] has 26 features per token, but X\[0\] has 20.*"
        r"\(n_channels, n_timepoints\).*data_format='channels_first'"
    )
    with pytest.raises(ValueError, match=message):
        Estimator().fit(aeon)
    message = (
        r"X\[1\] has 26 channels \(rows\), but X\[0\] has 20.*"
        r"data_format='channels_last'"
    )
    with pytest.raises(ValueError, match=message):
        Estimator(data_format="channels_first").fit(_transposed(aeon))


@pytest.mark.parametrize("Estimator", [AttentionTransformer, RandomAttentionFeatures])
def test_transform_in_the_wrong_layout_points_to_data_format(Estimator):
    panel = aeon_panel(n=6, n_channels=3, n_timepoints=10)
    est = Estimator(data_format="channels_first", random_state=0).fit(panel)
    message = (
        r"X has 10 channels, but \w+ is expecting 3 channels.*"
        r"data_format='channels_first'"
    )
    with pytest.raises(ValueError, match=message):
        est.transform(_transposed(panel))
    est = Estimator(random_state=0).fit(_transposed(panel))
    message = (
        r"X has 10 features per token, but \w+ is expecting 3 features per "
        r"token.*data_format='channels_first'"
    )
    with pytest.raises(ValueError, match=message):
        est.transform(panel)


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_nan_padded_array_says_how_to_pass_unequal_lengths(data_format):
    # tslearn's padding got scikit-learn's "Input X contains NaN"
    X = tslearn_padded()
    conversion = "[x[~np.isnan(x).all(axis=1)] for x in X]"
    if data_format == "channels_first":
        X = X.transpose(0, 2, 1)
        conversion = "[x[:, ~np.isnan(x).all(axis=0)] for x in X]"
    for est in (
        AttentionTransformer(data_format=data_format, **FAST),
        RandomAttentionFeatures(data_format=data_format),
    ):
        with pytest.raises(ValueError, match=r"NaN.*tslearn") as exc:
            est.fit(X)
        assert conversion in str(exc.value)
        assert "lengths 9 to 26 of 26" in str(exc.value)
    # the conversion of the message works, and reads the lengths
    converted = eval(conversion, {"np": np, "X": X})
    est = AttentionTransformer(data_format=data_format, **FAST).fit(converted)
    assert [len(t) for t in est.transform_sequences(converted)] == [20, 26, 9, 14]


def test_missing_values_are_not_taken_for_padding():
    X = tslearn_padded()
    X[0, 3, 0] = np.nan  # one value inside a series
    with pytest.raises(ValueError, match="Input X contains NaN") as exc:
        AttentionTransformer().fit(X)
    assert "tslearn" not in str(exc.value)
    X = tslearn_padded()
    X[1, 0] = np.nan  # a NaN token before valid ones
    with pytest.raises(ValueError, match="Input X contains NaN") as exc:
        AttentionTransformer().fit(X)
    assert "tslearn" not in str(exc.value)


def test_nested_dataframe_gives_the_conversion():
    # "setting an array element with a sequence" before
    panel = aeon_panel(n=6, n_channels=2, n_timepoints=12)
    nested = sktime_nested(panel)
    message = (
        r"nested DataFrame.*sktime.datatypes.convert_to\(X, to_type='numpy3D'\).*"
        r"data_format='channels_first'"
    )
    for est in (AttentionTransformer(**FAST), RandomAttentionFeatures()):
        with pytest.raises(ValueError, match=message) as exc:
            est.fit(nested)
    fitted = AttentionTransformer(data_format="channels_first", **FAST).fit(panel)
    with pytest.raises(ValueError, match=message):
        fitted.transform(nested)
    # the numpy conversions of the message work
    rows = (
        "[np.stack([np.asarray(c) for c in row]) for row in X.itertuples(index=False)]"
    )
    stack = f"np.stack({rows})"
    assert stack in str(exc.value) and f": {rows}." in str(exc.value)
    converted = eval(stack, {"np": np, "X": nested})
    assert_array_equal(converted, panel)
    assert_array_equal(fitted.transform(converted), fitted.transform(panel))
    converted = eval(rows, {"np": np, "X": nested})
    assert_equal(converted, list(panel))


def test_nested_dataframe_detection_leaves_object_tables_alone():
    X = pd.DataFrame({"a": ["x", "y"], "b": [1.0, 2.0]})
    with pytest.raises(ValueError, match="could not convert string"):
        AttentionTransformer().fit(X)


@pytest.mark.parametrize("Estimator", [AttentionTransformer, RandomAttentionFeatures])
def test_list_of_univariate_series(Estimator):
    # numpy's "inhomogeneous shape" before: 1-D arrays of different lengths
    # are univariate series, (n_tokens_i, 1), in every method
    rng = np.random.default_rng(0)
    series = [rng.standard_normal(n) for n in (12, 7, 20, 9, 15, 11)]
    series[1] = pd.Series(series[1])  # a Series is a 1-D array too
    columns = [np.asarray(s)[:, None] for s in series]
    y = _labels(len(series))
    params = FAST if Estimator is AttentionTransformer else dict(random_state=0)
    est = Estimator(**params).fit(series, y)
    reference = Estimator(**params).fit(columns, y)
    assert est.n_features_in_ == 1
    assert_array_equal(est.transform(series), reference.transform(columns))
    # one series, or series of one length, after a fit on sequences
    assert_array_equal(est.transform(series[:1]), reference.transform(columns[:1]))
    same = [s[:5] for s in series]
    assert_array_equal(
        est.transform(same), reference.transform([c[:5] for c in columns])
    )
    if Estimator is RandomAttentionFeatures:
        return
    for method in ("transform_sequences", "attention_weights"):
        assert_equal(getattr(est, method)(series), getattr(reference, method)(columns))
    est = Estimator(data_format="channels_first", **params).fit(series, y)
    assert_array_equal(est.transform(series), reference.transform(columns))
    est = Estimator(**params)
    reference = Estimator(**params)
    for _ in range(2):
        est.partial_fit(series, y, classes=[0, 1])
        reference.partial_fit(columns, y, classes=[0, 1])
    assert_array_equal(est.transform(series), reference.transform(columns))


def test_equal_length_lists_stay_tables_in_fit():
    # as scikit-learn reads a list of rows; nested lists of different lengths
    # are a broken table, not series
    rows = [np.arange(4.0), np.ones(4), np.zeros(4)]
    est = AttentionTransformer(**FAST).fit(rows)
    assert est.n_features_in_ == 4
    with pytest.raises(ValueError, match=r"X\[1\] has shape \(2,\).*univariate"):
        AttentionTransformer().fit([[1.0, 2.0, 3.0], [1.0, 2.0]])
