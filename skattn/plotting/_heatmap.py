"""Plots of attention, in the style of scikit-learn's ``*Display`` classes.

matplotlib is an optional dependency (the ``[plot]`` extra): it is imported
when a plot is drawn, never when skattn is imported.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._input import CHANNELS_FIRST, IDS, input_format

__all__ = ["AttentionDisplay"]

# A token of a table of at most this many tokens, or a patch, gets a tick each;
# longer sequences get every k-th tick, for at most this many ticks per axis.
MAX_TICKS = 40

CLS_LABEL = "[CLS]"


def _check_matplotlib(caller):
    """Import matplotlib.pyplot, or raise an ImportError naming the extra."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            f"{caller} requires matplotlib, the optional [plot] dependency of "
            'skattn: install it with pip install "skattn[plot]" (or pip install '
            "matplotlib)."
        ) from error
    return plt


class AttentionDisplay:
    """Attention weights as heatmaps: one head, or a grid of all the heads.

    Row ``t`` of a head's heatmap is how much token ``t`` (the query, on the
    vertical axis) attends to each token (the keys, on the horizontal axis);
    each row sums to 1.

    It is recommended to create the display with :meth:`from_estimator`, which
    computes the weights of one sample with
    :meth:`AttentionTransformer.attention_weights
    <skattn.AttentionTransformer.attention_weights>` and labels its tokens. All
    parameters are stored as attributes. Drawing needs matplotlib (``pip
    install "skattn[plot]"``).

    Parameters
    ----------
    weights : ndarray of shape (n_heads, n_tokens, n_tokens) or \
            (n_tokens, n_tokens)
        Attention weights of one sequence: every head, or one.

    token_labels : array-like of str of shape (n_tokens,), default=None
        Labels of the tokens, on both axes. None: their positions, 0 to
        ``n_tokens - 1``.

    Attributes
    ----------
    im_ : matplotlib AxesImage, or ndarray of AxesImage of shape (n_heads,)
        The heatmap of the head drawn, or of each head for a grid.

    ax_ : matplotlib Axes, or ndarray of Axes of shape (n_heads,)
        The axes of the heatmap, or of each head's heatmap for a grid.

    figure_ : matplotlib Figure
        The figure holding the axes.

    colorbar_ : matplotlib Colorbar or None
        The colourbar (one for a grid: the heads share a colour scale); None
        with ``colorbar=False``.

    text_ : ndarray of matplotlib Text of shape (n_tokens, n_tokens), or None
        The values written in the cells of a single head's heatmap
        (``include_values=True``); None otherwise.

    See Also
    --------
    AttentionDisplay.from_estimator : The display of one sample's attention
        in a fitted :class:`~skattn.AttentionTransformer`.
    skattn.AttentionTransformer.attention_weights : The weights of every head
        of one layer, for many samples.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")  # draw off screen
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from skattn import scaled_dot_product_attention
    >>> from skattn.plotting import AttentionDisplay
    >>> Q = K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> _, weights = scaled_dot_product_attention(Q, K, K, return_weights=True)
    >>> display = AttentionDisplay(weights, token_labels=["a", "b", "a+b"])
    >>> display.plot(include_values=True)
    <skattn.plotting.AttentionDisplay object at ...>
    >>> display.im_.get_array().shape
    (3, 3)
    >>> [label.get_text() for label in display.ax_.get_xticklabels()]
    ['a', 'b', 'a+b']
    >>> plt.close("all")
    """

    def __init__(self, weights, *, token_labels=None):
        self.weights = weights
        self.token_labels = token_labels

    def plot(
        self,
        *,
        head=None,
        ax=None,
        cmap="viridis",
        colorbar=True,
        include_values=False,
        values_format=".2f",
        xticks_rotation="vertical",
        im_kw=None,
    ):
        """Draw the heatmap of one head, or a grid of every head.

        Parameters
        ----------
        head : int, default=None
            The head to draw (negative values count from the last). None: all
            the heads, in a grid of about as many rows as columns (one heatmap
            when ``weights`` holds one head).

        ax : matplotlib Axes or array-like of Axes, default=None
            Where to draw. One Axes for one heatmap; for a grid, ``n_heads``
            Axes, or one Axes of a subplot grid whose area the grid fills.
            None: a new figure.

        cmap : str or matplotlib Colormap, default="viridis"
            Colormap of the heatmaps.

        colorbar : bool, default=True
            Whether to add a colourbar (one, shared by the heads of a grid).

        include_values : bool, default=False
            Write each weight in its cell (a single head only; legible for a
            dozen tokens or so).

        values_format : str, default=".2f"
            Format specification of the values written.

        xticks_rotation : {"vertical", "horizontal"} or float, default="vertical"
            Rotation of the labels of the horizontal axis.

        im_kw : dict, default=None
            Keywords passed to :meth:`matplotlib.axes.Axes.imshow`; they override
            the defaults (``cmap``, ``vmin=0``, ``vmax`` the largest weight
            drawn, ``interpolation="nearest"``).

        Returns
        -------
        display : AttentionDisplay
            The display, with its ``figure_``, ``ax_`` and ``im_``.
        """
        plt = _check_matplotlib("AttentionDisplay.plot")
        weights = self._check_weights()
        n_heads, n_tokens = weights.shape[0], weights.shape[1]
        labels = self._labels(n_tokens)
        heads = range(n_heads) if head is None else [_check_head(head, n_heads)]
        grid = len(heads) > 1
        if include_values and grid:
            raise ValueError(
                "include_values=True writes the weights of one head: pass head= "
                "to draw one head, or include_values=False for the grid."
            )
        axes, figure = self._axes(plt, ax, len(heads), grid, labels)

        shown = weights[list(heads)]
        im_kw = {
            "cmap": cmap,
            "vmin": 0.0,
            "vmax": float(shown.max()) if shown.size else 1.0,
            "interpolation": "nearest",
            **(im_kw or {}),
        }
        images = []
        for axis, index in zip(axes, heads, strict=True):
            image = axis.imshow(weights[index], **im_kw)
            images.append(image)
            _label_axes(axis, labels, xticks_rotation, grid)
            if n_heads > 1:
                axis.set_title(f"head {index}")

        self.text_ = None
        if include_values:
            self.text_ = _write_values(
                axes[0], weights[heads[0]], images[0], values_format
            )
        self.colorbar_ = None
        if colorbar:
            self.colorbar_ = figure.colorbar(
                images[0], ax=list(axes) if grid else axes[0]
            )
            self.colorbar_.set_label("attention weight")

        if grid:
            self.ax_ = np.array(axes, dtype=object)
            self.im_ = np.array(images, dtype=object)
        else:
            self.ax_, self.im_ = axes[0], images[0]
        self.figure_ = figure
        return self

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        *,
        sample=0,
        layer=-1,
        head=None,
        token_labels=None,
        ax=None,
        cmap="viridis",
        colorbar=True,
        include_values=False,
        values_format=".2f",
        xticks_rotation="vertical",
        im_kw=None,
    ):
        """The attention of one sample in a fitted attention estimator.

        Computes ``estimator.attention_weights`` of ``X``'s sample ``sample``
        alone (whatever the size of ``X``), labels its tokens and draws them.
        A sequence of a ragged list shows its own tokens only, never padding.

        Parameters
        ----------
        estimator : AttentionTransformer, AttentionClassifier, \
                AttentionRegressor or Pipeline
            A fitted :class:`~skattn.AttentionTransformer`,
            :class:`~skattn.AttentionClassifier` or
            :class:`~skattn.AttentionRegressor` (any fitted estimator with an
            ``attention_weights`` method), or a fitted
            :class:`~sklearn.pipeline.Pipeline` with one as its last step (or
            before steps without attention: the last such step), for which
            ``X`` is the pipeline's input, transformed by the steps before it.
            :class:`~skattn.RandomAttentionFeatures` has no attention to show.

        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Input of the kind the estimator (the pipeline) was fitted on.

        sample : int, default=0
            Which sample of ``X`` (negative values count from the last).

        layer : int, default=-1
            Which encoder layer, counted from 0 (negative values count from the
            last).

        head : int, default=None
            The head to draw; None: a grid of all the heads.

        token_labels : array-like of str, default=None
            Labels of the sample's tokens: one per token of a sequence, or one
            per column of a table (or, as they are, one per token the model
            sees). None: the positions of a sequence's tokens (``0``, ``1``,
            ...), or the column names of a table (a DataFrame's columns, else
            ``x0``, ``x1``, ...), or the words of a text read by a
            transformer of :mod:`skattn.text` just before the estimator in a
            Pipeline. A token that holds several of them (a token of
            ``features_per_token`` columns, a patch of a series) is labelled by
            their range, ``"first-last"``; the class token of ``pooling="cls"``
            (the last token) is ``"[CLS]"``.

        ax : matplotlib Axes or array-like of Axes, default=None
            Where to draw (see :meth:`plot`).

        cmap : str or matplotlib Colormap, default="viridis"
            Colormap of the heatmaps.

        colorbar : bool, default=True
            Whether to add a colourbar.

        include_values : bool, default=False
            Write each weight in its cell (one head only).

        values_format : str, default=".2f"
            Format specification of the values written.

        xticks_rotation : {"vertical", "horizontal"} or float, default="vertical"
            Rotation of the labels of the horizontal axis.

        im_kw : dict, default=None
            Keywords passed to :meth:`matplotlib.axes.Axes.imshow`.

        Returns
        -------
        display : AttentionDisplay
            The display, drawn, with the sample's weights (all the heads of the
            layer) in ``weights``.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")  # draw off screen
        >>> import matplotlib.pyplot as plt
        >>> from skattn import AttentionTransformer
        >>> from skattn.datasets import make_sequence_classification
        >>> from skattn.plotting import AttentionDisplay
        >>> X, y = make_sequence_classification(
        ...     n_samples=50, n_tokens=6, min_tokens=4, random_state=0
        ... )
        >>> [len(sequence) for sequence in X[:3]]  # a ragged list
        [6, 6, 4]
        >>> attn = AttentionTransformer(n_heads=2, random_state=0).fit(X)
        >>> display = AttentionDisplay.from_estimator(attn, X, sample=2)
        >>> display.weights.shape  # 2 heads, the 4 tokens of sample 2
        (2, 4, 4)
        >>> display.ax_.shape  # a grid: one heatmap per head
        (2,)
        >>> one = AttentionDisplay.from_estimator(attn, X, sample=2, head=0)
        >>> [label.get_text() for label in one.ax_.get_yticklabels()]
        ['0', '1', '2', '3']
        >>> plt.close("all")
        """
        _check_matplotlib("AttentionDisplay.from_estimator")
        estimator, X, words = _attention_step(estimator, X)
        fitted_format = input_format(estimator)
        x_sample, n_units, is_table = _select_sample(
            X,
            sample,
            ids=fitted_format["kind"] == IDS,
            channels_first=fitted_format["data_format"] == CHANNELS_FIRST,
        )
        if token_labels is None and words is not None:
            token_labels = words(_check_sample(sample, len(X)))
        weights = estimator.attention_weights(x_sample, layer=layer)[0]
        n_heads = weights.shape[0]
        if head is not None:
            _check_head(head, n_heads)
        labels = _model_token_labels(
            estimator, X, x_sample, n_units, is_table, weights.shape[-1], token_labels
        )
        display = cls(weights, token_labels=labels)
        return display.plot(
            head=head,
            ax=ax,
            cmap=cmap,
            colorbar=colorbar,
            include_values=include_values,
            values_format=values_format,
            xticks_rotation=xticks_rotation,
            im_kw=im_kw,
        )

    # Helpers
    # -------

    def _check_weights(self):
        """``weights`` as an array of shape (n_heads, n_tokens, n_tokens)."""
        weights = np.asarray(self.weights)
        if weights.ndim == 2:
            weights = weights[np.newaxis]
        if weights.ndim != 3 or weights.shape[1] != weights.shape[2]:
            raise ValueError(
                "weights must be the attention weights of one sequence, of shape "
                "(n_heads, n_tokens, n_tokens) or (n_tokens, n_tokens); got shape "
                f"{np.shape(self.weights)}."
            )
        if weights.shape[0] == 0:
            raise ValueError(f"weights holds no head (shape {weights.shape}).")
        return weights

    def _labels(self, n_tokens):
        """The token labels as a list of str, checked against ``n_tokens``."""
        if self.token_labels is None:
            return [str(position) for position in range(n_tokens)]
        labels = [str(label) for label in np.asarray(self.token_labels).ravel()]
        if len(labels) != n_tokens:
            raise ValueError(
                f"token_labels has {len(labels)} labels for weights of {n_tokens} "
                "tokens: give one label per token."
            )
        return labels

    def _axes(self, plt, ax, n_axes, grid, labels):
        """The axes to draw on, and their figure: the user's, or new ones."""
        n_cols = math.ceil(math.sqrt(n_axes))
        n_rows = math.ceil(n_axes / n_cols)
        # room for the tick labels (long column names) beside each heatmap
        margin = 0.08 * min(max(len(label) for label in labels), 30)
        if ax is None:
            if not grid:
                figure, axis = plt.subplots(
                    figsize=(5.2 + margin, 4.2 + margin), layout="constrained"
                )
                return [axis], figure
            figure, axes = plt.subplots(
                n_rows,
                n_cols,
                figsize=((3.4 + margin) * n_cols + 1.2, (3.2 + margin) * n_rows),
                layout="constrained",
                squeeze=False,
            )
            axes = list(axes.ravel())
            for spare in axes[n_axes:]:
                figure.delaxes(spare)
            return axes[:n_axes], figure
        if isinstance(ax, (list, tuple, np.ndarray)):
            axes = list(np.asarray(ax, dtype=object).ravel())
            if len(axes) != n_axes:
                raise ValueError(
                    f"ax holds {len(axes)} Axes, but {n_axes} heatmap(s) are drawn: "
                    f"pass {n_axes} Axes, one Axes with head= for one head, or "
                    "ax=None."
                )
            return axes, axes[0].figure
        if not grid:
            return [ax], ax.figure
        spec = ax.get_subplotspec()
        if spec is None:
            raise ValueError(
                f"ax is one Axes not in a subplot grid, and the {n_axes} heads need "
                f"a grid: pass {n_axes} Axes, pass head= to draw one head, or "
                "create ax with plt.subplots."
            )
        figure = ax.figure
        ax.set_axis_off()  # its area holds the grid, as PartialDependenceDisplay
        inner = spec.subgridspec(n_rows, n_cols)
        axes = [figure.add_subplot(inner[index]) for index in range(n_axes)]
        return axes, figure


