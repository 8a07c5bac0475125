"""
=============================
Text as token embeddings
=============================

A sentence is a sequence of word vectors: a ragged list, one array of shape
``(n_words, n_dims)`` per sentence, which :class:`~skattn.AttentionTransformer`
reads as it is. Everything here is offline and built in the example: a small
generated corpus, word vectors learned from its co-occurrences (positive
pointwise mutual information, reduced with
:class:`~sklearn.decomposition.TruncatedSVD`), and a sentiment task with
negation, which averaging the word vectors cannot solve: "good" and "not good"
share a word, and the label flips with the word "not".
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# A corpus and its word vectors
# -----------------------------
# Reviews generated from templates: positive adjectives appear next to "loved"
# and "recommend", negative ones next to "hated" and "refund", so their vectors
# carry their polarity, as vectors learned from real text do.
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import TruncatedSVD
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from skattn import AttentionClassifier, AttentionTransformer
from skattn.plotting import AttentionDisplay, TokenAttributionDisplay

rng = np.random.RandomState(0)
POSITIVE = ["good", "great", "fun", "moving", "clever", "charming"]
NEGATIVE = ["bad", "dull", "boring", "awful", "clumsy", "tedious"]
NOUNS = ["film", "plot", "cast", "story", "ending", "music", "script", "pace"]
ADVERBS = ["really", "very", "quite", "truly"]

corpus = []
for _ in range(3000):
    positive = rng.rand() < 0.5
    adjective = rng.choice(POSITIVE if positive else NEGATIVE)
    if rng.rand() < 0.5:
        adjective = f"{rng.choice(ADVERBS)} {adjective}"
    verb = rng.choice(["loved", "enjoyed"] if positive else ["hated", "regretted"])
    ending = rng.choice(
        ["i recommend it", "see it"] if positive else ["i want a refund", "skip it"]
    )
    opening = "honestly , " if rng.rand() < 0.3 else ""
    corpus.append(
        f"{opening}i {verb} the {rng.choice(NOUNS)} , it was {adjective} , {ending}"
    )
for _ in range(500):  # "not" in neutral contexts: its vector has no polarity
    adjective = rng.choice(POSITIVE + NEGATIVE)
    corpus.append(f"the {rng.choice(NOUNS)} was not {adjective}")

vocabulary = sorted({word for sentence in corpus for word in sentence.split()})
index = {word: i for i, word in enumerate(vocabulary)}
counts = np.zeros((len(vocabulary), len(vocabulary)))
for sentence in corpus:
    words = [index[word] for word in sentence.split()]
    for i, word in enumerate(words):  # a window of two words on each side
        for other in words[max(0, i - 2) : i] + words[i + 1 : i + 3]:
            counts[word, other] += 1
total = counts.sum()
pmi = np.log(counts * total / np.outer(counts.sum(1), counts.sum(0)) + 1e-12)
ppmi = np.maximum(pmi, 0)
vectors = TruncatedSVD(n_components=16, random_state=0).fit_transform(ppmi)
vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
print(f"{len(corpus)} sentences, {len(vocabulary)} words, vectors of 16 dimensions")


def similarity(a, b):
    return float(vectors[index[a]] @ vectors[index[b]])


print(
    f"cosine(good, great) = {similarity('good', 'great'):.2f}, "
    f"cosine(good, awful) = {similarity('good', 'awful'):.2f}"
)

# %%
# Sentences with negation
# -----------------------
# "the plot was not really good" is negative, "the plot was not dull" positive:
# the label is the adjective's polarity, flipped by "not". Sentences have 5 to
# 8 words, so the data are a ragged list.
sentences, y = [], []
for _ in range(800):
    positive, negated = rng.rand() < 0.5, rng.rand() < 0.5
    words = ["honestly", ","] if rng.rand() < 0.3 else []
    words += ["the", rng.choice(NOUNS), "was"]
    words += ["not"] if negated else []
    words += [rng.choice(ADVERBS)] if rng.rand() < 0.5 else []
    words += [rng.choice(POSITIVE if positive else NEGATIVE)]
    sentences.append(words)
    y.append(int(positive != negated))
y = np.array(y)
X = [vectors[[index[word] for word in words]] for words in sentences]
print(" ".join(sentences[0]), "->", y[0], "|", " ".join(sentences[1]), "->", y[1])

X_train, X_test, y_train, y_test, s_train, s_test = train_test_split(
    X, y, sentences, test_size=0.25, stratify=y, random_state=0
)

# %%
# The average word vector, then a logistic regression
# ---------------------------------------------------
# The usual baseline: one vector per sentence, the mean of its words. The
# label is the polarity XOR the negation, which no linear function of the mean
# can read.
mean_train = np.array([x.mean(axis=0) for x in X_train])
mean_test = np.array([x.mean(axis=0) for x in X_test])
start = time.perf_counter()
mean_model = LogisticRegression(max_iter=1000).fit(mean_train, y_train)
print(
    f"{'mean word vector + logistic regression':<44} accuracy "
    f"{mean_model.score(mean_test, y_test):.3f}  "
    f"({time.perf_counter() - start:.1f} s)"
)

# %%
# Attention over the words, then a logistic regression
# ----------------------------------------------------
# Each word attends to the others, so "not" can change what "good" contributes
# before the tokens are pooled.
attention = AttentionTransformer(max_iter=60, random_state=0)
model = make_pipeline(attention, LogisticRegression(max_iter=1000))
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # stopped at max_iter
    model.fit(X_train, y_train)
print(
    f"{'attention (learned) + logistic regression':<44} accuracy "
    f"{model.score(X_test, y_test):.3f}  ({time.perf_counter() - start:.1f} s)"
)

# %%
# What a negated sentence attends to, its words on the axes:
sample = next(i for i, words in enumerate(s_test) if "not" in words)
display = AttentionDisplay.from_estimator(
    attention,
    X_test,
    sample=sample,
    head=0,
    token_labels=s_test[sample],
    xticks_rotation=45,
)
words = s_test[sample]
attended = display.weights[0].mean(axis=0)  # mean weight of each key word
print(
    f"{' '.join(words)!r}: head 0 gives {attended.max():.2f} of its weight, "
    f"on average over the words, to {words[attended.argmax()]!r}"
)
plt.show()

# %%
# Attention solves the task and the average of the word vectors cannot: the
# mean scores near chance because the label depends on two words together. On
# the negated sentence drawn above, head 0 puts half of its weight on "not"
# and most of the rest on the adjective, the two words that decide the label.
# That is the case for attention; on tasks where the bag of words decides
# (topic, most sentiment without negation), the mean vector and a linear model
# are as good and far cheaper.

# %%
# Which words drive the prediction
# --------------------------------
# :class:`~skattn.plotting.TokenAttributionDisplay` colours each word by its
# gradient x input attribution: how much it moves the score of the predicted
# class, from the model's own backward pass (red raises the score, blue
# lowers it). It needs a model that predicts: an
# :class:`~skattn.AttentionClassifier`, the same attention with its own linear
# head. In a notebook the drawn display shows as its figure; a display made
# from scores without drawing shows itself as HTML.
classifier = AttentionClassifier(max_iter=60, random_state=0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # stopped at max_iter
    classifier.fit(X_train, y_train)
print(f"{'attention classifier':<44} accuracy {classifier.score(X_test, y_test):.3f}")
attribution = TokenAttributionDisplay.from_estimator(
    classifier, X_test, sample, token_labels=s_test[sample]
)
strongest = words[int(np.argmax(np.abs(attribution.scores)))]
print(f"{attribution.score_label}: largest for {strongest!r}")
plt.show()

# %%
# Contextual token embeddings from a pretrained model
# ---------------------------------------------------
# Real text: a pretrained encoder gives one vector per token (not executed
# here: it downloads a model). ``sentence-transformers`` returns them with
# ``output_value="token_embeddings"``, one ``(n_tokens_i, 384)`` tensor per
# text; as numpy arrays they are exactly the ragged input of
# :class:`~skattn.AttentionTransformer`:
#
# .. code-block:: python
#
#     from sentence_transformers import SentenceTransformer
#
#     model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
#     # one torch tensor of shape (n_tokens_i, 384) per text
#     texts = ["the plot was not good", "honestly , the music was great"]
#     tokens = model.encode(texts, output_value="token_embeddings")
#     X = [t.float().cpu().numpy() for t in tokens]
#     pipe = make_pipeline(AttentionTransformer(random_state=0),
#                          LogisticRegression(max_iter=1000))
#     pipe.fit(X, labels)  # one label per text
#
# The token labels to give :class:`~skattn.plotting.AttentionDisplay` and
# :class:`~skattn.plotting.TokenAttributionDisplay` are then the model's word
# pieces: ``model.tokenizer.tokenize(text)`` plus its special
# tokens (``[CLS]`` first and ``[SEP]`` last for this model). In a pipeline
# that starts with :class:`skattn.text.TokenEmbeddings`, the displays find
# the words themselves, one score per word (:ref:`text-attention`).
