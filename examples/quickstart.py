"""
===========
Quick start
===========

:class:`~skattn.AttentionTransformer` turns sequences of token embeddings into
one feature vector per sample, so any scikit-learn estimator can follow it in a
:class:`~sklearn.pipeline.Pipeline`.

Here each 8x8 image of the digits dataset is read as a sequence of 8 tokens (its
rows), each token holding the 8 pixels of a row. The attention projections are
only seeded from ``random_state`` for now (learning them from ``y`` comes in a
later version), so the logistic regression after the transformer does all the
learning.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Load the data as sequences
# --------------------------
# ``load_digits`` gives 64 pixel values from 0 to 16 per image. Scaled to [0, 1]
# and reshaped to ``(n_samples, n_tokens, n_features) = (n, 8, 8)``, each image
# is a sequence of its 8 rows.
from sklearn.datasets import load_digits
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
# Four heads of the default width 8 give a model width of 32.
# ``pooling="flatten"`` keeps every token's output (8 tokens x 32 = 256
# features), so the classifier still sees which row is which. ``"mean"`` pooling
# averages the rows away and scores much lower here (below 0.8).
model = make_pipeline(
    AttentionTransformer(n_heads=4, pooling="flatten", random_state=0),
    LogisticRegression(max_iter=1000),
)
model.fit(X_train, y_train)
accuracy = model.score(X_test, y_test)
print(f"attention + logistic regression, test accuracy: {accuracy:.3f}")

# %%
# A plain baseline
# ----------------
# The same classifier on the 64 scaled pixels. With seeded projections the
# attention features score about as well as the pixels themselves (within a
# point or so, depending on the split and the seed).
baseline = LogisticRegression(max_iter=1000)
baseline.fit(X_train.reshape(len(X_train), -1), y_train)
baseline_accuracy = baseline.score(X_test.reshape(len(X_test), -1), y_test)
print(f"logistic regression on pixels, test accuracy: {baseline_accuracy:.3f}")