def _check_index(value, n_items, name, items, *, none_allowed=False):
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


def _check_head(head, n_heads):
    """The index of ``head`` among ``n_heads`` heads."""
    return _check_index(
        head, n_heads, "head", f"weights of {n_heads} head(s)", none_allowed=True
    )


def _attention_step(estimator, X):
    """The fitted estimator with ``attention_weights``, X as it reads it, and
    the tokens' words.

    For a Pipeline: its last step with ``attention_weights`` and ``X``
    transformed by the steps before it; else ``estimator`` and ``X``. The
    words: a function of a sample's index that gives the words of its
    tokens, when the step just before is a transformer of texts (one with
    ``tokens``, as those of :mod:`skattn.text`); else None.

    Raises
    ------
    TypeError
        For an estimator (or pipeline) without attention weights.
    """
    words = None
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
                X = estimator.steps[index - 1][1].transform(texts)
                words = _words_of(estimator.steps[index - 1][1], texts)
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
            "AttentionDisplay.from_estimator needs a fitted attention estimator "
            "of skattn (AttentionTransformer, AttentionClassifier or "
            "AttentionRegressor: an estimator with attention_weights), or a "
            f"Pipeline with one; got {name}.{hint}"
        )
    check_is_fitted(estimator)
    return estimator, X, words


