"""Input validation: raw input to checked sequences, with clear errors.

The only module that imports private scikit-learn APIs, the two without a
public equivalent: ``_fit_context`` (parameter validation, and the callbacks'
set-up and tear-down around a fit) and ``_param_validation`` (``Interval``,
``StrOptions``). When scikit-learn moves them, this is the one file to change.
Feature names and ``n_features_in_`` go through the public ``validate_data``
(scikit-learn 1.6).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numbers
import warnings
from collections.abc import Iterator, Mapping, Set

import numpy as np
from scipy import sparse
from sklearn import get_config
from sklearn.base import _fit_context
from sklearn.utils import _param_validation, check_array
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_non_negative, validate_data

from ._parallel import CACHE_BYTES

__all__ = [
    "Interval",
    "StrOptions",
    "_fit_context",
    "check_array_like",
    "check_finite_output",
    "check_sample_weight",
    "check_target",
    "normalize_weights",
    "check_init",
    "check_input",
    "input_format",
    "batch_budget",
]

FLOAT_DTYPES = (np.float64, np.float32)
TABLE, SEQUENCES, IDS = "table", "sequences", "ids"
CHANNELS_LAST, CHANNELS_FIRST = "channels_last", "channels_first"
# How each data_format names the axes of a sequence, for the messages.
SEQUENCE_SHAPE = {
    CHANNELS_LAST: "(n_tokens, n_features)",
    CHANNELS_FIRST: "(n_channels, n_timepoints)",
}


class Interval(_param_validation.Interval):
    """scikit-learn's ``Interval`` constraint, which a bool does not satisfy.

    ``bool`` is an ``Integral``, so scikit-learn's constraint takes
    ``n_heads=True`` for one head and ``alpha=False`` for 0; a flag where a
    number is expected is a mistake, reported as any other invalid value.
    """

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


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
    overflow the products and the layer norms. Checked on the result, a pass
    over the output only.

    Parameters
    ----------
    estimator : BaseEstimator
        Named in the message.
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
    seqs = sequences if isinstance(sequences, list) else [sequences]
    largest = max(float(np.max(np.abs(seq), initial=0)) for seq in seqs)
    remedy = (
        "Standardise the tokens (scale_tokens=True, the default) or rescale X."
        if not scale_tokens
        else "X's tokens are far outside those of fit (standardised with fit's "
        "statistics, they are still too large): rescale X as the training data, "
        "or fit on data of this scale."
    )
    raise ValueError(
        f"{type(estimator).__name__} cannot compute X: its tokens (largest "
        f"|x| = {largest:.3g}, scale_tokens={scale_tokens}) overflow the model's "
        f"arithmetic and gave NaN or inf. {remedy}"
    )


def batch_budget():
    """Bytes a batch may use: scikit-learn's ``working_memory`` setting, and
    a cache-sized batch at most."""
    return min(get_config()["working_memory"] * 2**20, CACHE_BYTES)


def _is_ragged(X):
    """Whether X is a list/tuple/1-D object array (or Series) of 2D arrays."""
    is_list = isinstance(X, (list, tuple))
    is_object_vector = (
        str(getattr(X, "dtype", "")) == "object" and getattr(X, "ndim", None) == 1
    )  # a 1-D object ndarray or pandas Series
    if not (is_list or is_object_vector):
        return False
    if len(X) == 0:
        raise ValueError(
            f"X is empty: got an empty {type(X).__name__}; expected a table "
            "(n_samples, n_features), an array (n_samples, n_tokens, n_features) "
            "or a list of (n_tokens, n_features) arrays."
        )
    if is_object_vector:
        return True
    try:
        return np.ndim(X[0]) == 2
    except ValueError:  # an inhomogeneous nested list: not a 2D table row
        return True


def _check_ragged(X, data_format=CHANNELS_LAST):
    """Check each sequence of a ragged input; return a list of 2D arrays.

    With ``data_format="channels_first"`` each array is ``(n_channels,
    n_timepoints)`` and is returned transposed (a view). A list of 1-D arrays
    only is a list of univariate series, each returned as ``(n_tokens_i, 1)``.
    """
    first = data_format == CHANNELS_FIRST
    shape = SEQUENCE_SHAPE[data_format]
    univariate = _is_univariate(X)
    sequences = []
    for i, seq in enumerate(X):
        name = f"X[{i}]"
        ndim = _ndim(seq)
        given_shape = np.shape(seq) if ndim is not None else None
        if ndim is None:
            raise ValueError(
                f"{name} must be a 2D array of shape {shape}, but its rows have "
                f"different lengths: {seq!r:.80}."
            )
        if univariate:  # a series of scalars: (n_tokens_i, 1), a view
            seq = np.reshape(np.asarray(seq), (-1, 1))
        elif ndim != 2:
            raise ValueError(
                f"{name} must be a 2D array of shape {shape}, got {ndim} "
                f"dimension(s): {seq!r:.80}. (A list of 1-D arrays only is read as "
                "univariate series.)"
            )
        elif first:  # read as its transpose (n_timepoints, n_channels), a view
            seq = np.asarray(seq).T
        if np.shape(seq)[0] == 0:
            raise ValueError(
                f"{name} is a zero-length sequence (shape {given_shape}); every "
                "sequence needs at least one token."
            )
        try:
            seq = check_array(seq, dtype=FLOAT_DTYPES, input_name=name)
        except ValueError as exc:
            if name in str(exc):
                raise
            raise ValueError(f"{name}: {exc}") from exc
        if sequences and seq.shape[1] != sequences[0].shape[1]:
            raise ValueError(_width_mismatch(name, seq, sequences[0], data_format))
        sequences.append(seq)
    dtype = np.result_type(*(seq.dtype for seq in sequences))
    return [seq.astype(dtype, copy=False) for seq in sequences]


def _is_univariate(X):
    """Whether X holds 1-D arrays (or Series) only: univariate series.

    Nested lists stay rows of a table, as scikit-learn reads them.
    """
    return all(getattr(seq, "ndim", None) == 1 for seq in X)


def _is_univariate_list(estimator, X, reset):
    """Whether a list of 1-D arrays is read as univariate series.

    In fit, when their lengths differ (of one length, they are the rows of a
    table, as scikit-learn reads a list of rows); after a fit on sequences,
    always.
    """
    if not isinstance(X, (list, tuple)) or not _is_univariate(X):
        return False
    if not reset:
        return input_format(estimator)["kind"] == SEQUENCES
    return any(len(seq) != len(X[0]) for seq in X)


def _width_mismatch(name, seq, first_seq, data_format):
    """The message of a sequence whose width differs from X[0]'s."""
    if data_format == CHANNELS_FIRST:
        return (
            f"{name} has {seq.shape[1]} channels (rows), but X[0] has "
            f"{first_seq.shape[1]}: all sequences must have the same channels. "
            "data_format='channels_first' reads each array as (n_channels, "
            "n_timepoints); for (n_timepoints, n_channels) arrays, pass "
            "data_format='channels_last' (the default)."
        )
    return (
        f"{name} has {seq.shape[1]} features per token, but X[0] has "
        f"{first_seq.shape[1]}: all sequences must have the same width. "
        "data_format='channels_last' (the default) reads each array as "
        "(n_tokens, n_features); for (n_channels, n_timepoints) arrays, as "
        "aeon's collections of unequal length, pass data_format='channels_first'."
    )


