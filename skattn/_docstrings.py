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

PARAMETERS = {
    "n_heads": """
n_heads : int, default=4
    Number of attention heads.
""",
    "head_dim": """
head_dim : int, default=None
    Width of each head; the model width is ``d_model = n_heads * head_dim``.
    None: the width ``init`` implies, else ``ceil(64 / n_heads)``: a model 64
    wide whatever the token width (:ref:`default-transformer-head_dim`). When
    ``d_model`` equals the width of the model's tokens and ``init`` has no
    ``"input"``, the tokens enter the first layer as they are.
""",
    "n_layers": """
n_layers : int, default=1
    Number of encoder layers stacked.
""",
    "ff_dim": """
ff_dim : int, default=128
    Width of each layer's feed-forward sublayer,
    ``linear2(activation(linear1(x)))`` with biases; 0: none, each layer is
    self-attention only (:ref:`default-transformer-ff_dim`).
""",
    "activation": """
activation : {"relu", "gelu"}, default="relu"
    Activation of the feed-forward sublayer; ``"gelu"`` is the exact GELU
    (with the error function), torch's.
""",
    "dropout": """
dropout : float, default=0.0
    Training-only dropout rate, in torch's places: on the attention weights,
    on each sublayer's output before the residual sum, after the feed-forward
    activation. The masks come from ``random_state`` and do not depend on
    the threads or batches. Needs ``solver="adam"``.
""",
    "layer_norm": """
layer_norm : {"post", "pre"} or None, default="post"
    Where each sublayer normalises the tokens (with gain and bias):
    ``"post"``, ``norm(x + sublayer(x))`` (torch's ``norm_first=False``);
    ``"pre"``, ``x + sublayer(norm(x))`` with one final layer norm after the
    last layer (``norm_first=True``); None: nowhere.
""",
    "residual": """
residual : bool, default=True
    Add each sublayer's input to its output.
""",
    "causal": """
causal : bool, default=False
    Token ``i`` attends only to tokens ``j <= i``, in every layer (the class
    token of ``pooling="cls"``, after the last token, attends to all).
""",
    "positional_encoding": """
positional_encoding : {"sinusoidal", "learned"} or None, default="sinusoidal"
    Added to the projected tokens: the fixed encoding of Vaswani et al.
    (2017); a table of one vector per position up to the longest sequence
    of fit, learned from the sinusoidal start (positions beyond it use the
    sinusoidal encoding); or none, and the per-token outputs are then
    permutation-equivariant.
""",
    "pooling": """
pooling : {"mean", "max", "first", "last", "cls", "attention", "flatten"}, \
        default="mean"
    How the per-token outputs become one vector per sample ({pooled}), over
    the tokens a sequence has, never its padding: their mean or maximum
    (feature-wise); the first or last token; ``"cls"``, a learned class token
    appended after the last token, its output; ``"attention"``, a learned
    query attending over the tokens; ``"flatten"``, all tokens side by side
    (``n_tokens * d_model`` features; every sequence of fit's length).
""",
    "features_per_token": """
features_per_token : int, default=None
    For a table: the consecutive columns that form one token (None: 1, each
    column a scalar token, as in FT-Transformer); must divide the number of
    columns. Leave it None for sequences.
""",
    "data_format": """
data_format : {"channels_last", "channels_first"}, default="channels_last"
    Layout of 3D arrays and of the arrays of a list: ``(n_samples, n_tokens,
    n_features)`` and ``(n_tokens_i, n_features)`` (tslearn, PyTorch), or
    ``(n_samples, n_channels, n_timepoints)`` and ``(n_channels,
    n_timepoints_i)`` (aeon, sktime), read as their transposes. A table reads
    the same in both (``"channels_first"`` raises with
    ``features_per_token`` above 1). See :ref:`input_formats`.
""",
    "scale_tokens": """
scale_tokens : bool, default=True
    Standardise each token feature with its mean and standard deviation over
    the valid tokens of fit (per column of a table), weighted by
    ``sample_weight``: a :class:`~sklearn.preprocessing.StandardScaler` for
    sequences (:ref:`default-transformer-scale_tokens`). False reproduces
    ``torch.nn.TransformerEncoder`` on the raw tokens.
""",
    "patch_size": """
patch_size : int, "auto" or None, default="auto"
    Read patches of ``patch_size`` consecutive tokens, side by side, as the
    model's tokens (as PatchTST reads a series): ``ceil(n / patch_size)``
    patches of a sequence of ``n`` tokens, the last completed with zeros.
    ``"auto"``: series of at most 8 features per token whose median length
    in fit exceeds 64 in about 32 patches, other input not
    (:ref:`default-transformer-patch_size`); the size used is
    ``patch_size_``. None: no patches.
""",
    "objective": """
objective : {"auto", "classification", "regression"} or None, default="auto"
    What the weights learn from ``y``. ``"auto"``: from ``type_of_target(y)``,
    class labels by softmax cross-entropy, continuous targets (one or several
    columns) by squared error on the standardised target, nothing without
    ``y``. ``"classification"`` or ``"regression"`` force the task (``y`` is
    then required); None never learns: the weights stay seeded.
""",
    "pool_tokens": """
pool_tokens : bool or "auto", default="auto"
    Also return statistics of the (standardised) tokens themselves after the
    model's outputs: their mean, maximum and minimum, then the first and the
    last token, ``5 * n_token_features`` columns. ``"auto"``: for tokens of
    more than 8 features (word vectors and encoder states, whose ``[CLS]``
    and ``[SEP]`` are the first and last; :ref:`default-transformer-pool_tokens`).
    Training never sees them.
""",
    "init": """
init : "random" or dict, default="random"
    Initial weights. ``"random"``: Glorot-uniform matrices from
    ``random_state``, zero biases, identity layer norms. A dict: arrays by
    parameter, ``"input"`` ``(n_token_features, d_model)``, ``"layers"`` a
    list of ``n_layers`` dicts with the keys of ``layers_``, and any other
    learned parameter by its attribute's name without the underscore
    (``"head_coef"``, ``"cls_token"``, ...); a one-layer model also takes its
    layer's keys at the top level. Missing keys are seeded; the arrays are
    copied, never modified. ``RandomAttentionFeatures.weights_[m]`` is such
    a dict.
""",
    "solver": """
solver : {"adam", "lbfgs"}, default="adam"
    ``"adam"``: minibatches of ``batch_size`` for ``max_iter`` epochs, with
    ``partial_fit`` and early stopping. ``"lbfgs"``: full-batch L-BFGS-B
    (``scipy.optimize.minimize``) in the input's precision, no step size or
    batch to choose (:ref:`default-transformer-solver`).
""",
    "max_iter": """
max_iter : int, default=200
    Maximum number of epochs (adam) or iterations (lbfgs).
""",
    "learning_rate_init": """
learning_rate_init : float or "auto", default="auto"
    Adam's step size. ``"auto"``: 0.001 (MLPClassifier's), 0.002 with early
    stopping (:ref:`default-transformer-learning_rate_init`); ``partial_fit``
    goes on with its optimizer's step.
""",
    "batch_size": """
batch_size : int or "auto", default="auto"
    Adam's minibatch size; ``"auto"``: ``min(200, n_samples)`` as in
    :class:`~sklearn.neural_network.MLPClassifier`, 32 with early stopping
    (:ref:`default-transformer-batch_size`).
""",
    "alpha": """
alpha : float, default=0.0001
    Strength of the L2 penalty on the weights (projections, feed-forward
    matrices, class token, pooling query, head), divided by the summed
    sample weight as in :class:`~sklearn.neural_network.MLPClassifier`;
    biases, layer norms and learned positions are not penalised.
""",
    "tol": """
tol : float, default=1e-4
    Improvement of the loss (or validation score) below which an epoch
    counts as none; L-BFGS's gradient tolerance.
""",
    "early_stopping": """
early_stopping : bool or "auto", default="auto"
    Adam only: hold out ``validation_fraction`` of the samples (stratified,
    at least one of each class), stop when the head's validation score has
    not improved by ``tol`` for ``n_iter_no_change`` epochs, and keep the
    best weights. ``"auto"``: on for 2,000 samples or more, and with ``fit``'s
    ``X_val`` and ``y_val`` (:ref:`default-transformer-early_stopping`).
    ``partial_fit`` never validates; ``early_stopping_`` says what a fit did.
""",
    "validation_fraction": """
validation_fraction : float, default=0.1
    Share of the samples held out for early stopping.
""",
    "n_iter_no_change": """
n_iter_no_change : int or "auto", default="auto"
    Epochs without improvement before Adam stops: of the validation score
    with early stopping, of the training loss without. ``"auto"``: 3 with
    early stopping, 10 (MLPClassifier's) without
    (:ref:`default-transformer-n_iter_no_change`).
""",
    "shuffle": """
shuffle : bool, default=True
    Shuffle the samples before each epoch.
""",
    "beta_1": """
beta_1 : float, default=0.9
    Decay rate of Adam's first moment estimates, in [0, 1).
""",
    "beta_2": """
beta_2 : float, default=0.999
    Decay rate of Adam's second moment estimates, in [0, 1).
""",
    "epsilon": """
epsilon : float, default=1e-8
    Numerical stability term of Adam.
""",
    "class_weight": """
class_weight : dict, "balanced" or None, default=None
    Weights of the classes in the loss, as in
    :class:`~sklearn.linear_model.LogisticRegression`, times
    ``sample_weight``; "balanced" needs every class in each call's ``y``.
""",
    "warm_start": """
warm_start : bool, default=False
    Continue from the fitted weights on the next ``fit`` (Adam's moments
    afresh, as :class:`~sklearn.neural_network.MLPClassifier`;
    ``partial_fit`` keeps them). The data must have the token width and
    kind of target of the fit, and the parameters that fix the model their
    fitted values (see Notes).
""",
    "verbose": """
verbose : bool, default=False
    Print the loss (and validation score) of every epoch or iteration.
""",
    "random_state": """
random_state : int, RandomState instance or None, default=None
    Seed of the weights, shuffles, validation split and dropout. Pass an int
    for reproducible output across calls.
""",
}

