"""Reading X: raw input to checked sequences of tokens, with clear errors.

A table, a 3D array, a ragged list of sequences (channels last or first), a
DataFrame, or integer token ids: :func:`check_input` turns each into the
sequences the model reads, records how the estimator read it in ``fit``
(:func:`input_format`) and reads it the same way afterwards. Raw strings,
nested DataFrames and NaN-padded panels get an error that gives the
conversion.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
from scipy import sparse
from sklearn.utils import check_array
from sklearn.utils.validation import validate_data

from .validation import FLOAT_DTYPES, check_array_like

INT64_MAX = np.iinfo(np.int64).max  # the largest token id: ids are read as int64
TABLE, SEQUENCES, IDS = "table", "sequences", "ids"
CHANNELS_LAST, CHANNELS_FIRST = "channels_last", "channels_first"
# How each data_format names the axes of a sequence, for the messages.
SEQUENCE_SHAPE = {
    CHANNELS_LAST: "(n_tokens, n_features)",
    CHANNELS_FIRST: "(n_channels, n_timepoints)",
}


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
    """How a fitted estimator reads X, as :func:`check_input` recorded it in fit
    and the estimator's fitted object (``_fitted``) keeps it.

    Returns
    -------
    dict
        ``"kind"`` (table or sequences), ``"features_per_token"`` and
        ``"data_format"`` (the estimator's parameters at fit).
    """
    state = vars(estimator)
    if "_input_format" in state:  # read by this fit, its model not yet built
        return state["_input_format"]
    return state["_fitted"].input_format


def check_input(estimator, X, *, reset, role="transform"):
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
    role : {"transform", "partial_fit", "warm_start", "X_val"}, default="transform"
        What X is for, for the message of an input of another kind than fit's.

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
        sequences = check_ids(X, reset=reset)
        _check_kind(estimator, IDS, reset, features_per_token, data_format, role)
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
            _check_kind(estimator, TABLE, reset, features_per_token, data_format, role)
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
    if reset and not first:
        _warn_if_channels_first(sequences, n_features)
    _check_kind(estimator, SEQUENCES, reset, features_per_token, data_format, role)
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
    """Raise a TypeError naming ``skattn.text`` for raw strings, and a
    ValueError naming the value for numbers written as strings.

    X is text when its first value is a string that is not a number.
    """
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
    if not isinstance(first, (str, bytes)):
        return
    if not _is_number(first):
        raise TypeError(
            f"X holds raw text ({str(first)!r:.40}...): skattn's estimators read "
            f"sequences of numbers; {TEXT_REMEDY}."
        )
    where, value = _first_non_number(X)
    if where is None:
        raise ValueError(
            f"X holds numbers written as strings ({str(first)!r:.40}...): "
            "convert it to numbers first, np.asarray(X, dtype=float)."
        )
    raise ValueError(
        f"X{where} is {str(value)!r:.40}, which is not a number, in an X of "
        "numbers written as strings: replace or drop that value (np.nan for a "
        "missing one, with an imputer before the estimator), then convert X to "
        "numbers, np.asarray(X, dtype=float)."
    )


def _is_number(value):
    """Whether ``float(value)`` reads ``value``."""
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _first_non_number(X):
    """The index (as ``"[i, j]"``) and value of the first value of X, an array
    or a list of samples, that is not a number; (None, None) if all are."""
    samples = [X] if isinstance(X, np.ndarray) else X
    for number, sample in enumerate(samples):
        values = np.asarray(sample, dtype=object)
        for index in np.ndindex(values.shape):
            if not _is_number(values[index]):
                where = index if sample is X else (number, *index)
                return f"[{', '.join(map(str, where))}]", values[index]
    return None, None


def check_ids(X, *, reset):
    """Integer token ids: a list of 1-D integer arrays, or a 2D integer array
    (a DataFrame is read as the array it holds).

    Parameters
    ----------
    X : list of array-like of shape (n_tokens_i,), or {array-like, DataFrame} \
            of shape (n_samples, n_tokens)
        Raw input.
    reset : bool
        True in fit, which refuses ids beyond int64's range.

    Returns
    -------
    sequences : ndarray of shape (n_samples, n_tokens, 1) or list of ndarray \
            of shape (n_tokens_i, 1)
        The ids as int64 (views where possible, never X modified); unsigned
        ids beyond int64's range as its largest value, an id past any
        vocabulary, read as unknown.

    Raises
    ------
    TypeError
        For ids that are not integers.
    ValueError
        For an empty input, a zero-length sequence, a negative id, an id
        beyond int64's range in fit, or arrays of other dimensions.
    """
    remedy = (
        "vocabulary_size reads each token as an integer id: pass a list of 1-D "
        "integer arrays (skattn.text.TokenIds gives them) or a 2D integer "
        "array (n_samples, n_tokens)"
    )
    if hasattr(X, "columns"):  # a DataFrame: the array it holds
        X = check_array(X, dtype=None, ensure_all_finite=False, input_name="X")
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
        if reset and ids.max() > INT64_MAX:
            raise ValueError(
                f"{name} holds the token id {ids.max()}, beyond the largest id, "
                f"{INT64_MAX} (ids are read as int64): ids are 0 (unknown) to "
                "vocabulary_size - 1; number the tokens from 0, as "
                "skattn.text.TokenIds does."
            )
    if name == "X":
        return _as_int64(X)[:, :, None]  # (N, T, 1)
    return [_as_int64(ids)[:, None] for ids in sequences]


def _as_int64(ids):
    """Integer ids as int64 (a view where possible); unsigned ids beyond its
    range as its largest value, an id past any vocabulary (unknown)."""
    if not np.can_cast(ids.dtype, np.int64):  # uint64
        ids = np.minimum(ids, INT64_MAX)
    return ids.astype(np.int64, copy=False)


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


# A 3D array of at most this many tokens, each this many times as wide as the
# sequence is long, looks like an (n_samples, n_channels, n_timepoints) panel.
PANEL_MAX_CHANNELS, PANEL_WIDTH_RATIO = 8, 10


def _warn_if_channels_first(sequences, n_features):
    """Warn when channels-last sequences look like a channels-first panel
    (aeon's and sktime's layout): every sequence one token, or a 3D array of
    a few tokens far wider than the sequence is long."""
    if isinstance(sequences, np.ndarray):
        n_tokens = sequences.shape[1]
        looks_transposed = n_tokens == 1 or (
            n_tokens <= PANEL_MAX_CHANNELS
            and n_features >= PANEL_WIDTH_RATIO * n_tokens
        )
        shape = f"of shape {sequences.shape}"
    else:
        n_tokens = 1
        looks_transposed = all(len(sequence) == 1 for sequence in sequences)
        shape = "a list of (1, n_features) arrays"
    if looks_transposed:
        warnings.warn(
            f"X ({shape}) is read as sequences of {n_tokens} token(s) of "
            f"{n_features} features (data_format='channels_last'): attention "
            "runs over the tokens, here only that few. If X is a panel of time "
            "series stored as (n_samples, n_channels, n_timepoints), as aeon and "
            "sktime store them, pass data_format='channels_first' to read the "
            "time points as the tokens.",
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


KIND_NAMES = {TABLE: "a table", SEQUENCES: "sequences", IDS: "token ids"}


def _check_kind(estimator, kind, reset, features_per_token, data_format, role):
    """Remember (fit) or check (afterwards) whether X is a table or sequences
    (``role``: what X is for, see :func:`check_input`)."""
    if reset:
        estimator._input_format = {
            "kind": kind,
            "features_per_token": features_per_token,
            "data_format": data_format,
        }
        return
    fitted_kind = input_format(estimator)["kind"]
    if kind == fitted_kind:
        return
    name = type(estimator).__name__
    fitted, given = KIND_NAMES[fitted_kind], KIND_NAMES[kind]
    layouts = "(a 2D table, or a 3D array or list of sequences)"
    if role == "X_val":
        message = (
            f"it is {given}, and X is {fitted}: pass the validation set in the "
            f"layout of X {layouts}."
        )
    elif role in ("partial_fit", "warm_start"):
        call, fresh = "partial_fit", "fit"
        if role == "warm_start":
            call, fresh = "fit with warm_start=True", "warm_start=False"
        message = (
            f"{name} was fitted on {fitted}, and {call} goes on training that "
            f"model: it cannot learn from {given}. Pass the kind of input of "
            f"the first fit {layouts}, or start a new model ({fresh})."
        )
    else:
        message = (
            f"{name} was fitted on {fitted} and cannot transform {given}: pass "
            f"the same kind of input as in fit {layouts}."
        )
    raise ValueError(message)
