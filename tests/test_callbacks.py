"""scikit-learn's fit callbacks (scikit-learn >= 1.9): the tasks each fit reports,
what the hooks receive, stop requests, and propagation from meta-estimators."""

import re
import warnings

import numpy as np
import pytest
import sklearn
from helpers import order_task
from numpy.testing import assert_array_equal
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skattn import (
    AttentionClassifier,
    AttentionRegressor,
    AttentionTransformer,
    RandomAttentionFeatures,
)
from skattn._training.callbacks import CALLBACK_BASES

FAST = dict(max_iter=3, head_dim=4, n_heads=2, random_state=0)


try:
    from sklearn import callback
except ImportError:  # scikit-learn < 1.9
    callback = None

requires_callbacks = pytest.mark.skipif(
    callback is None, reason=f"scikit-learn {sklearn.__version__} has no callbacks"
)


def test_set_callbacks_exists_exactly_where_scikit_learn_has_callbacks():
    has_callbacks = callback is not None
    assert bool(CALLBACK_BASES) == has_callbacks
    for est in (
        AttentionTransformer(),
        AttentionClassifier(),
        AttentionRegressor(),
        RandomAttentionFeatures(),
    ):
        assert hasattr(est, "set_callbacks") == has_callbacks


class Recorder:
    """Records every hook call: (hook, task name, task id, X, y, metadata,
    fitted_estimator); asks to stop at the end of task ``stop_at``."""

    def __init__(self, stop_at=None, max_propagation_depth=None):
        self.calls = []
        self.stop_at = stop_at
        if max_propagation_depth != "no":  # an auto-propagated callback
            self.max_propagation_depth = max_propagation_depth

    def setup(self, estimator, context):
        self.calls.append(("setup", context.task_name, None, None, None, None, None))

    def teardown(self, estimator, context):
        self.calls.append(("teardown", context.task_name, None, None, None, None, None))

    def on_fit_task_begin(self, estimator, context, *, X=None, y=None, metadata=None):
        self.calls.append(
            ("begin", context.task_name, context.task_id, X, y, metadata, None)
        )

    def on_fit_task_end(
        self, estimator, context, *, X=None, y=None, metadata=None,
        fitted_estimator=None,
    ):  # fmt: skip
        self.calls.append(
            ("end", context.task_name, context.task_id, X, y, metadata,
             fitted_estimator)
        )  # fmt: skip
        return (context.task_name, context.task_id) == self.stop_at

    def ends(self, task_name):
        return [call for call in self.calls if call[:2] == ("end", task_name)]


def own(stop_at=None):
    """A callback set on the estimator itself (not propagated)."""
    return Recorder(stop_at=stop_at, max_propagation_depth="no")


@pytest.fixture
def task():
    return order_task(n=40)


