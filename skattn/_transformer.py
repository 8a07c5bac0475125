"""AttentionTransformer: multi-head self-attention as a scikit-learn transformer."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import itertools
import math
import time
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.optimize
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state, gen_batches
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ._head import LOSS_FUNCTIONS, linear_backward, linear_forward
from ._model import backward, forward, glorot_uniform, init_params, param_shapes
from ._optimizers import AdamOptimizer
from ._parallel import map_parallel, parallel_workers, single_threaded_blas
from ._pooling import POOLINGS
from ._sequences import (
    BATCH_BYTES,
    batch_indices,
    pad_sequences,
    sequence_lengths,
    sequences_dtype,
    token_width,
)
from ._validation import (
    Interval,
    StrOptions,
    _check_optimize_result,
    _fit_context,
    check_init,
    check_input,
    check_sample_weight,
    check_target,
    working_memory_bytes,
)

# Fitted attribute holding each model parameter.
PARAM_ATTRIBUTES = {
    "input": "input_weights_",
    "query": "query_weights_",
    "key": "key_weights_",
    "value": "value_weights_",
    "output": "output_weights_",
    "positions": "position_embeddings_",
    "cls": "cls_token_",
    "pool_query": "pooling_query_",
    "ln_weight": "layer_norm_weight_",
    "ln_bias": "layer_norm_bias_",
    "head_coef": "head_coef_",
    "head_intercept": "head_intercept_",
}

# Parameters the L2 penalty ``alpha`` applies to: weights, not biases, gains or
# positions (which start from the sinusoidal table, not from zero).
PENALIZED = ("input", "query", "key", "value", "output", "cls", "pool_query")
PENALIZED += ("head_coef",)

_STOCHASTIC_SOLVERS = ("adam",)

# Smallest head width the default rule gives: narrower heads attend poorly.
MIN_HEAD_DIM = 8


class AttentionTransformer(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Multi-head self-attention over sequences of token embeddings.

    Each sample is a sequence of tokens (vectors of ``n_features`` numbers). The
    transformer projects the tokens to the model width, adds a positional
    encoding, applies one block of multi-head self-attention (query, key, value
    and output projections, residual connection, layer norm) and pools the
    tokens into one vector per sample, ready for any scikit-learn estimator.

    ``fit`` learns all the block's weights from ``y`` (a linear head on the pooled
    vector is trained with them, then set aside: ``transform`` returns the
    learned representation); with ``objective=None`` or without ``y`` the
    projections stay seeded from ``random_state`` (or given by ``init``).

    Parameters
    ----------
    n_heads : int, default=4
        Number of attention heads.

    head_dim : int, default=None
        Width of each head; the model width is ``n_heads * head_dim``. None:
        taken from ``init`` when it gives a projection, otherwise
        ``max(8, ceil(n_features / n_heads))``, so that the model keeps at least
        the width of the tokens and each head at least 8 dimensions. When the
        model width equals the token width and ``init`` has no ``"input"``, the
        tokens enter the attention as they are (no input projection).

    embed_dim : int, default=None
        For 2D input only: the number of consecutive columns that form one token.
        None: 1, each column is a scalar token (as in FT-Transformer). Must divide
        the number of columns.

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

    init : "random" or dict of str to array-like, default="random"
        Initial weights.

        - ``"random"``: Glorot-uniform projections drawn from ``random_state``.
        - a dict with keys among ``"input"`` of shape (n_features, d_model),
          ``"query"``, ``"key"``, ``"value"`` and ``"output"`` of shape
          (d_model, d_model), with ``d_model = n_heads * head_dim`` (the
          ``x @ W`` convention of :func:`~skattn.multi_head_attention`; heads are
          consecutive column blocks). Missing keys are seeded. The arrays are
          copied, never modified.

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

    positional_encoding : {"sinusoidal", "learned"} or None, default="sinusoidal"
        Added to the projected tokens.

        - ``"sinusoidal"``: the fixed encoding of Vaswani et al. (2017).
        - ``"learned"``: a table of one vector per position up to the longest
          sequence seen in fit, initialised from the sinusoidal encoding;
          positions beyond it use the sinusoidal encoding.
        - None: no positions; the output tokens are then permutation-equivariant.

    residual : bool, default=True
        Add the block's input to the attention output.

    layer_norm : bool, default=True
        Normalise each output token (post-norm, with gain and bias).

    causal : bool, default=False
        Token ``i`` attends only to tokens ``j <= i``.

    solver : {"adam", "lbfgs"}, default="adam"
        Optimizer of the weights.

        - ``"adam"``: minibatches of ``batch_size`` samples, ``max_iter``
          epochs; supports ``partial_fit`` and ``early_stopping``.
        - ``"lbfgs"``: full-batch L-BFGS-B (``scipy.optimize.minimize``) for at
          most ``max_iter`` iterations; often better on small data sets.

    max_iter : int, default=200
        Maximum number of epochs (adam) or iterations (lbfgs).

    learning_rate_init : float, default=0.001
        Step size of Adam.

    batch_size : int or "auto", default="auto"
        Minibatch size of Adam; "auto" is ``min(200, n_samples)``.

    alpha : float, default=0.0001
        Strength of the L2 penalty on the weights (projections, class token,
        pooling query, head), divided by the summed sample weight of the batch
        as in :class:`~sklearn.neural_network.MLPClassifier`. Biases, layer-norm
        parameters and learned positions are not penalised.

    tol : float, default=1e-4
        Improvement of the loss (or validation score) below which an epoch
        counts as no improvement; gradient tolerance of L-BFGS.

    early_stopping : bool, default=False
        Adam only: set aside ``validation_fraction`` of the samples (stratified
        for classification, at least one per class), stop when the head's
        validation score (accuracy or R^2) has not improved by ``tol`` for
        ``n_iter_no_change`` epochs, and keep the best weights.

    validation_fraction : float, default=0.1
        Share of the samples set aside with ``early_stopping``.

    n_iter_no_change : int, default=10
        Epochs without improvement before Adam stops.

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
        them). The data must have the same token width and kind of target.

    verbose : bool, default=False
        Print the loss (and validation score) of every epoch or iteration.

    class_weight : dict, "balanced" or None, default=None
        Weights of the classes in the loss (classification only), as in
        :class:`~sklearn.linear_model.LogisticRegression`: ``{label: weight}``,
        or "balanced" for ``n_samples / (n_classes * np.bincount(y))``.
        Multiplied with ``sample_weight``.

    random_state : int, RandomState instance or None, default=None
        Seed of the random weights. Pass an int for reproducible output across
        calls.

    Attributes
    ----------
    n_features_in_ : int
        Columns of a table seen in fit, or the token width of sequences.

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the columns seen in fit, for a DataFrame with string column
        names.

    head_dim_ : int
        Width of each head.

    d_model_ : int
        Model width, ``n_heads * head_dim_``.

    max_tokens_ : int
        Length of the longest sequence seen in fit (for a table, its number of
        tokens).

    input_weights_ : ndarray of shape (n_tokens_features, d_model_) or None
        Input projection; None when the tokens enter unprojected.

    query_weights_, key_weights_, value_weights_ : ndarray of shape \
            (d_model_, d_model_)
        Projections of the tokens to queries, keys and values.

    output_weights_ : ndarray of shape (d_model_, d_model_)
        Projection of the concatenated heads.

    position_embeddings_ : ndarray of shape (max_tokens_, d_model_) or None
        Learned positional encoding.

    cls_token_ : ndarray of shape (d_model_,) or None
        Class token, for ``pooling="cls"``.

    pooling_query_ : ndarray of shape (d_model_,) or None
        Query of the attention pooling, for ``pooling="attention"``.

    layer_norm_weight_, layer_norm_bias_ : ndarray of shape (d_model_,) or None
        Gain and bias of the layer norm.

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

    Input formats:

    - a 2D array or DataFrame ``(n_samples, n_features)``: ``n_features /
      embed_dim`` tokens of width ``embed_dim``;
    - a 3D array ``(n_samples, n_tokens, n_features)`` (the tslearn / PyTorch
      order; sktime and aeon store ``(n_samples, n_channels, n_timepoints)``,
      which must be transposed with ``X.transpose(0, 2, 1)``);
    - a list, tuple or 1-D object array of 2D arrays ``(n_tokens_i,
      n_features)``: sequences of different lengths, padded internally and
      masked.

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
    >>> attn.transform(X).shape
    (10, 32)
    >>> attn.attention_weights(X).shape
    (10, 4, 6, 6)
    >>> ragged = [rng.standard_normal((n, 32)) for n in (3, 7, 5)]
    >>> [t.shape for t in attn.transform_sequences(ragged)]
    [(3, 32), (7, 32), (5, 32)]
    """

    _parameter_constraints: dict = {
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "head_dim": [Interval(Integral, 1, None, closed="left"), None],
        "embed_dim": [Interval(Integral, 1, None, closed="left"), None],
        "objective": [StrOptions({"auto", "classification", "regression"}), None],
        "init": [StrOptions({"random"}), dict],
        "pooling": [StrOptions(set(POOLINGS))],
        "positional_encoding": [StrOptions({"sinusoidal", "learned"}), None],
        "residual": ["boolean"],
        "layer_norm": ["boolean"],
        "causal": ["boolean"],
        "solver": [StrOptions({"adam", "lbfgs"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [
            StrOptions({"auto"}),
            Interval(Integral, 1, None, closed="left"),
        ],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "shuffle": ["boolean"],
        "beta_1": [Interval(Real, 0, 1, closed="left")],
        "beta_2": [Interval(Real, 0, 1, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_heads=4,
        head_dim=None,
        *,
        embed_dim=None,
        objective="auto",
        init="random",
        pooling="mean",
        positional_encoding="sinusoidal",
        residual=True,
        layer_norm=True,
        causal=False,
        solver="adam",
        max_iter=200,
        learning_rate_init=0.001,
        batch_size="auto",
        alpha=0.0001,
        tol=1e-4,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
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
        self.embed_dim = embed_dim
        self.objective = objective
        self.init = init
        self.pooling = pooling
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
    def fit(self, X, y=None, sample_weight=None):
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
            Weights of the samples in the loss; None gives every sample weight 1.

        Returns
        -------
        self : AttentionTransformer
            Fitted transformer.
        """
        return self._fit(X, y, sample_weight, incremental=False)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None, sample_weight=None):
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

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features_out)
            Pooled representations of X.
        """
        return self._fit(X, y, sample_weight, incremental=False).transform(X)

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
            first batch.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the loss.

        Returns
        -------
        self : AttentionTransformer
            The transformer, trained one more epoch.
        """
        return self._fit(X, y, sample_weight, incremental=True, classes=classes)

    def _check_solver(self):
        if self.solver not in _STOCHASTIC_SOLVERS:
            raise AttributeError(
                f"partial_fit is only available for stochastic optimizers; "
                f"{self.solver!r} is not stochastic."
            )
        return True

    def _fit(self, X, y, sample_weight, *, incremental, classes=None):
        """Shared body of fit and partial_fit."""
        fitted = hasattr(self, "query_weights_")
        first_pass = not fitted or not (self.warm_start or incremental)
        sequences = check_input(self, X, reset=first_pass, embed_dim=self.embed_dim)
        lengths = sequence_lengths(sequences)
        self._check_lengths(lengths, reset=first_pass)
        task, y = check_target(self, y, len(sequences))
        if not first_pass and task != self.target_type_:
            fitted_for = self.target_type_ or "no target (seeded weights)"
            raise ValueError(
                f"This call's target asks for {task or 'no training'}, but the "
                f"transformer was fitted for {fitted_for}; fit it anew (without "
                "warm_start) to change the task."
            )
        if task is not None or sample_weight is not None:
            # checked even when unused, so that a wrong one is never silent
            sample_weight = check_sample_weight(
                sample_weight, len(sequences), sequences_dtype(sequences)
            )
        if task is not None:
            y = self._encode_target(y, task, first_pass, classes, sample_weight)
            sample_weight = sample_weight * self._class_weights(y, task)

        if first_pass:
            self._random_state = check_random_state(self.random_state)
            self._initialize(sequences, lengths, task, y)
        if task is None:
            return self
        params = self._params(sequences_dtype(sequences))
        data = (sequences, lengths, y, sample_weight)
        start = time.time()
        if self.verbose:
            header = f"{'Iteration':>10} {'Objective Value':>20} {'Time(s)':>10}"
            if self.early_stopping:
                header += f" {'Validation':>12}"
            print(f"[{type(self).__name__}]\n[{type(self).__name__}] {header}")
            print(f"[{type(self).__name__}] {'-' * len(header)}")
        # one BLAS thread: on the small matrix products of a minibatch, two
        # threads ran up to 16x slower on a busy 2-core machine
        with single_threaded_blas():
            if self.solver == "lbfgs":
                self._fit_lbfgs(params, data)
            else:
                self._fit_stochastic(params, data, incremental)
        if self.verbose:
            print(f"[{type(self).__name__}] Training took {time.time() - start:.2f}s.")
        self._set_params(params)
        return self

    def _check_lengths(self, lengths, reset=False):
        """With pooling="flatten", every sequence has one length (fit's)."""
        if self.pooling != "flatten":
            return
        if reset and np.any(lengths != lengths[0]):
            raise ValueError(
                "pooling='flatten' needs sequences of one length; got lengths from "
                f"{lengths.min()} to {lengths.max()}. Use another pooling for "
                "sequences of different lengths."
            )
        if not reset and np.any(wrong := lengths != self.max_tokens_):
            raise ValueError(
                f"pooling='flatten' needs sequences of {self.max_tokens_} tokens, "
                f"the length seen in fit; got {lengths[wrong][0]}."
            )

    def _class_weights(self, y, task):
        """Weight of each sample from ``class_weight`` (y holds class indices)."""
        if self.class_weight is None:
            return 1.0
        if task != "classification":
            raise ValueError(
                f"class_weight={self.class_weight!r} applies to classification, but "
                f"the target is a {task} target."
            )
        weights = compute_class_weight(
            self.class_weight, classes=self.classes_, y=self.classes_[y]
        )
        return weights[y]

    def _encode_target(self, y, task, first_pass, classes, sample_weight):
        """Class indices (classification) or standardised targets (regression).

        The standardisation uses the weighted mean and standard deviation, so that
        a weight of 2 trains like a repeated sample.
        """
        if task == "classification":
            check_classification_targets(y)
            if first_pass:
                encoder = LabelEncoder().fit(y if classes is None else classes)
                if len(encoder.classes_) < 2:
                    raise ValueError(
                        "The target has only one class "
                        f"({encoder.classes_[0]!r}): classification needs at "
                        "least two classes."
                    )
                self.classes_ = encoder.classes_
            unseen = np.setdiff1d(y, self.classes_)
            if len(unseen):
                raise ValueError(
                    f"y has labels {unseen.tolist()} not among the classes "
                    f"{self.classes_.tolist()} of the first call."
                )
            return np.searchsorted(self.classes_, y)
        if first_pass:
            self._target_mean = np.average(y, axis=0, weights=sample_weight)
            variance = np.average(
                (y - self._target_mean) ** 2, axis=0, weights=sample_weight
            )
            scale = np.sqrt(variance)
            self._target_scale = np.where(scale > 0, scale, 1.0)
        elif y.shape[1] != len(self._target_mean):
            raise ValueError(
                f"y has {y.shape[1]} outputs, but the transformer was fitted on "
                f"{len(self._target_mean)}."
            )
        return (y - self._target_mean) / self._target_scale

    def _initialize(self, sequences, lengths, task=None, y=None):
        """Resolve the model's width, seed its parameters, reset training state."""
        n_features = token_width(sequences)
        init = {} if isinstance(self.init, str) else check_init(self.init)
        self.head_dim_ = self._resolve_head_dim(n_features, init)
        self.d_model_ = self.n_heads * self.head_dim_
        self.max_tokens_ = int(lengths.max())
        has_input = "input" in init or n_features != self.d_model_
        shapes = param_shapes(
            n_features, self.d_model_, pooling=self.pooling, has_input=has_input
        )
        for name, value in init.items():  # every key of init is in shapes
            if value.shape != shapes[name]:
                raise ValueError(
                    f"init['{name}'] has shape {value.shape}, expected "
                    f"{shapes[name]} (n_features={n_features}, d_model="
                    f"{self.d_model_})."
                )

        dtype = sequences_dtype(sequences)
        params = init_params(
            self._random_state,
            n_features,
            self.d_model_,
            pooling=self.pooling,
            positional_encoding=self.positional_encoding,
            n_positions=self.max_tokens_,
            layer_norm=self.layer_norm,
            has_input=has_input,
            init=init,
            dtype=dtype,
        )
        self.target_type_ = task
        if task == "regression":
            self.classes_ = None
        if task is not None:
            n_outputs = len(self.classes_) if task == "classification" else y.shape[1]
            params["head_coef"] = glorot_uniform(
                self._random_state, self._n_features_out, n_outputs, dtype
            )
            params["head_intercept"] = np.zeros(n_outputs, dtype=dtype)
        self._set_params(params)
        self.n_iter_ = 0
        self.t_ = 0
        self.loss_ = None
        self.loss_curve_ = []
        self.best_loss_ = np.inf
        self.validation_scores_ = [] if self.early_stopping else None
        self.best_validation_score_ = -np.inf if self.early_stopping else None
        self._no_improvement_count = 0
        if hasattr(self, "_optimizer"):
            del self._optimizer

    def _set_params(self, params):
        """Store the parameters as fitted attributes (None for absent ones)."""
        for name, attribute in PARAM_ATTRIBUTES.items():
            setattr(self, attribute, params.get(name))

    def _block_options(self):
        """Keyword arguments of the model's forward and backward functions."""
        return dict(
            n_heads=self.n_heads,
            pooling=self.pooling,
            positional_encoding=self.positional_encoding,
            residual=self.residual,
            layer_norm=self.layer_norm,
            causal=self.causal,
        )

    def _loss_grad(self, params, data, rows):
        """Loss and gradients on the samples ``rows`` (weighted mean + L2).

        Parameters
        ----------
        params : dict of str to ndarray
            Block and head parameters.
        data : tuple
            ``(sequences, lengths, y, sample_weight)`` of the whole training set.
        rows : ndarray of int
            Samples of this (mini)batch.

        Returns
        -------
        loss : float
        grads : dict of str to ndarray
        """
        sequences, all_lengths, all_y, all_weights = data
        total_weight = float(all_weights[rows].sum())
        loss_function = LOSS_FUNCTIONS[self.target_type_]
        options = self._block_options()

        def batch_loss_grad(batch, x):
            lengths, y, weight = all_lengths[batch], all_y[batch], all_weights[batch]
            fraction = float(weight.sum()) / total_weight
            _, pooled, cache = forward(params, x, lengths, **options)
            out = linear_forward(pooled, params["head_coef"], params["head_intercept"])
            batch_loss, d_out = loss_function(out, y, weight)
            d_out *= fraction
            d_pooled, d_coef, d_intercept = linear_backward(
                d_out, pooled, params["head_coef"]
            )
            batch_grads = backward(d_pooled, params, x, cache, **options)
            batch_grads["head_coef"] = d_coef
            batch_grads["head_intercept"] = d_intercept
            return fraction * batch_loss, batch_grads

        loss = 0.0
        grads = {name: np.zeros_like(value) for name, value in params.items()}
        for batch_loss, batch_grads in self._map_batches(
            batch_loss_grad, sequences, all_lengths, rows, training=True
        ):  # summed in the order of the batches, whatever the threads
            loss += batch_loss
            for name, grad in batch_grads.items():
                grads[name] += grad
        # L2 penalty, relative to the (weighted) number of samples as in MLP
        for name in PENALIZED:
            if name in params:
                value = params[name]
                loss += 0.5 * self.alpha * float(np.sum(value * value)) / total_weight
                grads[name] += (self.alpha / total_weight) * value
        return loss, grads

    def _validation_score(self, params, data, rows):
        """Accuracy (classification) or R^2 (regression) of the head on ``rows``."""
        sequences, lengths, y, _ = data

        def predict(batch, x):
            _, pooled, _ = forward(params, x, lengths[batch], **self._block_options())
            coef, intercept = params["head_coef"], params["head_intercept"]
            return batch, linear_forward(pooled, coef, intercept)

        predictions = np.empty((len(y), params["head_intercept"].shape[0]))
        for batch, batch_predictions in self._map_batches(
            predict, sequences, lengths, rows, training=False
        ):
            predictions[batch] = batch_predictions
        if self.target_type_ == "classification":
            return accuracy_score(y[rows], predictions[rows].argmax(axis=1))
        return r2_score(y[rows], predictions[rows])

    def _fit_stochastic(self, params, data, incremental):
        """Adam on shuffled minibatches, with early stopping (like MLP)."""
        sequences, lengths, y, sample_weight = data
        n_samples = len(lengths)
        train = np.arange(n_samples)
        validation = None
        if self.early_stopping and not incremental:
            stratify, test_size = None, self.validation_fraction
            if self.target_type_ == "classification":
                # stratified, with at least one validation sample per class
                stratify = y
                n_classes = len(self.classes_)
                test_size = max(math.ceil(test_size * n_samples), n_classes)
            train, validation = train_test_split(
                train,
                test_size=test_size,
                random_state=self._random_state,
                stratify=stratify,
            )
        n_train = len(train)
        if self.batch_size == "auto":
            batch_size = min(200, n_train)
        else:
            batch_size = min(self.batch_size, n_train)
        if not incremental or not hasattr(self, "_optimizer"):
            self._optimizer = AdamOptimizer(
                params, self.learning_rate_init, self.beta_1, self.beta_2, self.epsilon
            )
        best_params = None
        start = time.time()
        for _ in range(self.max_iter):
            if self.shuffle:
                train = self._random_state.permutation(train)
            epoch_loss = 0.0
            for batch in gen_batches(n_train, batch_size):
                rows = train[batch]
                loss, grads = self._loss_grad(params, data, rows)
                self._optimizer.update_params(params, grads)
                epoch_loss += loss * float(sample_weight[rows].sum())
            self.n_iter_ += 1
            self.t_ += n_train
            self.loss_ = epoch_loss / float(sample_weight[train].sum())
            self.loss_curve_.append(self.loss_)

            score = None
            if validation is not None:
                score = self._validation_score(params, data, validation)
                self.validation_scores_.append(score)
                if score > self.best_validation_score_:
                    best_params = {k: v.copy() for k, v in params.items()}
            self._update_no_improvement_count(score)
            if self.verbose:
                self._print_iteration(self.loss_, start, score)
            if incremental:
                break
            if self._no_improvement_count > self.n_iter_no_change:
                if self.verbose:
                    criterion = (
                        "Validation score"
                        if validation is not None
                        else ("Training loss")
                    )
                    print(
                        f"[{type(self).__name__}] {criterion} did not improve more "
                        f"than tol={self.tol} for {self.n_iter_no_change} "
                        "consecutive epochs. Stopping."
                    )
                break
            if self.n_iter_ == self.max_iter:
                warnings.warn(
                    f"Stochastic optimizer: maximum iterations ({self.max_iter}) "
                    "reached and the optimization hasn't converged yet.",
                    ConvergenceWarning,
                    stacklevel=3,
                )
        if best_params is not None:
            params.update(best_params)

    def _update_no_improvement_count(self, score):
        """Count epochs without improvement of the validation score or loss."""
        if score is not None:
            if score < self.best_validation_score_ + self.tol:
                self._no_improvement_count += 1
            else:
                self._no_improvement_count = 0
            self.best_validation_score_ = max(self.best_validation_score_, score)
        else:
            if self.loss_curve_[-1] > self.best_loss_ - self.tol:
                self._no_improvement_count += 1
            else:
                self._no_improvement_count = 0
        self.best_loss_ = min(self.best_loss_, self.loss_curve_[-1])

    def _fit_lbfgs(self, params, data):
        """Full-batch L-BFGS-B on the packed parameter vector (like NCA)."""
        names = sorted(params)
        shapes = [params[name].shape for name in names]
        sizes = [math.prod(shape) for shape in shapes]
        dtype = params[names[0]].dtype
        rows = np.arange(len(data[1]))
        start = time.time()

        def unpack(theta):
            pieces = np.split(theta, np.cumsum(sizes)[:-1])
            return {
                name: piece.reshape(shape).astype(dtype)
                for name, piece, shape in zip(names, pieces, shapes, strict=True)
            }

        def loss_grad(theta):
            loss, grads = self._loss_grad(unpack(theta), data, rows)
            return loss, np.concatenate([grads[name].ravel() for name in names]).astype(
                np.float64
            )

        def callback(intermediate_result):
            self.loss_curve_.append(float(intermediate_result.fun))
            if self.verbose:
                self._print_iteration(self.loss_curve_[-1], start)

        theta = np.concatenate([params[name].ravel() for name in names])
        result = scipy.optimize.minimize(
            loss_grad,
            theta.astype(np.float64),
            method="L-BFGS-B",
            jac=True,
            callback=callback,
            options={"maxiter": self.max_iter, "gtol": self.tol},
        )
        self.n_iter_ += _check_optimize_result("lbfgs", result, self.max_iter)
        params.update(unpack(result.x))
        self.loss_ = float(result.fun)
        self.best_loss_ = min(self.best_loss_, self.loss_)

    def _print_iteration(self, loss, start, score=None):
        line = f"{self.n_iter_:>10d} {loss:>20.6e} {time.time() - start:>10.2f}"
        if score is not None:
            line += f" {score:>12.4f}"
        print(f"[{type(self).__name__}] {line}")

    def _resolve_head_dim(self, n_features, init):
        """Head width: the parameter, else the width ``init`` implies, else the rule."""
        if self.head_dim is not None:
            return self.head_dim
        for name in ("query", "key", "value", "output", "input"):
            if name in init:
                width = np.shape(init[name])[-1]
                if width % self.n_heads:
                    raise ValueError(
                        f"init['{name}'] has {width} columns, which n_heads="
                        f"{self.n_heads} does not divide; its width sets the model "
                        "width n_heads * head_dim."
                    )
                return width // self.n_heads
        return max(MIN_HEAD_DIM, math.ceil(n_features / self.n_heads))

    def _params(self, dtype):
        """The fitted parameters as a dict for the kernels, cast to ``dtype``."""
        return {
            name: getattr(self, attribute).astype(dtype, copy=False)
            for name, attribute in PARAM_ATTRIBUTES.items()
            if getattr(self, attribute) is not None
        }

    def _check_sequences(self, X):
        """Validate X for a fitted transformer; return checked sequences."""
        check_is_fitted(self)
        sequences = check_input(self, X, reset=False, embed_dim=self.embed_dim)
        self._check_lengths(sequence_lengths(sequences))
        return sequences

    def _batches(self, sequences, lengths, rows, *, training, return_weights=False):
        """Padded batches of the samples ``rows`` that fit in ``working_memory``.

        And in :data:`BATCH_BYTES`, which keeps a batch in the CPU's caches.

        Parameters
        ----------
        sequences : ndarray of shape (n_samples, n_tokens, n_features) or list
            Checked sequences.
        lengths : ndarray of shape (n_samples,)
            Their lengths.
        rows : ndarray of int
            The samples to batch.
        training : bool
            Training keeps about twenty (T, d_model) activations per token for
            the backward pass, a forward pass about ten.
        return_weights : bool, default=False
            The attention weights (T per token and head) are kept.

        Yields
        ------
        batch : ndarray of int
            The samples of this batch, a subset of ``rows``.
        x : ndarray of shape (len(batch), T, n_features)
            Their tokens, zero-padded to the longest.
        """
        dtype = sequences_dtype(sequences)
        n_values_per_token = token_width(sequences) + (20 if training else 10) * (
            self.d_model_
        )

        def row_bytes(n_tokens):
            n_tokens += self.pooling == "cls"
            # one row of scores per head lives in the attention tiles
            scores = self.n_heads * (n_tokens if return_weights else 1)
            return n_tokens * (n_values_per_token + scores) * dtype.itemsize

        budget = min(working_memory_bytes(), BATCH_BYTES)
        for batch in batch_indices(lengths[rows], row_bytes, budget):
            batch = rows[batch]
            if isinstance(sequences, np.ndarray):
                if np.all(np.diff(batch) == 1):  # consecutive rows: a view
                    yield batch, sequences[batch[0] : batch[-1] + 1]
                else:
                    yield batch, sequences[batch]  # a copy of these rows only
            else:
                yield batch, pad_sequences([sequences[i] for i in batch], dtype)[0]

    def _map_batches(self, function, sequences, lengths, rows, **batch_options):
        """``function(batch, x)`` for each batch of :meth:`_batches`, in order.

        Batches run side by side on the threads the BLAS limit allows, each on
        one BLAS thread (see :func:`~skattn._attention.map_parallel`), a group of
        as many batches as threads at a time so that memory stays bounded.
        Every batch is computed the same way whatever the number of threads.
        """
        batches = self._batches(sequences, lengths, rows, **batch_options)
        n_workers = parallel_workers()
        while group := list(itertools.islice(batches, n_workers)):
            yield from map_parallel(lambda item: function(*item), group)

    def _forward_batches(self, sequences, *, return_weights=False):
        """Run the block on batches (see :meth:`_batches`), in order.

        Yields
        ------
        rows : ndarray of int
            Indices of the batch's samples.
        tokens : ndarray of shape (batch, T', d_model_)
            Per-token outputs, padded.
        pooled : ndarray of shape (batch, n_features_out)
            Pooled outputs.
        cache : dict
            Forward cache (see :func:`skattn._model.forward`).
        """
        params = self._params(sequences_dtype(sequences))
        lengths = sequence_lengths(sequences)
        options = self._block_options()

        def run(rows, x):
            tokens, pooled, cache = forward(
                params, x, lengths[rows], return_weights=return_weights, **options
            )
            return rows, tokens, pooled, cache

        yield from self._map_batches(
            run,
            sequences,
            lengths,
            np.arange(len(lengths)),
            training=False,
            return_weights=return_weights,
        )

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
            ``pooling="flatten"``.
        """
        sequences = self._check_sequences(X)
        X_new = np.empty(
            (len(sequences), self._n_features_out), dtype=sequences_dtype(sequences)
        )
        with single_threaded_blas():  # once, not per batch: it costs 40 us
            for rows, _, pooled, _ in self._forward_batches(sequences):
                X_new[rows] = pooled
        return X_new

    def transform_sequences(self, X):
        """Per-token outputs of the block, before pooling.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences, as for :meth:`transform`.

        Returns
        -------
        tokens : ndarray of shape (n_samples, n_tokens, d_model_) or list of \
                ndarray of shape (n_tokens_i, d_model_)
            An array for table and 3D input, a list for a list of sequences. With
            ``pooling="cls"`` each sequence ends with the class token's output
            (``n_tokens + 1`` rows).
        """
        return self._per_token(X, "tokens")

    def attention_weights(self, X):
        """Attention weights of every head.

        Row ``t`` of a head's matrix gives how much token ``t`` attends to each
        token; rows sum to 1.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences, as for :meth:`transform`.

        Returns
        -------
        weights : ndarray of shape (n_samples, n_heads, n_tokens, n_tokens) or \
                list of ndarray of shape (n_heads, n_tokens_i, n_tokens_i)
            An array for table and 3D input, a list for a list of sequences. With
            ``pooling="cls"`` the class token is the last token (``n_tokens + 1``).
            This holds ``n_heads * n_tokens**2`` numbers per sample.
        """
        return self._per_token(X, "weights")

    def _per_token(self, X, what):
        """Collect per-token outputs ("tokens") or attention weights ("weights")."""
        sequences = self._check_sequences(X)
        is_array = isinstance(sequences, np.ndarray)
        extra = int(self.pooling == "cls")
        results = [None] * len(sequences)
        with single_threaded_blas():  # see transform
            for rows, tokens, _, cache in self._forward_batches(
                sequences, return_weights=what == "weights"
            ):
                values = tokens if what == "tokens" else cache["attention"]["weights"]
                for row, value in zip(rows, values, strict=True):
                    n_tokens = len(sequences[row]) + extra
                    if what == "tokens":
                        results[row] = value[:n_tokens].copy()
                    else:
                        results[row] = value[:, :n_tokens, :n_tokens].copy()
        return np.stack(results) if is_array else results

    @property
    def _n_features_out(self):
        """Number of output features, for ``get_feature_names_out``."""
        if self.pooling == "flatten":
            return self.max_tokens_ * self.d_model_
        return self.d_model_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.target_tags.required = self.objective in ("classification", "regression")
        return tags
