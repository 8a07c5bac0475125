"""
==========================================
Random attention features against learned
==========================================

Two ways to turn sequences into features with attention:

- :class:`~skattn.RandomAttentionFeatures`: many seeded attention models,
  nothing trained (as ROCKET does with random convolutions), then a ridge
  classifier with its penalty chosen by cross-validation
  (:class:`~sklearn.linear_model.RidgeClassifierCV`);
- :class:`~skattn.AttentionTransformer`: one encoder learned from the labels,
  then a logistic regression.

They are compared on accuracy and fit time on the two tasks of
:func:`skattn.datasets.make_sequence_classification`: ``"order"`` (which of 3
markers comes first) and ``"cooccurrence"`` (whether exactly one of two
markers is present), 500 sequences of 16 tokens each.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The pipelines
# -------------
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, RidgeClassifierCV
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skattn import AttentionTransformer, RandomAttentionFeatures
from skattn.datasets import make_sequence_classification


def random_features(n_models):
    return make_pipeline(
        RandomAttentionFeatures(n_models=n_models, random_state=0),
        StandardScaler(),
        RidgeClassifierCV(alphas=np.logspace(-3, 3, 10)),
    )


def learned():
    return make_pipeline(
        AttentionTransformer(max_iter=50, random_state=0),
        LogisticRegression(max_iter=1000),
    )


pipelines = {
    "random attention, 16 models + ridge": lambda: random_features(16),
    "random attention, 64 models + ridge": lambda: random_features(64),
    "learned attention + logistic regression": learned,
}

# %%
# Accuracy and fit time on each task
# ----------------------------------
results = {}
for task, n_classes in [("order", 3), ("cooccurrence", 2)]:
    X, y = make_sequence_classification(
        n_samples=500,
        n_tokens=16,
        n_features=8,
        n_classes=n_classes,
        task=task,
        random_state=0,
    )
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=0
    )
    for name, make in pipelines.items():
        model = make()
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter reached
            model.fit(X_train, y_train)
        seconds = time.perf_counter() - start
        accuracy = model.score(X_test, y_test)
        results[task, name] = accuracy, seconds
        print(f"{task:<13} {name:<40} accuracy {accuracy:.3f}  fit {seconds:.1f} s")

# %%
# Side by side
# ------------
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
names = list(pipelines)
width = 0.38
positions = np.arange(len(names))
for offset, task in [(-width / 2, "order"), (width / 2, "cooccurrence")]:
    accuracy = [results[task, name][0] for name in names]
    seconds = [results[task, name][1] for name in names]
    left.barh(positions + offset, accuracy, height=width, label=task)
    right.barh(positions + offset, seconds, height=width, label=task)
short = ["random, 16", "random, 64", "learned"]
left.set(yticks=positions, yticklabels=short, xlabel="test accuracy", xlim=(0, 1))
right.set(yticks=positions, yticklabels=short, xlabel="fit time (s)")
left.invert_yaxis()
right.invert_yaxis()
left.legend(loc="lower right")
plt.show()

# %%
# Neither wins everywhere. On ``"order"`` the learned encoder is the most
# accurate: the labels teach its positions and its query-key products what to
# compare. On ``"cooccurrence"`` (an XOR of two markers) 64 random models with
# a ridge classifier beat it, and 16 random models are the cheapest to fit on
# both tasks. Random features are the first thing to try on a new data set;
# learn the attention when they fall short and the data are large enough to
# learn from. Both cost more with longer sequences: see the real-data
# benchmark, :ref:`benchmarks`.
