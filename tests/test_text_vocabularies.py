"""Vocabularies: TokenIds' learned one, StaticTokenEmbeddings' tables, and the
integer ids the estimators read with vocabulary_size."""

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

from skattn import AttentionClassifier, AttentionTransformer
from skattn.text import StaticTokenEmbeddings, TokenIds

pytestmark = pytest.mark.filterwarnings("ignore", category=ConvergenceWarning)


def ids_and_labels(n=24, n_tokens=5, seed=0):
    """Token ids from 0 to 9 in a 2D int64 array, and two classes."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 10, size=(n, n_tokens))
    return X, (X[:, 0] > 4).astype(int)


def fitted_probabilities(X, y, X_test):
    model = AttentionClassifier(vocabulary_size="auto", max_iter=3, random_state=0)
    return model.fit(X, y).predict_proba(X_test)


# TokenIds
# --------


def test_token_ids_fit_raises_the_tokenizers_error():
    def tokenizer(text):
        raise ValueError(f"cannot split {text!r}")

    ids = TokenIds(tokenizer=tokenizer)
    with pytest.raises(ValueError, match="cannot split 'a good film'"):
        ids.fit(["a good film"])
    assert not hasattr(ids, "vocabulary_")


@pytest.mark.parametrize(
    "texts, min_df", [(["?", "!"], 1), (["good film", "bad plot"], 1.0)]
)
def test_token_ids_learn_an_empty_vocabulary_when_no_word_is_kept(texts, min_df):
    # no word at all, or none in every text (min_df=1.0)
    ids = TokenIds(min_df=min_df).fit(texts)
    assert ids.vocabulary_ == {}
    assert all(set(x.tolist()) == {0} for x in ids.transform(texts))


# Integer ids given to the estimators
# -----------------------------------


def test_uint64_ids_read_as_the_same_int64_ids():
    X, y = ids_and_labels()
    expected = fitted_probabilities(X, y, X)
    unsigned = X.astype(np.uint64)
    assert_array_equal(fitted_probabilities(unsigned, y, unsigned), expected)
    ragged = [row.astype(np.uint64) for row in X]
    assert_array_equal(fitted_probabilities(ragged, y, ragged), expected)


@pytest.mark.parametrize("large", [2**63 + 5, 2**64 - 1])
def test_uint64_ids_beyond_int64_read_as_unknown(large):
    X, y = ids_and_labels()
    model = AttentionClassifier(vocabulary_size="auto", max_iter=3, random_state=0)
    model.fit(X, y)
    unknown = X[:2].copy()
    unknown[:, 1] = 0
    unsigned = X[:2].astype(np.uint64)
    unsigned[:, 1] = large
    expected = model.predict_proba(unknown)
    assert_array_equal(model.predict_proba(unsigned), expected)
    assert_array_equal(model.predict_proba(list(unsigned)), expected)
    transformer = AttentionTransformer(vocabulary_size=10, objective=None).fit(X)
    assert_array_equal(transformer.transform(unsigned), transformer.transform(unknown))


@pytest.mark.parametrize("vocabulary_size", ["auto", 10])
def test_fit_refuses_uint64_ids_beyond_int64_naming_the_id(vocabulary_size):
    X = np.array([[1, 2, 3], [4, 2**64 - 1, 0]], dtype=np.uint64)
    model = AttentionTransformer(vocabulary_size=vocabulary_size, objective=None)
    with pytest.raises(ValueError, match=r"X holds the token id 18446744073709551615"):
        model.fit(X)
    with pytest.raises(
        ValueError, match=r"X\[1\] holds the token id 9223372036854775813"
    ):
        model.fit([X[0], np.array([2**63 + 5], dtype=np.uint64)])


def test_a_dataframe_of_ids_reads_as_the_array_it_holds():
    X, y = ids_and_labels()
    columns = [f"token{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=columns)
    model = AttentionClassifier(vocabulary_size="auto", max_iter=3, random_state=0)
    model.fit(frame, y)
    assert_array_equal(model.feature_names_in_, columns)
    assert model.token_embeddings_.shape[0] == X.max() + 1
    assert_array_equal(model.predict_proba(frame), fitted_probabilities(X, y, X))
    with pytest.raises(TypeError, match="X holds float64 values, not integer"):
        clone(model).fit(frame.astype(float), y)


# StaticTokenEmbeddings
# ---------------------


@pytest.mark.parametrize(
    "vocabulary, n_rows, message",
    [
        ({"aa": -1, "bb": 0}, 2, r"'aa' the row -1.*2 row\(s\) \(0 to 1\)"),
        ({"aa": 5}, 1, r"'aa' the row 5.*1 row\(s\) \(0 to 0\)"),
        ({"aa": 0, "bb": 2**64}, 2, r"'bb' the row 18446744073709551616.*2 row"),
    ],
)
def test_static_embeddings_refuse_a_row_outside_the_matrix(vocabulary, n_rows, message):
    embed = StaticTokenEmbeddings((vocabulary, np.eye(n_rows)))
    with pytest.raises(ValueError, match=message):
        embed.fit()
    assert not hasattr(embed, "n_features_out_")


@pytest.mark.parametrize("row", [0.0, "0", None])
def test_static_embeddings_refuse_a_row_that_is_not_an_integer(row):
    vocabulary = {"bb": 0, "aa": row}
    with pytest.raises(ValueError, match=rf"'aa' the row {row!r}, not an integer"):
        StaticTokenEmbeddings((vocabulary, np.eye(2))).fit()


def test_static_embeddings_refuse_a_row_outside_gensims_matrix():
    class KeyedVectorsLike:
        key_to_index = {"aa": 0, "bb": 3}
        vectors = np.eye(2)

    with pytest.raises(ValueError, match=r"'bb' the row 3.*2 row\(s\)"):
        StaticTokenEmbeddings(KeyedVectorsLike()).fit()


@pytest.mark.parametrize(
    "words, repeated",
    [
        (["aa", "bb", "aa"], ["'aa' appears 2 times"]),
        (
            ["aa", "bb", "aa", "cc", "cc", "cc"],
            ["'aa' appears 2 times", "'cc' appears 3 times"],
        ),
    ],
)
@pytest.mark.parametrize("n_rows", ["one per word", "one per distinct word"])
def test_static_embeddings_name_a_repeated_word(words, repeated, n_rows):
    n = len(words) if n_rows == "one per word" else len(set(words))
    embed = StaticTokenEmbeddings((words, np.eye(n)))
    with pytest.raises(ValueError, match="appears") as error:
        embed.fit()
    message = str(error.value)
    assert all(part in message for part in repeated), message
    assert "'bb'" not in message


@pytest.mark.parametrize("form", ["pair", "mapping"])
def test_clone_shares_the_table_of_vectors(form):
    words = [f"w{i}" for i in range(50)]
    matrix = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
    vectors = (
        (words, matrix) if form == "pair" else dict(zip(words, matrix, strict=True))
    )
    embed = StaticTokenEmbeddings(vectors, lowercase=False).fit()
    copy = clone(embed)
    assert copy.get_params()["vectors"] is vectors
    assert copy.get_params()["lowercase"] is False
    assert not hasattr(copy, "n_features_out_")  # a clone is not fitted
    table = matrix if form == "pair" else vectors["w3"]
    shared = copy.vectors[1] if form == "pair" else copy.vectors["w3"]
    assert np.shares_memory(shared, table)
    step = clone(make_pipeline(embed, AttentionClassifier()))[0]
    assert step.vectors is vectors and step is not embed
    assert_array_equal(
        copy.fit().transform(["w1 w3"])[0], embed.transform(["w1 w3"])[0]
    )