ATTRIBUTES = {
    "n_features_in_": """
n_features_in_ : int
    Columns of a table seen in fit, or the token width of sequences.
""",
    "feature_names_in_": """
feature_names_in_ : ndarray of shape (``n_features_in_``,)
    Names of the columns seen in fit, for a DataFrame with string column
    names.
""",
    "classes_": """
classes_ : ndarray of shape (n_classes,)
    Class labels.
""",
    "target_type_": """
target_type_ : {"classification", "regression"} or None
    The task learned; None when the weights stay seeded.
""",
    "model": """
n_heads_, head_dim_, d_model_ : int
    Heads, head width and model width of the fitted model.

patch_size_ : int or None
    Tokens per patch (None: the tokens are the model's).

max_tokens_ : int
    Length of the longest sequence seen in fit (the tokens of a table).
""",
    "weights": """
token_mean_, token_scale_ : ndarray of shape (n_token_features,) or \
        (``max_tokens_``, n_token_features), or None
    The token standardisation (``scale_tokens``), per feature or per column
    of a table.

input_weights_ : ndarray of shape (n_token_features, ``d_model_``) or None
    Input projection; None when the tokens enter unprojected.

layers_ : list of dict of str to ndarray
    The weights of each encoder layer in the ``x @ W`` convention, by the
    names of torch's ``TransformerEncoderLayer`` modules: ``"query"``,
    ``"key"``, ``"value"`` (the blocks torch packs in
    ``self_attn.in_proj_weight``, transposed; heads as consecutive column
    blocks) and ``"output"`` (``self_attn.out_proj``), each ``(d_model_,
    d_model_)``; with a layer norm ``"norm1_weight"``, ``"norm1_bias"``;
    with ``ff_dim > 0`` ``"linear1"`` ``(d_model_, ff_dim)``,
    ``"linear1_bias"``, ``"linear2"`` ``(ff_dim, d_model_)``,
    ``"linear2_bias"`` and ``"norm2_weight"``, ``"norm2_bias"``.

final_norm_weight_, final_norm_bias_ : ndarray of shape (``d_model_``,) or None
    The final layer norm of ``layer_norm="pre"``.

position_embeddings_ : ndarray of shape (n_positions, ``d_model_``) or None
    Learned positional encoding.

cls_token_ : ndarray of shape (``d_model_``,) or None
    Class token, for ``pooling="cls"``.

pooling_query_ : ndarray of shape (``d_model_``,) or None
    Query of ``pooling="attention"``.
""",
    "head": """
head_coef_ : ndarray of shape (n_pooled, n_outputs)
    Weights of the linear head on the pooled vector.

head_intercept_ : ndarray of shape (n_outputs,)
    Bias of the linear head.
""",
    "training": """
n_iter_ : int
    Epochs (adam) or iterations (lbfgs) run.

t_ : int
    Training samples Adam has seen.

loss_ : float
    Loss at the end of training (on the standardised target for regression).

loss_curve_ : list of float
    Loss after each epoch or iteration.

best_loss_ : float
    Lowest loss reached.

early_stopping_ : bool
    Whether the last call held out a validation set.

validation_scores_, validation_loss_curve_ : list of float or None
    Validation score (accuracy or R²) and objective after each epoch, with
    early stopping (see :ref:`learning`).

best_validation_score_ : float or None
    Best validation score, with early stopping.
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
        Keys of :data:`ATTRIBUTES`, in order.
    """

    def decorate(cls):
        if cls.__doc__ is None:  # python -OO
            return cls
        names = list(inspect.signature(cls.__init__).parameters)[1:]
        parameters = "\n".join(PARAMETERS[name].strip() + "\n" for name in names)
        parameters = parameters.replace("{pooled}", pooled)
        attribute_text = "\n".join(
            ATTRIBUTES[name].strip() + "\n" for name in attributes
        )
        cls.__doc__ = cls.__doc__.replace(
            "    {parameters}\n", textwrap.indent(parameters, "    ")
        ).replace("    {attributes}\n", textwrap.indent(attribute_text, "    "))
        return cls

    return decorate
