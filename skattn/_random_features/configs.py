"""The configurations of RandomAttentionFeatures' models.

Each parameter of a model's configuration (heads, head width, positions,
causal mask, patch size and stride, differences, band) takes a value or a list
of candidates from which each model draws one. This module checks the
parameters, resolves their ``"auto"`` values from the data (the median length
of the series, the token width), the stride of each model's patches, and
draws each model's band (:func:`draw_band`, :func:`draw_dilation`). Values
in, lists of candidates (or a drawn band) out: the estimator is in
``estimator.py``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from collections.abc import Mapping, Set
from numbers import Integral

import numpy as np

from .._model.options import POSITIONAL_ENCODINGS
from .._model.pooling import STATISTICS, TOKEN_STATISTICS
from .._model.sequences import SERIES_MAX_FEATURES

# The pooling of each model (ModelConfig's): its own output is the statistic
# of this name.
MODEL_POOLING = "mean"
# The positional encodings a model may draw (beside None): those of the
# registry that training does not change. A learned table would keep its
# initial values, the sinusoidal table, in a model that is never trained.
RANDOM_POSITIONAL_ENCODINGS = tuple(
    name
    for name in POSITIONAL_ENCODINGS.names()
    if not POSITIONAL_ENCODINGS.get(name).trainable
)

# The statistics each model's per-token outputs can be pooled into (the
# functions are STATISTICS of _model/pooling.py), and those that compare the
# outputs with thresholds.
STATISTIC_NAMES = tuple(STATISTICS)
THRESHOLDED = {"ppv", "lspv"}
# statistics="auto": for narrow tokens (series, rows of an image, a table's scalar
# columns), ROCKET's maximum and PPV, with MultiRocket's LSPV for series long
# enough to be read in patches; for wide ones (word vectors, where the PPV did
# no better than the mean) the mean, maximum and minimum, and the first and
# last tokens (the [CLS] and [SEP] states of a BERT-style encoder's token
# states).
AUTO_POOLING_LONG = ("max", "ppv", "lspv")
AUTO_POOLING_NARROW = ("max", "ppv")
AUTO_POOLING_WIDE = TOKEN_STATISTICS  # what AttentionTransformer adds for them
# patch_size="auto": models see series (tokens of at most SERIES_MAX_FEATURES
# features) in AUTO_MIN_PATCHES to AUTO_MAX_PATCHES patches side by side, at
# every power-of-two scale in between.
AUTO_MIN_PATCHES = 16
AUTO_MAX_PATCHES = 128
# ... and univariate series too short for that (a median length of
# 2 * AUTO_MIN_PATCHES or less) in windows of 1 to AUTO_SHORT_PATCH consecutive
# points (at most half the median length), one starting at every point, as
# ROCKET's kernels read every short window: a scalar point is a poor token.
# Tokens of several features keep one token a model token.
AUTO_SHORT_PATCH = 4
# positional_encoding="auto": half the models of series read in patches add no
# positions (drawn), and pool windows wherever they are in the series, as
# ROCKET's kernels do; the other half keep the sinusoidal positions. Short
# series and other input keep their positions.
AUTO_POSITIONS_LONG = ("sinusoidal", None)
AUTO_POSITIONS = ("sinusoidal",)
# patch_stride="auto": patches overlap, one every eighth of a patch (at least
# 1 token; a stride of 1 is a convolution's), and at most AUTO_MAX_STRIDED
# patches in a sequence of the median length, which bounds the cost of
# attention. The measurements behind these rules are in the user guide, "How
# the defaults were chosen".
AUTO_STRIDE_DIVISOR = 8
AUTO_MAX_STRIDED = 256
# attention_window="auto": the models of series read in patches attend within
# a band of AUTO_WINDOW patches at the dilation each draws (ROCKET's scale with
# attention_dilation="auto"), in time linear in the number of patches; other
# input attends over every token.
AUTO_WINDOW = 17


def drawn_candidates(params):
    """The values each model draws its heads, head width, positions and causal
    mask from, by name; checked.

    Parameters
    ----------
    params : dict
        The estimator's ``n_heads``, ``head_dim``, ``positional_encoding`` and
        ``causal``.

    Returns
    -------
    dict of str to list

    Raises
    ------
    ValueError
        For an invalid value, or a positional encoding that refuses a head
        width a model may draw with it.
    """
    candidates = {}
    rules = {
        "n_heads": (_positive_int, "a positive int"),
        "head_dim": (_positive_int, "a positive int"),
        "positional_encoding": (
            lambda v: (
                v is None or (isinstance(v, str) and v in RANDOM_POSITIONAL_ENCODINGS)
            ),
            ", ".join(map(repr, RANDOM_POSITIONAL_ENCODINGS))
            + " or None (or 'auto', alone)",
        ),
        "causal": (lambda v: isinstance(v, (bool, np.bool_)), "a bool"),
    }
    for name, (valid, what) in rules.items():
        value = params[name]
        if name == "positional_encoding" and isinstance(value, str) and value == "auto":
            candidates[name] = ["auto"]  # resolved by positional_encodings()
            continue
        values = as_list(value, name)
        if not values or not all(valid(v) for v in values):
            raise ValueError(
                f"{name} must be {what} or a non-empty list of them (each "
                f"model draws one), got {value!r}."
            )
        candidates[name] = values
    candidates["n_heads"] = [int(v) for v in candidates["n_heads"]]
    candidates["head_dim"] = [int(v) for v in candidates["head_dim"]]
    candidates["causal"] = [bool(v) for v in candidates["causal"]]
    _check_positions(candidates)
    return candidates


def _check_positions(candidates):
    """Build each positional encoding a model may draw with each of the
    widths it may draw, before any model is drawn.

    Raises
    ------
    ValueError
        From a positional encoding that refuses some heads (rotary positions,
        heads of an odd width).
    """
    for name in candidates["positional_encoding"]:
        if name is None or name == "auto":  # "auto": sinusoidal or None
            continue
        unit = POSITIONAL_ENCODINGS.get(name)
        for n_heads in candidates["n_heads"]:
            for head_dim in candidates["head_dim"]:
                unit(1, n_heads * head_dim, n_heads)


def positional_encodings(candidates, median):
    """The positional encodings the models draw from: ``candidates``, or for
    ``["auto"]`` those of the rule (``median``: as for :func:`patch_sizes`)."""
    if candidates != ["auto"]:
        return candidates
    if reads_patches(median):
        return list(AUTO_POSITIONS_LONG)
    return list(AUTO_POSITIONS)


def patch_sizes(patch_size, median, n_features):
    """The patch sizes the models draw from (None: no patches); checked.

    ``median`` is the median length of the series (None for a table, or for
    tokens of more than ``SERIES_MAX_FEATURES`` features); ``n_features`` the
    token width.
    """
    if patch_size != "auto":
        values = _sizes_or_none(patch_size, "patch_size")
        return [None if v in (None, 1) else v for v in values]
    if median is None:
        return [None]
    if not reads_patches(median):
        if n_features != 1:
            return [None]
        largest = min(AUTO_SHORT_PATCH, int(median // 2))
        return [None] + list(range(2, largest + 1))
    smallest = max(1, math.ceil(median / AUTO_MAX_PATCHES))
    largest = max(smallest, math.floor(median / AUTO_MIN_PATCHES))
    sizes = [2**k for k in range(int(math.log2(largest)) + 1)]
    sizes = [size for size in sizes if size >= smallest] or [largest]
    return [None if size == 1 else size for size in sizes]


def reads_patches(median):
    """Whether ``patch_size="auto"`` patches series of this median length
    (None: not series of narrow tokens): above ``2 * AUTO_MIN_PATCHES``."""
    return median is not None and median > 2 * AUTO_MIN_PATCHES


def patch_strides(patch_stride):
    """The patch strides the models draw from (``"auto"`` and None as
    given); checked."""
    if isinstance(patch_stride, str):  # "auto", as validated
        return ["auto"]
    return _sizes_or_none(patch_stride, "patch_stride")


def stride_of(config, median):
    """The stride of a model's patches (None without patches); checked.

    ``config["patch_stride"]`` is the value the model drew (``"auto"``, None
    or an int); ``median`` the median length of the training series (None
    for other input).

    Raises
    ------
    ValueError
        For a stride larger than the model's patch size: its patches would
        skip tokens.
    """
    size, stride = config["patch_size"], config["patch_stride"]
    if size is None:
        return None
    if stride is None:
        return size
    if stride == "auto":
        stride = max(1, size // AUTO_STRIDE_DIVISOR)
        if median is not None:  # at most AUTO_MAX_STRIDED patches at the median
            stride = max(stride, math.ceil((median - size) / (AUTO_MAX_STRIDED - 1)))
        return min(stride, size)
    if stride > size:
        raise ValueError(
            f"patch_stride={stride} is larger than the patch size {size} a model "
            "drew: its patches would skip tokens. Pass strides of at most the "
            "smallest patch size (or 'auto', or None for side-by-side patches)."
        )
    return stride


def differences(difference, narrow, median):
    """The values of ``difference`` the models draw from; checked.

    ``"auto"``: every model of series read in patches reads each token beside
    its first-order difference, as MultiRocket reads a series beside its
    differences; half the models (drawn) of shorter sequences of narrow
    tokens; none for wider tokens or tables. ``narrow``: whether the input is
    sequences of at most ``SERIES_MAX_FEATURES`` features per token (not a
    table); ``median``: as for :func:`patch_sizes`.
    """
    if isinstance(difference, str):  # "auto", as validated
        if not narrow:
            return [False]
        return [True] if reads_patches(median) else [False, True]
    values = as_list(difference, "difference")
    if not values or not all(isinstance(v, (bool, np.bool_)) for v in values):
        raise ValueError(
            "difference must be a bool, 'auto' or a non-empty list of bools "
            f"(each model draws one), got {difference!r}."
        )
    return [bool(v) for v in values]


def band_candidates(attention_window, attention_dilation, median):
    """The windows (None: full attention) and dilations (``["auto"]``: of
    :func:`draw_dilation`) the models draw from; checked. ``median``: as for
    :func:`patch_sizes`, for ``attention_window="auto"``."""
    if isinstance(attention_window, str):  # "auto", as validated
        windows = [AUTO_WINDOW] if reads_patches(median) else [None]
    else:
        windows = _sizes_or_none(attention_window, "attention_window")
    if isinstance(attention_dilation, str):  # "auto", as validated
        return windows, ["auto"]
    dilations = as_list(attention_dilation, "attention_dilation")
    if not dilations or not all(_positive_int(v) for v in dilations):
        raise ValueError(
            "attention_dilation must be a positive int, 'auto' or a non-empty "
            f"list of positive ints (each model draws one), got "
            f"{attention_dilation!r}."
        )
    return windows, [int(v) for v in dilations]


def draw_dilation(rng, window, n_tokens):
    """ROCKET's dilation for a band of ``window`` over ``n_tokens`` model
    tokens: ``floor(2**u)``, ``u`` uniform between 0 and the exponent at which
    the band's reach on each side, ``(window // 2) * dilation``, is half the
    sequence (``window - 1`` tokens back for a causal band: the same scale).
    A window whose reach exceeds the sequence draws a dilation of 1: its reach
    is counted within the sequence, so that no window is too large for a
    float."""
    reach = max(1, min(window // 2, n_tokens))
    top = max(0.0, math.log2(max(1.0, (n_tokens - 1) / 2 / reach)))
    return int(2 ** rng.uniform(0, top))


def statistic_names(statistics, n_features, median=None):
    """The names of ``statistics`` as a list; checked.

    ``"auto"`` depends on the token width ``n_features`` (None: only check the
    parameter, and return None) and on ``median``, the median length of the
    series (None for a table or wide tokens): the LSPV for series long enough
    for ``patch_size="auto"`` to read them in patches.
    """
    if isinstance(statistics, str) and statistics == "auto":
        if n_features is None:
            return None
        if n_features > SERIES_MAX_FEATURES:
            return list(AUTO_POOLING_WIDE)
        if reads_patches(median):
            return list(AUTO_POOLING_LONG)
        return list(AUTO_POOLING_NARROW)
    names = as_list(statistics, "statistics")
    if (
        not names
        or not all(isinstance(n, str) and n in STATISTIC_NAMES for n in names)
        or len(set(names)) != len(names)
    ):
        raise ValueError(
            f"statistics must be one of {sorted(STATISTIC_NAMES)} or a non-empty "
            f"list of them without repeats, got {statistics!r}."
        )
    return names


def as_list(value, name):
    """A parameter value as a list of candidates: scalars and strings alone.

    Raises
    ------
    TypeError
        For a set (no order: the columns would change from run to run) or a
        mapping (its keys would be read as the candidates).
    """
    if value is None or isinstance(value, (str, bool, np.bool_, Integral)):
        return [value]
    if isinstance(value, (Set, Mapping)):
        raise TypeError(
            f"{name} must be a value or a list of values, got a "
            f"{type(value).__name__} {value!r:.80}: a set has no order (the "
            "models and columns would change from run to run) and a mapping's "
            f"keys are not candidates. Pass a list, e.g. {name}={list(value)!r:.80}."
        )
    return list(value)


def _positive_int(value):
    return isinstance(value, Integral) and not isinstance(value, bool) and value > 0


def _sizes_or_none(value, name):
    """A parameter of positive ints or None (a value or a list) as a list of
    candidates, ints as Python ints; checked."""
    values = as_list(value, name)
    if not values or not all(v is None or _positive_int(v) for v in values):
        raise ValueError(
            f"{name} must be a positive int, 'auto', None or a non-empty list of "
            f"positive ints (each model draws one), got {value!r}."
        )
    return [None if v is None else int(v) for v in values]


def draw_band(rng, windows, dilations, config, median, n_tokens):
    """A model's band: its window, and its dilation (``"auto"``: ROCKET's
    scale over the model tokens of a series of the median length).

    Parameters
    ----------
    rng : RandomState
        The model's generator.
    windows, dilations : list
        The candidates of :func:`band_candidates`.
    config : dict
        The model's drawn configuration (its ``"patch_size"`` and
        ``"patch_stride"``).
    median : float or None
        Median length of the training series (None for a table).
    n_tokens : int
        Tokens of a table's row (for ``median=None``).

    Returns
    -------
    dict
        ``"attention_window"`` (None: full attention) and
        ``"attention_dilation"``.
    """
    window = windows[rng.randint(len(windows))]
    dilation = dilations[rng.randint(len(dilations))]
    if window is None:
        return {"attention_window": None, "attention_dilation": 1}
    if dilation == "auto":
        length = n_tokens if median is None else median
        if config["patch_size"] is not None:
            length = 1 + (length - config["patch_size"]) // config["patch_stride"]
        dilation = draw_dilation(rng, window, max(1, int(length)))
    return {"attention_window": int(window), "attention_dilation": int(dilation)}
