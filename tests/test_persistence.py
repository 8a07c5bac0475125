"""Persistence: pickle and skops round trips give the same model, bit for bit.

A fitted estimator pickles as numpy arrays, Python numbers, dicts and lists
(its fitted model, Adam's state included, as plain dicts), so
``skops.io.load`` needs to trust nothing but skattn's public estimator classes.
"""

import importlib.util
import pickle
import re
import warnings

import numpy as np
import pytest
from helpers import make_ragged, order_task
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.svm import LinearSVC

import skattn
from skattn import (
    AttentionClassifier,
    AttentionRegressor,
    AttentionTransformer,
    RandomAttentionFeatures,
)
from skattn.compose import WeightedUnionCV
from skattn.text import StaticTokenEmbeddings, TokenEmbeddings, TokenIds

# an optional test dependency (the "test" extra), imported by the tests that
# use it only: importing skops imports every module of scikit-learn (4 s)
needs_skops = pytest.mark.skipif(
    importlib.util.find_spec("skops") is None,
    reason="skops is not installed (pip install skops, in the test extra)",
)


def skops_io():
    import skops.io

    return skops.io


TRANSFORMER = "skattn._estimators.transformer.AttentionTransformer"
RANDOM_FEATURES = "skattn._random_features.estimator.RandomAttentionFeatures"


def skops_round_trip(est, expected_untrusted):
    """Dump with skops, check the untrusted types, load trusting exactly those."""
    sio = skops_io()
    blob = sio.dumps(est)
    untrusted = sio.get_untrusted_types(data=blob)
    assert untrusted == expected_untrusted
    return sio.loads(blob, trusted=expected_untrusted)


def pickle_round_trip(est, expected_untrusted=None):
    return pickle.loads(pickle.dumps(est))


ROUND_TRIPS = [
    pytest.param(pickle_round_trip, id="pickle"),
    pytest.param(skops_round_trip, id="skops", marks=needs_skops),
]


def adam(**kwargs):
    """A small Adam model that shuffles and drops out: its random state matters."""
    return AttentionTransformer(
        n_heads=2, head_dim=2, dropout=0.1, max_iter=3, random_state=0, **kwargs
    )


@pytest.fixture(scope="module")
def task():
    X, y = order_task(n=60, n_tokens=5, width=3)
    return X, y


def fitted_estimators(X, y):
    return {
        "adam-fit": (adam().fit(X, y), [TRANSFORMER]),
        "adam-partial_fit": (adam().partial_fit(X, y), [TRANSFORMER]),
        "lbfgs": (
            AttentionTransformer(
                n_heads=2, head_dim=2, solver="lbfgs", max_iter=3, random_state=0
            ).fit(X, y),
            [TRANSFORMER],
        ),
        "random-features": (
            RandomAttentionFeatures(n_models=4, random_state=0).fit(X),
            [RANDOM_FEATURES],
        ),
    }


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("round_trip", ROUND_TRIPS)
def test_round_trip_transforms_bit_identically(task, round_trip):
    X, y = task
    ragged = make_ragged(width=3)
    for name, (est, untrusted) in fitted_estimators(X, y).items():
        restored = round_trip(est, untrusted)
        assert type(restored) is type(est), name
        assert_array_equal(restored.transform(X), est.transform(X), err_msg=name)
        assert_array_equal(
            restored.transform(ragged), est.transform(ragged), err_msg=name
        )
        if hasattr(est, "head_coef_"):
            assert_array_equal(restored.head_coef_, est.head_coef_, err_msg=name)


