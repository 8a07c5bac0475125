"""What the displays share: matplotlib on demand, the estimator and the sample
to show, and the labels of the tokens the model reads."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from collections import namedtuple
from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._input.formats import CHANNELS_FIRST, IDS, input_format

# The label of the class token of pooling="cls" (the model's, the last token):
# not "[CLS]", the first word piece of BERT-style encoders (TokenEmbeddings),
# which comes first in the same sequence.
CLS_LABEL = "<cls>"

# The units the tokens of a text are shown as (tokens= of the displays).
TOKEN_UNITS = ("words", "pieces")

# What labels the tokens of the step with attention, besides the data it
# reads: the transformer of texts just before it and the texts it reads
# (None, None without one), and the names of a table's columns that the
# pipeline carries: those its steps before the attention step put out, and
# the columns of its input DataFrame (None where there are none).
Sources = namedtuple("Sources", "text_step texts feature_names input_columns")
NO_SOURCES = Sources(None, None, None, None)


def check_matplotlib(caller):
    """Import matplotlib.pyplot, or raise an ImportError naming the extra."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            f"{caller} requires matplotlib: pip install matplotlib, or the "
            'optional [plot] extra of skattn (pip install ".[plot]" from a clone '
            "of its repository)."
        ) from error
    return plt


def check_index(value, n_items, name, items, *, none_allowed=False):
    """The index in ``range(n_items)`` of ``value`` (negative counts back).

    ``name`` is the parameter, ``items`` says what is counted, and
    ``none_allowed`` whether the parameter also takes None (for the message).
    """
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, Integral)
        or not -n_items <= value < n_items
    ):
        raise ValueError(
            f"{name} must be {'None or ' if none_allowed else ''}an integer in "
            f"[-{n_items}, {n_items}) for {items}, got {value!r}."
        )
    return int(value) % n_items


def check_tokens(tokens):
    """Raise a ValueError for a ``tokens`` that is not one of TOKEN_UNITS."""
    if tokens not in TOKEN_UNITS:
        raise ValueError(
            "tokens must be 'words' (the word pieces of a pretrained encoder "
            "merged into the words they come from) or 'pieces' (each word piece "
            f"alone), got {tokens!r}."
        )


def attention_step(estimator, X, caller):
    """The fitted estimator with ``attention_weights``, X as it reads it, and
    the sources of its tokens' labels.

    For a Pipeline: its last step with ``attention_weights`` and ``X``
    transformed by the steps before it; else ``estimator`` and ``X``. The
    sources (:data:`Sources`): the step just before, when it is a transformer
    of texts (one with ``tokens``, as those of :mod:`skattn.text`), and the
    texts it reads; the feature names the steps before put out
    (``get_feature_names_out``), and the columns of ``X`` when it is a
    DataFrame. ``caller`` names the method in messages.

    Raises
    ------
    TypeError
        For an estimator (or pipeline) without attention weights.
    """
    sources = NO_SOURCES._replace(input_columns=_columns(X))
    if hasattr(estimator, "steps"):  # a Pipeline
        check_is_fitted(estimator)
        with_attention = [
            index
            for index, (_, step) in enumerate(estimator.steps)
            if callable(getattr(step, "attention_weights", None))
        ]
        if with_attention:
            index = with_attention[-1]
            if index:
                texts = estimator[: index - 1].transform(X) if index > 1 else X
                step = estimator.steps[index - 1][1]
                X = step.transform(texts)
                if callable(getattr(step, "tokens", None)):
                    sources = sources._replace(text_step=step, texts=list(texts))
                else:
                    names = _feature_names_out(estimator[:index])
                    sources = sources._replace(feature_names=names)
            estimator = estimator.steps[index][1]
    if not callable(getattr(estimator, "attention_weights", None)):
        name = type(estimator).__name__
        hint = ""
        if hasattr(estimator, "steps"):
            hint = " None of the pipeline's steps has attention_weights."
        elif name == "RandomAttentionFeatures":
            hint = (
                " RandomAttentionFeatures has none: its many seeded models have no "
                "one set of weights to show."
            )
        raise TypeError(
            f"{caller} needs a fitted attention estimator of skattn "
            "(AttentionTransformer, AttentionClassifier or AttentionRegressor: "
            "an estimator with attention_weights), or a Pipeline with one; got "
            f"{name}.{hint}"
        )
    check_is_fitted(estimator)
    return estimator, X, sources


def _columns(X):
    """The column names of a DataFrame ``X``, else None."""
    if hasattr(X, "columns") and getattr(X, "ndim", 2) == 2:
        return [str(name) for name in X.columns]
    return None


