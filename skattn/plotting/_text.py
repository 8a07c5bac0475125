"""TokenAttributionDisplay: one score per token of a sequence, over its words."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import html
import math

import numpy as np
from sklearn.base import is_classifier, is_regressor

from .._model.attribution import pooling_attention, token_attributions
from .._model.sequences import model_dtype
from ._common import (
    attention_step,
    check_index,
    check_matplotlib,
    check_tokens,
    label_strings,
    model_token_labels,
    read_sample,
    reads_patches,
    word_scores,
)

METHODS = ("attribution", "attention")

# The colours of the scores: white at 0, POSITIVE at the largest |score| and
# NEGATIVE at minus it, linear in RGB between them (RdBu's ends).
WHITE = (1.0, 1.0, 1.0)
POSITIVE = (178 / 255, 24 / 255, 43 / 255)  # #b2182b
NEGATIVE = (33 / 255, 102 / 255, 172 / 255)  # #2166ac

# A new figure: TEXT_WIDTH inches wide, MARGIN around the words, and
# COLORBAR_INCHES below them for the colour bar, its ticks and its label.
TEXT_WIDTH, MARGIN, COLORBAR_INCHES = 8.0, 0.2, 0.75
# Around each word's box and between two boxes, and from one line to the next,
# in font sizes.
BOX_PAD, WORD_GAP, LINE_HEIGHT = 0.25, 0.3, 2.0


class TokenAttributionDisplay:
    """Which tokens drive a prediction: one score per token, over its words.

    The words (the token labels) of one sequence are drawn one after the other
    in lines, as a sentence, each on a box coloured by its score: for scores
    of both signs, blue (negative) through white (0) to red (positive), the
    largest ``|score|`` at each end; for scores of one sign (attention
    weights), white (0) to red (the largest).

    In a notebook a display shows once: drawn (after :meth:`plot`, as
    :meth:`from_estimator` returns it), as its matplotlib figure; else as
    HTML (:meth:`_repr_html_`), the words, escaped, on backgrounds of the
    same colours, which needs no matplotlib.

    It is recommended to create the display with :meth:`from_estimator`, which
    computes the scores of one sample with the fitted model's own forward and
    backward passes. All parameters are stored as attributes. Drawing needs
    matplotlib (the ``[plot]`` extra); the HTML does not.

    Parameters
    ----------
    scores : array-like of shape (n_tokens,)
        One finite score per token.

    token_labels : array-like of str of shape (n_tokens,), default=None
        The words of the tokens. None: their positions, 0 to ``n_tokens - 1``.

    score_label : str, default="score"
        What the scores are: the label of the colour bar and of the HTML's
        legend.

    Attributes
    ----------
    text_ : ndarray of matplotlib Text of shape (n_tokens,)
        The words drawn; the box of each is its ``get_bbox_patch()``.

    ax_ : matplotlib Axes
        The axes holding the words (without axis lines).

    figure_ : matplotlib Figure
        The figure holding the axes.

    colorbar_ : matplotlib Colorbar or None
        The colour bar; None with ``colorbar=False``.

    See Also
    --------
    TokenAttributionDisplay.from_estimator : The scores of one sample in a
        fitted :class:`~skattn.AttentionClassifier` or
        :class:`~skattn.AttentionRegressor`.
    AttentionDisplay : The attention weights of every token to every token.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")  # draw off screen
    >>> import matplotlib.pyplot as plt
    >>> from skattn.plotting import TokenAttributionDisplay
    >>> display = TokenAttributionDisplay(
    ...     [0.1, -0.4, 1.2], token_labels=["not", "<b>bad</b>", "at all"]
    ... )
    >>> "&lt;b&gt;bad&lt;/b&gt;" in display._repr_html_()  # a notebook's HTML
    True
    >>> display.plot()
    <...TokenAttributionDisplay object at ...>
    >>> [text.get_text() for text in display.text_]
    ['not', '<b>bad</b>', 'at all']
    >>> display._repr_html_() is None  # drawn: a notebook shows the figure
    True
    >>> plt.close("all")
    """

    def __init__(self, scores, *, token_labels=None, score_label="score"):
        self.scores = scores
        self.token_labels = token_labels
        self.score_label = score_label

    def plot(self, *, ax=None, cmap=None, colorbar=True, fontsize=12):
        """Draw the words, each on a box coloured by its score.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Where to draw: the words fill its width from its top left corner,
            line after line. None: a new figure 8 inches wide, as tall as the
            lines need.

        cmap : str or matplotlib Colormap, default=None
            Colormap of the scores, from ``-max|score|`` to ``max|score|``
            (from 0 for scores of one sign). None: the colours of the HTML
            (see the class description).

        colorbar : bool, default=True
            Whether to add a colour bar, below the words.

        fontsize : float, default=12
            Font size of the words, in points.

        Returns
        -------
        display : TokenAttributionDisplay
            The display, with its ``figure_``, ``ax_``, ``text_`` and
            ``colorbar_``.
        """
        plt = check_matplotlib("TokenAttributionDisplay.plot")
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import LinearSegmentedColormap, Normalize

        scores = self._check_scores()
        labels = self._labels(len(scores))
        largest, signed = _scale(scores)
        unit = _colorbar_unit(largest)
        if cmap is None:
            ends = [NEGATIVE, WHITE, POSITIVE] if signed else [WHITE, POSITIVE]
            cmap = LinearSegmentedColormap.from_list("skattn_scores", ends)
        top = largest / unit
        mappable = ScalarMappable(
            norm=Normalize(-top if signed else 0.0, top), cmap=cmap
        )
        new_figure = ax is None
        if new_figure:
            figure = plt.figure(figsize=(TEXT_WIDTH, 2.0))
            ax = figure.add_axes(
                (MARGIN / TEXT_WIDTH, 0.0, 1 - 2 * MARGIN / TEXT_WIDTH, 1.0)
            )
        figure = ax.figure
        ax.set_axis_off()
        self.colorbar_ = None
        if colorbar and not new_figure:  # it takes its room from ax first
            self.colorbar_ = figure.colorbar(
                mappable, ax=ax, orientation="horizontal", shrink=0.5
            )
        width = ax.get_window_extent().width * 72 / figure.dpi  # points
        colours = mappable.to_rgba(scores / unit)
        self.text_, height = _lay_out(ax, labels, colours, fontsize, width)
        if new_figure:
            below = MARGIN + (COLORBAR_INCHES if colorbar else 0.0)
            text_height = height / 72
            total = below + text_height + MARGIN
            figure.set_size_inches(TEXT_WIDTH, total)
            ax.set_position(
                (
                    MARGIN / TEXT_WIDTH,
                    below / total,
                    1 - 2 * MARGIN / TEXT_WIDTH,
                    text_height / total,
                )
            )
            if colorbar:
                bar = figure.add_axes((0.3, (MARGIN + 0.45) / total, 0.4, 0.12 / total))
                self.colorbar_ = figure.colorbar(
                    mappable, cax=bar, orientation="horizontal"
                )
        if self.colorbar_ is not None:
            label = (
                self.score_label if unit == 1.0 else f"{self.score_label} (× {unit:g})"
            )
            self.colorbar_.set_label(label)
        self.ax_, self.figure_ = ax, figure
        return self

    def _repr_html_(self):
        """The words as HTML: escaped, in order, each on its score's colour;
        None for a display drawn (with ``figure_``), which a notebook shows as
        its figure (IPython shows no HTML for None).

        Each word is a ``<span>`` whose ``title`` holds its score; a legend
        names the scores (``score_label``) and their colour scale.
        """
        if getattr(self, "figure_", None) is not None:
            return None
        scores = self._check_scores()
        labels = self._labels(len(scores))
        largest, signed = _scale(scores)
        spans = []
        for label, score in zip(labels, scores, strict=True):
            colour = _colour(score, largest)
            spans.append(
                f'<span class="skattn-token" title="{score:.4g}" '
                f'style="background-color:'
                f"{_hex(colour)};color:{_hex(_ink(colour))};padding:0.1em 0.25em;"
                f'border-radius:0.25em">{html.escape(label)}</span>'
            )
        low = f"{_swatch(NEGATIVE)} {-largest:.3g} &middot; " if signed else ""
        legend = (
            f"{html.escape(self.score_label)}: {low}{_swatch(WHITE)} 0 &middot; "
            f"{_swatch(POSITIVE)} {largest:.3g}"
        )
        return (
            '<div class="skattn-token-scores" style="line-height:2.2;'
            f'font-family:sans-serif">{" ".join(spans)}'
            f'<div style="font-size:80%;color:#555">{legend}</div></div>'
        )

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        sample=0,
        *,
        method="attribution",
        target=None,
        token_labels=None,
        tokens="words",
        ax=None,
        cmap=None,
        colorbar=True,
        fontsize=12,
    ):
        """The scores of one sample's tokens in a fitted attention estimator.

        Computes one score per token of ``X``'s sample ``sample`` alone and
        draws them over its words.

        - ``method="attribution"``: gradient x input of the score explained
          (``target``), with respect to the tokens as the model reads them:
          the vectors of the embedding table for token ids
          (``vocabulary_size``), else the input tokens (before the token
          standardisation and the patches; one score per input token). The
          score of token ``t`` is ``sum_w x[t, w] * d score / d x[t, w]``,
          from the model's own backward pass on the sample in evaluation
          mode (no dropout), through every path to the head, the statistics
          of the tokens (``token_statistics``) included. The scores sum to the
          gradient . input total; for a model linear in its tokens (no bias
          after them) that is the score minus its value on tokens of zeros.
        - ``method="attention"``: the pooling's attention over the tokens.
          ``pooling="attention"``: the weights of its learned query over the
          last layer's outputs (they sum to 1); ``pooling="cls"``: the last
          layer's attention weights of the class token over the sequence's
          tokens, averaged over the heads (the class token's weight on itself
          left out). One score per token the encoder reads (a patch is one).

        Parameters
        ----------
        estimator : AttentionClassifier, AttentionRegressor, \
                AttentionTransformer or Pipeline
            A fitted :class:`~skattn.AttentionClassifier` or
            :class:`~skattn.AttentionRegressor`, or a fitted
            :class:`~sklearn.pipeline.Pipeline` with one as its last step
            with attention, for which ``X`` is the pipeline's input,
            transformed by the steps before it. An
            :class:`~skattn.AttentionTransformer` (which has no head that
            predicts) takes ``method="attention"`` only.

        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), list of array-like of \
                shape (n_tokens_i, n_features), or list of str
            Input of the kind the estimator (the pipeline) was fitted on.

        sample : int, default=0
            Which sample of ``X`` (negative values count from the last).

        method : {"attribution", "attention"}, default="attribution"
            The scores: gradient x input attributions, or the pooling's
            attention (see above).

        target : class label or int, default=None
            The score explained by ``method="attribution"``. A classifier:
            the class whose score it is, None for the predicted class; the
            score is the class's logit (``decision_function``'s column), and
            for two classes ``decision_function``'s log-odds signed for the
            class (negated for ``classes_[0]``). A regressor: the index of the
            output whose prediction it is, None for a single output. Not used
            by ``method="attention"``.

        token_labels : array-like of str, default=None
            The words of the sample's tokens: one per token of a sequence (or
            column of a table), or one per score. None: the words of a text
            read by a transformer of :mod:`skattn.text` just before the
            estimator in a Pipeline (see ``tokens``), else the positions
            (``0``, ``1``, ...), or a table's column names; as
            :meth:`AttentionDisplay.from_estimator
            <skattn.plotting.AttentionDisplay.from_estimator>` labels them.

        tokens : {"words", "pieces"}, default="words"
            How a text read by a pretrained encoder
            (:class:`~skattn.text.TokenEmbeddings`, whose tokens are word
            pieces) is shown. ``"words"``: one score per word, as written in
            the text (:meth:`TokenEmbeddings.words
            <skattn.text.TokenEmbeddings.words>`), the sum of its pieces'
            scores (gradient x input adds over the tokens, and the pooling's
            weights of a word's pieces add up to the word's), each special
            token (such as ``"[CLS]"``) alone. ``"pieces"``: one score per
            piece (:meth:`TokenEmbeddings.tokens
            <skattn.text.TokenEmbeddings.tokens>`). The pooling's attention of
            a model that reads patches (``patch_size``) is one score per
            patch, labelled by its pieces, either way. Texts of other
            transformers (words already), the other inputs and
            ``token_labels`` are shown as they are.

        ax : matplotlib Axes, default=None
            Where to draw (see :meth:`plot`).

        cmap : str or matplotlib Colormap, default=None
            Colormap of the scores (see :meth:`plot`).

        colorbar : bool, default=True
            Whether to add a colour bar.

        fontsize : float, default=12
            Font size of the words, in points.

        Returns
        -------
        display : TokenAttributionDisplay
            The display, drawn, with the sample's ``scores`` and
            ``token_labels`` (its words' with ``tokens="words"``). A notebook
            shows its figure (:meth:`_repr_html_` returns None).

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")  # draw off screen
        >>> import matplotlib.pyplot as plt
        >>> from sklearn.pipeline import make_pipeline
        >>> from skattn import AttentionClassifier
        >>> from skattn.plotting import TokenAttributionDisplay
        >>> from skattn.text import TokenIds
        >>> texts = ["a good film", "not a good film", "bad", "not bad at all"] * 5
        >>> y = [1, 0, 0, 1] * 5
        >>> model = make_pipeline(
        ...     TokenIds(),
        ...     AttentionClassifier(
        ...         vocabulary_size="auto", pooling="attention", solver="lbfgs",
        ...         max_iter=20, random_state=0,
        ...     ),
        ... ).fit(texts, y)
        >>> display = TokenAttributionDisplay.from_estimator(model, texts, sample=3)
        >>> display.token_labels  # the words of the text, from TokenIds
        ['not', 'bad', 'at', 'all']
        >>> display.scores.shape  # one attribution per word
        (4,)
        >>> attention = TokenAttributionDisplay.from_estimator(
        ...     model, texts, sample=3, method="attention"
        ... )
        >>> round(float(attention.scores.sum()), 6)  # the pooling's weights
        1.0
        >>> plt.close("all")
        """
        check_matplotlib("TokenAttributionDisplay.from_estimator")
        if method not in METHODS:
            raise ValueError(
                f"method must be 'attribution' (gradient x input of the "
                f"prediction) or 'attention' (the pooling's), got {method!r}."
            )
        check_tokens(tokens)
        estimator, X, sources = attention_step(
            estimator, X, "TokenAttributionDisplay.from_estimator"
        )
        model = estimator._fitted.model
        if method == "attention" and not model.pooling.attends:
            raise ValueError(
                f"method='attention' shows the attention of the pooling over the "
                f"tokens, and pooling={model.config.pooling!r} has none: pass "
                "method='attribution' (for an AttentionClassifier or an "
                "AttentionRegressor), or fit with pooling='attention' or "
                "pooling='cls'."
            )
        if method == "attribution":
            _check_predictor(estimator)
        x_sample, n_units, is_table, token_labels, words = read_sample(
            estimator, X, sample, sources, token_labels, tokens
        )
        sequences = estimator._check_sequences(x_sample)
        params = estimator._fitted.cast(model_dtype(sequences))
        x = np.asarray(sequences[0])[np.newaxis]  # the sample alone, unpadded
        lengths = np.array([x.shape[1]])
        if method == "attention":
            scores = pooling_attention(model, params, x, lengths)[0]
            score_label = f"attention of the pooling ({model.config.pooling!r})"
        else:
            weights, score_label = _output_weights(estimator, x_sample, target)
            scores = token_attributions(model, params, x, lengths, weights[None])[0]
        labels = model_token_labels(
            estimator,
            X,
            n_units,
            is_table,
            len(scores),
            token_labels,
            patches=method == "attention",
            sources=sources,
        )
        if method == "attention" and reads_patches(estimator):
            words = None  # one score per patch
        scores, labels = word_scores(scores, labels, words)
        display = cls(scores, token_labels=labels, score_label=score_label)
        return display.plot(ax=ax, cmap=cmap, colorbar=colorbar, fontsize=fontsize)

    # Helpers
    # -------

    def _check_scores(self):
        """``scores`` as a 1-D float array of finite values."""
        scores = np.asarray(self.scores, dtype=float)
        if scores.ndim != 1 or scores.size == 0:
            raise ValueError(
                "scores must hold one score per token of one sequence, of shape "
                f"(n_tokens,); got shape {np.shape(self.scores)}."
            )
        if not np.isfinite(scores).all():
            raise ValueError(
                "scores holds NaN or infinite values: give finite scores (an "
                "infinite attribution comes from overflowing tokens)."
            )
        return scores

    def _labels(self, n_tokens):
        """The token labels as a list of str, checked against ``n_tokens``."""
        return label_strings(self.token_labels, n_tokens, f"{n_tokens} scores")


def _check_predictor(estimator):
    """Raise for an estimator without a head that predicts."""
    if is_classifier(estimator) or is_regressor(estimator):
        return
    raise TypeError(
        "method='attribution' differentiates the prediction of an "
        "AttentionClassifier or an AttentionRegressor (the class score, or the "
        f"predicted target); {type(estimator).__name__} has no head that "
        "predicts (the steps of a pipeline after it are not its model). Pass "
        "method='attention' (pooling='attention' or 'cls'), or predict with an "
        "AttentionClassifier or AttentionRegressor."
    )


def _output_weights(estimator, x_sample, target):
    """The weights of the head's outputs whose sum the attribution explains,
    and what that sum is (the colour bar's label)."""
    n_outputs = estimator.head_coef_.shape[1]
    weights = np.zeros(n_outputs)
    if is_classifier(estimator):
        classes = list(estimator.classes_)
        if target is None:
            target = estimator.predict(x_sample)[0]
        elif target not in classes:
            raise ValueError(
                f"target={target!r} is not a class of the classifier; its classes "
                f"are {[c.item() if hasattr(c, 'item') else c for c in classes]} "
                "(None: the predicted class)."
            )
        index = classes.index(target)
        if n_outputs == 2:  # the log-odds: logit of the class minus the other's
            weights[:] = -1.0
        weights[index] = 1.0
        return weights, f"gradient \N{MULTIPLICATION SIGN} input, class {target}"
    if target is None:
        if n_outputs != 1:
            raise ValueError(
                f"The regressor predicts {n_outputs} outputs: pass target=, the "
                "index of the output to explain."
            )
        target = 0
    index = check_index(target, n_outputs, "target", f"{n_outputs} output(s)")
    weights[index] = np.asarray(estimator._target_scaling()[1]).ravel()[index]
    output = f", output {index}" if n_outputs > 1 else ""
    return weights, f"gradient \N{MULTIPLICATION SIGN} input, prediction{output}"


def _lay_out(ax, labels, colours, fontsize, width):
    """The words on coloured boxes from the top left of ``ax``, in lines of at
    most ``width`` points.

    Returns
    -------
    texts : ndarray of Text of shape (n_tokens,)
    height : float
        Height of the lines, in points.
    """
    from matplotlib.transforms import offset_copy

    figure = ax.figure
    pad, gap, line = BOX_PAD * fontsize, WORD_GAP * fontsize, LINE_HEIGHT * fontsize
    texts = np.empty(len(labels), dtype=object)
    x = y = 0.0
    for index, (label, colour) in enumerate(zip(labels, colours, strict=True)):
        text = ax.text(
            0.0,
            1.0,
            label,
            fontsize=fontsize,
            color=_ink(colour[:3]),
            ha="left",
            va="top",
            parse_math=False,
            bbox={
                "boxstyle": f"square,pad={BOX_PAD}",
                "facecolor": colour,
                "edgecolor": "none",
            },
        )
        word = text.get_window_extent().width * 72 / figure.dpi  # points
        if x > 0 and x + word + 2 * pad > width:  # a new line
            x, y = 0.0, y + line
        text.set_transform(
            offset_copy(ax.transAxes, figure, x=x + pad, y=-(y + pad), units="points")
        )
        texts[index] = text
        x += word + 2 * pad + gap
    return texts, y + line


def _scale(scores):
    """The largest ``|score|`` (1 for scores of zeros) and whether any score
    is negative."""
    largest = float(np.max(np.abs(scores)))
    return (largest if largest > 0 else 1.0), bool(np.any(scores < 0))


def _colorbar_unit(largest):
    """The unit the colour bar reads scores in: 1, or for a largest ``|score|``
    whose range (twice it) overflows a float, its power of ten."""
    if math.isfinite(2 * largest):
        return 1.0
    return 10.0 ** math.floor(math.log10(largest))


def _colour(score, largest):
    """RGB of ``score``: white at 0, to POSITIVE at ``largest``, NEGATIVE at
    ``-largest``."""
    end = np.array(POSITIVE if score >= 0 else NEGATIVE)
    return tuple(np.array(WHITE) + min(abs(score) / largest, 1.0) * (end - WHITE))


def _ink(colour):
    """Black on light backgrounds, white on dark ones."""
    red, green, blue = colour[:3]
    light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
    return (0.0, 0.0, 0.0) if light else (1.0, 1.0, 1.0)


def _hex(colour):
    """``#rrggbb`` of an RGB triple in [0, 1]."""
    return "#" + "".join(f"{round(255 * channel):02x}" for channel in colour[:3])


def _swatch(colour):
    """A small square of ``colour``, for the HTML legend."""
    return (
        f'<span style="display:inline-block;width:0.8em;height:0.8em;'
        f'background-color:{_hex(colour)};border:1px solid #999"></span>'
    )