@needs_skops
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_skops_trusts_only_the_public_estimator_classes(task):
    """No private type (the Adam optimizer once was one) in a fitted estimator."""
    X, y = task
    sio = skops_io()
    for name, (est, expected) in fitted_estimators(X, y).items():
        public = f"{type(est).__module__}.{type(est).__name__}"
        assert expected == [public], name
        assert sio.get_untrusted_types(data=sio.dumps(est)) == expected, name
    # the Adam state is plain numbers and arrays
    state = adam().fit(X, y)._fitted.optimizer_state
    assert isinstance(state["t"], int) and state["t"] > 0
    for key in ("ms", "vs"):
        assert all(isinstance(v, np.ndarray) for v in state[key].values())


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("round_trip", ROUND_TRIPS)
@pytest.mark.parametrize("start", ["fit", "partial_fit"])
def test_partial_fit_after_a_round_trip_continues_as_without(task, round_trip, start):
    """Adam's moments and step count, and the random state, survive the trip."""
    X, y = task
    uninterrupted = getattr(adam(), start)(X, y)
    interrupted = round_trip(getattr(adam(), start)(X, y), [TRANSFORMER])
    for _ in range(2):
        uninterrupted.partial_fit(X, y)
        interrupted.partial_fit(X, y)
    assert (
        interrupted._fitted.optimizer_state["t"]
        == uninterrupted._fitted.optimizer_state["t"]
    )
    assert_array_equal(interrupted.transform(X), uninterrupted.transform(X))
    assert_array_equal(interrupted.head_coef_, uninterrupted.head_coef_)
    assert interrupted.loss_curve_ == uninterrupted.loss_curve_


def test_discarding_the_optimizer_state_halves_the_pickle_and_restarts_adam():
    """Adam's moments are as large as the weights: without them a pickle is
    about half as large and predicts the same; a later partial_fit starts
    Adam afresh (step count of one epoch) from the fitted weights."""
    X, y = order_task(n=60)
    clf = AttentionClassifier(max_iter=3, batch_size=20, random_state=0).fit(X, y)
    full = pickle.dumps(clf)
    assert clf._fitted.optimizer_state["t"] == 3 * 3
    slim = pickle.dumps(clf.discard_optimizer_state())
    assert len(slim) < 0.6 * len(full)
    restored = pickle.loads(slim)
    assert_array_equal(restored.predict_proba(X), pickle.loads(full).predict_proba(X))
    restored.partial_fit(X, y)
    assert restored._fitted.optimizer_state["t"] == 3  # one epoch of three batches


@needs_skops
def test_the_persistence_pages_trusted_types_cover_text_pipelines():
    """The user guide's skops example asserts that the untrusted types are
    among those it lists: true of the pipelines of each text transformer."""
    import pathlib
    import re

    from sklearn.pipeline import make_pipeline

    page = pathlib.Path(__file__).parents[1] / "docs/user_guide/persistence.rst"
    block = re.search(r"expected = \{(.*?)\}", page.read_text(), re.S).group(1)
    documented = set(re.findall(r'"([\w.]+)"', block))
    sio = skops_io()
    texts, y = ["a good film", "not good", "bad", "not bad at all"] * 5, [1, 0] * 10
    table = ({"a": 0, "good": 1, "film": 2, "bad": 3}, np.eye(4))
    for first, size in ((TokenIds(), "auto"), (StaticTokenEmbeddings(table), None)):
        model = make_pipeline(
            first, AttentionClassifier(vocabulary_size=size, max_iter=1)
        ).fit(texts, y)
        untrusted = set(sio.get_untrusted_types(data=sio.dumps(model)))
        assert untrusted <= documented, untrusted - documented


# Versions
# --------
# A pickle records the version of skattn that saved it and the format of its
# state; the pickles of development versions that recorded neither, and of
# other versions, are refused. The suite cannot check out those versions, so
# it writes their pickles: the class at the path they named, and the state
# as they held it.

VERSION_KEYS = ("_skattn_version", "_skattn_state_version")
TEXTS = ["a good film", "not good", "bad", "not bad at all"]


