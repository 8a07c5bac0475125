"""AttentionDisplay: attention weights as heatmaps, every token labelled."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from ._common import (
    attention_step,
    check_index,
    check_matplotlib,
    check_tokens,
    label_strings,
    model_token_labels,
    read_sample,
    reads_patches,
    word_weights,
)

# Every token gets its tick label, up to MAX_LABELS tokens (MAX_GRID_LABELS
# in each heatmap of a grid of heads); a longer sequence gets every k-th,
# k = ceil(n_tokens / MAX_LABELS), so that at most MAX_LABELS are shown.
MAX_LABELS = 100
MAX_GRID_LABELS = 50
# A heatmap on a new figure gets TOKEN_INCHES a token a side: at most
# MAX_LABELS * TOKEN_INCHES inches (MAX_GRID_LABELS * TOKEN_INCHES in a grid),
# at least MIN_SIDE (MIN_GRID_SIDE).
TOKEN_INCHES = 0.18
MIN_SIDE, MIN_GRID_SIDE = 3.0, 2.4
# A tick label's font is LABEL_FONT_FRACTION of the space between two labels,
# within [MIN_FONT, MAX_FONT] points.
LABEL_FONT_FRACTION = 0.7
MIN_FONT, MAX_FONT = 4.0, 10.0


class AttentionDisplay:
    """Attention weights as heatmaps: one head, or a grid of all the heads.

    Row ``t`` of a head's heatmap is how much token ``t`` (the query, on the
    vertical axis) attends to each token (the keys, on the horizontal axis);
    each row sums to 1.

    Every token gets its tick label up to 100 tokens (50 in each heatmap of a
    grid of heads); a longer sequence gets every k-th label, ``k =
    ceil(n_tokens / 100)`` (``/ 50`` in a grid). A new figure grows with the
    tokens, 0.18 in a token a side (a heatmap of 3 to 18 in; 2.4 to 9 in in a
    grid), and the labels' font fits the space of a label (4 to 10 points).

    It is recommended to create the display with :meth:`from_estimator`, which
    computes the weights of one sample with
    :meth:`AttentionTransformer.attention_weights
    <skattn.AttentionTransformer.attention_weights>` and labels its tokens. All
    parameters are stored as attributes. Drawing needs matplotlib (the
    ``[plot]`` extra).

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
    <...AttentionDisplay object at ...>
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
            None: a new figure, sized to the tokens. On given axes the labels'
            font fits their size as they are before drawing.

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
        plt = check_matplotlib("AttentionDisplay.plot")
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
        axes, figure, side = self._axes(plt, ax, len(heads), grid, labels)

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
            _label_axes(axis, labels, xticks_rotation, grid, side)
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
        tokens="words",
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
            (the last token) is ``"<cls>"``, told from the ``"[CLS]"`` word
            piece that a pretrained encoder (:class:`~skattn.text.TokenEmbeddings`)
            puts first. The column names of a table read through the steps of
            a Pipeline: those the steps before the estimator put out
            (``get_feature_names_out``, when it gives one name per column),
            else the estimator's ``feature_names_in_``, else the columns of
            ``X`` (a DataFrame).

        tokens : {"words", "pieces"}, default="words"
            How a text read by a pretrained encoder
            (:class:`~skattn.text.TokenEmbeddings`, whose tokens are word
            pieces) is shown. ``"words"``: one row and one column per word,
            as written in the text (:meth:`TokenEmbeddings.words
            <skattn.text.TokenEmbeddings.words>`), each special token (such
            as ``"[CLS]"``) and the class token alone: a word attends to
            another with the sum of its pieces' weights on the other's pieces,
            averaged over its own pieces (each row still sums to 1).
            ``"pieces"``: one row and one column per piece
            (:meth:`TokenEmbeddings.tokens
            <skattn.text.TokenEmbeddings.tokens>`). A model that reads patches
            (``patch_size``) shows its patches, labelled by their pieces,
            either way. Texts of other transformers (words already), the other
            inputs and ``token_labels`` are shown as they are.

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
            layer, between its words with ``tokens="words"``) in ``weights``.

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
        check_matplotlib("AttentionDisplay.from_estimator")
        check_tokens(tokens)
        estimator, X, sources = attention_step(
            estimator, X, "AttentionDisplay.from_estimator"
        )
        x_sample, n_units, is_table, token_labels, words = read_sample(
            estimator, X, sample, sources, token_labels, tokens
        )
        weights = estimator.attention_weights(x_sample, layer=layer)[0]
        n_heads = weights.shape[0]
        if head is not None:
            _check_head(head, n_heads)
        labels = model_token_labels(
            estimator,
            X,
            n_units,
            is_table,
            weights.shape[-1],
            token_labels,
            sources=sources,
        )
        if not reads_patches(estimator):
            weights, labels = word_weights(weights, labels, words)
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
        if weights.shape[1] == 0:
            raise ValueError(
                f"weights hold no token (shape {np.shape(self.weights)}): give "
                "the attention weights of a sequence of one token or more."
            )
        return weights

    def _labels(self, n_tokens):
        """The token labels as a list of str, checked against ``n_tokens``."""
        return label_strings(
            self.token_labels, n_tokens, f"weights of {n_tokens} tokens"
        )

    def _axes(self, plt, ax, n_axes, grid, labels):
        """The axes to draw on, their figure and the side of a heatmap in
        inches: the user's axes (side None: their own), or a new figure sized
        to the tokens."""
        n_cols = math.ceil(math.sqrt(n_axes))
        n_rows = math.ceil(n_axes / n_cols)
        if ax is None:
            side = _heatmap_side(len(labels), grid)
            # room for the tick labels (long column names) beside each heatmap
            fontsize = _label_font(side, len(labels), grid)
            margin = 0.6 * fontsize / 72 * min(max(len(label) for label in labels), 30)
            if not grid:
                figure, axis = plt.subplots(
                    figsize=(side + margin + 1.6, side + margin + 0.8),
                    layout="constrained",
                )
                return [axis], figure, side
            figure, axes = plt.subplots(
                n_rows,
                n_cols,
                figsize=(
                    (side + margin + 0.6) * n_cols + 1.2,
                    (side + margin + 0.7) * n_rows,
                ),
                layout="constrained",
                squeeze=False,
            )
            axes = list(axes.ravel())
            for spare in axes[n_axes:]:
                figure.delaxes(spare)
            return axes[:n_axes], figure, side
        if isinstance(ax, (list, tuple, np.ndarray)):
            axes = list(np.asarray(ax, dtype=object).ravel())
            if len(axes) != n_axes:
                raise ValueError(
                    f"ax holds {len(axes)} Axes, but {n_axes} heatmap(s) are drawn: "
                    f"pass {n_axes} Axes, one Axes with head= for one head, or "
                    "ax=None."
                )
            return axes, axes[0].figure, None
        if not grid:
            return [ax], ax.figure, None
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
        return axes, figure, None