def _words_of(step, texts):
    """The words of sample ``i``'s tokens, as ``step.tokens`` gives them, or
    None for a step that has no ``tokens``."""
    if not callable(getattr(step, "tokens", None)):
        return None
    return lambda index: step.tokens([list(texts)[index]])[0]


def _select_sample(X, sample, *, ids=False, channels_first=False):
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
        index = _check_sample(sample, n_samples)
        return X.iloc[index : index + 1], X.shape[1], True
    if isinstance(X, np.ndarray) and X.dtype != object:
        if X.ndim not in (2, 3):
            raise ValueError(
                f"X has {X.ndim} dimensions (shape {X.shape}); expected a 2D table, "
                "a 3D array of sequences or a list of 2D sequences."
            )
        index = _check_sample(sample, len(X))
        if X.ndim == 3:
            return X[index : index + 1], X.shape[2 if channels_first else 1], False
        return X[index : index + 1], X.shape[1], not ids
    if not hasattr(X, "__len__") or not hasattr(X, "__getitem__"):
        raise TypeError(
            "X must be a table, a 3D array or a list of sequences, got "
            f"{type(X).__name__}."
        )
    index = _check_sample(sample, len(X))
    row = X[index]
    if hasattr(row, "iloc"):  # a list of DataFrames, one per sequence
        row = row.to_numpy()
    x_sample = [row]
    shape = np.shape(row)
    if len(shape) == 1:  # a table given as a list of rows, or token ids
        return x_sample, shape[0], not ids
    return x_sample, shape[1 if channels_first else 0], False