@pytest.fixture(scope="module")
def public_estimators():
    """Every public estimator, fitted (TokenEmbeddings unfitted: fitting
    loads its encoder)."""
    X, y = order_task(n=30, n_tokens=4, width=3)
    small = dict(n_heads=1, head_dim=2, max_iter=1, random_state=0)
    table = ({"a": 0, "good": 1, "film": 2, "bad": 3}, np.eye(4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        estimators = [
            AttentionTransformer(**small).fit(X, y),
            AttentionClassifier(**small).fit(X, y),
            AttentionRegressor(**small).fit(X, y.astype(float)),
            RandomAttentionFeatures(n_models=2, random_state=0).fit(X),
            TokenIds().fit(TEXTS),
            StaticTokenEmbeddings(table).fit(TEXTS),
            TokenEmbeddings("an-encoder-name"),
            WeightedUnionCV(
                [("words", TfidfVectorizer()), ("counts", CountVectorizer())],
                LinearSVC(),
                cv=2,
            ).fit(TEXTS * 2, [1, 0, 0, 1] * 2),
        ]
    return {type(est).__name__: est for est in estimators}


PUBLIC_ESTIMATORS = [
    "AttentionTransformer",
    "AttentionClassifier",
    "AttentionRegressor",
    "RandomAttentionFeatures",
    "TokenIds",
    "StaticTokenEmbeddings",
    "TokenEmbeddings",
    "WeightedUnionCV",
]


def pickle_of(module, name, state):
    """The pickle of an instance of ``module.name`` holding ``state``, as
    pickle writes an estimator (protocol 2: the class by its path, a new
    instance, the state, ``__setstate__``), whether or not the path exists."""
    global_and_new = b"\x80\x02c" + f"{module}\n{name}\n".encode() + b")\x81"
    state_ops = pickle.dumps(state, protocol=2)[2:-1]  # without PROTO and STOP
    return global_and_new + state_ops + b"b."


def pickle_by_reconstructor(module, name, state):
    """The pickle of an instance of ``module.name`` holding ``state``, as
    protocols 0 and 1 write an estimator: ``copyreg._reconstructor`` makes the
    instance with ``object.__new__``, then ``__setstate__`` sets its state."""
    import copyreg
    import importlib

    cls = getattr(importlib.import_module(module), name)

    class Reduced:
        def __reduce__(self):
            return copyreg._reconstructor, (cls, object, None), state

    return pickle.dumps(Reduced(), protocol=0)


def unversioned(state):
    """A state as the development versions that recorded no version held it:
    no version, and their parameters (``pool_tokens``; no banded attention)."""
    state = {key: value for key, value in state.items() if key not in VERSION_KEYS}
    for name in ("attention_window", "attention_dilation"):
        state.pop(name, None)
    if "token_statistics" in state:
        state["pool_tokens"] = state.pop("token_statistics")
    return state


def refusal(name, saved, saver):
    """The refusal's message, as a pattern."""
    version = skattn.__version__
    return re.escape(
        f"This {name} was saved by {saved}; skattn {version} does not load the "
        f"fitted state of another version. Refit the {name} with skattn "
        f"{version}, or load it with {saver}."
    )


def unversioned_refusal(name):
    return refusal(
        name,
        f"a development version of skattn before {skattn.__version__} that "
        "recorded no version",
        "the version of skattn that saved it",
    )


@pytest.mark.parametrize("name", PUBLIC_ESTIMATORS)
def test_pickle_of_this_version_round_trips(public_estimators, name):
    """Silently, to an equal estimator that keeps no version attribute; the
    tests' own pickles of a state load as pickle's do."""
    est = public_estimators[name]
    cls = type(est)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        restored = pickle.loads(pickle.dumps(est))
        written = pickle.loads(pickle_of(cls.__module__, name, est.__getstate__()))
    for loaded in (restored, written):
        assert type(loaded) is cls
        assert repr(loaded) == repr(est)
        assert repr(clone(loaded)) == repr(est)
        assert not set(VERSION_KEYS) & set(vars(loaded))
        assert sorted(vars(loaded)) == sorted(vars(est))


@pytest.mark.parametrize("name", PUBLIC_ESTIMATORS)
def test_pickle_without_a_version_is_refused_with_both_versions_named(
    public_estimators, name
):
    """Loaded, such a pickle would give an estimator that predicts, then fails
    on repr, get_params, clone or transform for an attribute its version did
    not have."""
    est = public_estimators[name]
    blob = pickle_of(type(est).__module__, name, unversioned(est.__getstate__()))
    with pytest.raises(ValueError, match=unversioned_refusal(name)):
        pickle.loads(blob)


@pytest.mark.parametrize("name", PUBLIC_ESTIMATORS)
def test_pickle_of_another_version_is_refused_with_both_versions_named(
    public_estimators, name
):
    est = public_estimators[name]
    state = {**est.__getstate__(), "_skattn_version": "0.0.1"}
    blob = pickle_of(type(est).__module__, name, state)
    with pytest.raises(ValueError, match=refusal(name, "skattn 0.0.1", "skattn 0.0.1")):
        pickle.loads(blob)


def test_pickle_of_another_state_format_of_this_version_is_refused(
    public_estimators,
):
    """The version string is shared by every commit of a development version:
    the state format tells a pickle of a commit with another state apart."""
    est = public_estimators["AttentionClassifier"]
    state = est.__getstate__()
    state["_skattn_state_version"] += 1
    version = skattn.__version__
    saved = (
        f"skattn {version} with its state in format "
        f"{state['_skattn_state_version']}, of another commit of this development "
        f"version (this one reads format {state['_skattn_state_version'] - 1})"
    )
    blob = pickle_of(type(est).__module__, "AttentionClassifier", state)
    match = refusal("AttentionClassifier", saved, "the commit of skattn that saved it")
    with pytest.raises(ValueError, match=match):
        pickle.loads(blob)


@pytest.mark.parametrize(
    "module, name",
    [
        ("skattn._transformer", "AttentionTransformer"),
        ("skattn._predictors", "AttentionClassifier"),
        ("skattn._predictors", "AttentionRegressor"),
        ("skattn._estimators", "AttentionClassifier"),
        ("skattn._estimators", "AttentionRegressor"),
    ],
)
def test_pickle_naming_a_module_of_an_earlier_layout_is_refused_clearly(
    public_estimators, module, name
):
    """Development versions that recorded no version defined the estimators
    in modules the package does not have: pickle looks the class up before any
    state is read, and gets the same refusal (no ModuleNotFoundError), and
    nothing else, from that path."""
    import importlib

    state = unversioned(public_estimators[name].__getstate__())
    with pytest.raises(ValueError, match=unversioned_refusal(name)):
        pickle.loads(pickle_of(module, name, state))
    with pytest.raises(ValueError, match=unversioned_refusal(name)):
        pickle.loads(pickle_by_reconstructor(module, name, state))
    old = importlib.import_module(module)
    stand_in = getattr(old, name)  # as `from module import name` does
    with pytest.raises(ValueError, match=unversioned_refusal(name)):
        stand_in()
    # introspection (hasattr; sphinx-gallery's backreferences) meets no error
    assert hasattr(old, name) and getattr(old, name) is stand_in
    assert not hasattr(old, "fit")
    assert not hasattr(old, "RandomAttentionFeatures")


@needs_skops
def test_skops_file_without_a_version_is_refused_with_both_versions_named(
    public_estimators,
):
    """skops stores the same state as pickle, and checks it the same way."""
    import io
    import json
    import zipfile

    sio = skops_io()
    est = public_estimators["TokenIds"]
    with zipfile.ZipFile(io.BytesIO(sio.dumps(est))) as file:
        schema = json.loads(file.read("schema.json"))
    state = schema["content"]  # the dict of the estimator's state
    for key in VERSION_KEYS:
        position = list(state["content"]).index(key)
        del state["content"][key], state["key_types"]["content"][position]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as file:
        file.writestr("schema.json", json.dumps(schema))
    trusted = ["skattn.text._words.TokenIds"]
    assert sio.get_untrusted_types(data=buffer.getvalue()) == trusted
    with pytest.raises(ValueError, match=unversioned_refusal("TokenIds")):
        sio.loads(buffer.getvalue(), trusted=trusted)
