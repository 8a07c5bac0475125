"""From the estimator's parameters and the data to the model's description.

:func:`resolve_config` turns the parameters of an attention estimator (as
``get_params`` gives them) and the checked training data into the
:class:`~skattn._model.model.ModelConfig` that ``fit`` builds, every
``"auto"`` resolved. :func:`fitted_structure` says, parameter by parameter,
what a fitted model is; :func:`check_structure` refuses to continue training
(``partial_fit``, a warm start) with a parameter that would change it;
:func:`check_lengths` refuses sequences the pooling cannot read. Plain
functions of explicit values: nothing here reads or writes an estimator.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from .._input.formats import IDS, TABLE
from .._input.validation import check_token_statistics
from .._kernels.patterns import FullAttention, resolve_pattern
from .._model.model import ModelConfig
from .._model.options import ATTENTION_PATTERNS, REGISTRIES
from .._model.patterns import pattern_config, pattern_from_config
from .._model.pooling import TABLE_STATISTIC, TOKEN_STATISTICS, needs_fixed_length
from .._model.sequences import SERIES_MAX_FEATURES, series_median_length, token_width
from .._model.units import patch_count

# head_dim=None: a model 64 wide, as the one-layer torch encoder of the
# benchmark, whatever the width of the tokens (user guide, "How the defaults
# were chosen").
DEFAULT_D_MODEL = 64

# patch_size="auto": series (tokens of at most SERIES_MAX_FEATURES features)
# whose median length exceeds AUTO_PATCH_MIN_LENGTH are read in about
# AUTO_PATCHES patches.
AUTO_PATCHES = 32
AUTO_PATCH_MIN_LENGTH = 64

# pooling="auto": series read in patches pool the maximum of each feature over
# the patches (where a pattern is matters less than whether it occurs, as
# ROCKET pools its kernels), other input the mean.
AUTO_POOLING_PATCHES = "max"
AUTO_POOLING = "mean"

# The parameters whose "auto" (or None) resolves from the data or init:
# continuing training, that value means the fitted one.
RESOLVED = {
    "head_dim": None,
    "patch_size": "auto",
    "pooling": "auto",
    "vocabulary_size": "auto",
    "token_statistics": "auto",
}


def resolve_config(
    params,
    kind,
    sequences,
    lengths,
    user_weight,
    init,
    n_outputs,
    objective,
    random_state,
):
    """The model a fit builds, its ``"auto"`` values resolved.

    Parameters
    ----------
    params : dict
        The estimator's parameters.
    kind : {"table", "sequences", "ids"}
        How X was read (see ``skattn._input.formats.input_format``).
    sequences, lengths
        The checked training sequences and their lengths.
    user_weight : ndarray or None
        The caller's sample weights (for the median length).
    init : dict
        The checked ``init`` arrays (``{}`` for "random").
    n_outputs : int
        Outputs of the training head; 0 for none.
    objective : {"classification", "regression"} or None
        What the fit trains for (None: nothing).
    random_state : numpy.random.RandomState
        Draws the seed of a pattern's random layout left to the fit.

    Returns
    -------
    ModelConfig
    """
    vocabulary_size = _vocabulary_size(params["vocabulary_size"], kind, sequences)
    patch_size = _patch_size(
        params["patch_size"], kind, sequences, lengths, user_weight
    )
    n_features = token_width(sequences)
    read_width = n_features * (patch_size or 1)  # of the model's tokens
    n_heads = params["n_heads"]
    d_model = n_heads * _head_dim(params["head_dim"], n_heads, init)
    n_tokens = int(lengths.max())
    token_scale_shape = None
    if params["scale_tokens"] and kind != IDS:  # per feature, or per column
        token_scale_shape = (n_tokens, n_features) if kind == TABLE else (n_features,)
    n_positions = int(patch_count(n_tokens, patch_size)) if patch_size else n_tokens
    return ModelConfig(
        n_features=n_features,
        n_heads=n_heads,
        d_model=d_model,
        n_layers=params["n_layers"],
        ff_dim=params["ff_dim"],
        activation=params["activation"],
        feed_forward=params["feed_forward"],
        layer_norm=params["layer_norm"],
        residual=params["residual"],
        causal=params["causal"],
        attention_pattern=_pattern_config(params, random_state),
        positional_encoding=params["positional_encoding"],
        pooling=_pooling(params["pooling"], kind, patch_size),
        n_positions=n_positions,
        projects_input=kind != IDS and ("input" in init or read_width != d_model),
        token_scale_shape=token_scale_shape,
        patch_size=patch_size,
        n_outputs=n_outputs,
        vocabulary_size=vocabulary_size,
        token_statistics=_token_statistics(
            params["token_statistics"], kind, n_features, patch_size, objective
        ),
    )


def estimator_pattern(params):
    """The attention pattern ``params`` ask for: ``attention_pattern``, or
    the band of its shorthand ``attention_window`` and ``attention_dilation``,
    or full attention.

    Raises
    ------
    ValueError
        For a pattern given with its shorthand, or of parameters it cannot
        take.
    """
    names = ("attention_pattern", "attention_window", "attention_dilation")
    pattern = resolve_pattern(*(params[name] for name in names), names=names)
    return FullAttention() if pattern is None else pattern


def _pattern_config(params, random_state):
    """The pattern of a fit as its configuration holds it; a seed left to
    the fit (None) drawn from ``random_state``."""
    config = pattern_config(ATTENTION_PATTERNS, estimator_pattern(params))
    if "seed" in config and config["seed"] is None:
        config["seed"] = int(random_state.randint(np.iinfo(np.int64).max))
    return config


def pattern_as_given(params, fitted):
    """How ``params`` give their pattern, as the messages of
    :func:`check_structure` show it: the text of its shorthand (None where
    the pattern is given as itself), and the arguments of ``set_params`` that
    set the ``fitted`` pattern back."""
    names = ("attention_window", "attention_dilation")
    shown = None
    if params["attention_pattern"] is None and params["attention_window"] is not None:
        shown = ", ".join(f"{name}={params[name]!r}" for name in names)
    remedy = [f"attention_pattern={fitted!r}"]
    remedy += [
        f"{name}={default!r}"
        for name, default in zip(names, (None, 1), strict=True)
        if params[name] != default
    ]
    return shown, ", ".join(remedy)


def continued_pattern(params, fitted):
    """The pattern ``params`` ask for, a seed left to the fit (None) taken as
    the ``fitted`` pattern's: what continuing training compares with it."""
    pattern = estimator_pattern(params)
    changes = pattern.get_params()
    if changes.get("seed", 0) is None and type(fitted) is type(pattern):
        changes["seed"] = fitted.seed
    return type(pattern)(**changes)