def _feature_names_out(steps):
    """The feature names a fitted pipeline of transformers puts out, or None
    when one of its steps cannot tell them (no ``get_feature_names_out``, or
    one that refuses)."""
    try:
        names = steps.get_feature_names_out()
    except (AttributeError, TypeError, ValueError):
        return None
    return [str(name) for name in names]


def select_sample(X, sample, *, ids=False, channels_first=False):
    """X's sample ``sample`` alone, as input of the same kind.

    ``ids``: X holds token ids (``vocabulary_size``), a 2D array or a list of
    1-D arrays of one id per token. ``channels_first``: its sequences are
    ``(n_channels, n_timepoints)``, whose time points are the tokens.

    Returns
    -------
    x_sample : DataFrame, ndarray or list
        A one-sample table, 3D array or list of one sequence.
    n_units : int
        The sample's columns (table) or tokens (sequence).
    is_table : bool
        Whether X is a table.
    """
    if hasattr(X, "iloc") and getattr(X, "ndim", 2) == 2:  # a DataFrame
        n_samples = len(X)
        index = check_sample(sample, n_samples)
        return X.iloc[index : index + 1], X.shape[1], True
    if isinstance(X, np.ndarray) and X.dtype != object:
        if X.ndim not in (2, 3):
            raise ValueError(
                f"X has {X.ndim} dimensions (shape {X.shape}); expected a 2D table, "
                "a 3D array of sequences or a list of 2D sequences."
            )
        index = check_sample(sample, len(X))
        if X.ndim == 3:
            return X[index : index + 1], X.shape[2 if channels_first else 1], False
        return X[index : index + 1], X.shape[1], not ids
    if not hasattr(X, "__len__") or not hasattr(X, "__getitem__"):
        raise TypeError(
            "X must be a table, a 3D array or a list of sequences, got "
            f"{type(X).__name__}."
        )
    index = check_sample(sample, len(X))
    row = X[index]
    if hasattr(row, "iloc"):  # a list of DataFrames, one per sequence
        row = row.to_numpy()
    x_sample = [row]
    shape = np.shape(row)
    if len(shape) == 1:  # a table given as a list of rows, or token ids
        return x_sample, shape[0], not ids
    return x_sample, shape[1 if channels_first else 0], False


def check_sample(sample, n_samples):
    """The index of ``sample`` among the ``n_samples`` samples of X."""
    return check_index(sample, n_samples, "sample", f"X of {n_samples} sample(s)")


def model_token_labels(
    estimator,
    X,
    n_units,
    is_table,
    n_model_tokens,
    token_labels,
    *,
    patches=True,
    sources=NO_SOURCES,
):
    """Labels of the tokens the model sees, from labels of the input's units.

    A unit is a column of a table (named as :func:`column_names` names it,
    from ``sources``) or a token of a sequence; a model token holds
    ``features_per_token`` columns of a table, a patch holds ``patch_size_``
    tokens (with ``patches``; without, the tokens are those the model reads,
    before its patches), and the class token of ``pooling="cls"`` comes last,
    labelled ``CLS_LABEL``.
    """
    if token_labels is not None:
        labels = [str(label) for label in np.asarray(token_labels).ravel()]
        if len(labels) == n_model_tokens:
            return labels
        if len(labels) != n_units:
            unit = "column of the table" if is_table else "token of the sequence"
            raise ValueError(
                f"token_labels has {len(labels)} labels; expected one per {unit} "
                f"({n_units}) or one per token the model sees ({n_model_tokens})."
            )
    elif is_table:
        labels = column_names(estimator, X, n_units, sources)
    else:
        labels = [str(position) for position in range(n_units)]

    # units -> input tokens: the columns of a table in max_tokens_ tokens
    width = n_units // estimator.max_tokens_ if is_table else 1
    n_tokens = n_units // width
    # input tokens -> model tokens: patches
    patch = (getattr(estimator, "patch_size_", None) or 1) if patches else 1
    n_patches = math.ceil(n_tokens / patch)
    units_per_token = width * patch
    model_labels = [
        range_label(
            labels, start * units_per_token, min((start + 1) * patch, n_tokens) * width
        )
        for start in range(n_patches)
    ]
    extra = n_model_tokens - n_patches
    if extra == 1:  # pooling="cls": the class token, last
        model_labels.append(CLS_LABEL)
    elif extra != 0:  # pragma: no cover - a model layout this module ignores
        return [str(position) for position in range(n_model_tokens)]
    return model_labels