def _ndim(value):
    """Number of dimensions of an array-like; None for a nested list of rows of
    different lengths (numpy's "inhomogeneous shape")."""
    try:
        return value.ndim if hasattr(value, "ndim") else np.ndim(value)
    except ValueError:
        return None


def _explain_inhomogeneous(X, data_format=CHANNELS_LAST):
    """Raise a ValueError naming the element of a list that numpy could not stack.

    ``_is_ragged`` reads a list as sequences when its first element is 2D; a
    list whose first element is a row, but a later one a sequence, or whose
    rows differ in length, fails in numpy with "inhomogeneous shape" instead.
    Does nothing when no element explains the failure.
    """
    if not isinstance(X, (list, tuple)):
        return
    if any(_ndim(seq) == 2 for seq in X):
        # a list of sequences, with an element that is not one
        _check_ragged(X, data_format)
    first = np.shape(X[0]) if _ndim(X[0]) is not None else None
    for i, row in enumerate(X[1:], start=1):
        shape = np.shape(row) if _ndim(row) is not None else None
        if shape != first:
            raise ValueError(
                f"X[{i}] has shape {shape}, but X[0] has shape {first}: the rows "
                "of a table must all have the same length, and a list of "
                "sequences must hold 2D (n_tokens, n_features) arrays (or 1-D "
                "numpy arrays only, read as univariate series)."
            )


