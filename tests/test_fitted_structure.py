"""A fitted estimator computes with the structure it was fitted with.

``set_params`` after ``fit`` must not change what ``transform`` and the
per-token methods compute, and ``partial_fit`` or a warm-start ``fit`` must
refuse a changed structural parameter. ``attention_weights`` checks the size of
its output before computing it, and needs little more memory than its output.
"""

import re
import tracemalloc
import warnings

import numpy as np
import pytest
from helpers import make_3d, make_ragged, make_table
from numpy.testing import assert_allclose, assert_array_equal
from threadpoolctl import threadpool_limits

from skattn import AttentionTransformer, RandomAttentionFeatures
from skattn._model.options import REGISTRIES
from skattn._model.pooling import POOLINGS
from skattn.patterns import BigBirdAttention, FullAttention

# Parameters that fix the model's structure, each with a value that differs from
# the one fitted in the tests below.
STRUCTURAL_CHANGES = {
    "n_heads": 2,
    "head_dim": 3,
    "features_per_token": 2,
    "data_format": "channels_first",
    "scale_tokens": False,
    "patch_size": 2,
    "n_layers": 2,
    "ff_dim": 8,
    "activation": "gelu",
    "feed_forward": "swiglu",
    "pooling": "cls",
    "positional_encoding": "learned",
    "residual": False,
    "layer_norm": "pre",
    "causal": True,
    "attention_pattern": BigBirdAttention(block_size=2, n_random_blocks=1, seed=0),
    "token_statistics": ["mean"],  # of AttentionTransformer: the columns of transform
}
PER_TOKEN = ("transform", "transform_sequences", "attention_weights")


def test_every_registered_option_has_a_structural_change():
    # an option of one value (and no None) has no other value to change to
    changeable = {
        name
        for name, registry in REGISTRIES.items()
        if len(registry.names()) + registry.allows_none() > 1
    }
    assert changeable <= set(STRUCTURAL_CHANGES)


def _fitted(**params):
    X = make_3d(n=12, n_tokens=5, width=4)
    y = np.arange(12) % 2
    est = AttentionTransformer(
        n_heads=4, head_dim=4, max_iter=2, early_stopping=False, random_state=0
    )
    return est.set_params(**params).fit(X, y), X, y


def _outputs(est, X):
    return {method: getattr(est, method)(X) for method in PER_TOKEN}


# set_params after fit
# -----------------------------------


def _adds_to_the_model(pooling):
    """Whether a pooling adds to the fitted model: a class token, parameters
    of its own or a fixed length."""
    unit = POOLINGS.get(pooling)
    has_params = bool(unit(1, 1).param_specs())
    return unit.appends_class_token or unit.needs_fixed_length or has_params


# the plain mean, and every pooling that adds to the fitted model
STRUCTURED_POOLINGS = [
    "mean",
    *(pooling for pooling in POOLINGS.names() if _adds_to_the_model(pooling)),
]


@pytest.mark.parametrize("name", sorted(STRUCTURAL_CHANGES))
@pytest.mark.parametrize("pooling", STRUCTURED_POOLINGS)
def test_set_params_after_fit_leaves_the_fitted_model_unchanged(name, pooling):
    # the fitted model has a class token, a pooling query or a fixed length;
    # changing any structural parameter (to another pooling, learned positions,
    # other heads...) gave KeyError 'cls', 'pool_query', 'positions', an
    # IndexError or silently different numbers
    X_table = make_table(n=12, n_features=8)
    params = {"pooling": pooling, "positional_encoding": "sinusoidal"}
    est, X, y = _fitted(**params)
    table = AttentionTransformer(
        n_heads=4, head_dim=4, max_iter=2, early_stopping=False, random_state=0
    ).set_params(**params, features_per_token=4)
    table.fit(X_table, y)
    for fitted, data in ((est, X), (table, X_table)):
        before = _outputs(fitted, data)
        names = fitted.get_feature_names_out()
        widths = (fitted.head_dim_, fitted.d_model_)
        value = STRUCTURAL_CHANGES[name]
        if name == "pooling" and pooling == "cls":
            value = "attention"
        fitted.set_params(**{name: value})
        after = _outputs(fitted, data)
        for method in PER_TOKEN:
            assert_array_equal(after[method], before[method], err_msg=method)
        assert_array_equal(fitted.get_feature_names_out(), names)
        assert (fitted.head_dim_, fitted.d_model_) == widths
        assert fitted.n_heads_ * fitted.head_dim_ == fitted.d_model_ == 16


