"""
===========
Quick start
===========

:class:`~skattn.AttentionTransformer` turns sequences of token embeddings into
one feature vector per sample, so any scikit-learn estimator can follow it in a
:class:`~sklearn.pipeline.Pipeline`; :class:`~skattn.RandomAttentionFeatures`
does the same with many seeded attention models and no training.

Here each 8x8 image of the digits dataset is read as a sequence of 8 tokens (its
rows), each token holding the 8 pixels of a row, and the two attention pipelines
are measured against a logistic regression and a multi-layer perceptron on the
64 pixels, on the same held-out quarter of the images.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Load the data as sequences
# --------------------------
# ``load_digits`` gives 64 pixel values from 0 to 16 per image. Scaled to [0, 1]
# and reshaped to ``(n_samples, n_tokens, n_features) = (n, 8, 8)``, each image
# is a sequence of its 8 rows.
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, RidgeClassifierCV
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skattn import AttentionTransformer, RandomAttentionFeatures

pixels, y = load_digits(return_X_y=True)
X = (pixels / 16.0).reshape(-1, 8, 8)  # (n_samples, 8 rows, 8 pixels)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.25, stratify=y, random_state=0
)
print(f"train: {X_train.shape}, test: {X_test.shape}")


def measure(name, model, X_train, X_test):
    """Fit, then print the test accuracy and the fit time."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        # both networks stop at max_iter epochs, the loss still creeping down
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    print(f"{name:<42} accuracy {model.score(X_test, y_test):.3f}  ({seconds:.1f} s)")


# %%
# Two baselines on the 64 pixels
# ------------------------------
flat_train, flat_test = (
    X_train.reshape(len(X_train), -1),
    X_test.reshape(len(X_test), -1),
)
measure(
    "logistic regression on the pixels",
    LogisticRegression(max_iter=1000),
    flat_train,
    flat_test,
)
measure(
    "MLP on the pixels",
    MLPClassifier(max_iter=500, random_state=0),
    flat_train,
    flat_test,
)

# %%
# Learned attention, then a linear classifier
# -------------------------------------------
# With its defaults, ``fit`` standardises the 8 pixel columns, projects each
# row to a model of width 64 (4 heads of 16), runs one encoder layer
# (self-attention and a feed-forward sublayer) and trains it with a linear head
# on the mean of the 8 output tokens; the logistic regression then learns on
# those 64 learned features.
measure(
    "attention (learned) + logistic regression",
    make_pipeline(
        AttentionTransformer(random_state=0), LogisticRegression(max_iter=1000)
    ),
    X_train,
    X_test,
)

# %%
# Random attention features, then a ridge classifier
# --------------------------------------------------
# Sixteen seeded attention models, nothing trained: the maximum of each
# model's output tokens and the share of them above three thresholds (ROCKET's
# two statistics, the thresholds drawn from the models' outputs on 16 training
# images) are 4096 features for a ridge classifier (and 16 more, the same of
# each pixel column). Half the models read each row beside its difference
# from the row above, the vertical edges of the digit.
measure(
    "random attention features + ridge",
    make_pipeline(
        RandomAttentionFeatures(random_state=0),
        StandardScaler(),
        RidgeClassifierCV(alphas=np.logspace(-3, 3, 10)),
    ),
    X_train,
    X_test,
)

# %%
# Each line above is one pipeline's accuracy on the 450 test images and its
# seconds of fitting and scoring (one BLAS thread). On images this small the
# random attention features hold their own against the MLP in about its time,
# while the learned attention costs several times more for little over the
# pixels: it pays off on longer sequences whose order matters (time series
# read in patches, sentences given as word vectors). Which estimator to
# reach for, data kind by data kind, with the measurements behind the advice:
# :ref:`choosing`.
