"""What the loss compares and weighs: the target, the weights, the validation set.

:class:`TargetMixin` holds the part of fitting that reads ``y``: the classes
of ``partial_fit``, the encoding of ``y`` (class indices, or targets
standardised through powers of two so that any finite magnitude works), the
sample and class weights normalised by a power of two together with the L2
penalty that keeps the objective unchanged, and the checks of an explicit
validation set. :class:`skattn._base.BaseAttention` inherits it.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from numbers import Real

import numpy as np
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array

from ._sequences import sequence_lengths, sequences_dtype
from ._validation import check_array_like, check_input, normalize_weights


class TargetMixin:
    """Target, weights and validation set of the attention estimators."""

    def _check_classes(self, classes, task, first_pass):
        """``classes`` of partial_fit: for classification, the same at every call."""
        if classes is None:
            return
        check_array_like(classes, "classes")
        given = np.asarray(classes).tolist()
        if task != "classification":
            learned = "nothing is learned (no y, or objective=None)"
            if task == "regression":
                learned = (
                    f"the target is learned by regression (objective="
                    f"{self.objective!r}; 'auto' reads a continuous target so)"
                )
            raise ValueError(
                f"classes={given} applies to classification, but {learned}. Leave "
                "classes=None, or set objective='classification' for class labels."
            )
        if not first_pass and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(
                f"classes={given} differs from the classes "
                f"{self.classes_.tolist()} of the first call: pass the same "
                "classes, or None after the first call."
            )

    def _check_validation_request(self, X_val, y_val):
        """X_val and y_val together, for Adam's early stopping (as in
        HistGradientBoostingClassifier)."""
        if y_val is None:
            raise ValueError("X_val is provided, but y_val was not provided.")
        if X_val is None:
            raise ValueError("y_val is provided, but X_val was not provided.")
        if self.early_stopping is False:
            raise ValueError(
                "X_val and y_val are passed to fit while early_stopping=False: "
                "they are the validation set of early stopping. Set "
                "early_stopping to True or 'auto', or drop X_val and y_val."
            )
        if self.solver != "adam":
            raise ValueError(
                f"X_val and y_val are the validation set of early stopping, "
                f"which needs solver='adam' (got {self.solver!r})."
            )

    def _check_validation_set(self, X_val, y_val, task, y, n_tokens, first_pass):
        """X_val checked as X, y_val encoded as y (``y`` already encoded).

        Returns
        -------
        validation : tuple
            ``((sequences, lengths, y_val, weights), alpha)``: the weights are
            the ``class_weight`` of each sample's class (1 without it), from
            the classes' counts in ``y`` for "balanced"; ``alpha`` is the
            penalty for these weights (see :meth:`_penalty`).
        """
        structure = self._fitted_structure if not first_pass else None
        try:
            sequences = check_input(
                self,
                X_val,
                reset=False,
                features_per_token=self.features_per_token,
                data_format=self.data_format,
            )
        except ValueError as exc:
            raise ValueError(f"X_val: {exc}") from exc
        lengths = sequence_lengths(sequences)
        pooling = self.pooling if structure is None else structure["pooling"]
        if pooling == "flatten" and np.any(wrong := lengths != n_tokens):
            raise ValueError(
                f"X_val: pooling='flatten' needs sequences of {n_tokens} tokens, "
                f"the length of X's; got {lengths[wrong][0]}."
            )
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
        if task == "classification":
            if y_val.ndim != 1:
                raise ValueError(f"y_val must be 1-D as y, got shape {y_val.shape}.")
            unseen = np.setdiff1d(y_val, self.classes_)
            if len(unseen):
                raise ValueError(
                    f"y_val has labels {unseen.tolist()} not among the classes "
                    f"{self.classes_.tolist()} of y."
                )
            y_val = np.searchsorted(self.classes_, y_val)
            if self.class_weight is not None:
                class_weights = compute_class_weight(
                    self.class_weight, classes=self.classes_, y=self.classes_[y]
                )
                weights = class_weights[y_val]
                if not weights.max() > 0:
                    raise ValueError(
                        f"class_weight={self.class_weight!r} gives every sample "
                        "of y_val weight zero: its loss is undefined. Pass a "
                        "validation set with samples of a class of positive weight."
                    )
        else:
            try:
                y_val = y_val.astype(np.float64).reshape(len(y_val), -1)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"y_val must be numeric as y (regression): {exc}"
                ) from None
            if y_val.shape[1] != len(self._target_mean):
                raise ValueError(
                    f"y_val has {y_val.shape[1]} outputs, but y has "
                    f"{len(self._target_mean)}."
                )
            # standardised with y's moments
            y_val = self._encode_target(y_val, task, False, None, None)
        weights, exponent = normalize_weights(weights)
        dtype = sequences_dtype(sequences)
        alpha = self._penalty(weights, exponent, dtype)
        return (sequences, lengths, y_val, weights.astype(dtype)), alpha

    def _class_weights(self, y, task, sample_weight):
        """Sample weights times ``class_weight`` (y holds class indices).

        Returns
        -------
        sample_weight : ndarray of shape (n_samples,)
            The product, normalised (see :func:`skattn._validation.normalize_weights`).
        exponent : int
            The power of two it was divided by.
        """
        if self.class_weight is None:
            return sample_weight, 0
        if task != "classification":
            raise ValueError(
                f"class_weight={self.class_weight!r} applies to classification, but "
                f"the target is a {task} target."
            )
        if isinstance(self.class_weight, dict):
            for label, weight in self.class_weight.items():
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
            missing = np.setdiff1d(np.arange(len(self.classes_)), y)
            if len(missing):
                raise ValueError(
                    "class_weight='balanced' weighs each class by n_samples / "
                    "(n_classes * its count in y), but y has no sample of the "
                    f"class(es) {self.classes_[missing].tolist()}. In partial_fit, "
                    "pass batches that hold every class, or give class_weight as "
                    "a dict."
                )
        weights = compute_class_weight(
            self.class_weight, classes=self.classes_, y=self.classes_[y]
        )
        # normalised before the product: class weights of 1e300 times sample
        # weights of up to 2 would overflow
        weights, exponent = normalize_weights(weights)
        sample_weight = sample_weight * weights[y]
        if not sample_weight.max() > 0:
            raise ValueError(
                f"class_weight={self.class_weight!r} gives every sample of y weight "
                "zero (sample_weight times the weight of its class): no sample to "
                "learn from. Give a positive weight to a class present in y."
            )
        sample_weight, product_exponent = normalize_weights(sample_weight)
        return sample_weight, exponent + product_exponent

    def _penalty(self, sample_weight, weight_exponent, input_dtype):
        """``alpha`` for the normalised weights: ``alpha / 2**weight_exponent``.

        The L2 penalty is ``alpha / sum(w)`` times the squared weights, as in
        MLPClassifier (a weight of 2 counts as two samples); with the weights
        ``w = sample_weight * 2**weight_exponent`` it is the same objective.

        Raises
        ------
        ValueError
            When ``alpha / sum(w)`` overflows the training dtype.
        """
        dtype = np.float32 if self.solver == "adam" else input_dtype
        total = float(sample_weight.sum())
        try:
            alpha = math.ldexp(self.alpha, -weight_exponent)
        except OverflowError:
            alpha = math.inf
        if alpha / total > float(np.finfo(dtype).max):
            try:
                user_total = f"{math.ldexp(total, weight_exponent):.3g}"
            except OverflowError:
                user_total = "more than 1.8e308"
            raise ValueError(
                f"alpha / sum(sample_weight) overflows {np.dtype(dtype).name}: "
                f"alpha={self.alpha} is the L2 penalty relative to the summed "
                "sample weights (times class_weight; a weight of 2 counts as two "
                f"samples), and they sum to {user_total}. Scale the weights up "
                "(only their ratios and their sum matter), lower alpha, or set "
                "alpha=0."
            )
        return alpha

    def _encode_target(self, y, task, first_pass, classes, sample_weight):
        """Class indices (classification) or standardised targets (regression).

        The standardisation uses the weighted mean and standard deviation, so that
        a weight of 2 trains like a repeated sample.
        """
        if task == "classification":
            check_classification_targets(y)
            if first_pass:
                encoder = LabelEncoder().fit(y if classes is None else classes)
                if len(encoder.classes_) < 2:
                    source = "The target"
                    if classes is not None:
                        source = f"classes={np.asarray(classes).tolist()}"
                    found = "no class"  # classes=[]
                    if len(encoder.classes_):
                        found = f"only one class {encoder.classes_.tolist()}"
                    raise ValueError(
                        f"{source} has {found}: classification needs at least "
                        "two classes."
                    )
                self.classes_ = encoder.classes_
            unseen = np.setdiff1d(y, self.classes_)
            if len(unseen):
                raise ValueError(
                    f"y has labels {unseen.tolist()} not among the classes "
                    f"{self.classes_.tolist()} of the first call."
                )
            return np.searchsorted(self.classes_, y)
        if first_pass:
            # the moments of y / 2**e, e the exponent of each output's largest
            # |y|: the squares of targets beyond 1e154 overflow and those below
            # 1e-162 underflow, but a power of two scales every operation exactly
            exponent = np.frexp(np.max(np.abs(y), axis=0))[1]
            y_scaled = np.ldexp(y, -exponent)
            mean = np.average(y_scaled, axis=0, weights=sample_weight)
            variance = np.average((y_scaled - mean) ** 2, axis=0, weights=sample_weight)
            scale = np.sqrt(variance)
            self._target_mean = np.ldexp(mean, exponent)
            self._target_scale = np.where(scale > 0, np.ldexp(scale, exponent), 1.0)
        elif y.shape[1] != len(self._target_mean):
            raise ValueError(
                f"y has {y.shape[1]} outputs, but {type(self).__name__} was "
                f"fitted on {len(self._target_mean)}."
            )
        # (y - mean) / scale, each divided by a power of two near the scale
        # first: y - mean overflows for targets of either sign near 1.8e308
        exponent = np.frexp(self._target_scale)[1]
        return (
            np.ldexp(y, -exponent) - np.ldexp(self._target_mean, -exponent)
        ) / np.ldexp(self._target_scale, -exponent)
