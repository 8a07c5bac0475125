"""AttentionTransformer: a transformer encoder as a scikit-learn transformer."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.metaestimators import available_if

from ._base import ATTENTION_WEIGHTS_MAX_BYTES, STRUCTURE_PARAMETERS, BaseAttention
from ._dask import blocked_outputs, is_dask_collection
from ._pooling import TOKEN_STATISTICS
from ._validation import StrOptions, _fit_context


class AttentionTransformer(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseAttention
):
    """Multi-head self-attention over sequences of token embeddings.

    Each sample is a sequence of tokens (vectors of ``n_features`` numbers). The
    transformer projects the tokens to the model width, adds a positional
    encoding, runs them through a stack of ``n_layers`` transformer encoder
    layers (multi-head self-attention, then an optional feed-forward
    sublayer, each with a residual connection, layer norm and dropout, as
    :class:`torch.nn.TransformerEncoderLayer`) and pools the tokens into one
    vector per sample, ready for any scikit-learn estimator.

    ``fit`` learns all the model's weights from ``y`` (a linear head on the
    pooled vector is trained with them, then set aside: ``transform`` returns
    the learned representation); with ``objective=None`` or without ``y`` the
    weights stay seeded from ``random_state`` (or given by ``init``).

    Parameters
    ----------
    n_heads : int, default=4
        Number of attention heads.

    head_dim : int, default=None
        Width of each head; the model width is ``n_heads * head_dim``. None:
        taken from ``init`` when it gives a projection, otherwise
        ``ceil(64 / n_heads)``: a model of width 64 whatever the width of the
        tokens (a 384-wide word vector does not make a 384-wide model, which
        trained 7 times slower and scored lower on text in our benchmark). When
        the model width equals the token width and ``init`` has no
        ``"input"``, the tokens enter the attention as they are (no input
        projection).

    features_per_token : int, default=None
        For 2D input only: the number of consecutive columns that form one token.
        None: 1, each column is a scalar token (as in FT-Transformer). Must divide
        the number of columns. With sequences, leave it None (or the token
        width: ``n_channels`` with ``data_format="channels_first"``).

    data_format : {"channels_last", "channels_first"}, default="channels_last"
        Layout of 3D arrays and of the arrays of a list (tables are read the
        same way in both).

        - ``"channels_last"``: ``(n_samples, n_tokens, n_features)`` and
          ``(n_tokens_i, n_features)`` arrays (tslearn, PyTorch, Keras).
        - ``"channels_first"``: ``(n_samples, n_channels, n_timepoints)`` and
          ``(n_channels, n_timepoints_i)`` arrays, as aeon and sktime store
          panels; read as their transposes (a view, not a copy): the time
          points are the tokens, the channels their features.

        Nothing is guessed from the shapes: an aeon panel of 6 channels and
        100 time points passed with ``"channels_last"`` is read as 6 tokens of
        100 features, without error. ``n_features_in_`` is the token width
        (``n_channels`` with ``"channels_first"``); the per-token outputs are
        ``(n_tokens, d_model_)`` in both layouts. With a table,
        ``"channels_first"`` is ignored when a token is one column
        (``features_per_token=None`` or 1: a column is a time point of a single
        channel in both layouts) and raises a ``ValueError`` for wider tokens,
        whose columns are interleaved channels: reshape a panel flattened
        channel by channel to ``(n_samples, n_channels, n_timepoints)``
        instead.

    scale_tokens : bool, default=True
        Standardise the tokens with statistics learned in fit:
        ``(x - token_mean_) / token_scale_``, per feature over all the valid
        tokens of the training sequences (padding excluded), or per column for
        a table, weighted by ``sample_weight`` (times ``class_weight`` when the
        target is learned). The same as a
        :class:`~sklearn.preprocessing.StandardScaler` in front, which cannot
        read 3D arrays or ragged lists. On by default: raw series and word
        vectors of any scale then train with one learning rate (it won on
        the series and texts of our real-data benchmark). False reproduces
        ``torch.nn.TransformerEncoder`` on the raw tokens.

    patch_size : int, "auto" or None, default="auto"
        Read patches of ``patch_size`` consecutive tokens as the model's tokens,
        of width ``patch_size * n_features`` (after the token standardisation),
        as PatchTST reads a time series: a long series of scalars becomes a
        short sequence of local shapes, and attention's cost, quadratic in the
        length, falls with the square of the patch size. A sequence of ``n``
        tokens gives ``ceil(n / patch_size)`` patches, the last one completed
        with zeros; ``transform_sequences`` and ``attention_weights`` then have
        one row per patch. None: every token is a token.

        ``"auto"``: sequences of at most 8 features per token (series of a few
        channels, not word vectors) whose median length in fit exceeds 64 are
        read in about 32 patches, of ``ceil(median_length / 32)`` tokens; other
        input (tables, short or wide sequences) is not patched. The size used
        is ``patch_size_``.

    n_layers : int, default=1
        Number of encoder layers stacked.

    ff_dim : int, default=128
        Width of the feed-forward sublayer of each layer
        (``linear2(activation(linear1(x)))``, with biases); 0: no feed-forward
        sublayer, each layer is self-attention only. The default is twice the
        default model width, as in the encoder we benchmark against.

    activation : {"relu", "gelu"}, default="relu"
        Activation of the feed-forward sublayer; ``"gelu"`` is the exact GELU
        (with the error function), as torch's default.

    dropout : float, default=0.0
        Training-only dropout rate, in torch's places: on the attention weights,
        on each sublayer's output before the residual sum and after the
        feed-forward activation. The masks come from ``random_state``: two fits
        with the same seed are identical, whatever the threads or batches.
        ``transform`` never drops. Needs ``solver="adam"``.

    norm_first : bool, default=False
        Post-norm ``norm(x + sublayer(x))`` (False), or pre-norm
        ``x + sublayer(norm(x))`` with one final layer norm after the last
        layer (True).

    objective : {"auto", "classification", "regression"} or None, default="auto"
        What the weights learn from ``y``.

        - ``"auto"``: from the type of ``y`` (``type_of_target``): binary or
          multiclass labels are classification (softmax cross-entropy; string
          labels work), continuous targets, one or several columns, are
          regression (squared error on the standardised target). With
          ``y=None`` nothing is learned.
        - ``"classification"``, ``"regression"``: force the task; ``y`` is
          then required.
        - None: never learn; the projections stay seeded and ``y`` is ignored.

    init : "random" or dict, default="random"
        Initial weights.

        - ``"random"``: Glorot-uniform weight matrices drawn from
          ``random_state``, zero biases, identity layer norms.
        - a dict with keys ``"input"``, an array of shape (n_features,
          d_model), and ``"layers"``, a list of ``n_layers`` dicts with the keys
          of ``layers_`` (for instance ``"query"``, ``"key"``, ``"value"`` and
          ``"output"`` of shape (d_model, d_model), with ``d_model = n_heads *
          head_dim``: the ``x @ W`` convention of
          :func:`~skattn.multi_head_attention`; heads are consecutive column
          blocks). A one-layer model also takes that layer's keys at the top
          level (``{"query": ..., "key": ...}``). Missing keys are seeded. The
          arrays are copied, never modified.

    pooling : {"mean", "max", "first", "last", "cls", "attention", "flatten"}, \
            default="mean"
        How the per-token outputs become one vector per sample; all of them read
        only the tokens a sequence has, never its padding.

        - ``"mean"``, ``"max"``: over the tokens, feature-wise.
        - ``"first"``, ``"last"``: the first or last token of each sequence.
        - ``"cls"``: a learned class token is appended after the last token of
          each sequence (without positional encoding, and seen by every token
          under ``causal=True``); its output is the representation.
        - ``"attention"``: a query vector attends over the output tokens.
        - ``"flatten"``: all tokens side by side, ``n_tokens * d_model``
          features; every sequence must have the length seen in fit.

    pool_tokens : bool or "auto", default="auto"
        Also return statistics of the tokens themselves (standardised with
        ``scale_tokens``) after the model's pooled outputs: their mean,
        maximum and minimum over the valid tokens, then the first and the
        last token, ``5 * n_token_features`` columns (named
        ``attentiontransformer_tokens_{statistic}_{feature}``). The model
        squeezes a wide token into ``d_model`` features; these columns give
        the estimator after it what a linear model on the tokens' mean knows,
        and the ``[CLS]`` and ``[SEP]`` states of a BERT-style encoder.
        ``"auto"``: for tokens of more than 8 features (word vectors), not
        for series, rows of an image or a table's scalar columns, where they
        changed nothing. With the default pipeline and a logistic regression,
        on 2,000 newsgroup posts given as the contextual token states of a
        sentence encoder, the accuracy rose from 0.681 to 0.733, and with
        static word vectors from 0.615 to 0.657. Training never sees them:
        the model's weights are the same with or without.

    positional_encoding : {"sinusoidal", "learned"} or None, default="sinusoidal"
        Added to the projected tokens.

        - ``"sinusoidal"``: the fixed encoding of Vaswani et al. (2017).
        - ``"learned"``: a table of one vector per position up to the longest
          sequence seen in fit, initialised from the sinusoidal encoding;
          positions beyond it use the sinusoidal encoding.
        - None: no positions; the output tokens are then permutation-equivariant.

    residual : bool, default=True
        Add each sublayer's input to its output.

    layer_norm : bool, default=True
        Normalise the tokens in each sublayer (with gain and bias; where, see
        ``norm_first``).

    causal : bool, default=False
        Token ``i`` attends only to tokens ``j <= i``, in every layer.

    solver : {"adam", "lbfgs"}, default="adam"
        Optimizer of the weights.

        - ``"adam"``: minibatches of ``batch_size`` samples, ``max_iter``
          epochs; supports ``partial_fit`` and ``early_stopping``.
        - ``"lbfgs"``: full-batch L-BFGS-B (``scipy.optimize.minimize``) for at
          most ``max_iter`` iterations, in float64; no step size or batch to
          choose. On the small real data sets of our benchmark it scored below
          Adam (ItalyPowerDemand, ArrowHead, digits) and was not faster.

    max_iter : int, default=200
        Maximum number of epochs (adam) or iterations (lbfgs).

    learning_rate_init : float or "auto", default="auto"
        Step size of Adam. ``"auto"``: 0.001 (MLPClassifier's default), and
        0.002 with early stopping, whose minibatches of 32 and best-epoch
        weights stand a larger step: on the four text sets of our benchmark
        (three seeds) it raised the mean accuracy by 0.45 points (20
        Newsgroups' static word vectors 0.657 to 0.673) in about the same
        number of epochs. ``partial_fit`` goes on with the step size of the
        fit or ``partial_fit`` before it.

    batch_size : int or "auto", default="auto"
        Minibatch size of Adam; "auto" is ``min(200, n_samples)`` as in
        :class:`~sklearn.neural_network.MLPClassifier`, and 32 with early
        stopping, whose few epochs then take more, smaller steps (on text, 0.6
        and 1.9 points more accuracy than 200, in less time).

    alpha : float, default=0.0001
        Strength of the L2 penalty on the weights (projections, feed-forward
        matrices, class token, pooling query, head), divided by the summed
        sample weight of the batch as in
        :class:`~sklearn.neural_network.MLPClassifier`. Biases, layer-norm
        parameters and learned positions are not penalised.

    tol : float, default=1e-4
        Improvement of the loss (or validation score) below which an epoch
        counts as no improvement; gradient tolerance of L-BFGS.

    early_stopping : bool or "auto", default="auto"
        Adam only: set aside ``validation_fraction`` of the samples (stratified
        for classification, at least one per class, so every class needs two
        samples and the rest one training sample each), stop when the head's
        validation score (accuracy or R^2) has not improved by ``tol`` for
        ``n_iter_no_change`` epochs, and keep the best weights. ``"auto"``: on
        for training sets of at least 2000 samples (as
        :class:`~sklearn.ensemble.HistGradientBoostingClassifier` turns it on
        above 10,000), off below, where a tenth of the samples is too few to
        stop on (on 1347 digits it cost 1.3 points of accuracy).
        ``X_val`` and ``y_val`` passed to ``fit`` are the validation set
        instead (and turn "auto" on). ``partial_fit`` never validates. Whether
        it was on is ``early_stopping_``.

    validation_fraction : float, default=0.1
        Share of the samples set aside with ``early_stopping``.

    n_iter_no_change : int or "auto", default="auto"
        Epochs without improvement before Adam stops: of the validation score
        with early stopping, of the training loss without. ``"auto"``: 3 with
        early stopping, 10 (MLPClassifier's default) without. On the four text
        sets of our benchmark (2,000 and 4,291 texts of word vectors, three
        seeds) 3 epochs instead of 10 gave the same test accuracy but for one
        text in 2,000 (one more right) and fitted in 0.38 to 0.77 of the time;
        the training loss of small sets needs 10 (with 5, 36 ArrowHead series
        scored 0.61 instead of 0.75).

    shuffle : bool, default=True
        Shuffle the samples before each epoch.

    beta_1, beta_2 : float, default=0.9, 0.999
        Decay rates of Adam's moment estimates, in [0, 1).

    epsilon : float, default=1e-8
        Numerical stability term of Adam.

    warm_start : bool, default=False
        Continue from the fitted weights on the next ``fit`` instead of seeding
        them again (Adam's moment estimates start afresh, as in
        :class:`~sklearn.neural_network.MLPClassifier`; ``partial_fit`` keeps
        them). The data must have the same token width and kind of target, and
        the parameters that fix the model's structure their fitted values (see
        the Notes).

    verbose : bool, default=False
        Print the loss (and validation score) of every epoch or iteration.

    class_weight : dict, "balanced" or None, default=None
        Weights of the classes in the loss (classification only), as in
        :class:`~sklearn.linear_model.LogisticRegression`: ``{label: weight}``
        with finite, non-negative weights (1 for a class not in the dict), or
        "balanced" for ``n_samples / (n_classes * np.bincount(y))``, which needs
        every class in the ``y`` of each call. Multiplied with
        ``sample_weight``; some sample of ``y`` must keep a positive weight.

    random_state : int, RandomState instance or None, default=None
        Seed of the random weights. Pass an int for reproducible output across
        calls.

    Attributes
    ----------
    n_features_in_ : int
        Columns of a table seen in fit, or the token width of sequences.

    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the columns seen in fit, for a DataFrame with string column
        names.

    n_heads_ : int
        Number of attention heads of the fitted model.

    head_dim_ : int
        Width of each head.

    early_stopping_ : bool
        Whether the last call held out a validation set (see
        ``early_stopping``); False when nothing was learned.

    patch_size_ : int or None
        Tokens per patch (see ``patch_size``); None when tokens are not
        patched.

    d_model_ : int
        Model width, ``n_heads_ * head_dim_``.

    max_tokens_ : int
        Length of the longest sequence seen in fit (for a table, its number of
        tokens).

    token_mean_, token_scale_ : ndarray of shape (n_token_features,) or \
            (``max_tokens_``, n_token_features), or None
        Statistics of the token standardisation (``scale_tokens``): per feature
        of the tokens, or per column (position and feature) of a table.

    input_weights_ : ndarray of shape (n_token_features, ``d_model_``) or None
        Input projection; None when the tokens enter unprojected.

    layers_ : list of dict of str to ndarray
        The weights of each encoder layer, by torch's names, in the ``x @ W``
        convention: ``"query"``, ``"key"``, ``"value"`` (projections of the
        tokens, heads as consecutive column blocks) and ``"output"``
        (projection of the concatenated heads), each of shape
        ``(d_model_, d_model_)``; with ``layer_norm``, ``"norm1_weight"`` and
        ``"norm1_bias"`` of shape ``(d_model_,)``; with ``ff_dim > 0``,
        ``"linear1"`` of shape ``(d_model_, ff_dim)``, ``"linear1_bias"`` of
        shape ``(ff_dim,)``, ``"linear2"`` of shape ``(ff_dim, d_model_)``,
        ``"linear2_bias"`` of shape ``(d_model_,)`` and, with ``layer_norm``,
        ``"norm2_weight"`` and ``"norm2_bias"``.

    final_norm_weight_, final_norm_bias_ : ndarray of shape (``d_model_``,) \
            or None
        Gain and bias of the final layer norm (``norm_first`` with
        ``layer_norm``).

    position_embeddings_ : ndarray of shape (``max_tokens_``, ``d_model_``) \
            or None
        Learned positional encoding.

    cls_token_ : ndarray of shape (``d_model_``,) or None
        Class token, for ``pooling="cls"``.

    pooling_query_ : ndarray of shape (``d_model_``,) or None
        Query of the attention pooling, for ``pooling="attention"``.

    head_coef_ : ndarray of shape (n_features_out, n_outputs) or None
        Weights of the training head (None when nothing was learned); the head
        is not used by ``transform``.

    head_intercept_ : ndarray of shape (n_outputs,) or None
        Bias of the training head.

    target_type_ : {"classification", "regression"} or None
        The task learned; None when the weights stay seeded.

    classes_ : ndarray of shape (n_classes,) or None
        Class labels, for classification.

    n_iter_ : int
        Epochs (adam) or iterations (lbfgs) run; 0 when nothing was learned.

    t_ : int
        Training samples seen by Adam.

    loss_ : float or None
        Loss at the end of training (on the standardised target for
        regression).

    loss_curve_ : list of float
        Loss after each epoch or iteration.

    best_loss_ : float
        Lowest loss reached.

    validation_scores_ : list of float or None
        Validation score after each epoch, with ``early_stopping``.

    validation_loss_curve_ : list of float or None
        Loss on the validation set after each epoch, with ``early_stopping``
        (beside ``validation_scores_``; scikit-learn's MLP records only the
        scores). It is the training objective evaluated on the whole validation
        set as one batch, without dropout: the loss weighted by the samples'
        ``sample_weight`` (times ``class_weight``; ``X_val``'s samples weigh
        their ``class_weight`` only), on the standardised target for
        regression, plus the L2 penalty ``alpha / 2 * ||W||^2`` divided by the
        validation set's summed weight, as the penalty of each minibatch of
        ``loss_curve_`` (MLPClassifier's convention) is divided by the
        minibatch's. The best epoch's value is the loss of the weights kept.

    best_validation_score_ : float or None
        Best validation score, with ``early_stopping``.

    See Also
    --------
    skattn.multi_head_attention : The bare attention layer on arrays.
    sklearn.neighbors.NeighborhoodComponentsAnalysis : A supervised linear
        transformer with the same estimator layout.

    Notes
    -----
    .. note::
        Features learned in-sample can overfit the downstream estimator:
        ``fit(X, y).transform(X)`` encodes ``y`` into the training features.
        Fit the downstream estimator on a held-out split, or cross-validate the
        whole :class:`~sklearn.pipeline.Pipeline` (``cross_val_score``,
        ``GridSearchCV``), so that every test fold is transformed by a model
        that never saw it.

    With the same weights, ``transform_sequences`` equals
    :class:`torch.nn.TransformerEncoder` built from
    ``TransformerEncoderLayer(d_model, n_heads, ff_dim, dropout, activation,
    batch_first=True, norm_first=norm_first)`` with zero attention biases (and
    its final ``LayerNorm`` with ``norm_first``), fed the projected tokens plus
    positions with the key padding masked, in evaluation mode.

    Input formats:

    - a 2D array or DataFrame ``(n_samples, n_features)``: ``n_features /
      features_per_token`` tokens of width ``features_per_token``;
    - a 3D array ``(n_samples, n_tokens, n_features)`` (the tslearn / PyTorch
      order), or ``(n_samples, n_channels, n_timepoints)`` with
      ``data_format="channels_first"`` (aeon's and sktime's ``numpy3D``);
    - a list, tuple or 1-D object array of 2D arrays ``(n_tokens_i,
      n_features)``, or ``(n_channels, n_timepoints_i)`` with
      ``data_format="channels_first"`` (aeon's collections of unequal
      length): sequences of different lengths, padded internally and masked;
    - a list of 1-D arrays (or Series) of different lengths: univariate series,
      read as ``(n_tokens_i, 1)`` whatever ``data_format``. Of one length, they
      are the rows of a table in ``fit``, as scikit-learn reads a list of rows
      (pass ``[x[:, None] for x in X]`` to read them as series); after a ``fit``
      on sequences, a list of 1-D arrays is always read as series.

    Series of different lengths padded with NaN in one array (tslearn's
    ``to_time_series_dataset``) raise an error that gives the conversion to a
    list, ``[x[~np.isnan(x).all(axis=1)] for x in X]``; so does a nested
    DataFrame (sktime's ``nested_univ``), whose conversion is
    ``sktime.datatypes.convert_to(X, to_type="numpy3D")`` with
    ``data_format="channels_first"``.

    A :class:`dask.array.Array` chunked along the samples (the ``[dask]``
    extra) gives lazy results computed block by block, a dask bag of ragged
    sequences a bag of per-sequence results; ``fit`` and ``partial_fit`` of a
    dask array stream its blocks through Adam (user guide, "Beyond one
    machine").

    ``transform`` takes the same kind of input as ``fit`` (a table after a table,
    sequences after sequences). ``fit`` and ``transform`` run in batches of
    samples sized so that the intermediate arrays fit in scikit-learn's
    ``working_memory`` (``sklearn.config_context(working_memory=...)``, in MiB)
    and in the CPU's caches (about 4 MiB), and the attention itself runs in
    query tiles, so memory stays linear in the sequence length. Results do not
    depend on the batch or tile size beyond float rounding.

    There is no ``n_jobs``: the estimator uses as many cores as the BLAS thread
    limit allows (``threadpoolctl.threadpool_limits`` or ``OMP_NUM_THREADS``).
    BLAS itself runs on one thread inside ``fit`` and ``transform``, and the
    cores compute batches and attention tiles side by side; results are
    bit-identical whatever the number of threads.

    The computation runs in the dtype of ``X``: float32 input gives float32
    output.

    The parameters that fix the model's structure (``n_heads``, ``head_dim``,
    ``features_per_token``, ``data_format``, ``scale_tokens``, ``patch_size``,
    ``n_layers``, ``ff_dim``, ``activation``, ``norm_first``, ``pooling``,
    ``positional_encoding``, ``residual``, ``layer_norm``, ``causal``, and
    ``pool_tokens``, which fixes the columns of ``transform``) take effect at
    the next ``fit`` that builds a model: a fitted transformer
    computes with the values it was fitted with, whatever ``set_params``
    changed since, and ``partial_fit`` or ``fit`` with ``warm_start=True``
    raise a ``ValueError`` on a changed one. The parameters of training
    (``learning_rate_init``, ``alpha``, ``max_iter``, ``batch_size``,
    ``dropout``, ``solver``, ...) may change between calls.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
    .. [2] Y. Gorishniy et al., "Revisiting Deep Learning Models for Tabular
       Data", NeurIPS 2021 (features as tokens).
    .. [3] D. P. Kingma and J. Ba, "Adam: A Method for Stochastic
       Optimization", ICLR 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from skattn import AttentionTransformer
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((10, 6, 32))  # 10 sequences of 6 tokens of width 32
    >>> attn = AttentionTransformer(n_heads=4, random_state=0).fit(X)
    >>> attn.transform(X).shape  # d_model = 4 heads x 16, then 5 x 32 (pool_tokens)
    (10, 224)
    >>> attn.attention_weights(X).shape
    (10, 4, 6, 6)
    >>> deep = AttentionTransformer(n_layers=2, ff_dim=64, random_state=0).fit(X)
    >>> sorted(deep.layers_[1])
    ['key', 'linear1', 'linear1_bias', 'linear2', 'linear2_bias', 'norm1_bias', \
'norm1_weight', 'norm2_bias', 'norm2_weight', 'output', 'query', 'value']
    >>> ragged = [rng.standard_normal((n, 32)) for n in (3, 7, 5)]
    >>> [t.shape for t in attn.transform_sequences(ragged)]
    [(3, 64), (7, 64), (5, 64)]
    """

    _parameter_constraints: dict = {
        **BaseAttention._parameter_constraints,
        "pool_tokens": ["boolean", StrOptions({"auto"})],
    }
    # pool_tokens fixes the columns of transform: recorded at fit, refused
    # changed by partial_fit and warm starts, as the model's structure
    _structure_parameters = (*STRUCTURE_PARAMETERS, "pool_tokens")

    def __init__(
        self,
        n_heads=4,
        head_dim=None,
        *,
        features_per_token=None,
        data_format="channels_last",
        scale_tokens=True,
        patch_size="auto",
        n_layers=1,
        ff_dim=128,
        activation="relu",
        dropout=0.0,
        norm_first=False,
        objective="auto",
        init="random",
        pooling="mean",
        pool_tokens="auto",
        positional_encoding="sinusoidal",
        residual=True,
        layer_norm=True,
        causal=False,
        solver="adam",
        max_iter=200,
        learning_rate_init="auto",
        batch_size="auto",
        alpha=0.0001,
        tol=1e-4,
        early_stopping="auto",
        validation_fraction=0.1,
        n_iter_no_change="auto",
        shuffle=True,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        warm_start=False,
        verbose=False,
        class_weight=None,
        random_state=None,
    ):
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.features_per_token = features_per_token
        self.data_format = data_format
        self.scale_tokens = scale_tokens
        self.patch_size = patch_size
        self.n_layers = n_layers
        self.ff_dim = ff_dim
        self.activation = activation
        self.dropout = dropout
        self.norm_first = norm_first
        self.objective = objective
        self.init = init
        self.pooling = pooling
        self.pool_tokens = pool_tokens
        self.positional_encoding = positional_encoding
        self.residual = residual
        self.layer_norm = layer_norm
        self.causal = causal
        self.solver = solver
        self.max_iter = max_iter
        self.learning_rate_init = learning_rate_init
        self.batch_size = batch_size
        self.alpha = alpha
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.shuffle = shuffle
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.warm_start = warm_start
        self.verbose = verbose
        self.class_weight = class_weight
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None, *, X_val=None, y_val=None):
        """Fit the transformer: seed its weights, then learn them from ``y``.

        .. note::
            ``fit(X, y).transform(X)`` returns features learned on the same
            ``y``: a downstream estimator fitted on them sees an optimistic,
            overfitted view of ``X``. Fit the downstream estimator on a
            held-out split, or cross-validate the whole :class:`~sklearn.pipeline.
            Pipeline` (as :func:`~sklearn.model_selection.cross_val_score` does),
            so that each test fold is transformed by a model that never saw it.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Training sequences (see the class docstring for the formats).

        y : array-like of shape (n_samples,) or (n_samples, n_outputs), default=None
            Target the projections learn from: class labels (classification) or
            numbers (regression), see ``objective``. With ``y=None`` and
            ``objective="auto"``, or with ``objective=None``, the weights stay
            seeded.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss: finite, non-negative and not all
            zero, of any magnitude (a weight of 2 counts as two samples, so
            their sum sets the strength of ``alpha``); None gives every sample
            weight 1.

        X_val : array-like of the formats of X, default=None
            Validation sequences of early stopping (Adam), checked and read as
            X (``data_format`` included), instead of holding out
            ``validation_fraction`` of X: nothing is split off, and
            ``early_stopping="auto"`` turns on. Needs ``y_val``; refused with
            ``early_stopping=False`` or ``solver="lbfgs"`` (as in
            :class:`~sklearn.ensemble.HistGradientBoostingClassifier`). In a
            :class:`~sklearn.pipeline.Pipeline`, request it with
            ``set_fit_request(X_val=True, y_val=True)`` (metadata routing on),
            and transform it by the preceding steps with
            ``Pipeline(..., transform_input=["X_val"])``.

        y_val : array-like of shape (n_val,) or (n_val, n_outputs), default=None
            Target of ``X_val``, encoded as y: class labels among y's
            classes, or numbers standardised with y's mean and scale.

        Returns
        -------
        self : AttentionTransformer
            Fitted transformer.
        """
        return self._fit(
            X, y, sample_weight, incremental=False, X_val=X_val, y_val=y_val
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None, sample_weight=None, *, X_val=None, y_val=None):
        """Fit the transformer, then transform X.

        .. note::
            The result encodes ``y``: a downstream estimator fitted on it sees an
            overfitted view of ``X`` (see the note of :meth:`fit`).

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Training sequences.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs), default=None
            Target, see :meth:`fit`.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss.

        X_val : array-like of the formats of X, default=None
            Validation sequences of early stopping, see :meth:`fit`.

        y_val : array-like of shape (n_val,) or (n_val, n_outputs), default=None
            Target of ``X_val``.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features_out)
            Pooled representations of X.
        """
        return self._fit(
            X, y, sample_weight, incremental=False, X_val=X_val, y_val=y_val
        ).transform(X)

    @available_if(lambda est: est._check_solver())
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch of Adam on the given samples (``solver="adam"`` only).

        The first call initialises the model like :meth:`fit` (without
        training more than one epoch); later calls continue from the current
        weights and optimizer state.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            A batch of training sequences.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Target of the batch.

        classes : array-like of shape (n_classes,), default=None
            All the classes of the classification task, needed at the first
            call when a batch may miss some of them. None: the classes of the
            first batch. Later calls take None or the same classes; a target
            learned by regression takes None.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss.

        Returns
        -------
        self : AttentionTransformer
            The transformer, trained one more epoch.
        """
        return self._fit(X, y, sample_weight, incremental=True, classes=classes)

    def transform(self, X):
        """Apply self-attention and pool each sequence into one vector.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the same kind (table or sequences) and token width as in
            fit.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features_out)
            Pooled representations, in the dtype of X (float32 or float64);
            ``n_features_out`` is ``d_model_``, or ``n_tokens * d_model_`` for
            ``pooling="flatten"``, then with ``pool_tokens`` five columns per
            token feature.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._dask)
            return blocked_outputs(self, "transform", X)
        return self._transform(X)

    def get_feature_names_out(self, input_features=None):
        """Output feature names: the model's, then the tokens' statistics.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Only checked against ``feature_names_in_``: the outputs do not
            correspond to input features.

        Returns
        -------
        feature_names_out : ndarray of str objects
            ``attentiontransformer0``, ``attentiontransformer1``, ... for the
            model's outputs, then with ``pool_tokens``
            ``attentiontransformer_tokens_{statistic}_{feature}``.
        """
        names = super().get_feature_names_out(input_features)
        if not self._pools_tokens():
            return names
        width = self._token_width()
        n_model = len(names) - len(TOKEN_STATISTICS) * width
        prefix = type(self).__name__.lower()
        tokens = [
            f"{prefix}_tokens_{name}_{feature}"
            for name in TOKEN_STATISTICS
            for feature in range(width)
        ]
        return np.concatenate([names[:n_model], np.asarray(tokens, dtype=object)])

    def transform_sequences(self, X):
        """Per-token outputs of the last layer (and final norm), before pooling.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences, as for :meth:`transform`.

        Returns
        -------
        tokens : ndarray of shape (n_samples, n_tokens, ``d_model_``) or list \
                of ndarray of shape (n_tokens_i, ``d_model_``)
            An array for table and 3D input, a list for a list of sequences. With
            ``pooling="cls"`` each sequence ends with the class token's output
            (``n_tokens + 1`` rows). One row per token whatever
            ``data_format``: with ``"channels_first"``, one per time point.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._dask)
            return blocked_outputs(self, "transform_sequences", X)
        return self._per_token(X)

    def attention_weights(self, X, *, layer=-1, max_bytes=ATTENTION_WEIGHTS_MAX_BYTES):
        """Attention weights of every head of one encoder layer.

        Row ``t`` of a head's matrix gives how much token ``t`` attends to each
        token; rows sum to 1.

        The result holds ``n_heads_ * n_tokens**2`` numbers per sequence: 12 GiB
        for one sequence of 20,000 tokens with 4 heads in float64. Its size is
        checked against ``max_bytes`` before anything is computed, and the
        weights are written straight into it, a block of rows at a time: the
        call needs little more memory than its result.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences, as for :meth:`transform`.

        layer : int, default=-1
            Which encoder layer, counted from 0 (negative values count from the
            last).

        max_bytes : int, float or None, default=2**30
            The largest result allowed, in bytes (1 GiB by default, as
            scikit-learn's default ``working_memory``): a larger one raises a
            ``ValueError`` naming its size before any work. Raise it when the
            memory is there; None for no limit.

        Returns
        -------
        weights : ndarray of shape (n_samples, n_heads, n_tokens, n_tokens) or \
                list of ndarray of shape (n_heads, n_tokens_i, n_tokens_i)
            An array for table and 3D input, a list for a list of sequences. With
            ``pooling="cls"`` the class token is the last token (``n_tokens + 1``);
            with patches, ``n_tokens`` counts patches. With
            ``data_format="channels_first"`` the tokens are the time points.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._dask)
            return blocked_outputs(
                self, "attention_weights", X, layer=layer, max_bytes=max_bytes
            )
        layer = self._check_layer(layer)
        return self._per_token(X, layer=layer, max_bytes=max_bytes)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.target_tags.required = self.objective in ("classification", "regression")
        return tags