@pytest.mark.parametrize("name", sorted(STRUCTURAL_CHANGES))
@pytest.mark.parametrize("method", ["partial_fit", "warm_start"])
def test_continued_training_refuses_a_changed_structural_parameter(name, method):
    # partial_fit and fit(warm_start=True) continue the fitted weights: a
    # changed structure raised KeyError or trained a re-split model silently
    est, X, y = _fitted()
    fitted_value = est.get_params()[name]
    # "auto" is named by what it resolved to: 4 tokens of 4 features
    resolved = {
        "patch_size": est.patch_size_,
        "pooling": est.pooling_,
        "token_statistics": None,
        "attention_pattern": FullAttention(),
    }
    fitted_value = resolved.get(name, fitted_value)
    value = STRUCTURAL_CHANGES[name]
    before = _outputs(est, X)
    est.set_params(**{name: value})
    message = (
        rf"{name}={re.escape(repr(value))}.*fitted with "
        rf"{name}={re.escape(repr(fitted_value))}.*"
        r"warm_start=False.*set_params\("
    )
    with pytest.raises(ValueError, match=message):
        if method == "partial_fit":
            est.partial_fit(X, y)
        else:
            est.set_params(warm_start=True).fit(X, y)
    # nothing changed; set back, training continues
    for method_name, output in _outputs(est, X).items():
        assert_array_equal(output, before[method_name])
    est.set_params(**{name: fitted_value}).partial_fit(X, y)
    # a fit that starts afresh builds the new structure
    est.set_params(**{name: value}, warm_start=False)
    if name == "features_per_token":
        est.fit(make_table(n=12, n_features=8), y)
    else:
        est.fit(X, y)
    if name == "n_heads":
        assert est.n_heads_ == value and est.d_model_ == value * est.head_dim_


def test_continued_training_names_the_shorthand_as_given_and_its_remedy():
    # the band given by its shorthand is named by it; the remedy sets the
    # fitted pattern back and the shorthand to its default, and works
    est, X, y = _fitted()
    est.set_params(attention_window=3)
    message = (
        r"with attention_window=3, attention_dilation=1 \(attention_pattern="
        r"BandedAttention\(window=3, dilation=1\)\).*fitted with "
        r"attention_pattern=FullAttention\(\).*set_params\(attention_pattern="
        r"FullAttention\(\), attention_window=None\)"
    )
    with pytest.raises(ValueError, match=message):
        est.partial_fit(X, y)
    est.set_params(attention_pattern=FullAttention(), attention_window=None)
    est.partial_fit(X, y)


@pytest.mark.parametrize("method", ["partial_fit", "warm_start"])
def test_continued_training_reads_auto_and_none_as_the_fitted_value(method):
    # head_dim=None and patch_size="auto" resolved in fit (from init, the data's
    # lengths); continuing, they mean the fitted values, and so do those values
    X = make_3d(n=12, n_tokens=80, width=2)
    y = np.arange(12) % 2
    est = AttentionTransformer(n_heads=2, max_iter=1, random_state=0).fit(X, y)
    assert (est.head_dim_, est.patch_size_) == (32, 3)
    for params in (
        {"head_dim": None, "patch_size": "auto"},
        {"head_dim": 32, "patch_size": 3},
    ):
        est.set_params(**params)
        if method == "partial_fit":
            est.partial_fit(X, y)
        else:
            est.set_params(warm_start=True, max_iter=1).fit(X, y)
    assert est.n_iter_ == 3
    with pytest.raises(ValueError, match=r"patch_size=4.*fitted with patch_size=3"):
        est.set_params(patch_size=4).partial_fit(X, y)


def test_continued_training_accepts_changed_training_parameters():
    # the parameters of training, not of the model, may change between calls
    est, X, y = _fitted()
    est.set_params(
        learning_rate_init=0.01,
        alpha=0.1,
        max_iter=1,
        batch_size=4,
        tol=0.0,
        shuffle=False,
        beta_1=0.8,
        beta_2=0.99,
        epsilon=1e-7,
        dropout=0.1,
        verbose=False,
        random_state=1,
    )
    n_iter = est.n_iter_
    est.partial_fit(X, y)
    est.set_params(warm_start=True, early_stopping=False).fit(X, y)
    assert est.n_iter_ == n_iter + 2
    est.set_params(solver="lbfgs", dropout=0.0).fit(X, y)
    assert np.isfinite(est.transform(X)).all()


@pytest.mark.parametrize(
    "name, value",
    [
        ("scale_tokens", False),
        ("features_per_token", 2),
        ("data_format", "channels_first"),
    ],
)
def test_random_features_transform_with_the_fitted_structure(name, value):
    # scale_tokens and features_per_token were read again by transform: a
    # changed one gave another result, or a broadcasting error
    X = make_table(n=10, n_features=6)
    est = RandomAttentionFeatures(n_models=2, features_per_token=3, random_state=0)
    before = est.fit(X).transform(X)
    names = est.get_feature_names_out()
    est.set_params(**{name: value})
    assert_array_equal(est.transform(X), before)
    assert_array_equal(est.get_feature_names_out(), names)