def _check_head(head, n_heads):
    """The index of ``head`` among ``n_heads`` heads."""
    return check_index(
        head, n_heads, "head", f"weights of {n_heads} head(s)", none_allowed=True
    )


def _label_step(n_tokens, grid):
    """Every how many tokens a tick label goes: 1 up to ``MAX_LABELS`` tokens
    (``MAX_GRID_LABELS`` in a grid), then so that at most that many show."""
    return max(1, math.ceil(n_tokens / (MAX_GRID_LABELS if grid else MAX_LABELS)))


def _heatmap_side(n_tokens, grid):
    """Side in inches of a heatmap of ``n_tokens`` tokens on a new figure."""
    most = (MAX_GRID_LABELS if grid else MAX_LABELS) * TOKEN_INCHES
    return min(max(n_tokens * TOKEN_INCHES, MIN_GRID_SIDE if grid else MIN_SIDE), most)


def _label_font(side, n_tokens, grid):
    """Font size in points of the tick labels of ``n_tokens`` tokens on a
    heatmap of ``side`` inches."""
    n_labels = math.ceil(n_tokens / _label_step(n_tokens, grid))
    size = LABEL_FONT_FRACTION * side * 72 / n_labels
    return min(max(size, MIN_FONT), MAX_FONT)


def _label_axes(axis, labels, rotation, grid, side):
    """Token labels on both axes (see ``MAX_LABELS``), in a font that fits a
    heatmap of ``side`` inches (None: the axes' size)."""
    n_tokens = len(labels)
    ticks = np.arange(0, n_tokens, _label_step(n_tokens, grid))
    if side is None:  # the user's axes
        extent = axis.get_window_extent()
        side = min(extent.width, extent.height) / axis.figure.dpi
    fontsize = _label_font(side, n_tokens, grid)
    shown = [labels[tick] for tick in ticks]
    axis.set_xticks(ticks, shown, rotation=rotation, fontsize=fontsize)
    axis.set_yticks(ticks, shown, fontsize=fontsize)
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
