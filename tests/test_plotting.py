"""AttentionDisplay: the image is the weights, the labels are the tokens'."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import builtins
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

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


def test_table_labels_groups_and_cls():
    """features_per_token groups are labelled by their column range, the class
    token "[CLS]"; a numpy table's columns are x0, x1, ..."""
    rng = np.random.RandomState(3)
    X = rng.standard_normal((8, 6))
    attn = seeded(features_per_token=2, pooling="cls").fit(X)
    display = AttentionDisplay.from_estimator(attn, X, head=0)
    assert tick_texts(display.ax_.get_yticklabels()) == [
        "x0\N{EN DASH}x1",
        "x2\N{EN DASH}x3",
        "x4\N{EN DASH}x5",
        "[CLS]",
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
    """With data_format="channels_first" the patches were labelled 0, 1, 2
    and one label per time point was refused: the channels were counted as
    the tokens."""
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
    assert tick_texts(display.ax_.get_xticklabels()) == [*labels[:6], "[CLS]"]
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


def test_long_sequences_get_fewer_ticks():
    weights = np.full((100, 100), 0.01)
    display = AttentionDisplay(weights).plot()
    texts = tick_texts(display.ax_.get_xticklabels())
    assert 10 <= len(texts) <= 40 and texts[:2] == ["0", "3"]


def test_missing_matplotlib(monkeypatch, sequences):
    attn = seeded().fit(sequences)
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    for module in list(sys.modules):
        if module == "matplotlib" or module.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    message = r'pip install "skattn\[plot\]"'
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