def reads_table_row(params, kind, objective):
    """Whether a fit with ``params`` puts a table's standardised row beside
    the pooled vector (``TABLE_STATISTIC``, in ``token_statistics`` or by
    its ``"auto"``)."""
    if kind != TABLE:
        return False
    patch_size = _patch_size(params["patch_size"], kind, None, None, None)
    names = _token_statistics(
        params["token_statistics"], kind, 1, patch_size, objective
    )
    return TABLE_STATISTIC in names


def _token_statistics(value, kind, n_features, patch_size, objective):
    """The statistics of the tokens after the pooled outputs: those of
    ``token_statistics``. ``"auto"``: all of ``TOKEN_STATISTICS`` for tokens
    of more than ``SERIES_MAX_FEATURES`` features; for a table read without
    patches and trained on classes or targets, its tokens side by side
    (``TABLE_STATISTIC``: its standardised row, so that the head holds the
    linear model of the columns); none for other tokens."""
    if isinstance(value, str):  # "auto"
        if kind == TABLE and objective is not None and patch_size is None:
            return (TABLE_STATISTIC,)
        wide = kind != IDS and n_features > SERIES_MAX_FEATURES
        return TOKEN_STATISTICS if wide else ()
    if value is None:
        return ()
    names = check_token_statistics(value, (*TOKEN_STATISTICS, TABLE_STATISTIC))
    if names and kind == IDS:
        raise ValueError(
            f"token_statistics={list(names)!r} puts statistics of the token "
            "vectors beside the model's outputs, and vocabulary_size reads each "
            "token as an integer id: leave token_statistics='auto' (none for "
            "ids) or None."
        )
    if TABLE_STATISTIC in names and (kind != TABLE or patch_size is not None):
        raise ValueError(
            f"token_statistics={list(names)!r}: {TABLE_STATISTIC!r} puts a "
            "table's tokens side by side, one column per column of the table, "
            "and needs a table read without patches (2D X, patch_size=None); "
            f"got {'patches of a table' if kind == TABLE else 'sequences'}. "
            "Use the other statistics, or pooling='flatten' for sequences of "
            "one length."
        )
    return names


