"""WeightedUnionCV: blocks side by side, their weights chosen by cross-validation."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.decomposition import PCA
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from skattn.compose import WeightedUnionCV


class Columns(TransformerMixin, BaseEstimator):
    """The columns ``start:stop`` of X (a block of a table), times ``factor``;
    it records whether ``fit`` saw a target and how often ``transform`` ran."""

    def __init__(self, start=0, stop=None, factor=1.0):
        self.start, self.stop, self.factor = start, stop, factor

    def fit(self, X, y=None):
        self.saw_target_ = y is not None
        self.n_transforms_ = 0
        return self

    def transform(self, X):
        self.n_transforms_ += 1
        return self.factor * np.asarray(X)[:, self.start : self.stop]


def two_blocks_task(n=120, informative="first", seed=0):
    """Two blocks of 5 columns; the label is the sign of a column of the
    ``informative`` block ("first", "second") or of the sum of one of each
    ("both")."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 10))
    signal = {"first": X[:, 0], "second": X[:, 5], "both": X[:, 0] + X[:, 5]}
    return X, (signal[informative] > 0).astype(int)


def union(**params):
    blocks = [("first", Columns(0, 5)), ("second", Columns(5, 10))]
    return WeightedUnionCV(blocks, LogisticRegression(), **params)


