"""Learning the projections from y: losses, optimizer, solvers, training options."""

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import order_task
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from skattn import AttentionTransformer
from skattn._model.head import cross_entropy_loss, squared_loss
from skattn._training.optimizers import AdamOptimizer

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def test_cross_entropy_by_hand():
    logits = np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]])
    y = np.array([1, 0])
    weight = np.array([1.0, 3.0])
    loss, d_logits = cross_entropy_loss(logits, y, weight)
    p0 = np.exp([1.0, 2.0, 0.0]) / np.exp([1.0, 2.0, 0.0]).sum()
    p1 = np.exp([0.0, 0.0, 3.0]) / np.exp([0.0, 0.0, 3.0]).sum()
    expected = (-math.log(p0[1]) - 3 * math.log(p1[0])) / 4
    assert loss == pytest.approx(expected, rel=1e-14)
    assert_allclose(d_logits[0], (p0 - [0, 1, 0]) / 4, rtol=1e-14)
    assert_allclose(d_logits[1], 3 * (p1 - [1, 0, 0]) / 4, rtol=1e-14)


def test_squared_loss_by_hand():
    predictions = np.array([[1.0, 2.0], [0.0, -1.0]])
    y = np.array([[0.0, 2.0], [1.0, 1.0]])
    weight = np.array([1.0, 1.0])
    loss, d = squared_loss(predictions, y, weight)
    # per sample: 0.5 * mean of squares = 0.25, 0.5 * (1 + 4) / 2 = 1.25
    assert loss == pytest.approx((0.25 + 1.25) / 2, rel=1e-15)
    assert_allclose(d, (predictions - y) / 4, rtol=1e-15)


def test_adam_updates_follow_the_formula():
    """Injected state, one step, compared with Kingma & Ba's update."""
    params = {"w": np.array([1.0, -2.0])}
    grads = {"w": np.array([0.5, 0.25])}
    optimizer = AdamOptimizer(params, 0.1, beta_1=0.8, beta_2=0.9, epsilon=1e-8)
    optimizer.ms["w"][:] = [0.1, 0.2]
    optimizer.vs["w"][:] = [0.01, 0.02]
    optimizer.state["t"] = 2
    m = 0.8 * np.array([0.1, 0.2]) + 0.2 * np.array([0.5, 0.25])
    v = 0.9 * np.array([0.01, 0.02]) + 0.1 * np.array([0.25, 0.0625])
    learning_rate = 0.1 * math.sqrt(1 - 0.9**3) / (1 - 0.8**3)
    expected = np.array([1.0, -2.0]) - learning_rate * m / (np.sqrt(v) + 1e-8)
    optimizer.update_params(params, grads)
    assert_allclose(params["w"], expected, rtol=1e-15)
    assert optimizer.t == 3


def test_adam_steps_only_the_rows_of_a_sparse_gradient():
    """A table's rows in the batch (repeated rows summed) take the dense step;
    the other rows, and their moments, stay as they are (torch's SparseAdam)."""
    from skattn._model.units import SparseRows

    rng = np.random.default_rng(0)
    table = rng.standard_normal((5, 3))
    dense = {"w": table.copy()}
    sparse = {"w": table.copy()}
    state = dict(learning_rate_init=0.1, beta_1=0.8, beta_2=0.9, epsilon=1e-8)
    a, b = AdamOptimizer(dense, **state), AdamOptimizer(sparse, **state)
    for optimizer in (a, b):
        optimizer.ms["w"][:] = rng.standard_normal((5, 3))
        optimizer.vs["w"][:] = rng.uniform(0.1, 1.0, (5, 3))
        optimizer.state["t"] = 4
    b.state["ms"]["w"][:], b.state["vs"]["w"][:] = a.ms["w"], a.vs["w"]
    moments = (a.ms["w"].copy(), a.vs["w"].copy())
    values = rng.standard_normal((3, 3))
    gradient = SparseRows(np.array([3, 1, 3]), values, (5, 3))
    summed = np.zeros((5, 3))
    summed[1], summed[3] = values[1], values[0] + values[2]
    a.update_params(dense, {"w": summed})
    b.update_params(sparse, {"w": gradient})
    assert_allclose(sparse["w"][[1, 3]], dense["w"][[1, 3]], rtol=1e-14)
    assert_allclose(b.ms["w"][[1, 3]], a.ms["w"][[1, 3]], rtol=1e-14)
    untouched = [0, 2, 4]
    assert_array_equal(sparse["w"][untouched], table[untouched])
    assert_array_equal(b.ms["w"][untouched], moments[0][untouched])
    assert_array_equal(b.vs["w"][untouched], moments[1][untouched])
    assert b.t == a.t == 5


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_learning_beats_seeded_projections_on_an_order_task(solver):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    X, y = order_task(n=300)
    X_test, y_test = order_task(n=200, seed=1)
    scores = {}
    for objective in ("auto", None):
        model = make_pipeline(
            AttentionTransformer(
                n_heads=2, solver=solver, max_iter=60, objective=objective,
                random_state=0,
            ),
            LogisticRegression(max_iter=1000),
        ).fit(X, y)  # fmt: skip
        scores[objective] = model.score(X_test, y_test)
    assert scores["auto"] > 0.9
    assert scores["auto"] > scores[None] + 0.1
    mean_model = LogisticRegression().fit(X.mean(axis=1), y)
    assert mean_model.score(X_test.mean(axis=1), y_test) < 0.7


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_loss_decreases(solver):
    X, y = order_task()
    est = AttentionTransformer(n_heads=2, solver=solver, max_iter=15, random_state=0)
    est.fit(X, y)
    assert est.n_iter_ >= 1
    assert len(est.loss_curve_) == est.n_iter_
    assert est.loss_curve_[-1] < est.loss_curve_[0]
    assert est.loss_ == pytest.approx(est.loss_curve_[-1], rel=1e-6)
    assert est.best_loss_ <= min(est.loss_curve_) + 1e-12


