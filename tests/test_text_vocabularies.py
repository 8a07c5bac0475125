"""Vocabularies: TokenIds' learned one, StaticTokenEmbeddings' tables, and the
integer ids the estimators read with vocabulary_size."""

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skattn import AttentionClassifier
from skattn.text import TokenIds

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
