"""The text of the parameters and attributes the attention estimators share.

:class:`~skattn.AttentionTransformer`, :class:`~skattn.AttentionClassifier` and
:class:`~skattn.AttentionRegressor` share the model, its training and so most
of their parameters. Each entry below is written once, in numpydoc form;
:func:`fill_docstring` puts into a class docstring the entries of its own
constructor's parameters, in their order, so that a docstring lists exactly
the parameters its class takes. ``{pooled}`` in an entry names what the pooled
vector is for in that class.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import inspect
import textwrap

from .._model.options import ATTENTION_PATTERNS, REGISTRIES


def option_entry(option, default, summary, auto=None):
    """The entry of a parameter whose values are those of the registry of
    ``option``: its type from the registry's values, then ``summary`` and
    each value with its description; with ``auto``, the text of the
    parameter's ``"auto"``, last. ``default`` is a value, or a placeholder
    the class decorator fills (``{pooling_default}``)."""
    registry = REGISTRIES[option]
    choices = registry.choices() + (' or "auto"' if auto else "")
    if default is None:
        default = "None"
    elif not default.startswith("{"):
        default = f'"{default}"'
    text = " ".join([summary, *registry.descriptions(), *([auto] if auto else [])])
    body = textwrap.indent(textwrap.fill(text, 76, break_on_hyphens=False), "    ")
    return f"\n{option} : {choices}, default={default}\n{body}\n"


def pattern_entry():
    """The entry of ``attention_pattern``: its type and each registered
    pattern class with its description."""
    text = " ".join(
        [
            "Which tokens each token attends to, in every layer, an object of",
            ":mod:`skattn.patterns`:",
            *(
                f":class:`~skattn.patterns.{value.__name__}`, {description}"
                for _, value, description in ATTENTION_PATTERNS.items()
            ),
            "None: full attention, or the band of ``attention_window``; give",
            "one or the other. A random layout with ``seed=None`` is drawn",
            "from ``random_state`` in fit and kept. The class token of",
            '``pooling="cls"`` is global (:ref:`banded_attention`).',
        ]
    )
    body = textwrap.indent(textwrap.fill(text, 76, break_on_hyphens=False), "    ")
    return f"\nattention_pattern : attention pattern or None, default=None\n{body}\n"


PARAMETERS = {
    "n_heads": """
n_heads : int, default=4
    Number of attention heads.
""",
    "head_dim": """
head_dim : int, default=None
    Width of each head: ``d_model = n_heads * head_dim``. None: the width
    ``init`` implies, else ``ceil(64 / n_heads)``, a model 64 wide whatever
    the token width (:ref:`default-transformer-head_dim`).
""",
    "n_layers": """
n_layers : int, default=1
    Number of encoder layers stacked.
""",
    "ff_dim": """
ff_dim : int, default=128
    Width of each layer's feed-forward sublayer; 0: none
    (:ref:`default-transformer-ff_dim`).
""",
    "activation": option_entry("activation", "relu", "Feed-forward:"),
    "feed_forward": option_entry(
        "feed_forward", "mlp", "The feed-forward sublayer, ``ff_dim`` wide:"
    ),
    "dropout": """
dropout : float, default=0.0
    Training-only dropout in torch's places (attention weights, sublayer
    outputs, feed-forward activation), drawn from ``random_state`` whatever
    the threads or batches. Needs ``solver="adam"``.
""",
    "layer_norm": option_entry("layer_norm", "post", "Sublayer ``f``'s norm:"),
    "residual": """
residual : bool, default=True
    Add each sublayer's input to its output.
""",
    "causal": """
causal : bool, default=False
    Token ``i`` attends only to tokens ``j <= i`` (the class token of
    ``pooling="cls"``, after the last token, attends to all).
""",
    "attention_window": """
attention_window : int or None, default=None
    The shorthand of ``attention_pattern=BandedAttention(attention_window,
    attention_dilation)``: Longformer's sliding window, linear in the length
    (:ref:`banded_attention`). None: the pattern of ``attention_pattern``.
""",
    "attention_dilation": """
attention_dilation : int, default=1
    The step between the tokens of the band of ``attention_window``.
""",
    "attention_pattern": pattern_entry(),
    "positional_encoding": option_entry(
        "positional_encoding", "sinusoidal", "Token positions:"
    ),
    "pooling": option_entry(
        "pooling",
        "{pooling_default}",
        "The per-token outputs as one vector ({pooled}), over the valid tokens:",
        auto='``"auto"``: ``"max"`` for series read in patches (``patch_size``), '
        '``"mean"`` for other input (:ref:`default-transformer-pooling`).',
    ),
    "vocabulary_size": """
vocabulary_size : int, "auto" or None, default=None
    None: tokens are vectors. An int: each token is an integer id below it
    (as :class:`skattn.text.TokenIds` gives), looked up in a learned table
    ``token_embeddings_``; ``"auto"``: the largest id of fit plus one. Ids
    above it at transform read as 0, the unknown token (:ref:`text`).