def column_names(estimator, X, n_columns, sources=NO_SOURCES):
    """Names of the ``n_columns`` columns of the table ``X`` that ``estimator``
    reads: the first of these that gives one name per column, else ``x0``,
    ``x1``, ...: the feature names the steps of a pipeline before it put out,
    the names ``estimator`` was fitted on (``feature_names_in_``), the columns
    of ``X`` (a DataFrame), those of the pipeline's input DataFrame."""
    candidates = (
        sources.feature_names,
        getattr(estimator, "feature_names_in_", None),
        _columns(X),
        sources.input_columns,
    )
    for names in candidates:
        if names is not None and len(names) == n_columns:
            return [str(name) for name in names]
    return [f"x{column}" for column in range(n_columns)]


def range_label(labels, start, stop):
    """The label of units ``start`` to ``stop - 1``: one label, or "first-last"."""
    if stop - start == 1:
        return labels[start]
    return f"{labels[start]}\N{EN DASH}{labels[stop - 1]}"


def label_strings(token_labels, n_tokens, of):
    """The labels of ``n_tokens`` tokens as a list of str (their positions
    when ``token_labels`` is None), checked to be one per token; ``of`` names
    what is labelled, for the message ("weights of 5 tokens")."""
    if token_labels is None:
        return [str(position) for position in range(n_tokens)]
    labels = [str(label) for label in np.asarray(token_labels).ravel()]
    if len(labels) != n_tokens:
        raise ValueError(
            f"token_labels has {len(labels)} labels for {of}: give one label per token."
        )
    return labels


def read_sample(estimator, X, sample, sources, token_labels, tokens):
    """Sample ``sample`` of ``X`` as ``estimator`` reads it (see
    :func:`select_sample`), its token labels, and its words.

    The token labels: ``token_labels`` when given, else the tokens of a text
    pipeline's transformer of texts (``sources.text_step.tokens``). The words,
    with ``tokens="words"`` and no ``token_labels``, for a transformer of
    texts with ``words`` (:class:`~skattn.text.TokenEmbeddings`, whose tokens
    are word pieces): the sample's words and the index of each token's word,
    as ``words`` gives them; else None.

    Returns
    -------
    x_sample, n_units, is_table
        As :func:`select_sample` returns them.
    token_labels : list of str or None
    words : tuple of (list of str, ndarray of int) or None
    """
    fitted_format = input_format(estimator)
    x_sample, n_units, is_table = select_sample(
        X,
        sample,
        ids=fitted_format["kind"] == IDS,
        channels_first=fitted_format["data_format"] == CHANNELS_FIRST,
    )
    words = None
    step = sources.text_step
    if token_labels is None and step is not None:
        text = [sources.texts[check_sample(sample, len(X))]]
        token_labels = step.tokens(text)[0]
        if tokens == "words" and callable(getattr(step, "words", None)):
            (labels,), (index,) = step.words(text)
            words = labels, np.asarray(index)
    return x_sample, n_units, is_table, token_labels, words


def word_scores(scores, labels, words):
    """The scores of the words and their labels: each the sum of the scores
    of its tokens, for ``words`` (see :func:`read_sample`) of one score per
    token; without ``words`` (the caller's choice for patches), ``scores``
    and ``labels`` as they are."""
    if words is None:
        return scores, labels
    word_labels, index = words
    summed = np.bincount(index, weights=scores, minlength=len(word_labels))
    return summed, list(word_labels)


def reads_patches(estimator):
    """Whether the model reads patches of several tokens (``patch_size_``)."""
    return (getattr(estimator, "patch_size_", None) or 1) > 1


def word_weights(weights, labels, words):
    """Attention weights of shape (n_heads, n_tokens, n_tokens) between the
    words and their labels: a word attends to another with the sum of its
    tokens' weights on the other's tokens, averaged over its own tokens (each
    row still sums to 1). A class token after the tokens (``pooling="cls"``)
    is a word alone. Without ``words`` (the caller's choice for patches),
    ``weights`` and ``labels`` as they are."""
    if words is None:
        return weights, labels
    word_labels, index = words
    n_tokens, n_words = weights.shape[-1], len(word_labels)
    if n_tokens == len(index) + 1 and labels[-1] == CLS_LABEL:
        index = np.append(index, n_words)
        word_labels = [*word_labels, CLS_LABEL]
        n_words += 1
    members = np.zeros((n_tokens, n_words), dtype=weights.dtype)
    members[np.arange(n_tokens), index] = 1.0
    summed = np.einsum("tu,htk,kv->huv", members, weights, members)
    return summed / members.sum(axis=0)[:, np.newaxis], list(word_labels)