def _vocabulary_size(vocabulary_size, kind, sequences):
    """The size of the embedding table: the parameter, ``"auto"`` the largest
    id plus one; None for tokens that are vectors."""
    if kind != IDS:
        return None
    largest = max(int(ids.max()) for ids in sequences)
    if vocabulary_size == "auto":
        return largest + 1
    if largest >= vocabulary_size:
        raise ValueError(
            f"X holds the token id {largest}, but vocabulary_size="
            f"{vocabulary_size} reads ids from 0 to {vocabulary_size - 1}: pass "
            "a larger vocabulary_size, or 'auto' (the largest id of fit plus one)."
        )
    return vocabulary_size


def _head_dim(head_dim, n_heads, init):
    """Head width: the parameter, else the width ``init`` implies, else the rule."""
    if head_dim is not None:
        return head_dim
    first_layer = init.get("layers", [init])[0]
    place = "init['layers'][0]" if "layers" in init else "init"
    named = [
        (first_layer, key, f"{place}[{key!r}]")
        for key in ("query", "key", "value", "output")
    ]
    named += [(init, key, f"init[{key!r}]") for key in ("input", "embeddings")]
    for source, key, label in named:
        if key in source:
            width = source[key].shape[-1]
            if width % n_heads:
                raise ValueError(
                    f"{label} has {width} columns, which n_heads={n_heads} does "
                    "not divide; its width sets the model width n_heads * head_dim."
                )
            return width // n_heads
    return math.ceil(DEFAULT_D_MODEL / n_heads)


def needs_one_length(pooling):
    """Whether the ``pooling`` parameter reads sequences of one length only
    (``"auto"`` never resolves to such a pooling)."""
    return pooling != "auto" and needs_fixed_length(pooling)


def check_lengths(pooling, lengths, fitted_length=None, seen="the length seen in fit"):
    """Refuse sequences that a pooling of one length (``"flatten"``) cannot
    read.

    Parameters
    ----------
    pooling : str
        The ``pooling`` parameter (in fit) or the fitted pooling.
    lengths : ndarray of int
        Tokens of each sequence.
    fitted_length : int or None, default=None
        Tokens of fit's sequences; None in fit, whose sequences must share
        one length.
    seen : str, default="the length seen in fit"
        Where ``fitted_length`` comes from, for the message.

    Raises
    ------
    ValueError
        Naming the lengths found and the remedy.
    """
    if not needs_one_length(pooling):
        return
    if fitted_length is None and np.any(lengths != lengths[0]):
        raise ValueError(
            f"pooling={pooling!r} needs sequences of one length; got lengths from "
            f"{lengths.min()} to {lengths.max()}. Use another pooling for "
            "sequences of different lengths."
        )
    if fitted_length is not None and np.any(wrong := lengths != fitted_length):
        raise ValueError(
            f"pooling={pooling!r} needs sequences of {fitted_length} tokens, "
            f"{seen}; got {lengths[wrong][0]}."
        )