def test_objective_auto_resolves_the_task():
    X, y = order_task(n=40)
    est = AttentionTransformer(n_heads=2, max_iter=2, random_state=0)
    est.fit(X, np.array(["no", "yes"])[y])
    assert est.objective_ == "classification"
    assert_array_equal(est.classes_, ["no", "yes"])
    assert est.head_coef_.shape == (est.d_model_, 2)
    est.fit(X, np.column_stack([y * 1.5, -y + 0.25]))
    assert est.objective_ == "regression"
    assert est.classes_ is None
    assert est.head_coef_.shape == (est.d_model_, 2)
    est.fit(X)  # no y: seeded
    assert est.objective_ is None and est.n_iter_ == 0
    assert est.head_coef_ is None


def test_seeded_weights_equal_objective_none_before_training():
    X, y = order_task(n=40)
    learned = AttentionTransformer(n_heads=2, max_iter=1, random_state=0).fit(X)
    seeded = AttentionTransformer(n_heads=2, objective=None, random_state=0).fit(X, y)
    assert_array_equal(learned.layers_[0]["query"], seeded.layers_[0]["query"])
    trained = AttentionTransformer(n_heads=2, max_iter=1, random_state=0).fit(X, y)
    assert not np.array_equal(trained.layers_[0]["query"], seeded.layers_[0]["query"])


@pytest.mark.parametrize("objective", ["classification", "regression"])
def test_forced_objective_requires_y(objective):
    est = AttentionTransformer(objective=objective)
    with pytest.raises(ValueError, match="requires y to be passed, but the target"):
        est.fit(np.ones((5, 3, 2)))
    assert est.__sklearn_tags__().target_tags.required


def test_single_class_is_an_error():
    with pytest.raises(ValueError, match="one class"):
        AttentionTransformer().fit(np.ones((5, 3, 2)), np.zeros(5))


def test_unsupported_target_type_is_named():
    y = np.array([[0, 1], [1, 0], [1, 1], [0, 0]])  # multilabel-indicator
    with pytest.raises(ValueError, match="'multilabel-indicator'"):
        AttentionTransformer().fit(np.ones((4, 3, 2)), y)


def test_inconsistent_lengths_of_x_and_y():
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[5, 4\]"):
        AttentionTransformer().fit(np.ones((5, 3, 2)), [0, 1, 0, 1])


def test_regression_target_is_standardised_and_multi_output_works():
    X, y = order_task(n=60)
    targets = np.column_stack([1000.5 * y + 5.25, -3.5 * y])
    est = AttentionTransformer(n_heads=2, max_iter=30, random_state=0)
    est.fit(X, targets)
    # the loss is on the standardised scale, whatever the target's units
    assert est.loss_curve_[0] < 2.0
    assert est.transform(X).shape == (60, est.d_model_)


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_same_seed_gives_bit_identical_weights(solver):
    X, y = order_task(n=50)
    fits = [
        AttentionTransformer(n_heads=2, solver=solver, max_iter=5, random_state=3).fit(
            X, y
        )
        for _ in range(2)
    ]
    for layer, other in zip(fits[0].layers_, fits[1].layers_, strict=True):
        for name in layer:
            assert_array_equal(layer[name], other[name])
    assert_array_equal(fits[0].head_coef_, fits[1].head_coef_)
    assert_array_equal(fits[0].transform(X), fits[1].transform(X))
    other = AttentionTransformer(n_heads=2, solver=solver, max_iter=5, random_state=4)
    assert not np.array_equal(
        other.fit(X, y).layers_[0]["query"], fits[0].layers_[0]["query"]
    )


@pytest.mark.parametrize("ragged", [False, True])
def test_results_do_not_depend_on_the_thread_count(ragged):
    """Bit-identical weights and outputs on 1 and 2 threads: the batches
    (several here, see BATCH_BYTES) then run side by side, each computed the
    same way, and their gradients are summed in the same order."""
    X, y = order_task(n=128, n_tokens=40, width=16)
    if ragged:
        X = [seq[: 20 + i % 21] for i, seq in enumerate(X)]
    results = []
    for n_threads in (1, 2):
        with threadpool_limits(n_threads):
            est = AttentionTransformer(max_iter=3, random_state=0).fit(X, y)
            results.append((est.layers_[0]["query"], est.transform(X)))
    assert_array_equal(results[0][0], results[1][0])
    assert_array_equal(results[0][1], results[1][1])


