"""RandomAttentionFeatures: many seeded attention models, statistics side by side.

A ROCKET-style transform (Dempster et al., 2020): instead of random convolution
kernels, independent random transformer encoders (the model of
:class:`~skattn.AttentionTransformer`, built by ``skattn._model.build_model``),
each pooled into simple statistics of its per-token outputs. Nothing is
trained: ``fit`` draws the models and learns the token statistics (and the
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

from ._callbacks import CALLBACK_BASES, FitTasks
from ._dask import blocked_outputs, is_dask_collection
from ._model import build_model
from ._parallel import single_threaded_blas
from ._pooling import STATISTIC_POOLINGS, pool_lspv, pool_ppv
from ._random_configs import (
    THRESHOLDED,
    differences,
    drawn_candidates,
    patch_sizes,
    patch_strides,
    positional_encodings,
    statistic_names,
    stride_of,
)
from ._random_models import COMPUTE_DTYPE, ModelRunner, model_width, output_quantiles
from ._sequences import (
    SERIES_MAX_FEATURES,
    map_batches,
    sequence_lengths,
    sequences_dtype,
    series_median_length,
    token_moments,
    token_width,
)
from ._training import batch_budget
from ._validation import (
    CHANNELS_FIRST,
    CHANNELS_LAST,
    TABLE,
    Interval,
    StrOptions,
    _fit_context,
    check_finite_output,
    check_input,
    check_sample_weight,
)

# The statistics each model's per-token outputs are pooled into.
STATISTICS = {**STATISTIC_POOLINGS, "ppv": pool_ppv, "lspv": pool_lspv}
# "ppv" and "lspv" (THRESHOLDED): each feature of a model is compared with
# thresholds, quantiles of its outputs on training data at levels drawn
# uniformly from THRESHOLD_LEVELS (MiniRocket's range for its biases), over
# THRESHOLD_SAMPLES training sequences and at most THRESHOLD_TOKENS of their
# tokens each on average.
THRESHOLD_LEVELS = (0.25, 0.75)
THRESHOLD_SAMPLES = 16
THRESHOLD_TOKENS = 32


class RandomAttentionFeatures(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, *CALLBACK_BASES, BaseEstimator
):
    """Random attention features: many seeded attention models, nothing trained.

    A ROCKET-style transform of sequences of tokens: ``n_models`` independent
    transformer encoders (each the model of :class:`~skattn.AttentionTransformer`
    with ``objective=None``: patches of a series, input projection,
    positional encoding or none, one layer of multi-head self-attention with its
    residual connection and layer norm), with weights seeded from
    ``random_state``, each pooled into simple statistics of its per-token
    outputs (mean, maximum, proportion of positive values, longest stretch of
    positive values, minimum, first and last token). The statistics of
    all the models, side by side, are the features; a linear model after a
    :class:`~sklearn.preprocessing.StandardScaler` learns from them.

    ``fit`` trains nothing: it checks ``X``, draws the models and learns the
    token standardisation (mean and standard deviation of the token features,
    and of their differences), in a few passes over ``X`` as a
    :class:`~sklearn.preprocessing.StandardScaler` would; with the PPV or
    the LSPV it also runs the models on at most 16 training sequences for
    their thresholds.

    Parameters
    ----------
    n_models : int, default=16
        Number of independent models.

    n_heads : int or list of int, default=4
        Number of attention heads of a model; from a list, each model draws one
        value (uniformly, from ``random_state``).

    head_dim : int or list of int, default=16
        Width of each head of a model (the model width is ``n_heads *
        head_dim``); from a list, each model draws one value.

    positional_encoding : {"sinusoidal", None}, list of them, or "auto", \
            default="auto"
        Whether a model adds the sinusoidal positional encoding of Vaswani et
        al. (2017) to its projected tokens (None: its outputs do not depend on
        the order of the tokens, beyond the order inside its patches and the
        differences); from a list, each model draws one. ``"auto"``: for
        series read in patches (see ``patch_size``), ``["sinusoidal", None]``,
        half the models pooling the windows of the series wherever they are,
        as ROCKET's kernels do (over six seeds OSULeaf went from 0.869 to
        0.930, ACSF1 from 0.838 to 0.878 and GunPoint from 0.990 to 0.997,
        for 0.6 points on ArrowHead, 2.3 on PickupGestureWiimoteZ and 0.4 of
        R² on Tecator); ``"sinusoidal"`` for other input (on
        ItalyPowerDemand's 24 points the models without positions cost 0.6
        points). The choice of each model is in ``models_``.

    causal : bool or list of bool, default=False
        Whether token ``i`` of a model attends only to tokens ``j <= i``; from a
        list, each model draws one.

    patch_size : int, list of int, "auto" or None, default="auto"
        Tokens per patch of a model: patches of consecutive tokens side by side
        are its tokens (as ``patch_size`` of :class:`AttentionTransformer`), so
        that a model sees the series at the scale of its patches, as a ROCKET
        kernel sees it at its dilation; from a list, each model draws one value
        (1 or None: no patches). ``"auto"``: for sequences of at most 8
        features per token (series, not word vectors or tables), the powers of
        two from ``median_length / 128`` (at most 128 side-by-side patches,
        which bounds the quadratic cost of attention; see ``patch_stride``)
        to ``median_length / 16`` (at least 16 patches), each model drawing
        one; for univariate series of a median length of 32 or less, the
        sizes 1 to 4 (at most half the median length) with a stride of 1:
        every window of a few consecutive points, as ROCKET's kernels read a
        short series (a scalar point is a poor token; over nine seeds
        ItalyPowerDemand's 24 points went from 0.9645 to 0.9654); no patches
        for other short sequences (on tokens of 8 features, windows raised
        the digits' rows from 0.986 to 0.990 but cost the co-occurrence task
        of :func:`~skattn.datasets.make_sequence_classification` 10 points),
        for wide tokens nor for a table. The size of each model is in
        ``models_``.

    patch_stride : int, list of int, "auto" or None, default="auto"
        Tokens from the start of a model's patch to the start of the next:
        smaller than the patch size, the patches overlap, as a convolution
        slides its kernel (a stride of 1 reads every window of the series);
        None: the patch size, side by side. From a list, each model with
        patches draws one value; a drawn stride larger than the model's patch
        size (which would skip tokens) raises a ValueError in fit.
        ``"auto"``: an eighth of the patch size (at least 1), and no more
        than 256 patches in a sequence of the median training length (the
        stride grows to keep them). Over three seeds, a quarter of the patch
        raised ArrowHead from 0.802 to 0.819, OSULeaf from 0.784 to 0.835 and
        PickupGestureWiimoteZ from 0.820 to 0.860 against side-by-side patches;
        with today's statistics and positions an eighth then raised ArrowHead
        from 0.862 to 0.871 and OSULeaf from 0.930 to 0.939 (six seeds).
        Ignored by models without patches (None in ``models_``).

    difference : bool, list of bool or "auto", default="auto"
        Whether a model reads each token beside its first-order difference,
        half the token minus the one before it (0 for the first token; halved
        so that it never overflows), as MultiRocket reads a series beside its
        differences: the model's tokens are twice as wide, and its patches see
        the slopes of the series as well as its values. From a list, each
        model draws one value.
        ``"auto"``: half the models (drawn) for tokens of at most 8 features
        (series, rows of an image), none for wider tokens (word vectors) or a
        table. The choice of each model is in ``models_``.

    pooling : {"mean", "max", "min", "first", "last", "ppv", "lspv"}, list of \
            them, or "auto", default="auto"
        The statistics of every model, each over the valid tokens of a
        sequence, feature by feature, in the order of the list: ``"mean"``,
        ``"max"``, ``"min"``; ``"first"`` and ``"last"``, the outputs at the
        first and the last valid token (the first and last patch of a model
        that reads patches); ``"ppv"``, ROCKET's proportion of positive
        values: the share of the
        tokens where the feature is above a threshold (``thresholds_``), the
        quantile of the model's outputs on the training data at a level drawn
        between 0.25 and 0.75, as MiniRocket draws its biases; and
        ``"lspv"``, MultiRocket's longest stretch of positive values: the
        largest number of consecutive tokens above the threshold, divided by
        the number of tokens (it tells a pattern held for a while from the
        same share of scattered tokens). The tokens' own PPV and LSPV, with
        ``pool_tokens``, count the tokens above zero (their training mean
        when standardised).
        ``"auto"``: ``["max", "ppv", "lspv"]`` for series long enough to be
        read in patches (at most 8 features per token and a median length
        above 32), ``["max", "ppv"]`` (ROCKET's two) for other tokens of at
        most 8 features (short series, rows of an image, the scalar columns
        of a table), ``["mean", "max", "min", "first", "last"]`` for wider
        tokens (word vectors: the first and last are the states of ``[CLS]``
        and ``[SEP]`` in the token states of a BERT-style encoder). On
        the 100 appliance series of ACSF1 the PPV scored 0.780 where the mean
        did 0.627 (three seeds), and ArrowHead, OSULeaf and
        PickupGestureWiimoteZ gained 1 to 5 points; on sentences of word
        vectors it did no better than the mean. The LSPV then raised ArrowHead
        from 0.832 to 0.867 and OSULeaf from 0.830 to 0.859 (three seeds);
        on ItalyPowerDemand's 24 points it cost 3 of 1,029 test days. On
        the contextual token states of 2,000 newsgroup posts, the first and
        last raised the accuracy from 0.736 to 0.748, and on 4,291 tweets
        from 0.952 to 0.958 (three seeds); on series they cost ArrowHead,
        OSULeaf and ACSF1 2 to 5 points. The minimum then raised the
        newsgroups from 0.748 to 0.753 (contextual states) and from 0.631 to
        0.643 (static word vectors), for 0.958 to 0.952 on the contextual
        tweets (three seeds; 0.2 points more on average over the four text
        sets). The statistics used are in ``statistics_``.

    n_thresholds : int, default=3
        Thresholds per feature of a model for the PPV and the LSPV, each at
        its own level (drawn between 0.25 and 0.75), as MiniRocket gives each
        kernel several biases: each gives ``n_thresholds`` columns per feature
        (the tokens' own, with ``pool_tokens``, one). Three thresholds raised
        ACSF1 from 0.777 to 0.827 and ArrowHead from 0.819 to 0.832 over three
        seeds, with overlapping patches and the PPV. Ignored without ``"ppv"``
        or ``"lspv"``.

    scale_tokens : bool, default=True
        Standardise the tokens with statistics learned in fit:
        ``(x - token_mean_) / token_scale_``, per feature over all the valid
        tokens of the training sequences (padding excluded), or per column for
        a table, weighted by ``sample_weight``; all the models read the same
        standardised tokens, and the models with ``difference`` the same
        standardised differences (``difference_mean_``, ``difference_scale_``).

    pool_tokens : bool, default=True
        Also pool the (standardised) tokens themselves with the statistics of
        ``pooling``, as a model that does nothing would: ``n_token_features``
        columns per statistic after the models'. Cheap, and what a linear
        model on the mean and maximum of the tokens knows is then never lost:
        on sentences given as 384-wide word vectors it added 0.3 to 1.8 points
        of accuracy (a few columns for a series, which it did not change).

    features_per_token : int, default=None
        For 2D input only: the number of consecutive columns that form one
        token. None: 1, each column is a scalar token. Must divide the number of
        columns. With sequences, leave it None (or the token width:
        ``n_channels`` with ``data_format="channels_first"``).

    data_format : {"channels_last", "channels_first"}, default="channels_last"
        Layout of 3D arrays and of the arrays of a list, as in
        :class:`AttentionTransformer`: ``"channels_last"`` reads
        ``(n_samples, n_tokens, n_features)`` and ``(n_tokens_i, n_features)``
        arrays; ``"channels_first"`` reads ``(n_samples, n_channels,
        n_timepoints)`` and ``(n_channels, n_timepoints_i)`` arrays (aeon's and
        sktime's panels) as their transposes, the time points as tokens.
        Nothing is guessed from the shapes. Tables are read the same way in
        both (``"channels_first"`` raises only with ``features_per_token``
        above 1).

    random_state : int, RandomState instance or None, default=None
        Seed of the models (their configurations and weights). Pass an int for
        reproducible output across calls. Model ``m`` depends only on the
        ``m``-th seed drawn from it, so the first models of a larger
        ``n_models`` are the models of a smaller one.

    Attributes
    ----------
    n_features_in_ : int
        Columns of a table seen in fit, or the token width of sequences.

    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the columns seen in fit, for a DataFrame with string column
        names.

    token_mean_, token_scale_ : ndarray of shape (n_token_features,) or \
            (n_tokens, n_token_features), or None
        Statistics of the token standardisation (``scale_tokens``): per feature
        of the tokens, or per column (position and feature) of a table.

    difference_mean_, difference_scale_ : ndarray of the shape of \
            ``token_mean_``, or None
        Statistics of the standardisation of the tokens' differences, the
        same way; None without ``scale_tokens`` or when no model reads the
        differences.

    models_ : list of dict
        The configuration of each model: ``"n_heads"``, ``"head_dim"``,
        ``"positional_encoding"``, ``"causal"``, ``"patch_size"`` (None for
        none), ``"difference"`` and ``"patch_stride"`` (None without patches).

    weights_ : list of dict of str to ndarray
        The seeded float32 weights of each model, by name: ``"input"`` (the input
        projection, ``(n_token_features * patch_size, n_heads * head_dim)``,
        twice as many rows with ``difference``) and the
        attention layer's ``"layers.0.query"``, ``"layers.0.key"``,
        ``"layers.0.value"``, ``"layers.0.output"``, ``"layers.0.norm1_weight"``
        and ``"layers.0.norm1_bias"``, in the ``x @ W`` convention of
        :attr:`AttentionTransformer.layers_ <skattn.AttentionTransformer>`.

    statistics_ : list of str
        The statistics of ``pooling`` (``"auto"`` resolved), in the order of
        the columns of each model.

    thresholds_ : list of ndarray of shape (n_thresholds, model width), or None
        Each model's thresholds per feature for the PPV and the LSPV
        (float32): quantiles of the feature's outputs, each at a level drawn
        between 0.25 and 0.75, over the valid tokens of at most 16 training
        sequences of positive weight, evenly spaced through ``X`` (at most 32
        tokens each on average). None without ``"ppv"`` or ``"lspv"`` in
        ``statistics_``.

    n_features_out_ : int
        Number of output features: the sum over the models of their width
        (plus the token width with ``pool_tokens``) times the number of
        statistics, the models' PPV and LSPV counting ``n_thresholds`` times
        each.

    See Also
    --------
    skattn.AttentionTransformer : One attention model, seeded or trained from
        ``y``.
    sklearn.kernel_approximation.RBFSampler : Random features of another
        kernel, for a linear model after them.

    Notes
    -----
    ROCKET [1]_ transforms time series with many random convolution kernels,
    pools each into two statistics (the maximum and the proportion of positive
    values) and fits a ridge classifier on them; MiniRocket [2]_ makes it
    almost deterministic and faster, and MultiRocket [4]_ adds statistics such
    as the longest stretch of positive values. This transformer does the same with
    random attention models: each model is independent (its own heads, layer
    norm and poolings), which did better than one model as wide as all of
    them. The documented pipeline::

        make_pipeline(
            RandomAttentionFeatures(random_state=0),
            StandardScaler(),
            RidgeClassifierCV(alphas=np.logspace(-3, 3, 10)),
        )

    fits in seconds where training the attention takes minutes, and is a
    strong first model for sequence data: time series, pretrained token
    embeddings of text, rows of images. On long series (hundreds of time
    points and more) MiniRocket is faster and more accurate: attention costs
    ``n_tokens**2``, and a scalar time point is a poor token.

    Each model is the encoder of :class:`~skattn.AttentionTransformer`
    (``build_model``, ``objective=None``): a uniform input projection to
    ``n_heads * head_dim`` of variance ``1 / n_token_features`` (Glorot's
    bound scaled up, so that a standardised token's projection has unit
    variance and is not drowned by the positions), the chosen positional
    encoding, one post-norm self-attention sublayer with the chosen heads
    and causal mask, Glorot-uniform. The models share the token
    standardisation.

    ``transform`` reads ``X`` once: each batch of padded sequences goes through
    every model before the next batch, batches are sized so that one model's
    activations fit in scikit-learn's ``working_memory`` (and about 4 MiB, for
    the CPU's caches), and they run side by side on as many cores as the BLAS
    thread limit allows (``threadpoolctl.threadpool_limits`` or
    ``OMP_NUM_THREADS``), BLAS itself on one thread. Results are the same
    whatever the number of threads, and do not depend on the batch size beyond
    float rounding. The models compute in float32 whatever the dtype of ``X``
    (random features need no more precision, and float32 ran 3.4x faster than
    float64 on series of 427 points); the output has the dtype of ``X``:
    float32 input gives float32 output, float64 gives float64.

    Input formats are those of :class:`~skattn.AttentionTransformer`: a 2D
    array or DataFrame ``(n_samples, n_features)`` (``n_features /
    features_per_token`` tokens), a 3D array ``(n_samples, n_tokens,
    n_features)``, or a list, tuple or 1-D object array of 2D arrays
    ``(n_tokens_i, n_features)`` (padded internally and masked: padding never
    changes a result), each in the ``(n_channels, n_timepoints)`` layout with
    ``data_format="channels_first"``; a list of 1-D arrays of different
    lengths is read as univariate series. ``transform`` takes the same kind of
    input as ``fit``, and computes with the models (their differences
    included), statistics, ``scale_tokens``, ``pool_tokens``,
    ``features_per_token`` and ``data_format`` of the last ``fit``, whatever
    ``set_params`` changed since.

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
        "positional_encoding": [
            StrOptions({"sinusoidal", "auto"}),
            None,
            "array-like",
        ],
        "causal": ["boolean", "array-like"],
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
        "pooling": [StrOptions(set(STATISTICS) | {"auto"}), "array-like"],
        "n_thresholds": [Interval(Integral, 1, None, closed="left")],
        "scale_tokens": ["boolean"],
        "pool_tokens": ["boolean"],
        "features_per_token": [Interval(Integral, 1, None, closed="left"), None],
        "data_format": [StrOptions({CHANNELS_LAST, CHANNELS_FIRST})],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_models=16,
        *,
        n_heads=4,
        head_dim=16,
        positional_encoding="auto",
        causal=False,
        patch_size="auto",
        patch_stride="auto",
        difference="auto",
        pooling="auto",
        n_thresholds=3,
        scale_tokens=True,
        pool_tokens=True,
        features_per_token=None,
        data_format="channels_last",
        random_state=None,
    ):
        self.n_models = n_models
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.positional_encoding = positional_encoding
        self.causal = causal
        self.patch_size = patch_size
        self.patch_stride = patch_stride
        self.difference = difference
        self.pooling = pooling
        self.n_thresholds = n_thresholds
        self.scale_tokens = scale_tokens
        self.pool_tokens = pool_tokens
        self.features_per_token = features_per_token
        self.data_format = data_format
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Draw the models and learn the token standardisation.

        The cost is a few passes over ``X`` for its statistics; with the PPV
        or the LSPV, the models run on at most 16 training sequences for
        their thresholds.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features), ndarray of \
                shape (n_samples, n_tokens, n_features), or list of array-like of \
                shape (n_tokens_i, n_features)
            Training sequences (see the class docstring for the formats).

        y : None
            Ignored: nothing is learned from a target.

        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the token statistics: finite,
            non-negative and not all zero, of any magnitude (only their ratios
            matter); None gives every sample weight 1. The thresholds are
            quantiles over training sequences of positive weight, each counted
            once.

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
        if is_dask_collection(X):
            raise TypeError(
                "RandomAttentionFeatures.fit reads X in memory, in one pass for "
                "its token statistics, and takes no dask collection, which it "
                "would gather whole. Fit it on a sample held in memory (for "
                "example X[:10_000].compute()); transform then reads the dask "
                "array block by block."
            )
        candidates = drawn_candidates(self.get_params())
        statistic_names(self.pooling, None)  # checked before any work
        sequences = check_input(
            self,
            X,
            reset=True,
            features_per_token=self.features_per_token,
            data_format=self.data_format,
        )
        dtype = sequences_dtype(sequences)
        tasks = FitTasks(self, X, y, sample_weight)
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, len(sequences), dtype)
        # one task, no subtask: scikit-learn's callbacks (ProgressBar of a
        # Pipeline) see the step begin and end
        tasks.start("fit", max_subtasks=0)
        # transform builds the models with these, whatever set_params changes
        # after fit (the other parameters are in models_ and the statistics)
        self._fitted_structure = {
            "scale_tokens": self.scale_tokens,
            "pool_tokens": self.pool_tokens,
            "features_per_token": self.features_per_token,
            "data_format": self.data_format,
        }
        n_features = token_width(sequences)
        self._fitted_structure["token_width"] = n_features
        n_tokens = sequences.shape[1] if self._input_kind == TABLE else 1
        median = None  # of the lengths of series, for patches and the LSPV
        if self._input_kind != TABLE:
            lengths = sequence_lengths(sequences)
            median = series_median_length(sequences, lengths, sample_weight)
        statistics = statistic_names(self.pooling, n_features, median)
        candidates["patch_size"] = patch_sizes(self.patch_size, median, n_features)
        candidates["positional_encoding"] = positional_encodings(
            candidates["positional_encoding"], median
        )
        narrow = self._input_kind != TABLE and n_features <= SERIES_MAX_FEATURES
        candidates["difference"] = differences(self.difference, narrow)
        candidates["patch_stride"] = patch_strides(self.patch_stride)
        rng = check_random_state(self.random_state)
        seeds = rng.randint(np.iinfo(np.int32).max, size=self.n_models)
        self.models_, self.weights_ = [], []
        levels = []  # of the thresholds of each model
        for seed in seeds:
            model_rng = np.random.RandomState(seed)
            config = {
                name: values[model_rng.randint(len(values))]
                for name, values in candidates.items()
            }
            config["patch_stride"] = stride_of(config, median)
            model = self._build(config, n_features, n_tokens)
            params = model.init_params(model_rng, COMPUTE_DTYPE)
            n_features_in = model_width(config, n_features) * (
                config["patch_size"] or 1
            )
            params.pop("token_mean", None)
            params.pop("token_scale", None)
            # variance 1 / n_features instead of Glorot's 2 / (n_features + E):
            # a standardised token's projection has unit variance, as large as
            # the positions (0.5); with Glorot's, a scalar token (n_features=1)
            # drowned in them
            d_model = config["n_heads"] * config["head_dim"]
            params["input"] *= np.sqrt((n_features_in + d_model) / (2 * n_features_in))
            self.models_.append(config)
            self.weights_.append(params)
            # drawn after the weights: the weights do not depend on pooling
            levels.append(
                model_rng.uniform(*THRESHOLD_LEVELS, size=(self.n_thresholds, d_model))
            )
        self.token_mean_ = self.token_scale_ = None
        self.difference_mean_ = self.difference_scale_ = None
        per_position = self._input_kind == TABLE
        if self.scale_tokens:
            self.token_mean_, self.token_scale_ = token_moments(
                sequences, sample_weight, per_position=per_position
            )
        if self.scale_tokens and self._any_difference():
            self.difference_mean_, self.difference_scale_ = token_moments(
                sequences, sample_weight, per_position=per_position, differences=True
            )
        self.statistics_ = statistics
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
            Sequences of the same kind (table or sequences) and token width as in
            fit.

        Returns
        -------
        X_new : ndarray of shape (n_samples, ``n_features_out_``)
            For each model in turn, each statistic of ``pooling`` in turn, one
            column per feature of the model's width; then with
            ``pool_tokens`` each statistic of the tokens, one column per token
            feature; computed in float32, in the dtype of X (float32 or
            float64). With ``scale_tokens`` the tokens are standardised in the
            dtype of X before the cast.

        Raises
        ------
        ValueError
            When tokens too large for float32 (unstandardised, or far
            outside those of fit) make the models overflow, instead of NaN.
        """
        if is_dask_collection(X):  # lazy, block by block (skattn._dask)
            return blocked_outputs(self, "transform", X)
        check_is_fitted(self)
        structure = self._fitted_structure
        sequences = check_input(
            self,
            X,
            reset=False,
            features_per_token=structure["features_per_token"],
            # absent from estimators fitted before data_format existed
            data_format=structure.get("data_format", CHANNELS_LAST),
        )
        dtype = sequences_dtype(sequences)
        statistics = self.statistics_
        runner = self._runner(sequences)
        thresholds = self.thresholds_
        pool_tokens = structure["pool_tokens"]
        lengths = sequence_lengths(sequences)
        n_out = self.n_features_out_

        def row_bytes(n_tokens):
            return runner.row_bytes(n_tokens) + n_out * 8

        def run(rows, x):
            """Every model on one padded batch: its statistics side by side."""
            inputs = runner.inputs(x)
            out = np.empty((len(rows), n_out), dtype=COMPUTE_DTYPE)
            batch_lengths = lengths[rows]
            start = 0
            outputs = runner.outputs(inputs, batch_lengths)
            for index, (tokens, pooled, token_lengths) in enumerate(outputs):
                for name in statistics:
                    if name == "mean":  # the model's own pooling
                        values = pooled
                    else:
                        params = thresholds[index] if name in THRESHOLDED else None
                        values = STATISTICS[name](tokens, token_lengths, params)[0]
                    out[:, start : start + values.shape[1]] = values
                    start += values.shape[1]
            if pool_tokens:
                for name in statistics:
                    values = STATISTICS[name](inputs[False], batch_lengths, None)[0]
                    out[:, start : start + values.shape[1]] = values
                    start += values.shape[1]
            return rows, out

        X_new = np.empty((len(sequences), n_out), dtype=dtype)
        rows = np.arange(len(sequences))
        with single_threaded_blas():  # once, not per batch
            for batch, out in map_batches(
                run, sequences, lengths, rows, row_bytes, batch_budget()
            ):
                X_new[batch] = out
        check_finite_output(self, X_new, sequences, structure["scale_tokens"])
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
            ``pool_tokens``, in the order of the columns of :meth:`transform`.
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

    def _column_blocks(self):
        """Each block of output columns in order: its name (``m{index}`` or
        ``tokens``), its width and the labels of its statistics, ``ppv0``,
        ``ppv1``, ... for a model's PPV (or LSPV) at several thresholds."""
        n_thresholds = 1 if self.thresholds_ is None else len(self.thresholds_[0])

        def labels(thresholds):
            return [
                f"{name}{t}" if name in THRESHOLDED and thresholds > 1 else name
                for name in self.statistics_
                for t in range(thresholds if name in THRESHOLDED else 1)
            ]

        blocks = [
            (f"m{index}", config["n_heads"] * config["head_dim"], labels(n_thresholds))
            for index, config in enumerate(self.models_)
        ]
        if self._fitted_structure["pool_tokens"]:
            blocks.append(("tokens", self._fitted_structure["token_width"], labels(1)))
        return blocks

    def _runner(self, sequences):
        """The fitted models, ready to run on padded batches of ``sequences``."""
        dtype = sequences_dtype(sequences)
        n_features = token_width(sequences)
        n_tokens = sequences.shape[1] if self._input_kind == TABLE else 1
        token_stats = difference_stats = (None, None)
        if self._fitted_structure["scale_tokens"]:
            token_stats = (self.token_mean_, self.token_scale_)
            if self._any_difference():
                difference_stats = (self.difference_mean_, self.difference_scale_)
        token_stats, difference_stats = (
            tuple(None if m is None else m.astype(dtype, copy=False) for m in pair)
            for pair in (token_stats, difference_stats)
        )
        models = []
        for config, weights in zip(self.models_, self.weights_, strict=True):
            model = self._build(config, n_features, n_tokens, scales_tokens=False)
            models.append((model, dict(weights), config["difference"]))
        return ModelRunner(models, token_stats, difference_stats, n_features, dtype)

    def _thresholds(self, sequences, levels, sample_weight):
        """Each model's thresholds (see ``thresholds_``): threshold ``k`` of
        feature ``j`` of model ``m`` at quantile ``levels[m][k, j]`` of its
        outputs."""
        candidates = np.arange(len(sequences))
        if sample_weight is not None:
            candidates = np.flatnonzero(sample_weight > 0)
        n_picks = min(len(candidates), THRESHOLD_SAMPLES)
        picks = np.linspace(0, len(candidates) - 1, n_picks)
        rows = candidates[np.unique(picks.round().astype(int))]
        runner = self._runner(sequences)
        thresholds = output_quantiles(runner, sequences, rows, levels, THRESHOLD_TOKENS)
        check_finite_output(self, thresholds, sequences, self.scale_tokens)
        return thresholds

    def _build(self, config, n_features, n_tokens, scales_tokens=True):
        """The model of one configuration (see ``skattn._model.build_model``).

        With ``scales_tokens=False`` the model has no token standardisation
        even with ``scale_tokens``: ``transform`` standardises the tokens
        itself, in the dtype of X.
        """
        n_features = model_width(config, n_features)
        token_shape = None
        if scales_tokens and self._fitted_structure["scale_tokens"]:
            token_shape = (n_features,)
            if self._input_kind == TABLE:
                token_shape = (n_tokens, n_features)
        return build_model(
            n_features=n_features,
            d_model=config["n_heads"] * config["head_dim"],
            n_heads=config["n_heads"],
            n_layers=1,
            ff_dim=0,
            activation="relu",
            norm_first=False,
            residual=True,
            layer_norm=True,
            causal=config["causal"],
            pooling="mean",
            patch_size=config["patch_size"],
            patch_stride=config["patch_stride"],
            positional_encoding=config["positional_encoding"],
            n_positions=n_tokens,
            projects_input=True,
            token_shape=token_shape,
        )

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