""",
    "features_per_token": """
features_per_token : int, default=None
    For a table: consecutive columns per token (None: 1, scalar tokens as in
    FT-Transformer); must divide the number of columns.
""",
    "data_format": """
data_format : {"channels_last", "channels_first"}, default="channels_last"
    Layout of 3D arrays and of a list's arrays: ``(n_tokens, n_features)``
    per sequence, or ``(n_channels, n_timepoints)`` (aeon, sktime), read as
    its transpose (:ref:`input_formats`).
""",
    "scale_tokens": """
scale_tokens : bool, default=True
    Standardise each token feature with its weighted mean and standard
    deviation over fit's valid tokens (per column of a table)
    (:ref:`default-transformer-scale_tokens`).
""",
    "patch_size": """
patch_size : int, "auto" or None, default="auto"
    Read patches of consecutive tokens, side by side, as the model's tokens
    (PatchTST), the last completed with zeros. ``"auto"``: about 32 patches
    for series of at most 8 features per token and a median length above
    64 (:ref:`default-transformer-patch_size`); None: no patches.
""",
    "objective": """
objective : {"auto", "classification", "regression"} or None, default="auto"
    What the weights learn from ``y``: ``"auto"`` from ``type_of_target(y)``
    (class labels by cross-entropy, continuous targets by squared error,
    nothing without ``y``); a task, which then needs ``y``; None: seeded
    weights, ``y`` ignored.
""",
    "token_statistics": """
token_statistics : "auto", list of str or None, default="auto"
    Statistics of the standardised tokens (``"mean"``, ``"max"``, ``"min"``,
    ``"first"``, ``"last"``; a table's row: ``"flatten"``) after the pooled
    vector, which the head ``fit`` refits reads too. ``"auto"``: the first
    five for tokens of over 8 features, ``["flatten"]`` for a table trained
    on ``y`` (:ref:`default-transformer-token_statistics`).
""",
    "init": """
init : "random" or dict, default="random"
    Initial weights: Glorot-uniform from ``random_state``, or a dict of
    arrays, ``"input"`` ``(n_token_features, d_model)`` (or ``"embeddings"``
    ``(vocabulary_size, d_model)``, pretrained vectors), ``"layers"`` a list
    of dicts with the keys of ``layers_``, and any other learned parameter by
    its attribute's name without the underscore (one layer also takes its
    keys at the top level). Missing keys are seeded; arrays are copied.
    ``RandomAttentionFeatures.weights_[m]`` is such a dict.
""",
    "solver": """
solver : {"adam", "lbfgs"}, default="adam"
    Minibatch Adam in float32 (with ``partial_fit`` and early stopping), or
    full-batch L-BFGS-B in the input's precision
    (:ref:`default-transformer-solver`).
""",
    "max_iter": """
max_iter : int, default=200
    Maximum number of epochs (adam) or iterations (lbfgs).
""",
    "learning_rate_init": """
learning_rate_init : float or "auto", default="auto"
    Adam's step size; ``"auto"``: 0.001, 0.002 with early stopping
    (:ref:`default-transformer-learning_rate_init`).
""",
    "batch_size": """
batch_size : int or "auto", default="auto"
    Adam's minibatch; ``"auto"``: ``min(200, n_samples)``, 32 with early
    stopping (:ref:`default-transformer-batch_size`).
""",
    "alpha": """
alpha : float, default=0.0001
    L2 penalty of the weight matrices, class token, pooling query and head,
    relative to the summed sample weight (as in MLPClassifier).
""",
    "tol": """
tol : float, default=1e-4
    Least improvement of an epoch; L-BFGS's gradient tolerance.
""",
    "early_stopping": """
early_stopping : bool or "auto", default="auto"
    Adam: hold out ``validation_fraction`` (stratified), stop when the
    validation score stalls, keep the best weights. ``"auto"``: with
    ``X_val``, from 2,000 samples, from a validation split of 100 for tokens
    of over 8 features (word vectors, encoder states) and of 10 for a table
    whose head reads its row (:ref:`default-transformer-early_stopping`).
""",
    "validation_fraction": """
validation_fraction : float, default=0.1
    Share of the samples held out for early stopping.
""",
    "n_iter_no_change": """
n_iter_no_change : int or "auto", default="auto"
    Epochs without improvement before stopping; ``"auto"``: 3 of the
    validation score, 10 of the training loss
    (:ref:`default-transformer-n_iter_no_change`).
""",
    "shuffle": """
shuffle : bool, default=True
    Shuffle the samples before each epoch.
""",
    "beta_1": """
beta_1 : float, default=0.9
    Decay rate of Adam's first moments, in [0, 1).
""",
    "beta_2": """
beta_2 : float, default=0.999
    Decay rate of Adam's second moments, in [0, 1).
""",
    "epsilon": """
epsilon : float, default=1e-8
    Numerical stability term of Adam.