@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize(
    "options", [dict(), dict(n_layers=2, ff_dim=8, dropout=0.1, pooling="attention")]
)
def test_float32_loss_and_gradients_stay_float32(task, options):
    """No float64 creeps into the gradients (float64 sample weights and targets
    included)."""
    from skattn._input.targets import TrainingSet
    from skattn._model.sequences import sequence_lengths
    from skattn._training.loss import loss_gradients

    X, y = order_task(n=40)
    X = X.astype(np.float32)
    if task == "regression":
        y = y + np.linspace(0, 1, len(y))  # float64 targets
    est = AttentionTransformer(n_heads=2, max_iter=1, random_state=0, **options)
    est.fit(X, y)
    model = est._fitted.model
    params = est._fitted.cast(np.float32)
    assert {value.dtype for value in params.values()} == {np.dtype(np.float32)}
    y_encoded = y if task == "classification" else y[:, None]
    weight = np.ones(len(y))
    data = TrainingSet(X, sequence_lengths(X), y_encoded, weight, 1e-4, task)
    dropout = (0.1, 3) if options else None
    _, grads = loss_gradients(model, params, data, np.arange(40), dropout=dropout)
    assert {grad.dtype for grad in grads.values()} == {np.dtype(np.float32)}


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
@pytest.mark.parametrize("task", ["classification", "regression"])
def test_float32_training_stays_float32(solver, task):
    X, y = order_task(n=40)
    if task == "regression":
        y = y + np.linspace(0, 1, len(y))
    est = AttentionTransformer(
        n_heads=2, solver=solver, max_iter=3, pooling="attention", random_state=0
    )
    X_new = est.fit_transform(X.astype(np.float32), y, sample_weight=np.ones(len(y)))
    assert X_new.dtype == np.float32
    assert est.layers_[0]["query"].dtype == np.float32
    assert est.layers_[0]["norm1_weight"].dtype == np.float32
    assert est.head_coef_.dtype == np.float32
    assert est.pooling_query_.dtype == np.float32


def test_max_iter_reached_warns():
    X, y = order_task(n=40)
    with pytest.warns(ConvergenceWarning, match=r"maximum iterations \(2\) reached"):
        AttentionTransformer(max_iter=2, tol=0).fit(X, y)
    with pytest.warns(ConvergenceWarning, match="lbfgs failed to converge"):
        AttentionTransformer(solver="lbfgs", max_iter=2, tol=0).fit(X, y)