# three candidates and three folds: the checks need the composition, not the
# default's seven candidates
@parametrize_with_checks(
    [
        WeightedUnionCV(
            [("scaled", StandardScaler()), ("pca", PCA(n_components=1))],
            LogisticRegression(),
            weights=(0, 1),
            cv=3,
        ),
        WeightedUnionCV(
            [("scaled", StandardScaler()), ("pca", PCA(n_components=1))],
            Ridge(),
            weights=(0, 1),
            cv=3,
        ),
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_candidates_give_the_largest_weight_to_a_block_in_tie_breaking_order():
    results = union().fit(*two_blocks_task()).cv_results_
    assert [tuple(p.values()) for p in results["params"]] == [
        (1.0, 0.0),
        (0.0, 1.0),
        (1.0, 1.0),
        (1.0, 0.5),
        (1.0, 0.25),
        (0.5, 1.0),
        (0.25, 1.0),
    ]
    three = WeightedUnionCV(
        [("a", Columns(0, 3)), ("b", Columns(3, 6)), ("c", Columns(6, 10))],
        LogisticRegression(),
        weights=[0, 0.5, 1],
    ).fit(*two_blocks_task())
    assert len(three.cv_results_["params"]) == 3**3 - 2**3


@pytest.mark.parametrize(
    "informative, chosen",
    [
        ("first", {"first": 1.0, "second": 0.0}),
        ("second", {"first": 0.0, "second": 1.0}),
    ],
)
def test_a_block_of_noise_gets_no_weight(informative, chosen):
    model = union().fit(*two_blocks_task(informative=informative))
    assert model.weights_ == chosen


def test_complementary_blocks_are_both_kept():
    X, y = two_blocks_task(informative="both")
    model = union().fit(X, y)
    assert min(model.weights_.values()) > 0
    alone = max(
        cross_val_score(LogisticRegression(), X[:, s], y, cv=5).mean()
        for s in (slice(0, 5), slice(5, 10))
    )
    assert model.best_score_ > alone + 0.1


def test_cv_results_are_the_scores_of_the_estimator_on_the_weighted_blocks():
    """By hand: each candidate's blocks, divided by their root mean square row
    norm and times their weight, side by side, scored by cross_val_score."""
    X, y = two_blocks_task(informative="both")
    X[:, 5:] *= 7.0  # a block of other scale
    model = union().fit(X, y)
    columns = (slice(0, 5), slice(5, 10))
    scales = [np.sqrt(np.mean(np.sum(X[:, s] ** 2, axis=1))) for s in columns]
    assert_allclose(list(model.block_scales_.values()), scales)
    cv = StratifiedKFold(5)
    for index, params in enumerate(model.cv_results_["params"]):
        weights = list(params.values())
        parts = [
            X[:, s] * (w / scale)
            for s, w, scale in zip(columns, weights, scales, strict=True)
            if w > 0
        ]
        scores = cross_val_score(LogisticRegression(), np.hstack(parts), y, cv=cv)
        for split, score in enumerate(scores):
            assert model.cv_results_[f"split{split}_test_score"][index] == score
        assert_allclose(model.cv_results_["mean_test_score"][index], scores.mean())
    best = np.argmax(model.cv_results_["mean_test_score"])
    assert model.cv_results_["rank_test_score"][best] == 1
    assert model.best_score_ == model.cv_results_["mean_test_score"][best]


def test_tfidf_alone_predicts_as_tfidf_and_its_model():
    """When the words win, the union is TF-IDF and the same LinearSVC: TF-IDF
    rows have unit norm, so its scale is 1 and its features are unchanged."""
    texts = ["good film", "bad film", "a good plot", "a bad plot", "good", "bad"] * 6
    y = [1, 0, 1, 0, 1, 0] * 6
    noise = FunctionTransformer(
        lambda t: np.random.default_rng(len(t)).standard_normal((len(t), 3))
    )
    model = WeightedUnionCV(
        [("words", TfidfVectorizer()), ("noise", noise)], LinearSVC(), cv=3
    ).fit(texts, y)
    assert model.weights_ == {"words": 1.0, "noise": 0.0}
    assert_allclose(model.block_scales_["words"], 1.0)
    alone = make_pipeline(TfidfVectorizer(), LinearSVC()).fit(texts, y)
    tests = ["good plot", "bad", "a film"]
    assert_allclose(model.decision_function(tests), alone.decision_function(tests))


def test_scaling_a_block_changes_nothing_with_scale_blocks():
    X, y = two_blocks_task(informative="both")
    base = union().fit(X, y)
    scaled = union().set_params(second__factor=1000.0).fit(X, y)
    assert scaled.weights_ == base.weights_
    assert_allclose(scaled.decision_function(X), base.decision_function(X))
    unscaled = union(scale_blocks=False).set_params(second__factor=1000.0).fit(X, y)
    assert unscaled.block_scales_ == {"first": 1.0, "second": 1.0}


def test_blocks_are_fitted_without_the_target_and_unweighted_ones_not_computed():
    X, y = two_blocks_task(informative="first")
    model = union().fit(X, y)
    assert model.weights_["second"] == 0
    assert not any(t.saw_target_ for _, t in model.transformers_)
    model.predict(X)
    counts = {name: t.n_transforms_ for name, t in model.transformers_}
    assert counts == {"first": 2, "second": 1}  # fit's, then predict's (first only)


def test_sparse_and_dense_blocks_side_by_side():
    texts = ["good film", "bad film", "a good plot", "a bad plot"] * 5
    y = [1, 0, 1, 0] * 5
    lengths = FunctionTransformer(lambda t: np.array([[len(s)] for s in t], float))
    model = WeightedUnionCV(
        [("words", CountVectorizer()), ("length", lengths)], LinearSVC(), cv=2
    ).fit(texts, y)
    features = model._features(texts)
    assert sparse.issparse(features) or model.weights_["words"] == 0
    assert model.score(texts, y) == 1.0


def test_parallel_folds_score_as_sequential_ones():
    X, y = two_blocks_task(informative="both")
    one = union(n_jobs=1).fit(X, y).cv_results_
    two = union(n_jobs=2).fit(X, y).cv_results_
    for key in ("mean_test_score", "split0_test_score", "split4_test_score"):
        assert_array_equal(one[key], two[key])


def test_block_parameters_are_nested_and_searchable():
    model = union()
    params = model.get_params()
    assert params["second__factor"] == 1.0 and params["estimator__C"] == 1.0
    model.set_params(first=Columns(0, 4), estimator__C=0.5)
    assert model.transformer_list[0][1].stop == 4 and model.estimator.C == 0.5
    X, y = two_blocks_task()
    search = GridSearchCV(union(), {"first__start": [1, 0]}, cv=2).fit(X, y)
    assert search.best_params_ == {"first__start": 0}  # column 0 decides
    assert clone(model).get_params()["first__stop"] == 4


def test_the_callers_input_is_not_modified():
    X, y = two_blocks_task()
    X_copy, y_copy = X.copy(), y.copy()
    union().fit(X, y).predict(X)
    assert_array_equal(X, X_copy)
    assert_array_equal(y, y_copy)


@pytest.mark.parametrize(
    "params, error, message",
    [
        ({"transformer_list": []}, ValueError, "transformer_list is empty"),
        (
            {"transformer_list": [("a", Columns()), ("a", Columns())]},
            ValueError,
            "'a' is given twice",
        ),
        (
            {"transformer_list": [("a__b", Columns())]},
            ValueError,
            "without '__'",
        ),
        (
            {"transformer_list": [("cv", Columns())]},
            ValueError,
            "not a parameter of WeightedUnionCV",
        ),
        (
            {"transformer_list": [("a", LogisticRegression())]},
            TypeError,
            "not a transformer: give an object with fit and transform",
        ),
        (
            {"transformer_list": [Columns()]},
            ValueError,
            "give \\(name, transformer\\) pairs",
        ),
        ({"weights": [0, 0]}, ValueError, "at least one above 0"),
        ({"weights": [-1, 1]}, ValueError, "non-negative"),
        ({"weights": [[1, 0]]}, ValueError, "1-D sequence"),
    ],
)
def test_invalid_blocks_and_weights_are_refused_with_the_remedy(params, error, message):
    X, y = two_blocks_task()
    with pytest.raises(error, match=message):
        union().set_params(**params).fit(X, y)


def test_a_block_of_other_rows_is_refused():
    X, y = two_blocks_task()
    first = FunctionTransformer(lambda X: X[:-1])
    with pytest.raises(ValueError, match="must give one row per sample"):
        WeightedUnionCV([("short", first)], LogisticRegression()).fit(X, y)


def test_tied_candidates_share_the_smaller_rank_and_the_first_is_chosen():
    # both blocks hold the label's column: some candidates score all folds
    X, y = two_blocks_task(informative="first")
    X[:, 5] = X[:, 0]
    blocks = [("first", Columns(0, 5)), ("second", Columns(5, 10))]
    model = WeightedUnionCV(blocks, LogisticRegression(C=100.0)).fit(X, y)
    results = model.cv_results_
    best = results["mean_test_score"] == results["mean_test_score"].max()
    assert best.sum() >= 2 and best[0]  # a tie, the first candidate among it
    assert np.all(results["rank_test_score"][best] == 1)
    assert np.all(results["rank_test_score"][~best] > best.sum())
    assert model.weights_ == {"first": 1.0, "second": 0.0}
