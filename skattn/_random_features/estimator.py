"""RandomAttentionFeatures: many seeded attention models, statistics side by side.

A ROCKET-style transform (Dempster et al., 2020): instead of random convolution
kernels, independent random transformer encoders (the model of
:class:`~skattn.AttentionTransformer`, one :class:`~skattn._model.model.ModelConfig`
each), each pooled into simple statistics of its per-token outputs. Nothing
is trained: ``fit`` draws the models and learns the token statistics (and the
thresholds of the PPV and LSPV from the models' outputs on a sample).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._estimators.attributes import fitted_object
from .._estimators.dask import blocked_outputs, is_dask_collection
from .._input.formats import (
    CHANNELS_FIRST,
    CHANNELS_LAST,
    TABLE,
    check_input,
    input_format,
)
from .._input.validation import (
    Interval,
    StrOptions,
    _fit_context,
    batch_budget,
    check_finite_output,
    check_sample_weight,
    check_token_statistics,
)
from .._model.pooling import STATISTICS
from .._model.sequences import (
    SERIES_MAX_FEATURES,
    sequence_lengths,
    sequences_dtype,
    series_median_length,
    token_moments,
    token_width,
)
from .._persistence import PlainFittedState, VersionedState
from .._training.callbacks import CALLBACK_BASES, FitTasks
from .columns import column_blocks, output_columns
from .configs import (
    RANDOM_POSITIONAL_ENCODINGS,
    THRESHOLDED,
    band_candidates,
    differences,
    drawn_candidates,
    patch_sizes,
    patch_strides,
    positional_encodings,
    statistic_names,
)
from .fitted import FittedFeatures
from .models import draw_models, thresholds
from .runner import ModelRunner


class RandomAttentionFeatures(
    VersionedState,
    PlainFittedState,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    *CALLBACK_BASES,
    BaseEstimator,
):
    """Random attention features: many seeded attention models, nothing trained.

    A ROCKET-style transform of sequences of tokens: ``n_models`` independent
    transformer encoders (each the model of :class:`~skattn.AttentionTransformer`
    with ``objective=None``: patches of a series, input projection, positional
    encoding or none, one post-norm self-attention sublayer), seeded from
    ``random_state``, each pooled into simple statistics of its per-token
    outputs. The statistics of all the models, side by side, are the features
    for a linear model after a :class:`~sklearn.preprocessing.StandardScaler`.

    ``fit`` trains nothing: it draws the models, learns the token
    standardisation and, for the PPV or LSPV, thresholds from the models'
    outputs on at most 16 training sequences.

    Read more in the :ref:`User Guide <random_features>`.

    Parameters
    ----------
    n_models : int, default=16
        Number of independent models.

    n_heads, head_dim : int or list of int, default=1, 64
        Heads of a model and the width of each (``n_heads * head_dim`` the
        model's); from a list, each model draws one value.

    causal : bool or list of bool, default=False
        Whether a model's token ``i`` attends only to tokens ``j <= i``.

    attention_window : int, list of int, "auto" or None, default="auto"
        The window of a model's banded attention (as
        :class:`AttentionTransformer`'s), in time linear in the length; None:
        full attention. From a list, each model draws one. ``"auto"``: bands
        of 17 patches for series read in patches (``patch_size="auto"``: of
        a median length above 32), full attention for other input
        (:ref:`default-random-attention_window`).

    attention_dilation : int, list of int or "auto", default="auto"
        The step between the tokens of a model's band (as
        :class:`AttentionTransformer`'s). From a list, each model draws one;
        ``"auto"``: drawn on ROCKET's exponential scale, up to a reach of half
        the median length.

    positional_encoding : {"sinusoidal", "rotary", None}, list of them, or \
            "auto", default="auto"
        A model's positions, as :class:`AttentionTransformer`'s but never
        learned (rotary: even head widths only; None: outputs independent of
        where a patch is); from a list, each model draws one. ``"auto"``:
        for series read in patches, half the models without (pooling windows
        wherever they are, as ROCKET's kernels); sinusoidal positions for
        other input (:ref:`default-random-positional_encoding`).

    patch_size : int, list of int, "auto" or None, default="auto"
        Tokens per patch of a model (as in :class:`AttentionTransformer`): a
        model sees the series at the scale of its patches, as a ROCKET kernel
        at its dilation; from a list, each model draws one (1 or None: no
        patches). ``"auto"``: for series of at most 8 features per token, the
        powers of two from ``median_length / 128`` to ``median_length / 16``;
        for univariate series of median length 32 or less, windows of 1 to 4
        points (:ref:`default-random-patch_size`).

    patch_stride : int, list of int, "auto" or None, default="auto"
        Tokens from the start of a model's patch to the start of the next:
        smaller than the patch size, the patches overlap as a convolution
        slides; None: side by side. From a list, each model with patches draws
        one (a stride larger than its patch size raises a ValueError).
        ``"auto"``: an eighth of the patch size (at least 1), and at most 256
        patches at the median training length
        (:ref:`default-random-patch_stride`).

    difference : bool, list of bool or "auto", default="auto"
        Whether a model reads each token beside its (halved) first difference,
        as MultiRocket does. ``"auto"``: every model of series read in patches,
        half of other narrow tokens (:ref:`default-random-difference`).

    features_per_token : int, default=None
        For a table: the consecutive columns that form one token (None: 1);
        must divide the number of columns. Leave it None for sequences.

    data_format : {"channels_last", "channels_first"}, default="channels_last"
        Layout of 3D arrays and of a list's arrays, as in
        :class:`AttentionTransformer` (:ref:`input_formats`).

    scale_tokens : bool, default=True
        Standardise the tokens (and differences) with their weighted moments
        over fit's valid tokens (per column of a table).

    statistics : {"mean", "max", "min", "first", "last", "ppv", "lspv"}, list \
            of them, or "auto", default="auto"
        The statistics each model's per-token outputs are pooled into, feature
        by feature over the valid tokens, in the order of the list: the mean,
        maximum and minimum; the first and last token (patch) (the poolings of
        those names of :class:`AttentionTransformer`); ``"ppv"``,
        ROCKET's proportion of the tokens above a threshold; ``"lspv"``,
        MultiRocket's longest stretch of consecutive tokens above it, divided
        by the number of tokens. The thresholds are quantiles of each feature's
        outputs on training data at levels drawn between 0.25 and 0.75, as
        MiniRocket draws its biases. ``"auto"``: ``["max", "ppv", "lspv"]``
        for series read in patches, ``["max", "ppv"]`` for other tokens of at
        most 8 features, ``["mean", "max", "min", "first", "last"]`` for wider
        tokens (:ref:`default-random-statistics`). The statistics used are
        ``statistics_``.

    n_thresholds : int, default=3
        Thresholds per feature of a model for the PPV and the LSPV, as
        MiniRocket's biases; the tokens' take one (:ref:`default-random-n_thresholds`).

    token_statistics : "auto", list of str or None, default="auto"
        Statistics (of those of ``statistics``) of the standardised tokens
        themselves, ``n_token_features`` columns each after the models'.
        ``"auto"``: those of ``statistics_``, so that what a linear model on
        them knows is never lost (:ref:`default-random-token_statistics`).

    random_state : int, RandomState instance or None, default=None
        Seed of the models (configurations and weights); an int gives
        reproducible output. Model ``m`` depends only on the ``m``-th seed
        drawn, so a larger ``n_models`` adds models after the same first ones.

    Attributes
    ----------
    n_features_in_ : int
        Columns of a table seen in fit, or the token width of sequences.

    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the columns seen in fit, for a DataFrame with string column
        names.

    token_mean_, token_scale_ : ndarray of shape (n_token_features,) or \
            (n_tokens, n_token_features), or None
        The token standardisation (``scale_tokens``), per feature or per
        column of a table.

    difference_mean_, difference_scale_ : ndarray of the shape of \
            ``token_mean_``, or None
        The standardisation of the tokens' differences; None without
        ``scale_tokens`` or when no model reads the differences.

    models_ : list of dict
        The configuration each model drew: ``"n_heads"``, ``"head_dim"``,
        ``"positional_encoding"``, ``"causal"``, ``"patch_size"`` (None for
        none), ``"difference"``, ``"patch_stride"`` (None without patches),
        and with ``attention_window`` its band (``"attention_window"``,
        ``"attention_dilation"``).

    weights_ : list of dict
        The seeded float32 weights of each model, in the layout of
        :class:`AttentionTransformer`'s ``init``: ``"input"`` (twice as many
        rows with ``difference``) and ``"layers"``, one dict with the keys of
        its ``layers_``.

    statistics_ : list of str
        The statistics of ``statistics`` (``"auto"`` resolved), in the order
        of the columns of each model.

    token_statistics_ : tuple of str
        The tokens' own statistics, in the order of their columns.

    thresholds_ : list of ndarray of shape (n_thresholds, model width), or None
        Each model's thresholds per feature for the PPV and the LSPV (from 16
        training sequences at most); None without them.

    n_features_out_ : int
        Number of output features.

    See Also
    --------
    skattn.AttentionTransformer : One attention model, seeded or trained from
        ``y``.
    sklearn.kernel_approximation.RBFSampler : Random features of another
        kernel, for a linear model after them.

    Notes
    -----
    ROCKET [1]_ pools many random convolution kernels into the maximum and the
    proportion of positive values for a ridge classifier; MiniRocket [2]_ and
    MultiRocket [4]_ refine it. This transformer does the same with random
    attention models [3]_, each independent. The documented pipeline is::

        make_pipeline(
            RandomAttentionFeatures(random_state=0),
            StandardScaler(),
            RidgeClassifierCV(alphas=np.logspace(-3, 3, 10)),
        )

    A model's input projection has variance ``1 / n_token_features``
    (:ref:`default-random-input_scale`). The models compute in float32 (the
    output has the dtype of ``X``) within ``working_memory``, with the models
    and settings of the last ``fit`` whatever ``set_params`` changed since.

    References
    ----------
    .. [1] A. Dempster, F. Petitjean and G. I. Webb, "ROCKET: Exceptionally
       fast and accurate time series classification using random convolutional
       kernels", Data Mining and Knowledge Discovery 34, 2020.
    .. [2] A. Dempster, D. F. Schmidt and G. I. Webb, "MiniRocket: A Very Fast
       (Almost) Deterministic Transform for Time Series Classification", KDD
       2021.
    .. [3] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
    .. [4] C. W. Tan, A. Dempster, C. Bergmeir and G. I. Webb, "MultiRocket:
       multiple pooling operators and transformations for fast and effective
       time series classification", Data Mining and Knowledge Discovery 36,
       2022.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import RidgeClassifierCV
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skattn import RandomAttentionFeatures
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((40, 12, 3))  # 40 sequences of 12 tokens of width 3
    >>> y = (X[:, :6, 0].mean(axis=1) > X[:, 6:, 0].mean(axis=1)).astype(int)
    >>> features = RandomAttentionFeatures(n_models=4, random_state=0).fit(X)
    >>> features.transform(X).shape  # 4 models x (max, 3 PPVs) x 64, the tokens' 2 x 3
    (40, 1030)
    >>> features.statistics_  # "auto": ROCKET's two for narrow tokens
    ['max', 'ppv']
    >>> features.get_feature_names_out()[[0, 64, 1023, 1029]].tolist()
    ['randomattentionfeatures_m0_max_0', 'randomattentionfeatures_m0_ppv0_0', \
'randomattentionfeatures_m3_ppv2_63', 'randomattentionfeatures_tokens_ppv_2']
    >>> sorted(features.weights_[0]["layers"][0])
    ['key', 'norm1_bias', 'norm1_weight', 'output', 'query', 'value']
    >>> model = make_pipeline(
    ...     RandomAttentionFeatures(random_state=0),
    ...     StandardScaler(),
    ...     RidgeClassifierCV(alphas=np.logspace(-3, 3, 10)),
    ... ).fit(X[:30], y[:30])
    >>> model.predict(X[30:]).shape
    (10,)
    """

    _parameter_constraints: dict = {
        "n_models": [Interval(Integral, 1, None, closed="left")],
        "n_heads": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "head_dim": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "causal": ["boolean", "array-like"],
        "positional_encoding": [
            StrOptions({*RANDOM_POSITIONAL_ENCODINGS, "auto"}),
            None,
            "array-like",
        ],
        "patch_size": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            "array-like",
            None,
        ],
        "patch_stride": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            "array-like",
            None,
        ],
        "difference": ["boolean", StrOptions({"auto"}), "array-like"],
        "features_per_token": [Interval(Integral, 1, None, closed="left"), None],
        "data_format": [StrOptions({CHANNELS_LAST, CHANNELS_FIRST})],
        "scale_tokens": ["boolean"],
        "statistics": [StrOptions(set(STATISTICS) | {"auto"}), "array-like"],
        "n_thresholds": [Interval(Integral, 1, None, closed="left")],
        "token_statistics": [StrOptions({"auto"}), list, tuple, None],
        "attention_window": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            "array-like",
            None,
        ],
        "attention_dilation": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            "array-like",
        ],
        "random_state": ["random_state"],
    }

    _fitted_type = FittedFeatures

    @property
    def models_(self):
        return fitted_object(self, "models_").configs

    @property
    def weights_(self):
        return fitted_object(self, "weights_").params

    @weights_.setter
    def weights_(self, weights):
        self._fitted = fitted_object(self, "weights_").with_params(weights)

    def __init__(
        self,
        n_models=16,
        *,
        n_heads=1,
        head_dim=64,
        causal=False,
        attention_window="auto",
        attention_dilation="auto",
        positional_encoding="auto",
        patch_size="auto",
        patch_stride="auto",
        difference="auto",
        features_per_token=None,
        data_format="channels_last",
        scale_tokens=True,
        statistics="auto",
        n_thresholds=3,
        token_statistics="auto",
        random_state=None,
    ):
        self.n_models = n_models
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.causal = causal
        self.attention_window = attention_window
        self.attention_dilation = attention_dilation
        self.positional_encoding = positional_encoding
        self.patch_size = patch_size
        self.patch_stride = patch_stride
        self.difference = difference
        self.features_per_token = features_per_token
        self.data_format = data_format
        self.scale_tokens = scale_tokens
        self.statistics = statistics
        self.n_thresholds = n_thresholds
        self.token_statistics = token_statistics
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Draw the models and learn the token standardisation.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Training sequences (see :ref:`input_formats`).

        y : None
            Ignored: nothing is learned from a target.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the token statistics: finite,
            non-negative and not all zero (only their ratios matter); None
            weighs each 1. The thresholds are quantiles over training sequences
            of positive weight, each counted once.

        Returns
        -------
        self : RandomAttentionFeatures
            Fitted transformer.

        Raises
        ------
        ValueError
            With the PPV or LSPV, when tokens too large for float32
            (unstandardised) make the models overflow on the sample of their
            thresholds, as :meth:`transform` would.
        """
        try:
            return self._fit_once(X, y, sample_weight)
        finally:  # the input format goes into the fitted object; a failed
            # fit leaves the former fitted object's in force
            vars(self).pop("_input_format", None)

    def _fit_once(self, X, y, sample_weight):
        """The body of :meth:`fit`."""
        if is_dask_collection(X):
            raise TypeError(
                "RandomAttentionFeatures.fit reads X in memory, in one pass for "
                "its token statistics, and takes no dask collection, which it "
                "would gather whole. Fit it on a sample held in memory (for "
                "example X[:10_000].compute()); transform then reads the dask "
                "array block by block."
            )
        candidates = drawn_candidates(self.get_params())
        statistic_names(self.statistics, None)  # checked before any work
        self._token_statistics(())
        sequences = check_input(self, X, reset=True)
        dtype = sequences_dtype(sequences)
        tasks = FitTasks(self, X, y, sample_weight)
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, len(sequences), dtype)
        # one task, no subtask: scikit-learn's callbacks (ProgressBar of a
        # Pipeline) see the step begin and end
        tasks.start("fit", max_subtasks=0)
        table = input_format(self)["kind"] == TABLE
        n_features = token_width(sequences)
        n_tokens = sequences.shape[1] if table else 1
        median = None  # of the lengths of series, for patches and the LSPV
        if not table:
            lengths = sequence_lengths(sequences)
            median = series_median_length(sequences, lengths, sample_weight)
        statistics = statistic_names(self.statistics, n_features, median)
        candidates["patch_size"] = patch_sizes(self.patch_size, median, n_features)
        candidates["positional_encoding"] = positional_encodings(
            candidates["positional_encoding"], median
        )
        narrow = not table and n_features <= SERIES_MAX_FEATURES
        candidates["difference"] = differences(self.difference, narrow, median)
        candidates["patch_stride"] = patch_strides(self.patch_stride)
        windows, dilations = band_candidates(
            self.attention_window, self.attention_dilation, median
        )
        models, weights, levels = draw_models(
            check_random_state(self.random_state),
            self.n_models,
            candidates,
            (windows, dilations),
            n_features,
            n_tokens,
            median,
            self.n_thresholds,
        )
        self._fitted = FittedFeatures(
            models, weights, n_features, n_tokens, vars(self).pop("_input_format")
        )
        self.token_mean_ = self.token_scale_ = None
        self.difference_mean_ = self.difference_scale_ = None
        budget = batch_budget()
        if self.scale_tokens:
            self.token_mean_, self.token_scale_ = token_moments(
                sequences, sample_weight, per_position=table, budget_bytes=budget
            )
        if self.scale_tokens and self._any_difference():
            self.difference_mean_, self.difference_scale_ = token_moments(
                sequences,
                sample_weight,
                per_position=table,
                differences=True,
                budget_bytes=budget,
            )
        self.statistics_ = statistics
        self.token_statistics_ = self._token_statistics(statistics)
        self.thresholds_ = None
        if THRESHOLDED & set(statistics):
            self.thresholds_ = self._thresholds(sequences, levels, sample_weight)
        self.n_features_out_ = sum(
            width * len(labels) for _, width, labels in self._column_blocks()
        )
        tasks.finish()
        return self

    def transform(self, X):
        """Pooled statistics of every model, side by side.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Sequences of the kind (table or sequences) and token width of fit.

        Returns
        -------
        X_new : ndarray of shape (n_samples, ``n_features_out_``)
            For each model in turn, each statistic of ``statistics_`` in turn,
            one column per feature of the model's width; then with
            each statistic of ``token_statistics_`` of the tokens, one column
            per token feature; computed in float32, in the dtype of X.

        Raises
        ------
        ValueError
            When tokens too large for float32 (unstandardised, or far
            outside those of fit) make the models overflow, instead of NaN.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._estimators.dask)
            return blocked_outputs(self, "transform", X)
        check_is_fitted(self)
        sequences = check_input(self, X, reset=False)
        X_new = output_columns(
            self._runner(sequences),
            sequences,
            self.statistics_,
            self.thresholds_,
            self.token_statistics_,
            self.n_features_out_,
            batch_budget(),
        )
        check_finite_output(self, X_new, sequences, self.token_mean_ is not None)
        return X_new

    def get_feature_names_out(self, input_features=None):
        """Output feature names: model, statistic and feature of the model.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Only checked against ``feature_names_in_``: the outputs do not
            correspond to input features.

        Returns
        -------
        feature_names_out : ndarray of str objects
            ``randomattentionfeatures_m{model}_{statistic}_{feature}``, then
            ``randomattentionfeatures_tokens_{statistic}_{feature}`` with
            ``token_statistics_``, in the order of the columns of :meth:`transform`.
        """
        check_is_fitted(self, "n_features_out_")
        # checks input_features like the other transformers of scikit-learn
        super().get_feature_names_out(input_features)
        prefix = type(self).__name__.lower()
        names = [
            f"{prefix}_{block}_{label}_{feature}"
            for block, width, labels in self._column_blocks()
            for label in labels
            for feature in range(width)
        ]
        return np.asarray(names, dtype=object)

    # Helpers
    # -------

    def _token_width(self):
        """Features of a token of the fitted input."""
        fitted = input_format(self)
        if fitted["kind"] == TABLE:
            return fitted["features_per_token"] or 1
        return self.n_features_in_

    def _column_blocks(self):
        """Each block of output columns in order (see
        :func:`~.columns.column_blocks`)."""
        token_width = self._token_width() if self.token_statistics_ else None
        return column_blocks(
            self.models_,
            self.statistics_,
            self.thresholds_,
            self.token_statistics_,
            token_width,
        )

    def _runner(self, sequences):
        """The fitted models, ready to run on padded batches of ``sequences``."""
        dtype = sequences_dtype(sequences)
        n_features = token_width(sequences)
        token_stats = (self.token_mean_, self.token_scale_)
        difference_stats = (self.difference_mean_, self.difference_scale_)
        token_stats, difference_stats = (
            tuple(None if m is None else m.astype(dtype, copy=False) for m in pair)
            for pair in (token_stats, difference_stats)
        )
        models = self._fitted.built
        return ModelRunner(models, token_stats, difference_stats, n_features, dtype)

    def _token_statistics(self, statistics):
        """The statistics of the tokens themselves: ``token_statistics``,
        ``"auto"`` those of the models (``statistics``, resolved)."""
        if isinstance(self.token_statistics, str):  # "auto"
            return tuple(statistics)
        if self.token_statistics is None:
            return ()
        return check_token_statistics(self.token_statistics, STATISTICS)

    def _thresholds(self, sequences, levels, sample_weight):
        """Each model's thresholds (see ``thresholds_``): threshold ``k`` of
        feature ``j`` of model ``m`` at quantile ``levels[m][k, j]`` of its
        outputs."""
        runner = self._runner(sequences)
        out = thresholds(runner, sequences, levels, sample_weight, batch_budget())
        check_finite_output(self, out, sequences, self.scale_tokens)
        return out

    def _any_difference(self):
        """Whether a fitted model reads the differences of the tokens."""
        return any(config["difference"] for config in self.models_)

    @property
    def _n_features_out(self):
        """Number of output features, for ``get_feature_names_out``."""
        return self.n_features_out_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