def _check_n_features_per_token(estimator, n_features, reset, data_format):
    """Set or check ``n_features_in_`` for sequence input (the token width)."""
    if reset:
        estimator.n_features_in_ = n_features
    elif n_features != estimator.n_features_in_:
        name = type(estimator).__name__
        if data_format == CHANNELS_FIRST:
            raise ValueError(
                f"X has {n_features} channels, but {name} is expecting "
                f"{estimator.n_features_in_} channels as input. It was fitted with "
                "data_format='channels_first', which reads (n_samples, n_channels, "
                "n_timepoints) arrays and lists of (n_channels, n_timepoints) "
                "arrays: pass X in that layout."
            )
        raise ValueError(
            f"X has {n_features} features per token, but {name} is expecting "
            f"{estimator.n_features_in_} features per token as input. It was "
            "fitted with data_format='channels_last', which reads (n_samples, "
            "n_tokens, n_features) arrays and lists of (n_tokens, n_features) "
            "arrays: pass X in that layout (for data stored as (n_channels, "
            "n_timepoints), fit with data_format='channels_first')."
        )


def input_format(estimator):
    """How a fitted estimator reads X, as :func:`check_input` recorded it in fit.

    Returns
    -------
    dict
        ``"kind"`` (table or sequences), ``"features_per_token"`` and
        ``"data_format"`` (the estimator's parameters at fit).
    """
    return estimator._input_format


