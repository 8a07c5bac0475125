"""Dask: grid search on a cluster, lazy blocked outputs and streamed training.

One ``distributed.LocalCluster`` of two worker processes serves the module;
every result computed on it must equal the in-memory one exactly.
"""

import copy
import subprocess
import sys
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.pipeline import make_pipeline

from skattn import (
    AttentionClassifier,
    AttentionRegressor,
    AttentionTransformer,
    RandomAttentionFeatures,
)
from skattn._estimators.dask import block_orders

SMALL = dict(n_heads=2, head_dim=4, ff_dim=8, random_state=0)


@pytest.fixture(scope="module")
def client():
    """A client of a local cluster of two single-threaded worker processes."""
    pytest.importorskip(
        "distributed", reason="the dask tests need the [dask] extra (distributed)"
    )
    pytest.importorskip("dask.array", reason="the dask tests need dask[array]")
    from distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # port and memory notices of the cluster
        cluster = LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=None,
        )
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def data():
    """60 sequences of 5 tokens of width 3, labels, blocks of 20."""
    rng = np.random.RandomState(0)
    X = rng.standard_normal((60, 5, 3))
    y = (X[:, :, 0].mean(axis=1) > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return AttentionTransformer(max_iter=5, **SMALL).fit(X, y)


def assert_equal_to_rounding(blocked, whole, computed_in=None):
    """Blocked results against the in-memory method on all of X: a sequence's
    output depends on the sequences computed with it by BLAS's rounding only
    (the user guide, "Performance": 16 units in the last place in float32, 24
    in float64), so floats agree to 64 units of the dtype they are computed
    in (``computed_in``: float32 for the random features; None: the result's
    own); anything else to the bit."""
    blocked, whole = np.asarray(blocked), np.asarray(whole)
    if whole.dtype.kind != "f":
        np.testing.assert_array_equal(blocked, whole)
        return
    tolerance = 64 * np.finfo(computed_in or whole.dtype).eps
    np.testing.assert_allclose(
        blocked, whole, rtol=tolerance, atol=tolerance * np.abs(whole).max()
    )


def _by_block(function, X, size=20, **kwargs):
    """``function`` in memory on each block of ``size`` samples, concatenated
    (which the blocked result and the result of X at once both equal, bit for
    bit)."""
    outputs = [function(X[i : i + size], **kwargs) for i in range(0, len(X), size)]
    return np.concatenate(outputs)


def _blocks(X, size=20):
    import dask.array as da

    return da.from_array(X, chunks=(size, *X.shape[1:]))


def test_import_skattn_imports_no_dask():
    """skattn imports without dask, and recognises no collection without it."""
    code = (
        "import sys, skattn\n"
        "from skattn._estimators.dask import is_dask_collection\n"
        "class Fake:\n"
        "    def __dask_graph__(self):\n"
        "        return {}\n"
        "assert not is_dask_collection(Fake())\n"
        "assert 'dask' not in sys.modules, 'import skattn imported dask'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_workers_run_blas_on_one_thread(client):
    """The nanny's OMP_NUM_THREADS=1 reaches skattn: one thread per task."""
    from skattn._parallel import parallel_workers

    assert set(client.run(parallel_workers).values()) == {1}


def test_grid_search_on_cluster_equals_n_jobs_1(client, data):
    X, y = data
    pipe = make_pipeline(
        AttentionTransformer(max_iter=3, **SMALL), LogisticRegression()
    )
    grid = {"attentiontransformer__n_heads": [1, 2]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        local = GridSearchCV(pipe, grid, cv=2).fit(X, y)
        local_cv = cross_validate(pipe, X, y, cv=2)
        with joblib.parallel_backend("dask"):
            remote = GridSearchCV(pipe, grid, cv=2, n_jobs=-1).fit(X, y)
            remote_cv = cross_validate(pipe, X, y, cv=2, n_jobs=-1)
    for key in ("split0_test_score", "split1_test_score", "mean_test_score"):
        np.testing.assert_array_equal(remote.cv_results_[key], local.cv_results_[key])
    np.testing.assert_array_equal(remote_cv["test_score"], local_cv["test_score"])


@pytest.mark.parametrize(
    "method, kwargs, tail",
    [
        ("transform", {}, (8,)),
        ("transform_sequences", {}, (5, 8)),
        ("attention_weights", {"layer": 0}, (2, 5, 5)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blocked_outputs_equal_in_memory(
    client, data, fitted, method, kwargs, tail, dtype
):
    import dask.array as da

    X = data[0].astype(dtype)
    lazy = getattr(fitted, method)(_blocks(X), **kwargs)
    assert isinstance(lazy, da.Array)
    assert lazy.shape == (60, *tail)
    assert lazy.chunks == ((20, 20, 20), *((n,) for n in tail))
    assert lazy.dtype == dtype
    computed = lazy.compute()
    function = getattr(fitted, method)
    np.testing.assert_array_equal(computed, _by_block(function, X, **kwargs))
    assert_equal_to_rounding(computed, function(X, **kwargs))


def test_blocked_predictions_equal_in_memory(client, data):
    X, y = data
    dX = _blocks(X)
    labels = np.array(["neg", "pos"])[y]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = AttentionClassifier(max_iter=3, **SMALL).fit(X, labels)
        reg = AttentionRegressor(max_iter=3, **SMALL).fit(X, X[:, :, 1].sum(axis=1))
    rf = RandomAttentionFeatures(random_state=0).fit(X)
    cases = [
        (clf, "predict"),
        (clf, "predict_proba"),
        (clf, "predict_log_proba"),
        (clf, "decision_function"),
        (reg, "predict"),
        (rf, "transform"),
    ]
    for est, method in cases:
        lazy = getattr(est, method)(dX)
        expected = getattr(est, method)(X)
        assert (lazy.shape, lazy.dtype) == (expected.shape, expected.dtype)
        assert lazy.chunks[0] == (20, 20, 20)
        float32 = np.float32 if est is rf else None
        assert_equal_to_rounding(lazy.compute(), expected, computed_in=float32)


def test_blocked_table(client):
    rng = np.random.RandomState(0)
    X = rng.standard_normal((30, 6))
    est = AttentionTransformer(**SMALL).fit(X)
    np.testing.assert_array_equal(
        est.transform(_blocks(X, 10)).compute(), _by_block(est.transform, X, 10)
    )


def test_ragged_bag(client, fitted):
    import dask.bag as db

    rng = np.random.RandomState(1)
    sequences = [rng.standard_normal((n, 3)) for n in (2, 7, 4, 5, 3)]
    bag = db.from_sequence(sequences, npartitions=2)
    tokens = fitted.transform_sequences(bag)
    assert isinstance(tokens, db.Bag)
    for lazy, expected in zip(
        tokens.compute(), fitted.transform_sequences(sequences), strict=True
    ):
        np.testing.assert_array_equal(lazy, expected)
    pooled = np.stack(fitted.transform(bag).compute())
    np.testing.assert_array_equal(pooled, fitted.transform(sequences))


def test_bad_collections(fitted, data):
    pytest.importorskip("dask.array", reason="the dask tests need dask[array]")
    import dask

    X = data[0]
    import dask.array as da

    tokens_split = da.from_array(X, chunks=(20, 2, 3))
    with pytest.raises(ValueError, match=r"along the samples \(axis 0\) only.*axis 1"):
        fitted.transform(tokens_split)
    with pytest.raises(ValueError, match="chunked along the samples"):
        fitted.fit(tokens_split, data[1])
    with pytest.raises(ValueError, match="2D dask array .* or a 3D one"):
        fitted.transform(da.zeros((4, 5, 3, 1), chunks=2))
    with pytest.raises(TypeError, match="reads dask arrays"):
        fitted.transform(dask.delayed(X))
    with pytest.raises(ValueError, match="3 features"):  # checked before compute
        fitted.transform(_blocks(X[:, :, :2]))


def test_blocked_fit_errors(data):
    pytest.importorskip("dask.array", reason="the dask tests need dask[array]")
    X, y = data
    dX, dy = _blocks(X), _blocks(y)
    with pytest.raises(ValueError, match="solver='lbfgs' cannot stream"):
        AttentionClassifier(solver="lbfgs", **SMALL).fit(dX, dy)
    with pytest.raises(ValueError, match="cannot stop early"):
        AttentionClassifier(early_stopping=True, **SMALL).fit(dX, dy)
    with pytest.raises(ValueError, match="takes no X_val"):
        AttentionClassifier(**SMALL).fit(dX, dy, X_val=X, y_val=y)
    with pytest.raises(ValueError, match="X has 60 samples but y has 59"):
        AttentionClassifier(**SMALL).fit(dX, dy[:59])
    with pytest.raises(ValueError, match="requires y"):
        AttentionClassifier(**SMALL).fit(dX, None)
    with pytest.raises(TypeError, match="Fit it on a sample held in memory"):
        RandomAttentionFeatures(random_state=0).fit(dX)


@pytest.mark.parametrize("shuffle", [False, True])
def test_blocked_fit_equals_partial_fit_of_the_blocks(client, data, shuffle):
    """max_iter epochs of partial_fit over the blocks in the documented order."""
    X, y = data
    # the first block misses class 2: fit finds the classes of all the blocks
    y = y.copy()
    y[40:45] = 2
    weight = np.linspace(0.5, 2, 60)
    est = AttentionClassifier(max_iter=3, shuffle=shuffle, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(_blocks(X), _blocks(y), sample_weight=_blocks(weight))
    reference = clone(est)
    orders = block_orders(0, 3, 3) if shuffle else [range(3)] * 3
    for order in orders:
        for b in order:
            rows = slice(20 * b, 20 * b + 20)
            reference.partial_fit(
                X[rows], y[rows], classes=[0, 1, 2], sample_weight=weight[rows]
            )
    for name in ("input_weights_", "head_coef_", "head_intercept_", "token_mean_"):
        np.testing.assert_array_equal(getattr(est, name), getattr(reference, name))
    for layer, expected in zip(est.layers_, reference.layers_, strict=True):
        for key in expected:
            np.testing.assert_array_equal(layer[key], expected[key])
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    assert est.n_iter_ == 3 and len(est.loss_curve_) == 3
    assert est.early_stopping_ is False


def test_blocked_partial_fit_and_stopping(client, data):
    X, y = data
    dX = _blocks(X)
    target = X[:, :, 1].sum(axis=1)
    est = AttentionRegressor(**SMALL)
    reference = clone(est)
    for _ in range(2):  # one pass over the blocks in order, per call
        est.partial_fit(dX, _blocks(target))
        for b in range(3):
            rows = slice(20 * b, 20 * b + 20)
            reference.partial_fit(X[rows], target[rows])
    np.testing.assert_array_equal(est.head_coef_, reference.head_coef_)
    assert est.n_iter_ == 2
    # no improvement by tol=1e9 after the first epoch: stops after
    # n_iter_no_change + 2 epochs, as fit in memory
    stopping = AttentionTransformer(tol=1e9, n_iter_no_change=1, **SMALL)
    stopping.fit(dX, _blocks(y))
    in_memory = clone(stopping).fit(X, y)
    assert stopping.n_iter_ == in_memory.n_iter_ == 3
    # "auto" is the training loss's patience, 10: the blocked fit never validates
    stopping.set_params(n_iter_no_change="auto").fit(dX, _blocks(y))
    assert stopping.n_iter_ == 12
    # labels as a numpy array beside a dask X
    clf = AttentionClassifier(max_iter=1, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(dX, np.array(["a", "b", "c"])[y + (np.arange(60) >= 50)])
    np.testing.assert_array_equal(clf.classes_, ["a", "b", "c"])


def test_every_fit_method_streams_a_dask_array(client, data):
    """fit_transform and the classifier's partial_fit take the same path
    (BaseAttention._fit hands every dask X to the blocked fit)."""
    import dask.array as da

    X, y = data
    dX, dy = _blocks(X), _blocks(y)
    transformer = AttentionTransformer(max_iter=2, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        lazy = transformer.fit_transform(dX, dy)
        fitted = clone(transformer).fit(dX, dy)
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), _by_block(fitted.transform, X))
    clf = AttentionClassifier(**SMALL)
    reference = clone(clf)
    clf.partial_fit(dX, dy, classes=[0, 1])
    for b in range(3):
        rows = slice(20 * b, 20 * b + 20)
        reference.partial_fit(X[rows], y[rows], classes=[0, 1])
    np.testing.assert_array_equal(clf.head_coef_, reference.head_coef_)


def test_blocked_fit_without_target_seeds(client, data):
    X = data[0]
    est = AttentionTransformer(**SMALL).fit(_blocks(X))
    expected = AttentionTransformer(**SMALL).fit(X[:20])  # the first block
    np.testing.assert_array_equal(est.token_mean_, expected.token_mean_)
    assert est.objective_ is None


def test_empty_blocks_are_skipped(client, data, fitted):
    """A block of no sample (chunks (5, 0, 15)) failed in transform, predict
    and fit with "Found array with 0 sample(s)"; it holds no result and no
    step."""
    import dask.array as da

    X, y = data
    X, y = X[:20], y[:20]
    with_empty = da.from_array(X, chunks=((5, 0, 15), 5, 3))
    without = da.from_array(X, chunks=((5, 15), 5, 3))
    np.testing.assert_array_equal(
        fitted.transform(with_empty).compute(), fitted.transform(without).compute()
    )
    features = RandomAttentionFeatures(n_models=2, random_state=0).fit(X)
    assert_equal_to_rounding(
        features.transform(with_empty).compute(),
        features.transform(X),
        computed_in=np.float32,
    )
    params = dict(max_iter=2, shuffle=False, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = AttentionClassifier(**params).fit(with_empty, y)
        reference = AttentionClassifier(**params).fit(without, y)
    np.testing.assert_array_equal(est.head_coef_, reference.head_coef_)
    assert est.loss_curve_ == reference.loss_curve_
    np.testing.assert_array_equal(
        est.predict(with_empty).compute(), reference.predict(X)
    )
    seeded = AttentionTransformer(objective=None, **SMALL)
    first_empty = da.from_array(X, chunks=((0, 20), 5, 3))
    np.testing.assert_array_equal(
        seeded.fit(first_empty).token_mean_, clone(seeded).fit(X).token_mean_
    )
    with pytest.raises(ValueError, match="X has no samples"):
        AttentionClassifier(**SMALL).fit(da.zeros((0, 5, 3), chunks=(1, 5, 3)), [])


def test_set_output_containers_are_refused_with_the_remedy(data, fitted):
    """set_output(transform="pandas") on a dask array raised AttributeError:
    'DataFrame' object has no attribute 'dtype'."""
    pytest.importorskip("pandas")
    pytest.importorskip("dask.array", reason="the dask tests need dask[array]")
    from sklearn import config_context

    X = data[0]
    features = RandomAttentionFeatures(n_models=2, random_state=0).fit(X)
    message = r"lazy dask array.*set_output\(transform='pandas'\).*from_dask_array"
    for est in (fitted, features):
        with config_context(transform_output="pandas"):  # the global setting
            with pytest.raises(ValueError, match=message):
                est.transform(_blocks(X))
        est = copy.deepcopy(est).set_output(transform="pandas")
        with pytest.raises(ValueError, match=message):
            est.transform(_blocks(X))
        assert est.transform(X).shape == (len(X), len(est.get_feature_names_out()))
        lazy = est.set_output(transform="default").transform(_blocks(X))
        float32 = np.float32 if isinstance(est, RandomAttentionFeatures) else None
        assert_equal_to_rounding(lazy.compute(), est.transform(X), float32)
    with config_context(transform_output="pandas"):  # no container for these
        assert fitted.transform_sequences(_blocks(X)).compute().shape == (60, 5, 8)


def test_blocked_fit_decides_the_task_from_the_whole_target(client, data):
    """A continuous y whose first block holds whole numbers is regression, as
    in memory; the first block's type made it "fitted for classification"."""
    X = data[0]
    y = np.random.default_rng(0).standard_normal(60)
    y[:20] = np.arange(20) % 3  # whole numbers
    params = dict(max_iter=1, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = AttentionTransformer(**params).fit(_blocks(X), _blocks(y))
        in_memory = AttentionTransformer(**params).fit(X, y)
    assert est.objective_ == in_memory.objective_ == "regression"
    assert est.objective == "auto"  # the caller's parameter, unchanged


def test_blocked_fit_names_a_wrong_target_and_refuses_a_bag(data):
    pytest.importorskip("dask.bag", reason="the dask tests need dask[bag]")
    import dask.bag as db

    X, y = data
    with pytest.raises(ValueError, match="X has 60 samples but y has 59"):
        AttentionClassifier(**SMALL).fit(_blocks(X), y[:59])  # a numpy y
    with pytest.raises(ValueError, match="sample_weight has 61"):
        AttentionClassifier(**SMALL).fit(_blocks(X), y, sample_weight=np.ones(61))
    bag = db.from_sequence(list(X), npartitions=2)
    with pytest.raises(TypeError, match="cannot train on a dask bag.*transforms"):
        AttentionClassifier(**SMALL).fit(bag, y)