""",
    "class_weight": """
class_weight : dict, "balanced" or None, default=None
    Weights of the classes, times ``sample_weight``, as in
    :class:`~sklearn.linear_model.LogisticRegression`.
""",
    "warm_start": """
warm_start : bool, default=False
    Continue from the fitted weights at the next ``fit`` (Adam's moments
    afresh); the parameters that fix the model keep their values (Notes).
""",
    "verbose": """
verbose : bool, default=False
    Print the loss (and validation score) of each epoch or iteration.
""",
    "random_state": """
random_state : int, RandomState instance or None, default=None
    Seed of the weights, shuffles, split and dropout.
""",
}

ATTRIBUTE_TEXT = {
    "n_features_in_": """
n_features_in_ : int
    Columns of a table seen in fit, or the token width of sequences.
""",
    "feature_names_in_": """
feature_names_in_ : ndarray of shape (``n_features_in_``,)
    Column names seen in fit, for a DataFrame with string column names.
""",
    "classes_": """
classes_ : ndarray of shape (n_classes,)
    Class labels.
""",
    "objective_": """
objective_ : {"classification", "regression"} or None
    The task learned (None: seeded weights); ``classes_`` for classification.
""",
    "model": """
n_heads_, head_dim_, d_model_, patch_size_, max_tokens_ : int
    The fitted model's heads, head width, width and tokens per patch (None:
    no patches), and the longest sequence of fit (the tokens of a table).

pooling_, token_statistics_ : str, tuple of str
    What the pooled vector holds: the fitted pooling (``pooling="auto"``
    resolved), then the tokens' statistics (empty: none).
""",
    "weights": """
layers_ : list of dict of str to ndarray
    Each encoder layer's weights, ``x @ W`` convention, by torch's module
    names: ``"query"``, ``"key"``, ``"value"`` (the blocks of torch's
    ``self_attn.in_proj_weight``, transposed) and ``"output"``; with layer
    norms ``"norm1_weight"``, ``"norm1_bias"``; with ``ff_dim``
    ``"linear1"``, ``"linear1_bias"``, ``"linear2"``, ``"linear2_bias"``
    (``feed_forward="swiglu"``: ``"linear1"``, ``"linear3"``,
    ``"linear2"``), ``"norm2_weight"``, ``"norm2_bias"``.

input_weights_, token_embeddings_, token_mean_, token_scale_, \
        position_embeddings_, cls_token_, pooling_query_, final_norm_weight_, \
        final_norm_bias_ : ndarray or None
    The input projection, the embeddings of token ids ``(vocabulary_size,
    d_model_)``, the token standardisation, the learned positions, the class
    token, the pooling query and the final layer norm, where the model has
    them (else None).
""",
    "head": """
head_coef_, head_intercept_ : ndarray
    The linear head on the pooled vector, ``(n_pooled, n_outputs)`` and
    ``(n_outputs,)``.
""",
    "training head": """
head_coef_, head_intercept_ : ndarray or None
    The linear head trained on the pooled vector, ``(n_pooled, n_outputs)``
    and ``(n_outputs,)``; None when nothing was learned.
""",
    "training": """
n_iter_, t_ : int
    Epochs (or L-BFGS iterations) run, and samples Adam has seen.

loss_, best_loss_ : float
    Last and lowest training loss.

loss_curve_ : list of float
    Loss of each epoch or iteration.

early_stopping_ : bool
    Whether the last call held out a validation set.

validation_scores_, validation_loss_curve_, best_validation_score_ : \
        list of float or float or None
    The validation score (accuracy or R²) and loss of each epoch, and the
    best score, with early stopping (:ref:`learning`).
""",
}


def fill_docstring(*, pooled, attributes):
    """A class decorator: put the entries of the class's parameters and of
    ``attributes`` into its docstring, at ``{parameters}`` and ``{attributes}``.

    Parameters
    ----------
    pooled : str
        What the pooled vector is for in this class (for ``pooling``).
    attributes : list of str
        Keys of :data:`ATTRIBUTE_TEXT`, in order.
    """

    def decorate(cls):
        if cls.__doc__ is None:  # python -OO
            return cls
        signature = inspect.signature(cls.__init__).parameters
        names = list(signature)[1:]
        parameters = "\n".join(
            PARAMETERS[name].strip() + "\n" for name in names if PARAMETERS[name]
        )
        parameters = parameters.replace("{pooled}", pooled)
        if "pooling" in signature:  # its default differs from class to class
            default = f'"{signature["pooling"].default}"'
            parameters = parameters.replace("{pooling_default}", default)
        attribute_text = "\n".join(
            ATTRIBUTE_TEXT[name].strip() + "\n" for name in attributes
        )
        cls.__doc__ = cls.__doc__.replace(
            "    {parameters}\n", textwrap.indent(parameters, "    ")
        ).replace("    {attributes}\n", textwrap.indent(attribute_text, "    "))
        return cls

    return decorate
