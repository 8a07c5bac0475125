"""What the loss compares and weighs: the training set, its target and weights.

A :class:`TrainingSet` is the samples as the loss reads them. The functions
here make one from checked sequences and explicit state, never an estimator:
the encoding of ``y`` (:class:`TargetEncoding`: class indices, or targets
standardised through powers of two so that any finite magnitude works), the
class weights times the sample weights normalised by a power of two, and the
L2 penalty that keeps the objective unchanged by that normalisation; likewise
for an explicit validation set, and the ``classes`` of ``partial_fit``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import math
from numbers import Real

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_array
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets

from .._model.sequences import model_dtype, sequences_dtype
from .validation import check_array_like, normalize_weights


@dataclasses.dataclass
class TrainingSet:
    """Samples as the loss reads them: a training set, or a validation set.

    Attributes
    ----------
    sequences : ndarray of shape (n_samples, n_tokens, n_features) or list
        Checked sequences.
    lengths : ndarray of shape (n_samples,)
        Their lengths.
    y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        Class indices, or standardised targets.
    sample_weight : ndarray of shape (n_samples,)
        Weights of the loss (times the class weights), normalised.
    alpha : float
        The L2 penalty for these weights (see :func:`penalty`).
    objective : {"classification", "regression"}
        Picks the loss.
    dtype : dtype
        The dtype the loss reads floating sequences in, each batch cast as it
        is made (a cast copy of all the sequences would take memory in
        proportion to X); token ids stay integers. None at construction: the
        sequences' :func:`model_dtype`.
    weight_exponent : int
        The weights as given (times the class weights) are
        ``sample_weight * 2**weight_exponent``.
    encoding : TargetEncoding
        How ``y`` was encoded.
    """

    sequences: object
    lengths: np.ndarray
    y: np.ndarray
    sample_weight: np.ndarray
    alpha: float
    objective: str
    dtype: np.dtype | None = None
    weight_exponent: int = 0
    encoding: object = None

    def __post_init__(self):
        if self.dtype is None:
            self.dtype = model_dtype(self.sequences)
        self.dtype = np.dtype(self.dtype)

    def __len__(self):
        return len(self.lengths)

    def astype(self, dtype):
        """The set in ``dtype``: the weights and regression targets cast, the
        floating sequences read in it (see ``dtype``)."""
        y = self.y.astype(dtype) if self.objective == "regression" else self.y
        floating = sequences_dtype(self.sequences).kind == "f"
        return dataclasses.replace(
            self,
            y=y,
            sample_weight=self.sample_weight.astype(dtype),
            dtype=dtype if floating else None,
        )


@dataclasses.dataclass(frozen=True)
class TargetEncoding:
    """How ``y`` becomes what the loss compares: fitted at the first call.

    Attributes
    ----------
    objective : {"classification", "regression"}
    classes : ndarray of shape (n_classes,) or None
        The sorted class labels (classification).
    mean, scale : ndarray of shape (n_outputs,) or None
        The weighted moments of the target (regression).
    """

    objective: str
    classes: np.ndarray | None = None
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None

    @classmethod
    def fit(cls, y, objective, classes=None, sample_weight=None):
        """The encoding of ``y`` (with ``partial_fit``'s ``classes``)."""
        if objective == "classification":
            return cls(objective, classes=fit_classes(y, classes))
        mean, scale = fit_scaling(y, sample_weight)
        return cls(objective, mean=mean, scale=scale)

    def encode(self, y, *, name="y", fitted="the first call's y"):
        """Class indices, or the standardised target.

        Raises
        ------
        ValueError
            For labels not among the classes, or another number of outputs
            (``name`` and ``fitted`` name this target and the fitted one).
        """
        if self.objective == "classification":
            return encode_classes(y, self.classes, name=name, fitted=fitted)
        if y.shape[1] != len(self.mean):
            raise ValueError(
                f"{name} has {y.shape[1]} outputs, but {fitted} has {len(self.mean)}."
            )
        return standardise_targets(y, self.mean, self.scale)


def training_set(
    sequences, lengths, y, sample_weight, weight_exponent, encoding, *,
    class_weight, alpha, dtype,
):  # fmt: skip
    """The training set of checked sequences and target.

    Parameters
    ----------
    sequences, lengths
        Checked sequences and their lengths.
    y : ndarray
        The checked target.
    sample_weight : ndarray of shape (n_samples,)
        The caller's checked weights, normalised: they are the user's divided
        by ``2**weight_exponent``.
    weight_exponent : int
    encoding : TargetEncoding
    class_weight : dict, "balanced" or None
        The estimator's ``class_weight``.
    alpha : float
        The estimator's ``alpha``.
    dtype : dtype
        The dtype training computes in (for the penalty's range).

    Returns
    -------
    TrainingSet
    """
    y = encoding.encode(y)
    if class_weight is not None:
        if encoding.objective != "classification":
            raise ValueError(
                f"class_weight={class_weight!r} applies to classification, but "
                f"the target is a {encoding.objective} target."
            )
        sample_weight, exponent = class_sample_weight(
            y, encoding.classes, class_weight, sample_weight
        )
        weight_exponent += exponent
    alpha = penalty(alpha, sample_weight, weight_exponent, dtype)
    return TrainingSet(
        sequences, lengths, y, sample_weight, alpha, encoding.objective,
        weight_exponent=weight_exponent, encoding=encoding,
    )  # fmt: skip


def validation_set(sequences, lengths, y_val, train, encoding, *, class_weight,
                   alpha, dtype):  # fmt: skip
    """The validation set of early stopping: ``X_val`` checked, ``y_val``
    encoded as y.

    Each sample weighs the ``class_weight`` of its class (1 without it), from
    the classes' counts in the training set ``train`` for "balanced".

    Returns
    -------
    TrainingSet
    """
    check_array_like(y_val, "y_val")
    y_val = check_array(y_val, ensure_2d=False, dtype=None, input_name="y_val")
    if y_val.ndim == 2 and y_val.shape[1] == 1:
        y_val = y_val[:, 0]
    if len(y_val) != len(sequences):
        raise ValueError(
            "Found input variables with inconsistent numbers of samples: "
            f"[{len(sequences)}, {len(y_val)}] (X_val and y_val)."
        )
    weights = np.ones(len(y_val))
    if encoding.objective == "classification":
        if y_val.ndim != 1:
            raise ValueError(f"y_val must be 1-D as y, got shape {y_val.shape}.")
        check_classification_targets(y_val)
        y_val = encoding.encode(y_val, name="y_val", fitted="y")
        if class_weight is not None:
            classes = encoding.classes
            class_weights = compute_class_weight(
                class_weight, classes=classes, y=classes[train.y]
            )
            weights = class_weights[y_val]
            if not weights.max() > 0:
                raise ValueError(
                    f"class_weight={class_weight!r} gives every sample of y_val "
                    "weight zero: its loss is undefined. Pass a validation set "
                    "with samples of a class of positive weight."
                )
    else:
        try:
            y_val = y_val.astype(np.float64).reshape(len(y_val), -1)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"y_val must be numeric as y (regression): {exc}"
            ) from None
        y_val = encoding.encode(y_val, name="y_val", fitted="y")
    weights, exponent = normalize_weights(weights)
    alpha = penalty(alpha, weights, exponent, dtype)
    weights = weights.astype(model_dtype(sequences))
    return TrainingSet(
        sequences, lengths, y_val, weights, alpha, encoding.objective,
        weight_exponent=exponent, encoding=encoding,
    )  # fmt: skip


