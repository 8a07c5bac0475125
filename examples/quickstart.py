"""
===========
Quick start
===========

:class:`~skattn.AttentionTransformer` turns sequences of token embeddings into
one feature vector per sample, so any scikit-learn estimator can follow it in a
:class:`~sklearn.pipeline.Pipeline`.

Here each 8x8 image of the digits dataset is read as a sequence of 8 tokens (its
rows), each token holding the 8 pixels of a row. ``fit`` learns the attention
weights from the labels, then the logistic regression learns on the pooled,
learned representation.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Load the data as sequences
# --------------------------
# ``load_digits`` gives 64 pixel values from 0 to 16 per image. Scaled to [0, 1]
# and reshaped to ``(n_samples, n_tokens, n_features) = (n, 8, 8)``, each image
# is a sequence of its 8 rows.
import warnings

from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from skattn import AttentionTransformer

pixels, y = load_digits(return_X_y=True)
X = (pixels / 16.0).reshape(-1, 8, 8)  # (n_samples, 8 rows, 8 pixels)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.25, stratify=y, random_state=0
)
print(f"train: {X_train.shape}, test: {X_test.shape}")

# %%
# Attention, then a linear classifier
# -----------------------------------
# Four heads of the default width 8 give a model width of 32; the 8 output
# tokens are mean-pooled into 32 features. ``fit`` trains the block with a
# linear head on those 32 features (Adam, 30 epochs here), so that the average
# of the rows keeps what tells the digits apart.
model = make_pipeline(
    AttentionTransformer(max_iter=30, learning_rate_init=0.01, random_state=0),
    LogisticRegression(max_iter=1000),
)
with warnings.catch_warnings():
    # 30 epochs are enough here; the loss would still creep down with more
    warnings.simplefilter("ignore", ConvergenceWarning)
    model.fit(X_train, y_train)
accuracy = model.score(X_test, y_test)
print(f"attention + logistic regression, test accuracy: {accuracy:.3f}")

# %%
# What learning adds
# ------------------
# The same pipeline with ``objective=None`` keeps the seeded random projections:
# the mean of 8 randomly mixed rows loses much of the picture.
seeded = make_pipeline(
    AttentionTransformer(objective=None, random_state=0),
    LogisticRegression(max_iter=1000),
)
seeded.fit(X_train, y_train)
print(f"seeded attention + logistic regression: {seeded.score(X_test, y_test):.3f}")

# %%
# A plain baseline
# ----------------
# The same classifier on the 64 scaled pixels.
baseline = LogisticRegression(max_iter=1000)
baseline.fit(X_train.reshape(len(X_train), -1), y_train)
baseline_accuracy = baseline.score(X_test.reshape(len(X_test), -1), y_test)
print(f"logistic regression on pixels, test accuracy: {baseline_accuracy:.3f}")