def check_input(estimator, X, *, reset):
    """Validate X and turn it into sequences of tokens.

    Sets (``reset=True``) or checks ``n_features_in_``, ``feature_names_in_`` and
    the input format (see :func:`input_format`) on ``estimator``. In fit X is
    read with the estimator's ``features_per_token`` (tokens of a table: None
    for 1) and ``data_format`` (``(n_tokens, n_features)`` per sequence, or
    ``(n_channels, n_timepoints)``, read as its transpose); afterwards with
    the values of that fit, whatever ``set_params`` changed since.

    Parameters
    ----------
    estimator : BaseEstimator
        The estimator whose input this is.
    X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of shape \
            (n_samples, n_tokens, n_features), or list of array-like
        Raw input.
    reset : bool
        True in fit: remember the input's properties; False: check against them.

    Returns
    -------
    sequences : ndarray of shape (n_samples, n_tokens, n_features) or list of \
            ndarray of shape (n_tokens_i, n_features)
        Finite float32 or float64 tokens; a view of X where possible (the
        transpose of channels-first input is a view too), never X itself
        modified.
    """
    check_array_like(X, "X")
    _check_not_nested(X)
    _check_not_text(X)
    if reset:
        features_per_token = estimator.features_per_token
        data_format = estimator.data_format
        reads_ids = getattr(estimator, "vocabulary_size", None) is not None
    else:
        features_per_token = input_format(estimator)["features_per_token"]
        data_format = input_format(estimator)["data_format"]
        reads_ids = input_format(estimator)["kind"] == IDS
    if reads_ids:
        sequences = check_ids(X)
        _check_kind(estimator, IDS, reset, features_per_token, data_format)
        validate_data(estimator, X, reset=reset, skip_check_array=True, ensure_2d=False)
        _check_n_features_per_token(estimator, 1, reset, data_format)
        return sequences
    first = data_format == CHANNELS_FIRST
    if _is_ragged(X) or _is_univariate_list(estimator, X, reset):
        if reset:
            _warn_if_ids(X, estimator)
        sequences = _check_ragged(X, data_format)
        n_features = sequences[0].shape[1]
    else:
        try:
            array = check_array(
                X,
                dtype=FLOAT_DTYPES,
                allow_nd=True,
                estimator=estimator,
                input_name="X",
            )
        except ValueError:
            _explain_inhomogeneous(X, data_format)
            _explain_nan_padding(X, data_format)
            raise
        if array.ndim == 2:
            _check_kind(estimator, TABLE, reset, features_per_token, data_format)
            # feature_names_in_ and n_features_in_ (X's width: array's, checked)
            validate_data(estimator, X, reset=reset, skip_check_array=True)
            width = 1 if features_per_token is None else features_per_token
            if first and width > 1:
                raise ValueError(
                    "data_format='channels_first' applies to 3D arrays and lists "
                    "of sequences; a table is read as tokens of features_per_token="
                    f"{features_per_token} consecutive columns (column t * "
                    f"{features_per_token} + c is feature c of token t). Reshape "
                    "a panel flattened channel by channel, (n_samples, n_channels "
                    "* n_timepoints), to (n_samples, n_channels, n_timepoints) "
                    "and pass that, or pass data_format='channels_last'."
                )
            if array.shape[1] % width:
                raise ValueError(
                    f"features_per_token={features_per_token} does not divide the "
                    f"number of columns of X, {array.shape[1]}: a table is read as "
                    "n_features / features_per_token tokens of width "
                    "features_per_token."
                )
            return array.reshape(array.shape[0], -1, width)  # (N, T, D)
        layout = f"(n_samples, {SEQUENCE_SHAPE[data_format][1:]}"
        if array.ndim != 3:
            raise ValueError(
                f"X has {array.ndim} dimensions (shape {array.shape}); expected a "
                f"2D table (n_samples, n_features), a 3D array {layout} or a list "
                f"of 2D {SEQUENCE_SHAPE[data_format]} arrays."
            )
        if 0 in array.shape[1:]:
            raise ValueError(
                f"X of shape {array.shape} has no tokens or no features: "
                f"expected {layout} with every axis of length at least 1."
            )
        if first:  # (n_samples, n_timepoints, n_channels), a view
            array = array.transpose(0, 2, 1)
        sequences, n_features = array, array.shape[2]

    if features_per_token is not None and features_per_token != n_features:
        raise ValueError(
            f"features_per_token={features_per_token} is for 2D tables only; "
            f"sequences of width {n_features} were passed. Leave "
            "features_per_token=None for sequence input."
        )
    _check_kind(estimator, SEQUENCES, reset, features_per_token, data_format)
    # feature_names_in_ only: ensure_2d=False skips n_features_in_, which for
    # sequences is the token width, set below
    validate_data(estimator, X, reset=reset, skip_check_array=True, ensure_2d=False)
    _check_n_features_per_token(estimator, n_features, reset, data_format)
    return sequences


TEXT_REMEDY = (
    "turn the texts into tokens first, in a Pipeline: skattn.text.TokenIds "
    "(integer ids, for vocabulary_size='auto'), skattn.text.TokenEmbeddings "
    "(a pretrained encoder's token states) or skattn.text.StaticTokenEmbeddings "
    "(word vectors)"
)