def check_classes(classes, objective, setting, fitted_classes=None):
    """``classes`` of ``partial_fit``: for classification, the same at every call.

    Parameters
    ----------
    classes : array-like or None
        The caller's ``classes``.
    objective : {"classification", "regression"} or None
        What this call learns.
    setting : str or None
        The estimator's ``objective`` parameter, for the message.
    fitted_classes : ndarray or None, default=None
        The classes of the first call (None at the first call).
    """
    if classes is None:
        return
    check_array_like(classes, "classes")
    given = np.asarray(classes).tolist()
    if objective != "classification":
        learned = "nothing is learned (no y, or objective=None)"
        if objective == "regression":
            learned = (
                f"the target is learned by regression (objective={setting!r}; "
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

    ``y``: labels of a binary or multiclass target, checked as
    :func:`~skattn._input.validation.check_target` checks them.

    Raises
    ------
    ValueError
        For fewer than two classes (the message says "one class", as
        scikit-learn's checks expect).
    """
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


def encode_classes(y, classes, *, name="y", fitted="the first call's y"):
    """Indices of ``y``'s labels among ``classes``.

    ``y``: labels of a binary or multiclass target, checked as
    :func:`~skattn._input.validation.check_target` checks them.

    Raises
    ------
    ValueError
        For a label not among ``classes``.
    """
    unseen = np.setdiff1d(y, classes)
    if len(unseen):
        raise ValueError(
            f"{name} has labels {unseen.tolist()} not among the classes "
            f"{classes.tolist()} of {fitted}."
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


def standardise_targets(y, mean, scale):
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
        The product, normalised (see
        :func:`skattn._input.validation.normalize_weights`).
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


def validation_split(data, fraction, rng, *, setting):
    """Training and validation rows of early stopping, as ``train_test_split``.

    A ``fraction`` of the samples, stratified with at least one sample of each
    class for classification; a class of one sample stays in training (it
    cannot be both learned and validated).

    Parameters
    ----------
    data : TrainingSet
    fraction : float
        ``validation_fraction``.
    rng : numpy.random.RandomState
    setting : bool or str
        The estimator's ``early_stopping`` (True, or "auto" on), for messages.

    Raises
    ------
    ValueError
        Naming ``early_stopping`` and ``validation_fraction`` when the split
        cannot be made (``train_test_split`` names its own ``test_size``), or
        when the training rows or the validation rows all weigh zero.
    """
    y, n_samples = data.y, len(data)
    n_validation = math.ceil(fraction * n_samples)  # as train_test_split rounds
    stratify, test_size = None, fraction
    rows, kept = np.arange(n_samples), np.arange(0)  # split, kept for training
    setting = f"early_stopping={setting!r}"
    remedy = "pass more samples, lower validation_fraction or set early_stopping=False"
    if data.objective == "classification":
        # stratified, with at least one validation sample per class of two or
        # more samples; the classes of one sample train only
        labels, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
        alone = counts[inverse] < 2
        rows, kept = np.flatnonzero(~alone), np.flatnonzero(alone)
        n_split = int(np.sum(counts >= 2))  # classes split between the two
        if n_split == 0:
            raise ValueError(
                f"{setting} holds out a validation split (validation_fraction="
                f"{fraction}) stratified by class, and every class of y has only "
                "one sample: there is none to validate on. Pass more samples or "
                "set early_stopping=False."
            )
        stratify = y[rows]
        test_size = n_validation = max(n_validation, n_split)
        n_train = n_samples - n_validation
        if n_train < len(labels):
            raise ValueError(
                f"{setting} holds out {n_validation} of the {n_samples} "
                f"samples (validation_fraction={fraction}, and at least one sample "
                f"of each of the {n_split} classes of two or more samples), which "
                f"leaves {max(n_train, 0)} to train on, fewer than the "
                f"{len(labels)} classes of y: {remedy}."
            )
    elif n_samples - n_validation < 1:
        raise ValueError(
            f"{setting} holds out {n_validation} of the {n_samples} "
            f"sample(s) (validation_fraction={fraction}), which leaves no sample "
            f"to train on: {remedy}."
        )
    train, validation = train_test_split(
        rows, test_size=test_size, random_state=rng, stratify=stratify
    )
    train = np.concatenate([train, kept])
    if not data.sample_weight[train].sum() > 0:
        raise ValueError(
            f"{setting} held out every sample of non-zero sample_weight for "
            f"validation (validation_fraction={fraction}): the training "
            f"samples all weigh zero. Give weight to more samples, or {remedy}."
        )
    if not data.sample_weight[validation].sum() > 0:
        raise ValueError(
            f"{setting} held out {len(validation)} sample(s) for validation "
            f"(validation_fraction={fraction}) that all weigh zero "
            "(sample_weight or class_weight): their validation loss is "
            "undefined. Give weight to more samples, raise validation_fraction, "
            "pass a validation set of your own (X_val, y_val) or set "
            "early_stopping=False."
        )
    return train, validation