# attention_weights on long sequences
# --------------------------------------------------


def test_attention_weights_checks_its_output_size_first():
    # one sequence of 20,000 tokens asked for 4 * 20000**2 float64 (12 GiB)
    # without a check
    X = make_3d(n=8, n_tokens=6, width=2)
    est = AttentionTransformer(n_heads=4, patch_size=None, random_state=0).fit(X)
    message = re.escape(
        "attention_weights would return 2.4 MiB for 1 sequence(s) (4 heads x "
        "n_tokens**2 weights each, n_tokens up to 280, float64), more than "
        "max_bytes=1048576 (1.0 MiB)"
    )
    tracemalloc.start()
    with pytest.raises(ValueError, match=message + r".*max_bytes=None"):
        est.attention_weights(make_3d(n=1, n_tokens=280, width=2), max_bytes=2**20)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2**18, "the model ran before the size was checked"
    long = [make_ragged(lengths=(20_000,), width=2)[0]]
    with pytest.raises(ValueError, match=r"11.9 GiB .* max_bytes=1073741824 "):
        est.attention_weights(long)  # the default limit, 1 GiB
    weights = est.attention_weights(X, max_bytes=est.n_heads_ * 6 * 6 * 8 * 8)
    assert weights.shape == (8, 4, 6, 6)
    assert est.attention_weights(X, max_bytes=None).shape == (8, 4, 6, 6)
    for wrong in (0, -1.0, "1GB", True):
        with pytest.raises((ValueError, TypeError), match="max_bytes must be"):
            est.attention_weights(X, max_bytes=wrong)


@pytest.mark.parametrize("integer", [np.int16, np.int32, np.int64])
def test_sizes_given_as_numpy_integers_are_python_ints_once_fitted(integer):
    """n_heads=np.int32(4) made the size check of attention_weights overflow
    (an 11.9 GiB request passed with a RuntimeWarning; int16 raised an
    OverflowError): the fitted sizes are Python ints."""
    X = make_3d(n=4, n_tokens=6, width=2)
    est = AttentionTransformer(
        n_heads=integer(4), head_dim=integer(2), ff_dim=integer(8), random_state=0
    ).fit(X, [0, 1, 0, 1])
    assert {type(v) for v in (est.n_heads_, est.head_dim_, est.d_model_)} == {int}
    long = [make_ragged(lengths=(20_000,), width=2)[0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match=r"11.9 GiB .* max_bytes=1073741824 "):
            est.attention_weights(long)


def test_one_sequence_above_working_memory_warns_with_the_remedy():
    """At working_memory=1 (MiB) one sequence of 8,192 tokens traced 34 MiB
    without a word; scikit-learn warns in the same case (here one of 1,024
    tokens, which needs 7 MiB)."""
    from sklearn import config_context

    est = AttentionTransformer(objective=None, random_state=0)
    est.fit(make_3d(n=4, n_tokens=6, width=2))
    long = [make_ragged(lengths=(1024,), width=2)[0]]
    message = (
        r"Could not adhere to working_memory config: one sequence of 1024 "
        r"tokens needs .* MiB, more than working_memory=1 MiB.*patch_size"
    )
    with config_context(working_memory=1), pytest.warns(UserWarning, match=message):
        est.transform(long)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.transform(long)  # within the default 1 GiB


@pytest.mark.parametrize("kind", ["3d", "list"])
def test_attention_weights_peak_memory_within_its_output(kind):
    # per-row copies, then np.stack, took up to three times the output
    X_fit = make_3d(n=4, n_tokens=10, width=3)
    est = AttentionTransformer(
        n_heads=8, head_dim=2, ff_dim=0, patch_size=None, random_state=0
    ).fit(X_fit)
    X = make_3d(n=1, n_tokens=1600, width=3)
    if kind == "list":
        X = [X[0]]
    est.attention_weights(X_fit)  # anything allocated once is not counted
    # each thread holds a tile of scores and a block of weights: at most two
    with threadpool_limits(limits=2, user_api="blas"):
        tracemalloc.start()
        try:
            weights = est.attention_weights(X)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    n_bytes = sum(w.nbytes for w in weights)
    assert n_bytes == 8 * 1600 * 1600 * 8  # 156 MiB
    # beyond the output, about 20 MiB: a batch's activations, and the tiles and
    # blocks of the two threads
    assert peak <= 1.2 * n_bytes, peak / n_bytes
    for w in weights:
        assert_allclose(w.sum(axis=-1), 1.0, rtol=1e-12)