def _check_not_text(X):
    """Raise a TypeError naming ``skattn.text`` for raw strings."""
    if isinstance(X, str):
        raise TypeError(
            f"X is a string; expected a collection of samples: {TEXT_REMEDY}."
        )
    first = None
    if isinstance(X, (list, tuple)) and len(X):
        first = X[0]
        if isinstance(first, np.ndarray) and first.size and first.dtype.kind in "US":
            first = first.flat[0]  # a sequence of strings
    elif isinstance(X, np.ndarray) and X.size and X.dtype.kind in "USO":
        first = X.flat[0]
    if isinstance(first, (str, bytes)):
        raise TypeError(
            f"X holds raw text ({first!r:.40}...): skattn's estimators read "
            f"sequences of numbers; {TEXT_REMEDY}."
        )


def check_ids(X):
    """Integer token ids: a list of 1-D integer arrays, or a 2D integer array.

    Returns
    -------
    sequences : ndarray of shape (n_samples, n_tokens, 1) or list of ndarray \
            of shape (n_tokens_i, 1)
        The ids as int64 (views where possible, never X modified).

    Raises
    ------
    TypeError
        For ids that are not integers.
    ValueError
        For an empty input, a zero-length sequence, a negative id, or arrays
        of other dimensions.
    """
    remedy = (
        "vocabulary_size reads each token as an integer id: pass a list of 1-D "
        "integer arrays (skattn.text.TokenIds gives them) or a 2D integer "
        "array (n_samples, n_tokens)"
    )
    if isinstance(X, np.ndarray) and X.dtype != object:
        if X.ndim != 2:
            raise ValueError(
                f"X has {X.ndim} dimension(s) (shape {X.shape}); {remedy}."
            )
        sequences = [X]
    else:
        if len(X) == 0:
            raise ValueError(f"X is empty; {remedy}.")
        sequences = [np.asarray(x) for x in X]
    for i, ids in enumerate(sequences):
        name = "X" if isinstance(X, np.ndarray) and X.dtype != object else f"X[{i}]"
        if ids.dtype.kind not in "iu":
            raise TypeError(
                f"{name} holds {ids.dtype} values, not integer token ids; {remedy}."
            )
        expected = 2 if name == "X" else 1
        if ids.ndim != expected:
            raise ValueError(
                f"{name} has shape {ids.shape}, not {expected}-D; {remedy}."
            )
        if ids.shape[-1] == 0 or ids.size == 0:
            raise ValueError(
                f"{name} is a zero-length sequence; every sequence needs at least "
                "one token (id 0 for an unknown one)."
            )
        if ids.min() < 0:
            raise ValueError(
                f"{name} holds the negative id {ids.min()}; ids are 0 (unknown) "
                "to vocabulary_size - 1."
            )
    if name == "X":
        return X.astype(np.int64, copy=False)[:, :, None]  # (N, T, 1)
    return [ids.astype(np.int64, copy=False)[:, None] for ids in sequences]


def _warn_if_ids(X, estimator):
    """Warn that a list of 1-D integer arrays (token ids, as TokenIds gives)
    is read as univariate series of numbers."""
    if not isinstance(X, (list, tuple)) or not all(
        getattr(x, "ndim", None) == 1 and x.dtype.kind in "iu" for x in X
    ):
        return
    remedy = "pass vocabulary_size='auto' to read them as token ids"
    if not hasattr(estimator, "vocabulary_size"):
        remedy = (
            f"{type(estimator).__name__} reads vectors: give it the tokens' "
            "vectors (skattn.text.StaticTokenEmbeddings or TokenEmbeddings)"
        )
    warnings.warn(
        f"X is a list of 1-D integer arrays, read as univariate series of "
        f"numbers (one scalar token per integer). If they are token ids, {remedy}.",
        UserWarning,
        stacklevel=4,
    )