def _pooling(pooling, kind, patch_size):
    """The pooling: the parameter, or the "auto" rule (the maximum for
    sequences read in patches, else the mean)."""
    if pooling != "auto":
        return pooling
    if kind not in (TABLE, IDS) and patch_size is not None:
        return AUTO_POOLING_PATCHES
    return AUTO_POOLING


def _patch_size(patch_size, kind, sequences, lengths, sample_weight):
    """Tokens per patch: the parameter, or the "auto" rule (from the median
    length, weighted); None for none."""
    if kind == IDS:
        if patch_size not in ("auto", None):
            raise ValueError(
                f"patch_size={patch_size} reads token vectors side by side, and "
                "vocabulary_size reads each token as an id: leave "
                "patch_size='auto' (no patches for ids) or None."
            )
        return None
    if patch_size != "auto":
        return patch_size
    median = None
    if kind != TABLE:
        median = series_median_length(sequences, lengths, sample_weight)
    if median is None or median <= AUTO_PATCH_MIN_LENGTH:
        return None
    return math.ceil(median / AUTO_PATCHES)


def fitted_structure(config, input_format):
    """The parameters that fix a fitted model, with the values it has (what
    ``"auto"`` and None resolved to)."""
    structure = {
        "n_heads": config.n_heads,
        "head_dim": config.d_model // config.n_heads,
        "n_layers": config.n_layers,
        "ff_dim": config.ff_dim,
        "residual": config.residual,
        "causal": config.causal,
        "attention_pattern": pattern_from_config(
            ATTENTION_PATTERNS, config.attention_pattern
        ),
        # every option of a registry: its values are units of the model
        **{name: getattr(config, name) for name in REGISTRIES},
        "vocabulary_size": config.vocabulary_size,
        "patch_size": config.patch_size,
        "features_per_token": input_format["features_per_token"],
        "data_format": input_format["data_format"],
        "token_statistics": list(config.token_statistics) or None,
    }
    if config.vocabulary_size is None:  # ids are not standardised
        structure["scale_tokens"] = config.token_scale_shape is not None
    return structure


def check_structure(params, structure, incremental, given=None):
    """Refuse to continue training a model whose structure a parameter changed.

    A parameter continues the fitted model when it has the fitted value, or is
    the ``"auto"`` (or None) that resolved to it.

    Parameters
    ----------
    params : dict
        The estimator's parameters, ``attention_pattern`` as
        :func:`continued_pattern` resolves it.
    structure : dict
        :func:`fitted_structure` of the fitted model.
    incremental : bool
        Whether the call is ``partial_fit``.
    given : dict, default=None
        For a parameter that others may give (``attention_pattern`` and its
        shorthand), ``(shown, remedy)``: how the caller gave it (None: as
        itself) and the arguments of ``set_params`` that set it back.

    Raises
    ------
    ValueError
        Naming the first parameter that differs from the fitted model, both
        values, and the remedies.
    """
    for name, fitted in structure.items():
        value = params[name]
        if isinstance(value, tuple):  # a list of names, given as a tuple
            value = list(value)
        if name in RESOLVED and _is_value(value, RESOLVED[name]):
            continue
        if _is_value(value, fitted):
            continue
        call = "partial_fit" if incremental else "fit with warm_start=True"
        shown, remedy = f"{name}={value!r}", f"{name}={fitted!r}"
        if given and name in given:
            as_given, remedy = given[name]
            shown = shown if as_given is None else f"{as_given} ({shown})"
        raise ValueError(
            f"Cannot continue training ({call}) with {shown}: the "
            f"model was fitted with {name}={fitted!r}, which fixes its "
            "structure. Call fit with warm_start=False to fit a new model, "
            f"or set it back with set_params({remedy})."
        )


def _is_value(value, expected):
    """Whether a parameter's ``value`` is ``expected``: equal and of the same
    kind (None, a bool, a string or a number: ``True`` does not equal 1)."""
    return _kind(value) == _kind(expected) and value == expected


def _kind(value):
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, list):
        return "list"
    return "str" if isinstance(value, str) else "number"
