"""Persistence: pickle and skops round trips give the same model, bit for bit.

A fitted estimator pickles as numpy arrays, Python numbers, dicts and lists
(its fitted model, Adam's state included, as plain dicts), so
``skops.io.load`` needs to trust nothing but skattn's public estimator classes.
"""

import importlib.util
import pickle

import numpy as np
import pytest
from helpers import make_ragged, order_task
from numpy.testing import assert_array_equal

from skattn import AttentionTransformer, RandomAttentionFeatures

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
    from skattn import AttentionClassifier

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

    from skattn import AttentionClassifier
    from skattn.text import StaticTokenEmbeddings, TokenIds

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