def _check_not_nested(X):
    """Raise a ValueError for a nested DataFrame (sktime's "nested_univ").

    Its cells hold a pandas Series (or an array) of time points per channel;
    numpy's own message is "setting an array element with a sequence".
    """
    if not (hasattr(X, "iloc") and hasattr(X, "columns")) or 0 in X.shape:
        return
    if getattr(X.iloc[0, 0], "ndim", 0) == 0:
        return
    raise ValueError(
        "X is a nested DataFrame (sktime's 'nested_univ' format: a column per "
        "channel, a Series of time points in each cell), which skattn does not "
        "read. Convert it to a 3D array (n_samples, n_channels, n_timepoints) "
        "and pass data_format='channels_first': with sktime, "
        "sktime.datatypes.convert_to(X, to_type='numpy3D'); with numpy, "
        "np.stack([np.stack([np.asarray(c) for c in row]) for row in "
        "X.itertuples(index=False)]). Series of different lengths go in a list "
        "of (n_channels, n_timepoints_i) arrays, with "
        "data_format='channels_first': [np.stack([np.asarray(c) for c in row]) "
        "for row in X.itertuples(index=False)]."
    )


def _explain_nan_padding(X, data_format):
    """Raise a ValueError for a 3D array padded with NaN (tslearn's convention).

    tslearn stores series of different lengths as one array whose last time
    points are NaN in every channel. Does nothing for other NaN (missing values
    inside the sequences) or other failures.
    """
    if _ndim(X) != 3 or sparse.issparse(X):
        return
    array = np.asarray(X)
    if array.dtype.kind != "f":
        return
    feature_axis = 1 if data_format == CHANNELS_FIRST else 2
    missing = np.isnan(array)
    padded = missing.all(axis=feature_axis)  # (n_samples, n_tokens)
    if not padded.any() or np.any(missing.any(axis=feature_axis) != padded):
        return  # no NaN token, or NaN inside a token: missing values
    if np.any(np.diff(padded.astype(np.int8), axis=1) < 0):
        return  # a NaN token before a valid one: not padding
    lengths = padded.shape[1] - padded.sum(axis=1)
    if data_format == CHANNELS_FIRST:
        convert = "[x[:, ~np.isnan(x).all(axis=0)] for x in X]"
        layout = "a list of (n_channels, n_timepoints_i) arrays"
    else:
        convert = "[x[~np.isnan(x).all(axis=1)] for x in X]"
        layout = "a list of (n_tokens_i, n_features) arrays"
    raise ValueError(
        f"Input X contains NaN: its sequences end with tokens that are NaN in "
        f"every feature (lengths {lengths.min()} to {lengths.max()} of "
        f"{padded.shape[1]}), tslearn's padding of series of different lengths. "
        f"Pass sequences of different lengths as {layout}, padded internally "
        f"and masked: X = {convert}."
    )


def _check_kind(estimator, kind, reset, features_per_token, data_format):
    """Remember (fit) or check (transform) whether X is a table or sequences."""
    if reset:
        estimator._input_format = {
            "kind": kind,
            "features_per_token": features_per_token,
            "data_format": data_format,
        }
    elif kind != input_format(estimator)["kind"]:
        fitted = "a table" if input_format(estimator)["kind"] == TABLE else "sequences"
        given = "a table" if kind == TABLE else "sequences"
        raise ValueError(
            f"{estimator.__class__.__name__} was fitted on {fitted} and cannot "
            f"transform {given}: pass the same kind of input as in fit (2D table, "
            "or 3D array / list of sequences)."
        )


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
TARGET_TASKS = {
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
    task : {"classification", "regression"} or None
        None: nothing is learned.
    y : ndarray or None
        Checked target (1-D for classification, 2-D float for regression).
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
        if target_type not in TARGET_TASKS:
            raise ValueError(
                f"objective='auto' learns from binary, multiclass or continuous "
                f"targets; got a target of type {target_type!r}. Set objective to "
                "'classification' or 'regression', or None."
            )
        objective = TARGET_TASKS[target_type]
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