def _check_sample(sample, n_samples):
    """The index of ``sample`` among the ``n_samples`` samples of X."""
    return _check_index(sample, n_samples, "sample", f"X of {n_samples} sample(s)")


def _model_token_labels(
    estimator, X, x_sample, n_units, is_table, n_model_tokens, token_labels
):
    """Labels of the tokens the model sees, from labels of the input's units.

    A unit is a column of a table or a token of a sequence; a model token holds
    ``features_per_token`` columns of a table, a patch holds ``patch_size_``
    tokens, and the class token of ``pooling="cls"`` comes last.
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
        labels = _column_names(estimator, X, n_units)
    else:
        labels = [str(position) for position in range(n_units)]

    # units -> input tokens: the columns of a table in max_tokens_ tokens
    width = n_units // estimator.max_tokens_ if is_table else 1
    n_tokens = n_units // width
    # input tokens -> model tokens: patches
    patch = getattr(estimator, "patch_size_", None) or 1
    n_patches = math.ceil(n_tokens / patch)
    units_per_token = width * patch
    model_labels = [
        _range_label(
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


def _column_names(estimator, X, n_columns):
    """Names of a table's columns: the DataFrame's, the fitted ones, or x0..."""
    if hasattr(X, "columns"):
        return [str(name) for name in X.columns]
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None and len(names) == n_columns:
        return [str(name) for name in names]
    return [f"x{column}" for column in range(n_columns)]


def _range_label(labels, start, stop):
    """The label of units ``start`` to ``stop - 1``: one label, or "first-last"."""
    if stop - start == 1:
        return labels[start]
    return f"{labels[start]}\N{EN DASH}{labels[stop - 1]}"


def _label_axes(axis, labels, rotation, grid):
    """Token labels on both axes (every k-th one for long sequences)."""
    n_tokens = len(labels)
    step = max(1, math.ceil(n_tokens / MAX_TICKS))
    ticks = np.arange(0, n_tokens, step)
    shown = [labels[tick] for tick in ticks]
    axis.set_xticks(ticks, shown, rotation=rotation)
    axis.set_yticks(ticks, shown)
    axis.set_xlabel("key token (attended to)")
    axis.set_ylabel("query token (attending)")
    if grid:  # shorter labels in the small heatmaps of a grid
        axis.set_xlabel("key")
        axis.set_ylabel("query")


def _write_values(axis, weights, image, values_format):
    """Each weight in its cell, light on dark cells and dark on light ones."""
    text = np.empty(weights.shape, dtype=object)
    low, high = image.norm.vmin, image.norm.vmax
    threshold = (low + high) / 2
    dark, light = image.cmap(0.0), image.cmap(1.0)
    for row in range(weights.shape[0]):
        for column in range(weights.shape[1]):
            value = weights[row, column]
            text[row, column] = axis.text(
                column,
                row,
                format(value, values_format),
                ha="center",
                va="center",
                color=light if value < threshold else dark,
            )
    return text
