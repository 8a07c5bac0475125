"""Validation of parameters, targets, weights and outputs, with clear errors.

The only module that imports private scikit-learn APIs, those without a
public equivalent: ``_fit_context`` (parameter validation, and the callbacks'
set-up and tear-down around a fit), ``_param_validation`` (``Interval``,
``StrOptions``, ``HasMethods``), ``_safe_indexing`` (the rows of a scoring
set, for the callbacks) and ``_get_output_config`` (the ``set_output``
container, which a lazy dask transform refuses); the other modules import
them from here. When scikit-learn moves them, this is the one file to
change. Feature names and ``n_features_in_`` go through the public
``validate_data`` (scikit-learn 1.6).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numbers
from collections.abc import Iterator, Mapping, Set

import numpy as np
from scipy import sparse
from sklearn import get_config
from sklearn.base import _fit_context
from sklearn.utils import _param_validation, _safe_indexing, check_array
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_non_negative

__all__ = [
    "HasMethods",
    "Interval",
    "StrOptions",
    "_fit_context",
    "_get_output_config",
    "_safe_indexing",
    "check_array_like",
    "check_finite_output",
    "check_sample_weight",
    "check_target",
    "normalize_weights",
    "check_init",
    "batch_budget",
]

FLOAT_DTYPES = (np.float64, np.float32)


class Interval(_param_validation.Interval):
    """scikit-learn's ``Interval`` constraint, which a bool does not satisfy.

    ``bool`` is an ``Integral``, so scikit-learn's constraint takes
    ``n_heads=True`` for one head and ``alpha=False`` for 0; a flag where a
    number is expected is a mistake, reported as any other invalid value.
    """

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


def option_constraint(registry):
    """The constraint of a parameter whose values are those of ``registry``
    (a :class:`~skattn._model.registry.Registry`): its names, and None when
    the registry has it."""
    return [StrOptions(set(registry.names()))] + [None] * registry.allows_none()


def check_array_like(value, name):
    """Raise a TypeError for a one-pass iterator, a set or a mapping.

    ``check_array`` reads a generator as a 0-D object array ("float() argument
    must be ... not 'generator'"); a set or a dict has no order of samples.
    """
    if isinstance(value, Iterator):
        raise TypeError(
            f"{name} must be an array-like (an array, a list or a DataFrame), got "
            f"a {type(value).__name__}, which can be read only once: pass "
            f"list({name}) or an array."
        )
    if isinstance(value, (Set, Mapping)) and not sparse.issparse(value):  # dok
        raise TypeError(
            f"{name} must be an array-like (an array, a list or a DataFrame), got "
            f"a {type(value).__name__}, which has no order of samples."
        )


def check_finite_output(estimator, out, sequences, scale_tokens):
    """Raise a ValueError when a forward pass returned NaN or inf.

    Finite tokens can still overflow the model: unstandardised tokens of
    1e300 (or 1e20 in float32, which RandomAttentionFeatures computes in)
    overflow the products and the layer norms, and so do weights of that
    scale (given in ``init``, say) on tokens of any scale. Checked on the
    result, a pass over the output only; the message blames the larger of the
    two, the model's tokens (standardised as the model reads them) or its
    weights, and names the remedy.

    Parameters
    ----------
    estimator : BaseEstimator
        Named in the message; its fitted weights are looked at.
    out : ndarray or list of ndarray
        The result.
    sequences : ndarray or list of ndarray
        The checked input, for the message.
    scale_tokens : bool
        The fitted ``scale_tokens``.
    """
    arrays = out if isinstance(out, list) else [out]
    if all(np.isfinite(array).all() for array in arrays):
        return
    name = type(estimator).__name__
    tokens = _largest_token(estimator, sequences, scale_tokens)
    weights = max(map(_largest, _fitted_weights(estimator)), default=0.0)
    which = "standardised " if scale_tokens else ""
    if weights > tokens:
        raise ValueError(
            f"{name} cannot compute X: its weights (largest |w| = {weights:.3g}) "
            f"overflow the model's arithmetic on X's {which}tokens (largest |x| = "
            f"{tokens:.3g}) and gave NaN or inf. Give init weights of the scale "
            "of the default initialisation (entries of about 1 / sqrt(d_model)), "
            "or fit without init; weights learned this large ask for a smaller "
            "learning_rate_init."
        )
    remedy = (
        "Standardise the tokens (scale_tokens=True, the default) or rescale X."
        if not scale_tokens
        else "X's tokens are far outside those of fit (standardised with fit's "
        "statistics, they are still too large): rescale X as the training data, "
        "or fit on data of this scale."
    )
    raise ValueError(
        f"{name} cannot compute X: its {which}tokens (largest |x| = {tokens:.3g}, "
        f"scale_tokens={scale_tokens}) overflow the model's arithmetic and gave "
        f"NaN or inf. {remedy}"
    )


# Fitted attributes that are no weights of the model: the token statistics
# (the tokens' scale is measured on the tokens themselves) and the labels.
_NOT_WEIGHTS = frozenset({"token_mean_", "token_scale_", "classes_"})


def _fitted_weights(estimator):
    """The floating arrays of an estimator's fitted attributes (in lists and
    dicts too, as ``layers_`` holds them), but the token statistics."""
    fitted = vars(estimator).get("_fitted")  # an attention estimator's model
    if fitted is not None:
        yield from fitted.weights()
        return
    stack = [
        value
        for name, value in vars(estimator).items()
        if name.endswith("_") and not name.startswith("_") and name not in _NOT_WEIGHTS
    ]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f":
            yield value


def _largest(array):
    return float(np.max(np.abs(array), initial=0))


def _largest_token(estimator, sequences, scale_tokens):
    """The largest |x| of the tokens as the model reads them: standardised
    with the fitted statistics, where it standardises them."""
    seqs = sequences if isinstance(sequences, list) else [sequences]
    mean = getattr(estimator, "token_mean_", None)
    scale = getattr(estimator, "token_scale_", None)
    if not scale_tokens or mean is None or scale is None:
        return max(map(_largest, seqs), default=0.0)
    with np.errstate(over="ignore"):  # one sequence at a time: an error path
        return max(
            (_largest((seq - mean) / scale) for seq in seqs if len(seq)),
            default=0.0,
        )


def batch_budget():
    """Bytes a batch may use: scikit-learn's ``working_memory`` setting (the
    batches themselves are at most ``BATCH_BYTES``, see ``batch_indices``)."""
    return get_config()["working_memory"] * 2**20


def check_init(init, n_layers):
    """Check the structure and the arrays of a user ``init`` dict.

    ``init`` holds ``"layers"`` (a list of ``n_layers`` dicts of arrays) and
    arrays by parameter name (``"input"``, ...); a one-layer model also takes
    that layer's keys at the top level (``{"query": ...}``). Names and shapes
    are checked against the model once its width is known
    (``Model.flat_init``).

    Parameters
    ----------
    init : dict
        User-given weights.
    n_layers : int
        Number of encoder layers of the model.

    Returns
    -------
    init : dict
        The same structure with checked, finite float arrays (not copied: the
        parameters copy them when casting).
    """
    checked = {}
    for key, value in init.items():
        if key != "layers":
            checked[key] = _check_init_array(value, f"init[{key!r}]")
            continue
        if not isinstance(value, (list, tuple)) or len(value) != n_layers:
            raise ValueError(
                f"init['layers'] must be a list of n_layers={n_layers} dicts "
                f"(one per encoder layer), got {value!r:.80}."
            )
        checked[key] = []
        for index, layer in enumerate(value):
            if not isinstance(layer, dict):
                raise ValueError(
                    f"init['layers'][{index}] must be a dict of arrays, got "
                    f"{type(layer).__name__}."
                )
            checked[key].append(
                {
                    name: _check_init_array(array, f"init['layers'][{index}][{name!r}]")
                    for name, array in layer.items()
                }
            )
    return checked


def _check_init_array(value, name):
    """A finite float array of 1 or 2 dimensions, for ``init``."""
    if np.ndim(value) not in (1, 2):
        raise ValueError(
            f"{name} must be a 1D or 2D array, got shape {np.shape(value)}."
        )
    return check_array(value, dtype=FLOAT_DTYPES, ensure_2d=False, input_name=name)


# What objective="auto" makes of each target type (as TargetEncoder's target_type).
TARGET_OBJECTIVES = {
    "binary": "classification",
    "multiclass": "classification",
    "continuous": "regression",
    "continuous-multioutput": "regression",
}


def check_target(estimator, y, n_samples):
    """Resolve the objective and validate y.

    Parameters
    ----------
    estimator : AttentionTransformer
        Its ``objective`` decides what is learned.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs), or None
        Target.
    n_samples : int
        Number of samples of X.

    Returns
    -------
    objective : {"classification", "regression"} or None
        What is learned (the parameter's ``"auto"`` resolved); None: nothing.
    y : ndarray or None
        Checked target: for classification, 1-D labels of a binary or
        multiclass target (scikit-learn's ``check_classification_targets``);
        for regression, 2-D floats.
    """
    objective = estimator.objective
    if objective is None:
        return None, None
    if y is None:
        if objective == "auto":
            return None, None
        raise ValueError(
            f"{estimator.__class__.__name__} requires y to be passed, but the "
            f"target y is None (objective={objective!r})."
        )
    check_array_like(y, "y")
    y = check_array(
        y, ensure_2d=False, dtype=None, input_name="y", ensure_all_finite=True
    )
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if len(y) != n_samples:
        raise ValueError(
            "Found input variables with inconsistent numbers of samples: "
            f"[{n_samples}, {len(y)}] (X and y)."
        )
    if objective == "auto":
        target_type = type_of_target(y, input_name="y", raise_unknown=True)
        if target_type not in TARGET_OBJECTIVES:
            raise ValueError(
                f"objective='auto' learns from binary, multiclass or continuous "
                f"targets; got a target of type {target_type!r}. Set objective to "
                "'classification' or 'regression', or None."
            )
        objective = TARGET_OBJECTIVES[target_type]
    if objective == "regression":
        try:
            y = y.astype(np.float64).reshape(n_samples, -1)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"objective='regression' needs a numeric target: {exc}"
            ) from None
    elif y.ndim != 1:
        raise ValueError(
            f"objective='classification' needs a 1-D target, got shape {y.shape}."
        )
    elif estimator.objective != "auto":  # "auto" read a binary or multiclass one
        check_classification_targets(y)
    return objective, y


def check_sample_weight(sample_weight, n_samples, dtype, *, return_exponent=False):
    """Checked non-negative sample weights, not all zero, scaled to a largest of 1.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,), float or None
        The user's weights: any finite non-negative numbers, not all zero; a
        number weighs every sample, None weighs each 1.
    n_samples : int
        Number of samples.
    dtype : dtype
        dtype of the result.
    return_exponent : bool, default=False
        Also return the power of two by which the weights were divided.

    Returns
    -------
    sample_weight : ndarray of shape (n_samples,)
        The weights divided by a power of two (see :func:`normalize_weights`):
        their ratios are exactly the user's, from 1e-320 to 1e308.
    exponent : int
        Only with ``return_exponent``: ``sample_weight * 2**exponent`` are the
        user's weights.
    """
    check_array_like(sample_weight, "sample_weight")
    # checked in float64 and only then cast: 1e300 overflows float32, 1e-50
    # rounds to zero in it, but both are fine weights once normalised
    if sample_weight is None:
        sample_weight = np.ones(n_samples)
    elif isinstance(sample_weight, numbers.Number):  # one weight for all samples
        sample_weight = np.full(n_samples, sample_weight)
    sample_weight = check_array(
        sample_weight, ensure_2d=False, dtype=np.float64, input_name="sample_weight"
    )
    if sample_weight.ndim != 1:
        raise ValueError(
            f"sample_weight must be a 1-D array or a scalar, got a "
            f"{sample_weight.ndim}-D array of shape {sample_weight.shape}; expected "
            f"{n_samples} weights, one per sample."
        )
    if sample_weight.shape != (n_samples,):
        raise ValueError(
            f"sample_weight.shape == {sample_weight.shape}, expected "
            f"{(n_samples,)}: one weight per sample."
        )
    check_non_negative(sample_weight, "sample_weight")
    if not sample_weight.max(initial=0) > 0:
        # as the _check_sample_weight of newer scikit-learn versions says
        raise ValueError(
            "sample_weight must contain at least one non-zero weight; all "
            f"{n_samples} are zero: no sample to learn from."
        )
    sample_weight, exponent = normalize_weights(sample_weight)
    sample_weight = sample_weight.astype(dtype, copy=False)
    return (sample_weight, exponent) if return_exponent else sample_weight


def normalize_weights(weights):
    """Divide finite non-negative weights by the power of two that brings the
    largest into [1, 2).

    A power of two, so that the ratios of the weights, and so every weighted
    mean, are exact (to the bit, but for weights more than 2**1022 times
    smaller than the largest, which become subnormal); the largest in [1, 2),
    so that sums stay far from overflow and underflow in float32 and float64.
    Weights already in that range are returned as they are.

    Parameters
    ----------
    weights : ndarray of shape (n_samples,)
        Finite, non-negative, not all zero.

    Returns
    -------
    weights : ndarray of shape (n_samples,)
        ``weights / 2**exponent``.
    exponent : int
    """
    exponent = int(np.frexp(weights.max())[1]) - 1
    if exponent == 0:
        return weights, 0
    return np.ldexp(weights, -exponent), exponent


def check_token_statistics(value, known):
    """The statistics of a ``token_statistics`` list or tuple, as a tuple.

    Parameters
    ----------
    value : list or tuple of str
        The caller's statistics (``"auto"`` and None are resolved by the
        estimator).
    known : iterable of str
        The statistics the estimator computes.

    Raises
    ------
    ValueError
        For a name that is not a known statistic, or one given twice.
    """
    names = tuple(value)
    unknown = [name for name in names if not isinstance(name, str) or name not in known]
    if unknown or len(set(names)) != len(names):
        problem = f"unknown {unknown}" if unknown else "repeated names"
        raise ValueError(
            f"token_statistics={list(names)!r} has {problem}: give a list of "
            f"distinct statistics of {list(known)}, 'auto', or None for none."
        )
    return names


def check_max_bytes(max_bytes):
    """``max_bytes`` of ``attention_weights``: a positive number, or None."""
    if max_bytes is None:
        return
    if isinstance(max_bytes, bool | np.bool_) or not isinstance(
        max_bytes, numbers.Real
    ):
        raise TypeError(
            f"max_bytes must be a number of bytes or None, got {max_bytes!r}."
        )
    if not max_bytes > 0:  # NaN too
        raise ValueError(
            f"max_bytes must be a positive number of bytes or None, got {max_bytes!r}."
        )


def format_bytes(n_bytes):
    """``n_bytes`` for a message: ``"11.9 GiB"``."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n_bytes < 1024:
            return f"{n_bytes:.1f} {unit}" if unit != "bytes" else f"{n_bytes} bytes"
        n_bytes /= 1024
    return f"{n_bytes:.1f} TiB"