def test_stops_when_the_loss_stops_improving():
    X, y = order_task(n=40)
    est = AttentionTransformer(max_iter=200, tol=10.0, n_iter_no_change=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.fit(X, y)
    assert est.n_iter_ == 5  # epoch 1 improves on inf; 4 more exceed n_iter_no_change


@pytest.mark.parametrize("early_stopping, n_iter", [(False, 12), (True, 5)])
def test_auto_patience_is_3_epochs_of_validation_and_10_of_training_loss(
    early_stopping, n_iter, capsys
):
    """n_iter_no_change="auto": nothing improves by tol=10 after the first
    epoch, so the fit stops after 1 + (patience + 1) epochs: 3 epochs of the
    validation score with early stopping, 10 of the training loss without."""
    X, y = order_task(n=40)
    est = AttentionTransformer(
        max_iter=200, tol=10.0, early_stopping=early_stopping, random_state=0
    )
    assert est.n_iter_no_change == "auto"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.set_params(verbose=True).fit(X, y)
    assert est.early_stopping_ is early_stopping
    assert est.n_iter_ == n_iter
    criterion = "Validation score" if early_stopping else "Training loss"
    patience = n_iter - 2
    assert f"{criterion} did not improve more than tol=10.0 for {patience} " in (
        capsys.readouterr().out
    )
    est.set_params(verbose=False)
    # a number is the patience of either criterion
    est.set_params(n_iter_no_change=2).fit(X, y)
    assert est.n_iter_ == 4


@pytest.mark.parametrize("early_stopping, step", [(False, 1e-3), (True, 2e-3)])
def test_auto_learning_rate_doubles_with_early_stopping(early_stopping, step):
    X, y = order_task(n=40)
    kwargs = dict(max_iter=1, n_heads=1, head_dim=4, random_state=0)
    est = AttentionTransformer(early_stopping=early_stopping, **kwargs)
    assert est.learning_rate_init == "auto"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    assert est._fitted.optimizer_state["learning_rate_init"] == step
    # the same first step as the number itself
    given = AttentionTransformer(
        early_stopping=early_stopping, learning_rate_init=step, **kwargs
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        given.fit(X, y)
    assert_array_equal(est.layers_[0]["query"], given.layers_[0]["query"])
    # partial_fit goes on with the fit's step size (it never validates)
    est.partial_fit(X, y)
    assert est._fitted.optimizer_state["learning_rate_init"] == step


def test_early_stopping_keeps_the_best_weights():
    """The kept weights are those of the first epoch with the best validation
    score: the same as a run stopped right after that epoch (every epoch before
    it is the same in both runs)."""
    X, y = order_task(n=100)
    kwargs = dict(
        n_heads=2, early_stopping=True, learning_rate_init=0.05, random_state=0
    )
    est = AttentionTransformer(max_iter=40, n_iter_no_change=3, **kwargs).fit(X, y)
    scores = est.validation_scores_
    assert est.best_validation_score_ == max(scores)
    best = int(np.argmax(scores))  # the first epoch reaching the best score
    assert best < len(scores) - 1, "training should run past its best epoch"
    short = AttentionTransformer(max_iter=best + 1, n_iter_no_change=50, **kwargs)
    short.fit(X, y)
    assert short.validation_scores_ == scores[: best + 1]
    assert_array_equal(est.layers_[0]["query"], short.layers_[0]["query"])
    assert_array_equal(est.head_coef_, short.head_coef_)


@pytest.mark.parametrize("n_samples, on", [(1999, False), (2000, True)])
def test_early_stopping_auto_holds_out_data_from_2000_samples(n_samples, on):
    X, y = order_task(n=n_samples, n_tokens=3)
    est = AttentionTransformer(
        n_heads=1, head_dim=2, early_stopping="auto", max_iter=2, random_state=0
    ).fit(X, y)
    assert est.early_stopping_ is on
    assert (est.validation_scores_ is not None) is on
    # batch_size="auto": 32 with early stopping (200 of 2000 held out), else 200
    steps = math.ceil(1800 / 32) if on else math.ceil(n_samples / 200)
    assert est._fitted.optimizer_state["t"] == 2 * steps
    if on:
        assert len(est.validation_scores_) == 2
    # partial_fit never holds out samples
    est = AttentionTransformer(n_heads=1, head_dim=2, early_stopping="auto")
    assert est.partial_fit(X, y).early_stopping_ is False
    # an unsupervised refit learns nothing, so holds nothing out
    est = AttentionTransformer(n_heads=1, head_dim=2, early_stopping=True, max_iter=1)
    est.fit(X[:50], y[:50]).set_params(objective=None).fit(X[:50])
    assert est.early_stopping_ is False and est.validation_scores_ is None
    # a warm start that turns it on starts a validation history
    est = AttentionTransformer(
        n_heads=1, head_dim=2, early_stopping=False, max_iter=1, warm_start=True
    ).fit(X[:50], y[:50])
    est.set_params(early_stopping=True).fit(X[:50], y[:50])
    assert len(est.validation_scores_) == 1


@pytest.mark.parametrize(
    "n_samples, fraction, on", [(99, 0.1, False), (100, 0.1, True), (50, 0.2, True)]
)
def test_early_stopping_auto_holds_out_ten_samples_of_a_table(n_samples, fraction, on):
    """A table whose head reads its row stops early once its validation split
    holds 10 samples; the same samples as sequences (a 3D X), a table read
    without its row or with seeded weights do not."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_samples, 4))
    y = (X[:, 0] > 0).astype(int)
    kwargs = dict(n_heads=1, head_dim=2, max_iter=2, validation_fraction=fraction)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        table = AttentionTransformer(**kwargs).fit(X, y)
        sequences = AttentionTransformer(**kwargs).fit(X[:, :, None], y)
        seeded = AttentionTransformer(objective=None, **kwargs).fit(X, y)
        no_row = AttentionTransformer(token_statistics=None, **kwargs).fit(X, y)
        patches = AttentionTransformer(patch_size=2, **kwargs).fit(X, y)
        row = AttentionTransformer(token_statistics=["mean", "flatten"], **kwargs)
        row.fit(X, y)
    assert table.early_stopping_ is on and row.early_stopping_ is on
    assert no_row.early_stopping_ is False and patches.early_stopping_ is False
    assert (table.validation_scores_ is not None) is on
    assert sequences.early_stopping_ is False
    assert seeded.early_stopping_ is False


def test_warm_start_continues_from_the_fitted_weights():
    X, y = order_task(n=40)
    est = AttentionTransformer(n_heads=2, max_iter=3, warm_start=True, random_state=0)
    est.fit(X, y)
    weights, n_iter = est.layers_[0]["query"].copy(), est.n_iter_
    est.fit(X, y)
    assert est.n_iter_ == n_iter + 3
    assert len(est.loss_curve_) == 6
    assert not np.array_equal(est.layers_[0]["query"], weights)
    cold = AttentionTransformer(n_heads=2, max_iter=3, random_state=0).fit(X, y)
    cold.fit(X, y)
    assert cold.n_iter_ == 3


def test_partial_fit_runs_one_epoch_per_call():
    X, y = order_task(n=60)
    est = AttentionTransformer(n_heads=2, random_state=0)
    est.partial_fit(X[:30], y[:30], classes=[0, 1])
    assert est.n_iter_ == 1
    est.partial_fit(X[30:], y[30:])
    assert est.n_iter_ == 2 and est.t_ == 60
    with pytest.raises(ValueError, match=r"labels \[7\] not among the classes"):
        est.partial_fit(X[:2], [0, 7])
    assert not hasattr(AttentionTransformer(solver="lbfgs"), "partial_fit")


def test_partial_fit_classes_cover_missing_labels():
    X, y = order_task(n=20)
    est = AttentionTransformer(n_heads=2, random_state=0)
    est.partial_fit(X[y == 0], y[y == 0], classes=[0, 1, 2])
    assert_array_equal(est.classes_, [0, 1, 2])


def test_sample_weight_zero_equals_dropping_samples_with_lbfgs():
    X, y = order_task(n=40)
    weight = np.ones(40)
    weight[::4] = 0
    kwargs = dict(n_heads=2, solver="lbfgs", max_iter=5, random_state=0)
    weighted = AttentionTransformer(**kwargs).fit(X, y, sample_weight=weight)
    dropped = AttentionTransformer(**kwargs).fit(X[weight > 0], y[weight > 0])
    assert_allclose(
        weighted.layers_[0]["query"], dropped.layers_[0]["query"], rtol=1e-6
    )


@pytest.mark.filterwarnings("ignore:Could not adhere to working_memory")
def test_sample_weight_zero_on_a_batch_of_its_own_with_adam():
    """A long sequence of weight zero, which the memory budget puts in a batch
    of its own: it adds nothing (its batch's mean loss was 0 / 0, NaN)."""
    rng = np.random.default_rng(0)
    X = [rng.standard_normal((n, 1)) for n in (70, 100, 130, 400, 3000)]
    y = np.array([0, 1, 0, 1, 1])
    weight = np.array([1.0, 3.0, 1.0, 1.0, 0.0])
    kwargs = dict(n_heads=2, max_iter=2, shuffle=False, random_state=0)
    with config_context(working_memory=1):  # MiB: one batch per sequence
        weighted = AttentionTransformer(**kwargs).fit(X, y, sample_weight=weight)
        dropped = AttentionTransformer(**kwargs).fit(
            X[:4], y[:4], sample_weight=weight[:4]
        )
    assert np.all(np.isfinite(weighted.loss_curve_))
    assert_allclose(weighted.loss_curve_, dropped.loss_curve_, rtol=1e-5)
    assert_allclose(weighted.transform(X), dropped.transform(X), rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("objective", ["classification", "regression"])
def test_sample_weight_two_equals_a_repeated_sample_with_adam(objective):
    """To float32's rounding: Adam trains in float32 whatever the input."""
    X, y = order_task(n=30)
    if objective == "regression":
        y = y + 0.5 * X[:, 0, 0]
    weight = np.ones(30)
    weight[:10] = 2
    kwargs = dict(n_heads=2, max_iter=5, shuffle=False, random_state=0)
    weighted = AttentionTransformer(**kwargs).fit(X, y, sample_weight=weight)
    repeated = AttentionTransformer(**kwargs).fit(
        np.concatenate([X, X[:10]]), np.concatenate([y, y[:10]])
    )
    unweighted = AttentionTransformer(**kwargs).fit(X, y)
    assert_allclose(weighted.transform(X), repeated.transform(X), rtol=2e-4, atol=2e-5)
    assert not np.allclose(weighted.transform(X), unweighted.transform(X), atol=1e-3)


def test_adam_trains_in_float32_and_stores_the_input_dtype():
    X, y = order_task(n=30)
    kwargs = dict(n_heads=2, max_iter=3, scale_tokens=True, random_state=0)
    est64 = AttentionTransformer(**kwargs).fit(X, y)
    est32 = AttentionTransformer(**kwargs).fit(X.astype(np.float32), y)
    assert est64.layers_[0]["query"].dtype == np.float64
    assert est64.token_scale_.dtype == np.float64
    # the same float32 steps: float64 input adds only its token statistics'
    # rounding to float32. They are computed from the float64 values, those of
    # est32 from the float32 ones, and may round to neighbouring float32 numbers
    # (here one entry of token_mean_, by 1.5e-8), which moves the trained
    # weights by float32 rounding (2e-7 here, for entries up to 0.22): absolute
    # differences, beyond any rtol for the entries near 0.
    assert_allclose(
        est64.layers_[0]["query"], est32.layers_[0]["query"], rtol=1e-4, atol=1e-6
    )
    # float64 input of float32 numbers has the statistics of est32: the same fit
    X_rounded = X.astype(np.float32).astype(np.float64)
    rounded = AttentionTransformer(**kwargs).fit(X_rounded, y)
    assert_array_equal(rounded.layers_[0]["query"], est32.layers_[0]["query"])
    assert_array_equal(rounded.loss_curve_, est32.loss_curve_)
    # the trained weights are float32 numbers; the token statistics are not
    query = est64.layers_[0]["query"]
    assert_array_equal(query.astype(np.float32).astype(np.float64), query)
    mean = est64.token_mean_
    assert not np.array_equal(mean.astype(np.float32).astype(np.float64), mean)
    assert est64.transform(X).dtype == np.float64
    lbfgs = AttentionTransformer(solver="lbfgs", **kwargs).fit(X, y)
    query = lbfgs.layers_[0]["query"]
    assert not np.array_equal(query.astype(np.float32).astype(np.float64), query)


@pytest.mark.parametrize(
    "params, remedy",
    [
        (dict(learning_rate_init=1e30), r"lower learning_rate_init \(now 1e\+30\)"),
        (dict(solver="lbfgs", alpha=1e308), r"lower alpha \(now 1e\+308\)"),
    ],
)
def test_training_to_non_finite_weights_raises(params, remedy):
    """As MLPClassifier: never a fit that returns NaN weights."""
    X, y = order_task(n=40)
    est = AttentionTransformer(n_heads=2, max_iter=5, random_state=0, **params)
    with pytest.raises(ValueError, match="non-finite parameter weights.*" + remedy):
        est.fit(X, y)


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_non_finite_training_names_the_cause_it_can_see(solver):
    """Huge init weights were answered with "rescale X"; the message names
    the starting weights, or the unstandardised tokens, and never the tokens
    a model standardises."""
    X, y = order_task(n=40)
    kwargs = dict(n_heads=2, max_iter=2, solver=solver, random_state=0)
    huge = {"input": np.full((X.shape[2], 64), 1e200)}
    with pytest.raises(ValueError) as error:
        AttentionTransformer(init=huge, **kwargs).fit(X, y)
    message = str(error.value)
    assert "the weights it started from reach" in message and "init" in message
    assert "tokens" not in message
    with pytest.raises(ValueError, match=r"the tokens reach .* scale_tokens=True"):
        AttentionTransformer(scale_tokens=False, **kwargs).fit(X * 1e300, y)


def test_divergence_warns_with_the_remedy():
    X, y = order_task(n=60)
    kwargs = dict(n_heads=2, max_iter=10, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"Adam diverged.*learning_rate_init"):
        est = AttentionTransformer(learning_rate_init=1.0, **kwargs).fit(X, y)
    assert est.loss_curve_[-1] > 2 * est.loss_curve_[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        AttentionTransformer(**kwargs).fit(X, y)
    assert not [w for w in caught if "diverged" in str(w.message)]


def test_class_weight_scales_the_loss_like_sample_weight():
    X, y = order_task(n=40)
    kwargs = dict(n_heads=2, solver="lbfgs", max_iter=3, random_state=0)
    by_class = AttentionTransformer(class_weight={0: 1.0, 1: 3.0}, **kwargs).fit(X, y)
    by_sample = AttentionTransformer(**kwargs).fit(X, y, sample_weight=1 + 2.0 * y)
    assert_allclose(
        by_class.layers_[0]["query"], by_sample.layers_[0]["query"], rtol=1e-10
    )
    # "balanced": n_samples / (n_classes * count of the sample's class)
    balanced = AttentionTransformer(class_weight="balanced", **kwargs).fit(X, y)
    by_count = AttentionTransformer(**kwargs).fit(
        X, y, sample_weight=len(y) / (2 * np.bincount(y)[y])
    )
    assert_allclose(
        balanced.layers_[0]["query"], by_count.layers_[0]["query"], rtol=1e-10
    )
    assert np.bincount(y)[0] != np.bincount(y)[1]  # so that balancing matters
    unweighted = AttentionTransformer(**kwargs).fit(X, y)
    assert not np.allclose(balanced.layers_[0]["query"], unweighted.layers_[0]["query"])
    with pytest.raises(ValueError, match="applies to classification"):
        AttentionTransformer(class_weight="balanced").fit(X, y * 0.5 + 0.1)


def test_sample_weight_is_checked():
    X, y = order_task(n=10)
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(3,\), expected"):
        AttentionTransformer().fit(X, y, sample_weight=[1, 2, 3])
    with pytest.raises(ValueError, match="at least one non-zero"):
        AttentionTransformer().fit(X, y, sample_weight=np.zeros(10))
    with pytest.raises(ValueError, match="Negative values in data"):
        AttentionTransformer().fit(X, y, sample_weight=-np.ones(10))
    with pytest.raises(ValueError, match=r"1-D array or a scalar, got a 2-D array"):
        AttentionTransformer().fit(X, y, sample_weight=np.ones((10, 1)))
    with pytest.raises(ValueError, match="sample_weight contains NaN"):
        AttentionTransformer().fit(X, y, sample_weight=np.nan)
    # a number weighs every sample alike
    est = AttentionTransformer(n_heads=2, max_iter=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weights = clone(est).fit(X, y, sample_weight=np.full(10, 3.0)).transform(X)
        number = clone(est).fit(X, y, sample_weight=3.0).transform(X)
    assert_array_equal(number, weights)


@pytest.mark.filterwarnings("ignore:Could not adhere to working_memory")
def test_ragged_training_ignores_padding():
    """Training on a ragged batch equals training on the same sequences whatever
    the padding (lbfgs, full batch)."""
    rng = np.random.RandomState(0)
    X = [rng.standard_normal((n, 3)) for n in (2, 5, 3, 4, 1, 5)]
    y = np.array([0, 1, 0, 1, 1, 0])
    kwargs = dict(n_heads=2, solver="lbfgs", max_iter=4, random_state=0)
    est = AttentionTransformer(**kwargs).fit(X, y)
    with __import__("sklearn").config_context(working_memory=1e-5):
        one_by_one = AttentionTransformer(**kwargs).fit(X, y)  # one row per chunk
    assert_allclose(est.layers_[0]["query"], one_by_one.layers_[0]["query"], rtol=1e-8)


def test_verbose_prints_one_line_per_epoch(capsys):
    X, y = order_task(n=40)
    AttentionTransformer(n_heads=2, max_iter=3, verbose=True).fit(X, y)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "[AttentionTransformer]"
    assert re.match(r"\[AttentionTransformer\]\s+Iteration\s+Objective Value", lines[1])
    for line in lines[3:6]:
        assert re.match(
            r"\[AttentionTransformer\]\s+\d+\s+\d\.\d+e[+-]\d+\s+\d+\.\d+", line
        )
    assert re.match(r"\[AttentionTransformer\] Training took \d+\.\d+s\.", lines[-1])


def test_verbose_early_stopping_prints_validation_score(capsys):
    X, y = order_task(n=40)
    AttentionTransformer(n_heads=2, max_iter=2, verbose=True, early_stopping=True).fit(
        X, y
    )
    out = capsys.readouterr().out
    assert "Validation" in out
    assert re.search(r"\s+1\s+\S+\s+\S+\s+[01]\.\d{4}\n", out)


def test_silent_by_default(capsys):
    X, y = order_task(n=20)
    AttentionTransformer(n_heads=2, max_iter=2).fit(X, y)
    assert capsys.readouterr().out == ""


def test_order_task_needs_attention():
    """Where order matters, the learned transformer +
    LogisticRegression reaches >= 0.95 while mean pooling stays near chance."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline

    from skattn.datasets import make_sequence_classification

    X, y = make_sequence_classification(
        n_samples=600, n_tokens=8, n_features=8, task="order", random_state=0
    )
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    model = make_pipeline(
        AttentionTransformer(random_state=0), LogisticRegression(max_iter=1000)
    ).fit(X_train, y_train)
    assert model.score(X_test, y_test) >= 0.95
    mean_pooling = LogisticRegression().fit(X_train.mean(axis=1), y_train)
    assert abs(mean_pooling.score(X_test.mean(axis=1), y_test) - 0.5) < 0.1


def test_warm_start_cannot_change_the_task():
    X, y = order_task(n=20)
    est = AttentionTransformer(n_heads=2, max_iter=2, warm_start=True).fit(X)
    with pytest.raises(ValueError, match="fitted for no target"):
        est.fit(X, y)
    est = AttentionTransformer(n_heads=2, max_iter=2, warm_start=True).fit(X, y)
    msg = "asks for regression, but AttentionTransformer was fitted"
    with pytest.raises(ValueError, match=msg):
        est.fit(X, y + 0.5)


@pytest.mark.parametrize(
    "width, n_samples, fraction, on",
    [
        (9, 1000, 0.1, True),  # 100 held out
        (9, 999, 0.1, False),
        (9, 400, 0.25, True),
        (9, 40, 0.1, False),
        (8, 1000, 0.1, False),  # narrow tokens: from 2,000 samples
    ],
)
def test_auto_early_stopping_for_wide_tokens_holds_out_100_samples_or_more(
    width, n_samples, fraction, on
):
    X = np.random.default_rng(0).standard_normal((n_samples, 2, width))
    y = np.arange(n_samples) % 2
    est = AttentionTransformer(
        n_heads=1, head_dim=2, max_iter=1, validation_fraction=fraction, random_state=0
    ).fit(X, y)
    assert est.early_stopping_ is on
    assert (est.validation_scores_ is not None) is on


def test_warm_start_with_early_stopping_keeps_weights_that_score_the_best_score():
    """When no epoch of a warm start beats the weights it started from, those
    are kept: the kept weights score best_validation_score_ on the validation
    set, as after the first fit."""
    from skattn import AttentionClassifier

    X, y = order_task(n=200)
    X_val, y_val = order_task(n=100, seed=1)
    clf = AttentionClassifier(
        n_heads=2, early_stopping=True, max_iter=3, random_state=0
    ).fit(X, y, X_val=X_val, y_val=y_val)
    assert clf.score(X_val, y_val) == clf.best_validation_score_ > 0.8
    first = clf.best_validation_score_
    # a step size that wrecks every epoch: no epoch beats the start
    clf.set_params(warm_start=True, learning_rate_init=0.3, max_iter=6)
    clf.fit(X, y, X_val=X_val, y_val=y_val)
    assert len(clf.validation_scores_) > 3 and max(clf.validation_scores_[3:]) < first
    assert clf.score(X_val, y_val) == clf.best_validation_score_ == first


class Interrupt(BaseException):
    """Raised by the patched training step, as KeyboardInterrupt would be."""


def interrupt_at_step(monkeypatch, step):
    """Make the ``step``-th minibatch gradient (from 1) raise Interrupt, in
    either solver."""
    import skattn._training.adam
    import skattn._training.lbfgs

    loss_gradients = skattn._training.adam.loss_gradients
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == step:
            raise Interrupt
        return loss_gradients(*args, **kwargs)

    monkeypatch.setattr(skattn._training.adam, "loss_gradients", interrupted)
    monkeypatch.setattr(skattn._training.lbfgs, "loss_gradients", interrupted)


def assert_same_training_state(a, b):
    assert a.n_iter_ == b.n_iter_ and a.t_ == b.t_
    assert a.loss_curve_ == b.loss_curve_ and a.loss_ == b.loss_
    assert_array_equal(a.layers_[0]["query"], b.layers_[0]["query"])
    assert_array_equal(a.head_coef_, b.head_coef_)
    assert a.layers_[0]["query"].dtype == b.layers_[0]["query"].dtype
    state_a, state_b = a._fitted.optimizer_state, b._fitted.optimizer_state
    assert state_a["t"] == state_b["t"]
    for name in state_a["ms"]:
        assert_array_equal(state_a["ms"][name], state_b["ms"][name])
        assert_array_equal(state_a["vs"][name], state_b["vs"][name])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("early_stopping", [False, True])
def test_an_interrupted_fit_is_the_fit_stopped_after_its_last_epoch(
    monkeypatch, dtype, early_stopping
):
    """Interrupted in the middle of epoch 3, the estimator is the one of two
    epochs: weights, history and Adam's state, for either input dtype."""
    X, y = order_task(n=40)
    X = X.astype(dtype)
    params = dict(
        n_heads=2, batch_size=10, early_stopping=early_stopping, random_state=0
    )
    two_epochs = AttentionTransformer(max_iter=2, n_iter_no_change=50, **params)
    two_epochs.fit(X, y)
    interrupt_at_step(monkeypatch, 2 * 4 + 2)  # 40 or 36 samples: 4 batches
    est = AttentionTransformer(max_iter=10, n_iter_no_change=50, **params)
    with pytest.raises(Interrupt):
        est.fit(X, y)
    assert est.n_iter_ == 2
    assert_same_training_state(est, two_epochs)
    if early_stopping:
        assert est.validation_scores_ == two_epochs.validation_scores_


def test_an_interrupted_partial_fit_or_warm_start_leaves_the_estimator_as_it_was(
    monkeypatch,
):
    X, y = order_task(n=40)
    params = dict(n_heads=2, batch_size=10, random_state=0)
    before = AttentionTransformer(**params).partial_fit(X, y, classes=[0, 1])
    est = clone(before).partial_fit(X, y, classes=[0, 1])
    interrupt_at_step(monkeypatch, 2)
    with pytest.raises(Interrupt):
        est.partial_fit(X, y)
    assert_same_training_state(est, before)
    warm = AttentionTransformer(max_iter=2, warm_start=True, **params).fit(X, y)
    expected = clone(warm).fit(X, y)
    interrupt_at_step(monkeypatch, 3)
    with pytest.raises(Interrupt):
        warm.fit(X, y)
    assert_same_training_state(warm, expected)


def test_an_interrupted_lbfgs_fit_keeps_its_last_iteration(monkeypatch):
    """L-BFGS's iterates do not depend on max_iter: interrupted during
    iteration k + 1, the estimator is the fit of max_iter=k."""
    X, y = order_task(n=40)
    interrupt_at_step(monkeypatch, 8)
    est = AttentionTransformer(n_heads=2, solver="lbfgs", random_state=0)
    with pytest.raises(Interrupt):
        est.fit(X, y)
    assert est.n_iter_ >= 1 and len(est.loss_curve_) == est.n_iter_
    monkeypatch.undo()
    short = AttentionTransformer(
        n_heads=2, solver="lbfgs", max_iter=est.n_iter_, random_state=0
    ).fit(X, y)
    assert est.loss_curve_ == short.loss_curve_ and est.loss_ == short.loss_
    assert_array_equal(est.layers_[0]["query"], short.layers_[0]["query"])


def test_a_warm_start_that_runs_max_iter_epochs_warns():
    X, y = order_task(n=40)
    est = AttentionTransformer(n_heads=2, max_iter=2, tol=0, warm_start=True)
    with pytest.warns(ConvergenceWarning, match=r"maximum iterations \(2\)"):
        est.fit(X, y)
    with pytest.warns(ConvergenceWarning, match=r"maximum iterations \(2\)"):
        est.fit(X, y)  # epochs 3 and 4: this fit's two


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_convergence_warnings_point_at_the_estimators_method(solver):
    X, y = order_task(n=40)
    with pytest.warns(ConvergenceWarning) as record:
        AttentionTransformer(solver=solver, max_iter=1, tol=0).fit(X, y)
    assert {Path(w.filename).name for w in record} == {"transformer.py"}


def test_a_class_of_one_sample_trains_and_is_never_held_out():
    """Early stopping's stratified split keeps a class of one sample in
    training (as a classifier still learns it) instead of refusing y."""
    from skattn import AttentionClassifier
    from skattn._input.targets import TrainingSet, validation_split

    y = np.array([0] * 30 + [1] * 30 + [2])  # class 2: one sample
    data = TrainingSet(
        sequences=np.zeros((61, 2, 1)),
        lengths=np.full(61, 2),
        y=y,
        sample_weight=np.ones(61),
        alpha=0.0,
        objective="classification",
    )
    for seed in range(5):
        train, validation = validation_split(
            data, 0.1, np.random.RandomState(seed), setting=True
        )
        assert 60 in train and 60 not in validation
        assert sorted([*train, *validation]) == list(range(61))
        assert len(validation) == 7  # ceil(0.1 * 61), both classes of two or more
        assert set(y[validation]) == {0, 1}
    X, y = order_task(n=61, n_tokens=3)
    y = y.astype(int)
    y[-1] = 2  # one sample of a third class
    est = AttentionClassifier(
        n_heads=1, head_dim=2, early_stopping=True, max_iter=2, random_state=0
    ).fit(X, y)
    assert est.early_stopping_ and est.classes_.tolist() == [0, 1, 2]
