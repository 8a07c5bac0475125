"""What the loss compares and weighs: the target and the weights, as functions.

Each function takes the state it needs (the fitted classes, the target's
moments) and returns the new state, never an estimator: the classes of
``partial_fit``, the encoding of ``y`` (class indices, or targets standardised
through powers of two so that any finite magnitude works), the class weights
times the sample weights normalised by a power of two, and the L2 penalty that
keeps the objective unchanged by that normalisation.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from numbers import Real

import numpy as np
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets

from ._validation import check_array_like, normalize_weights


def check_classes(classes, task, objective, fitted_classes=None):
    """``classes`` of ``partial_fit``: for classification, the same at every call.

    Parameters
    ----------
    classes : array-like or None
        The caller's ``classes``.
    task : {"classification", "regression"} or None
        What this call learns.
    objective : str or None
        The estimator's ``objective``, for the message.
    fitted_classes : ndarray or None, default=None
        The classes of the first call (None at the first call).
    """
    if classes is None:
        return
    check_array_like(classes, "classes")
    given = np.asarray(classes).tolist()
    if task != "classification":
        learned = "nothing is learned (no y, or objective=None)"
        if task == "regression":
            learned = (
                f"the target is learned by regression (objective={objective!r}; "
                "'auto' reads a continuous target so)"
            )
        raise ValueError(
            f"classes={given} applies to classification, but {learned}. Leave "
            "classes=None, or set objective='classification' for class labels."
        )
    if fitted_classes is not None and not np.array_equal(
        np.unique(classes), fitted_classes
    ):
        raise ValueError(
            f"classes={given} differs from the classes {fitted_classes.tolist()} "
            "of the first call: pass the same classes, or None after the first call."
        )


def fit_classes(y, classes=None):
    """The sorted classes of ``y`` (or of ``classes``, when given).

    Raises
    ------
    ValueError
        For fewer than two classes (the message says "one class", as
        scikit-learn's checks expect).
    """
    check_classification_targets(y)
    encoder = LabelEncoder().fit(y if classes is None else classes)
    if len(encoder.classes_) < 2:
        source = "The target"
        if classes is not None:
            source = f"classes={np.asarray(classes).tolist()}"
        found = "no class"  # classes=[]
        if len(encoder.classes_):
            found = f"only one class {encoder.classes_.tolist()}"
        raise ValueError(
            f"{source} has {found}: classification needs at least two classes."
        )
    return encoder.classes_


def encode_classes(y, classes, *, name="y", first="of the first call"):
    """Indices of ``y``'s labels among ``classes``.

    Raises
    ------
    ValueError
        For a label not among ``classes``.
    """
    check_classification_targets(y)
    unseen = np.setdiff1d(y, classes)
    if len(unseen):
        raise ValueError(
            f"{name} has labels {unseen.tolist()} not among the classes "
            f"{classes.tolist()} {first}."
        )
    return np.searchsorted(classes, y)


def fit_scaling(y, sample_weight):
    """Weighted mean and standard deviation of each output of ``y``.

    The moments of ``y / 2**e``, ``e`` the exponent of each output's largest
    ``|y|``: the squares of targets beyond 1e154 overflow and those below
    1e-162 underflow, but a power of two scales every operation exactly.

    Parameters
    ----------
    y : ndarray of shape (n_samples, n_outputs)
    sample_weight : ndarray of shape (n_samples,)

    Returns
    -------
    mean, scale : ndarray of shape (n_outputs,)
        A constant output gets scale 1.
    """
    exponent = np.frexp(np.max(np.abs(y), axis=0))[1]
    y_scaled = np.ldexp(y, -exponent)
    mean = np.average(y_scaled, axis=0, weights=sample_weight)
    variance = np.average((y_scaled - mean) ** 2, axis=0, weights=sample_weight)
    scale = np.sqrt(variance)
    return np.ldexp(mean, exponent), np.where(scale > 0, np.ldexp(scale, exponent), 1.0)


def standardise(y, mean, scale):
    """``(y - mean) / scale``, each divided by a power of two near the scale
    first: ``y - mean`` overflows for targets of either sign near 1.8e308."""
    exponent = np.frexp(scale)[1]
    return (np.ldexp(y, -exponent) - np.ldexp(mean, -exponent)) / np.ldexp(
        scale, -exponent
    )


def class_sample_weight(y, classes, class_weight, sample_weight):
    """Sample weights times ``class_weight`` (``y`` holds class indices).

    Parameters
    ----------
    y : ndarray of shape (n_samples,) of int
    classes : ndarray of shape (n_classes,)
    class_weight : dict or "balanced"
    sample_weight : ndarray of shape (n_samples,)
        Normalised weights.

    Returns
    -------
    sample_weight : ndarray of shape (n_samples,)
        The product, normalised (see :func:`skattn._validation.normalize_weights`).
    exponent : int
        The power of two it was divided by.
    """
    if isinstance(class_weight, dict):
        for label, weight in class_weight.items():
            is_number = isinstance(weight, Real) and not isinstance(
                weight, (bool, np.bool_)
            )
            if not (is_number and math.isfinite(weight) and weight >= 0):
                raise ValueError(
                    f"class_weight[{label!r}] = {weight!r}: the weight of a "
                    "class must be a finite, non-negative number (it "
                    "multiplies sample_weight)."
                )
    else:  # "balanced": n_samples / (n_classes * count) needs every count
        missing = np.setdiff1d(np.arange(len(classes)), y)
        if len(missing):
            raise ValueError(
                "class_weight='balanced' weighs each class by n_samples / "
                "(n_classes * its count in y), but y has no sample of the "
                f"class(es) {classes[missing].tolist()}. In partial_fit, "
                "pass batches that hold every class, or give class_weight as "
                "a dict."
            )
    weights = compute_class_weight(class_weight, classes=classes, y=classes[y])
    # normalised before the product: class weights of 1e300 times sample
    # weights of up to 2 would overflow
    weights, exponent = normalize_weights(weights)
    sample_weight = sample_weight * weights[y]
    if not sample_weight.max() > 0:
        raise ValueError(
            f"class_weight={class_weight!r} gives every sample of y weight "
            "zero (sample_weight times the weight of its class): no sample to "
            "learn from. Give a positive weight to a class present in y."
        )
    sample_weight, product_exponent = normalize_weights(sample_weight)
    return sample_weight, exponent + product_exponent


def penalty(alpha, sample_weight, weight_exponent, dtype):
    """``alpha`` for normalised weights: ``alpha / 2**weight_exponent``.

    The L2 penalty is ``alpha / sum(w)`` times the squared weights, as in
    MLPClassifier (a weight of 2 counts as two samples); with the weights
    ``w = sample_weight * 2**weight_exponent`` it is the same objective.

    Parameters
    ----------
    alpha : float
        The estimator's ``alpha``.
    sample_weight : ndarray of shape (n_samples,)
        Normalised weights.
    weight_exponent : int
        The power of two they were divided by.
    dtype : dtype
        The dtype training computes in.

    Raises
    ------
    ValueError
        When ``alpha / sum(w)`` overflows ``dtype``.
    """
    total = float(sample_weight.sum())
    try:
        scaled = math.ldexp(alpha, -weight_exponent)
    except OverflowError:
        scaled = math.inf
    if scaled / total > float(np.finfo(dtype).max):
        try:
            user_total = f"{math.ldexp(total, weight_exponent):.3g}"
        except OverflowError:
            user_total = "more than 1.8e308"
        raise ValueError(
            f"alpha / sum(sample_weight) overflows {np.dtype(dtype).name}: "
            f"alpha={alpha} is the L2 penalty relative to the summed "
            "sample weights (times class_weight; a weight of 2 counts as two "
            f"samples), and they sum to {user_total}. Scale the weights up "
            "(only their ratios and their sum matter), lower alpha, or set "
            "alpha=0."
        )
    return scaled