@requires_callbacks
def test_adam_reports_one_task_per_epoch(task):
    X, y = task
    rec = own()
    clf = AttentionClassifier(**FAST).set_callbacks(rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        clf.fit(X, y)
    names = [(hook, name) for hook, name, *_ in rec.calls]
    epochs = [("begin", "epoch"), ("end", "epoch")] * clf.n_iter_
    assert names == [
        ("setup", "fit"),
        ("begin", "fit"),
        *epochs,
        ("end", "fit"),
        ("teardown", "fit"),
    ]
    assert [call[2] for call in rec.ends("epoch")] == [0, 1, 2]
    for _, _, _, X_hook, y_hook, metadata, _ in rec.ends("epoch"):
        assert X_hook is X and y_hook is y and metadata is None  # the caller's own
    # fitted_estimator of the last epoch is the model fit returns, and earlier
    # ones are snapshots, not views of the weights that trained on
    first, last = rec.ends("epoch")[0][-1], rec.ends("epoch")[-1][-1]
    assert_array_equal(last.decision_function(X), clf.decision_function(X))
    assert not np.array_equal(first.decision_function(X), clf.decision_function(X))
    fitted = rec.ends("fit")[0][-1]  # the end of the fit: the fitted model
    assert_array_equal(fitted.decision_function(X), clf.decision_function(X))


@requires_callbacks
def test_scoring_monitor_scores_every_epoch_on_train_and_validation(task):
    pytest.importorskip("pandas")
    X, y = task
    monitor = callback.ScoringMonitor(scoring="accuracy")
    clf = AttentionClassifier(
        early_stopping=True, validation_fraction=0.25, n_iter_no_change=10, **FAST
    ).set_callbacks(monitor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        clf.fit(X, y)
    log = monitor.get_logs().data_as_pandas
    train = log[log.task_name == "epoch"]
    validation = log[log.task_name == "validation"]
    assert len(train) == len(validation) == clf.n_iter_ == 3
    # the head's validation score that early stopping records, on the same rows
    assert_array_equal(validation.accuracy, clf.validation_scores_)
    assert train.accuracy.between(0, 1).all()


@requires_callbacks
def test_early_stopping_split_gives_each_task_its_rows(task):
    X, y = task
    weight = np.arange(1.0, 41.0)
    rec = own()
    clf = AttentionClassifier(
        early_stopping=True, validation_fraction=0.25, n_iter_no_change=10, **FAST
    ).set_callbacks(rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        clf.fit(X, y, sample_weight=weight)
    (_, _, _, X_train, y_train, meta_train, _), *_ = rec.ends("epoch")
    (_, _, _, X_val, y_val, meta_val, fitted), *_ = rec.ends("validation")
    assert len(X_train) == 30 and len(X_val) == 10
    # a partition of the caller's rows, with their labels and weights
    rows = np.concatenate([meta_train["sample_weight"], meta_val["sample_weight"]])
    assert_array_equal(np.sort(rows), weight)
    for X_part, y_part, meta in ((X_train, y_train, meta_train),
                                 (X_val, y_val, meta_val)):  # fmt: skip
        index = meta["sample_weight"].astype(int) - 1
        assert_array_equal(X_part, X[index])
        assert_array_equal(y_part, y[index])
    assert fitted.score(X_val, y_val) == clf.validation_scores_[0]


@requires_callbacks
def test_explicit_validation_set_is_passed_as_is(task):
    X, y = task
    X_val, y_val = order_task(n=12, seed=1)
    rec = own()
    clf = AttentionClassifier(**FAST).set_callbacks(rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        clf.fit(X, y, X_val=X_val, y_val=y_val)
    validations = rec.ends("validation")
    assert len(validations) == len(rec.ends("epoch")) == clf.n_iter_
    for _, _, _, X_hook, y_hook, _, _ in validations:
        assert X_hook is X_val and y_hook is y_val
    for _, _, _, X_hook, _, _, _ in rec.ends("epoch"):
        assert X_hook is X  # nothing held out of the training set
    # task ids alternate: epoch 0, validation 1, epoch 2, ...
    ends = [call for call in rec.calls if call[0] == "end" and call[1] != "fit"]
    assert [(name, i) for _, name, i, *_ in ends][:4] == [
        ("epoch", 0),
        ("validation", 1),
        ("epoch", 2),
        ("validation", 3),
    ]


@requires_callbacks
def test_lbfgs_reports_one_task_per_iteration(task):
    X, y = task
    rec = own()
    clf = AttentionClassifier(solver="lbfgs", **{**FAST, "max_iter": 5})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        clf.set_callbacks(rec).fit(X, y)
    iterations = rec.ends("iteration")
    # one per iteration, and the one begun last, which never ran, ends empty
    assert len(iterations) == clf.n_iter_ + 1 == 6
    assert all(call[-1] is not None for call in iterations[:-1])
    assert iterations[-1][3:] == (None, None, None, None)
    last = iterations[-2][-1]
    assert_array_equal(last.decision_function(X), clf.decision_function(X))


@requires_callbacks
@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_a_callback_can_stop_the_training(task, solver):
    X, y = task
    stop_at = ("epoch", 1) if solver == "adam" else ("iteration", 1)
    rec = own(stop_at=stop_at)
    clf = AttentionClassifier(solver=solver, **{**FAST, "max_iter": 50})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stopped on request: no ConvergenceWarning
        clf.set_callbacks(rec).fit(X, y)
    assert clf.n_iter_ == 2
    assert len(clf.loss_curve_) == 2
    last = rec.ends(stop_at[0])[-1][-1]
    assert_array_equal(last.decision_function(X), clf.decision_function(X))


@requires_callbacks
def test_partial_fit_and_seeded_fit_tasks(task):
    X, y = task
    rec = own()
    clf = AttentionClassifier(**FAST).set_callbacks(rec)
    clf.partial_fit(X, y, classes=[0, 1])
    assert [(h, n) for h, n, *_ in rec.calls if h in ("begin", "end")] == [
        ("begin", "partial_fit"),
        ("begin", "epoch"),
        ("end", "epoch"),
        ("end", "partial_fit"),
    ]
    rec = own()
    AttentionTransformer(objective=None, **FAST).set_callbacks(rec).fit(X, y)
    assert [(h, n) for h, n, *_ in rec.calls if h in ("begin", "end")] == [
        ("begin", "fit"),
        ("end", "fit"),
    ]


@requires_callbacks
def test_regressor_epochs_carry_the_trained_model_then_fit_refits_the_head(task):
    """The last epoch's regressor holds the model as trained, its head the
    trained one; fit then refits the head alone (the ridge of its features)."""
    X, _ = task
    y = X[:, :, 0].sum(axis=1)
    rec = own()
    reg = AttentionRegressor(**FAST).set_callbacks(rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        reg.fit(X, y)
    last = rec.ends("epoch")[-1][-1]
    assert_array_equal(last.transform_sequences(X), reg.transform_sequences(X))
    assert np.all(np.isfinite(last.predict(X)))
    assert not np.allclose(last.head_coef_, reg.head_coef_)


@requires_callbacks
def test_progress_bar_in_a_pipeline_shows_the_attention_epochs(
    task, capsys, monkeypatch
):
    """ProgressBar propagated from a Pipeline: the attention step's fit gets a
    bar that the epochs complete; a recording callback beside it sees them."""
    pytest.importorskip("rich")
    monkeypatch.setenv("COLUMNS", "200")  # rich's width: whole task names
    X, y = task
    rec = Recorder()
    pipe = make_pipeline(
        AttentionTransformer(**FAST), LogisticRegression(max_iter=50)
    ).set_callbacks(callback.ProgressBar(max_propagation_depth=None), rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        pipe.fit(X, y)
    out = capsys.readouterr().out
    bar = re.search(r"AttentionTransformer - fit\b.*", out)
    assert bar is not None, out
    assert "100%" in bar.group()
    assert not re.search(r"\b[0-9]{1,2}%", out)  # every bar complete
    assert len(rec.ends("epoch")) == pipe[0].n_iter_ == 3


@requires_callbacks
def test_callbacks_propagate_from_grid_search(task):
    X, y = task
    rec = Recorder()
    search = GridSearchCV(
        AttentionClassifier(**FAST), {"max_iter": [1, 2]}, cv=2
    ).set_callbacks(rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        search.fit(X, y)
    # 2 folds x (1 + 2 epochs), then the refit's epochs
    refit_epochs = search.best_estimator_.n_iter_
    assert len(rec.ends("epoch")) == 2 * (1 + 2) + refit_epochs


@requires_callbacks
def test_random_features_report_their_fit_in_a_pipeline(task):
    """One task, no subtask, and no "does not support callbacks" warning."""
    X, y = task
    rec = Recorder()
    pipe = make_pipeline(
        RandomAttentionFeatures(n_models=2, random_state=0), LogisticRegression()
    ).set_callbacks(rec)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        pipe.fit(X, y)
    (fit,) = [call for call in rec.ends("fit") if call[-1] is not None and
              isinstance(call[-1], RandomAttentionFeatures)]  # fmt: skip
    assert fit[3] is X and fit[4] is y
    assert_array_equal(fit[-1].transform(X), pipe[0].transform(X))
